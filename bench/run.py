"""Benchmarks, run side by side in one run and reported as ratios (``make bench``).

Small files, the fixed cost a sosreport's hundreds of files pay: every real golden input of at most 4 KB
(``tests/golden``) through ``parse_bytes`` in one process, sources sniffed; median ms per file, by
source, against a per-line Python ``re`` pass of every family's prefilter over the same bytes.

Kernel source, on a generated realistic 1,000,000-line log (``bench/gen_kernel.py``):

* ``ours``       forensics' kernel parse to an Arrow events table (all cores, and with one Polars thread)
* ``grep``       ``grep -E -c`` with the prefilter's pattern (translated to POSIX ERE) on the same file
* ``re``         a plain per-line Python ``re`` parser producing the same columns (envelope, kind from
                 the anchors, template, JSON detail) into an Arrow table
* ``lark``       Lark on every record (no prefilter), on a slice, scaled to the file

Journal source, on a generated ``journalctl -o json`` export of ``--journal-mb`` (2 GB by default;
``bench/gen_journal.py``): ``forensics parse --format parquet`` streams it in chunks; time and peak RSS.

Job output (NCCL_DEBUG, PyTorch/torchrun, training logs interleaved with launcher prefixes, progress
bars and tracebacks), on a generated ``--job-mb`` log (64 MB; ``bench/gen_joblog.py``):

* ``ours``       ``joblog.parse`` in memory (all cores, and with one Polars thread)
* ``grep``       ``grep -E -c`` with the union of the nccl, traceback and trainlog prefilters
* ``streamed``   ``forensics parse --format parquet`` of a ``--job-stream-mb`` log (512 MB), one run:
                 time, peak RSS, MB/s against the in-memory figure

Ingest, of ``--incidents`` (1,000) small real incidents in five packagings (``bench/gen_incidents.py``):

* ``read``       the baseline: find the incidents and decompress/unpack every member, parsing nothing
* ``jobs 1``     ``forensics.ingest(jobs=1)`` into a fresh dataset (one process)
* ``jobs 2``     the same with two worker processes (the speedup over ``jobs 1`` is the figure to watch)
* ``dask 2``     ``engine="dask"`` on a local cluster of two single-threaded workers
* ``unchanged``  a second ingest of the same input into the ``jobs 1`` dataset (nothing to read)

and the dataset's size on disk against the input's decompressed bytes.

``issue_26_targets`` in the results: each target of issue 26 (small file <= 5 ms, job log >= 50 MB/s and
<= 30x grep, streamed job log <= 400 MB RSS, kernel >= 100 MB/s and <= 10x grep, ingest <= 15 ms per
incident) with the measured figure, met or not, and the factor by which it is missed; ``where_time_goes``:
each of those workloads once more under cProfile, the share of its time each stage takes.

Diagnosis, of ``--diagnose-incidents`` (10,000) incidents copied from ``--diagnose-seeds`` (40)
synthetic ones of 12-14 hosts (about 20 M events):

* ``read``       the baseline: every event of the dataset read into memory
* ``index``      the signals index made anew, as ingest ends (:mod:`forensics.mine.signals`)
* ``diagnose``   ``forensics.diagnose`` of the whole dataset, through the index (target: < 10 s, < 2 GB)
* ``no index``   the same, every incident read from its own events file
* ``stats``      ``forensics.stats`` by cause (diagnosis included) and by Xid code (over every event)

Every figure is the median of several runs; each run is a fresh process (so it includes what a user
pays: imports, allocation warm-up) and reports its peak RSS. Results: a table on stdout and
``bench/results.json``.

    python bench/run.py [--lines 1000000] [--runs 3] [--job-mb 64] [--job-stream-mb 512] [--incidents 1000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

CHILD_OURS = """
import json, resource, sys, time
t0 = time.perf_counter()
from forensics.sources import kernel
data = open(sys.argv[1], "rb").read()
t = time.perf_counter()
result = kernel.parse(data, file="bench.log")
elapsed = time.perf_counter() - t
print(json.dumps({"seconds": elapsed, "rows": result.events.num_rows, "import_s": t - t0,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHILD_RE = """
import json, re, resource, sys, time
import pyarrow as pa
from forensics.grammar import family_grammar
from forensics.regex import for_python
from forensics.schema import EVENTS
from forensics.sources import base, envelope, kernel
data = open(sys.argv[1], "rb").read()
t = time.perf_counter()
env = re.compile(for_python(envelope.ENVELOPE))
g = family_grammar("kernel")
prefilter = re.compile(for_python(g.prefilter_regex()))
anchors = [(k, re.compile(for_python(g.anchor_regex(k)))) for k in g.families]
mask = re.compile(for_python(base.mask_regex()))
rows = []
for n, line in enumerate(data.decode("utf-8", "backslashreplace").split("\\n")[:-1], start=1):
    m = env.match(line)
    msg = line[m.end():]
    uptime = float(m["mono"]) if m["mono"] else None
    kind = "other"
    if prefilter.search(msg):
        kind = next((k for k, rx in anchors if rx.search(msg)), "other")
    detail = json.dumps({"template": mask.sub("<*>", msg)[:256]})
    rows.append({"incident": "", "host": m["h5"] or m["tip"], "source": "kernel", "file": "bench.log", "line": n,
                 "ts": None, "uptime_s": uptime, "kind": kind, "severity": "info", "gpu": None, "rank": None,
                 "pid": None, "code": None, "message": msg, "detail": detail})
table = pa.Table.from_pylist(rows, schema=EVENTS)
elapsed = time.perf_counter() - t
print(json.dumps({"seconds": elapsed, "rows": table.num_rows,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHILD_LARK = """
import json, resource, sys, time
from forensics.sources import kernel
data = open(sys.argv[1], "rb").read()
t = time.perf_counter()
result = kernel.parse(data, file="slice.log", full=True)
elapsed = time.perf_counter() - t
print(json.dumps({"seconds": elapsed, "rows": result.events.num_rows,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


CHILD_SMALL = """
import json, re, resource, statistics, sys, time
from pathlib import Path
t0 = time.perf_counter()
from forensics.grammar import family_grammar
from forensics.parse import parse_bytes
from forensics.regex import for_python
imported = time.perf_counter() - t0
files = sorted(p for p in Path(sys.argv[1]).rglob("*") if p.is_file() and p.suffix not in (".md", ".jsonl")
               and p.stat().st_size <= int(sys.argv[2]))
inputs = [(p.parent.name, p.name, p.read_bytes()) for p in files]
# the baseline: the same bytes split into lines and searched with every family's prefilter in Python re
union = re.compile(for_python("|".join(f"(?:{family_grammar(n).prefilter_regex()})" for n in ("kernel", "journal", "nccl", "traceback", "trainlog"))))
ours, base, by_source = [], [], {}
first = None
for source, name, data in inputs:
    t = time.perf_counter()
    parse_bytes(data, file=name)
    ms = (time.perf_counter() - t) * 1000
    first = ms if first is None else first
    ours.append(ms)
    by_source.setdefault(source, []).append(ms)
    t = time.perf_counter()
    sum(1 for line in data.decode("utf-8", "replace").splitlines() if union.search(line))
    base.append((time.perf_counter() - t) * 1000)
print(json.dumps({"seconds": sum(ours) / 1000, "rows": len(ours), "import_s": imported, "first_ms": first,
                  "median_ms": statistics.median(ours), "baseline_median_ms": statistics.median(base),
                  "by_source_median_ms": {k: round(statistics.median(v), 2) for k, v in sorted(by_source.items())},
                  "median_bytes": statistics.median(len(d) for _, _, d in inputs),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHILD_PROFILE = """
import cProfile, json, pstats, resource, sys, time
from pathlib import Path
from forensics.parse import parse_bytes
from forensics.sources import joblog, kernel
path, mode = sys.argv[1], sys.argv[2]
stages = json.loads(sys.argv[3])
if mode == "small":
    files = [p for p in sorted(Path(path).rglob("*")) if p.is_file() and p.suffix not in (".md", ".jsonl") and p.stat().st_size <= 4096]
    inputs = [(p.name, p.read_bytes()) for p in files]
    parse_bytes(inputs[0][1], file=inputs[0][0])
    run = lambda: [parse_bytes(d, file=n) for n, d in inputs]
elif mode == "one":  # one small file, 50 times
    data = Path(path).read_bytes()
    parse_bytes(data, file="x")
    run = lambda: [parse_bytes(data, file="x") for _ in range(50)]
else:
    data = open(path, "rb").read()[: int(sys.argv[4])]
    parse = joblog.parse if mode == "job" else kernel.parse
    parse(data[:100_000], file="warm.log")
    run = lambda: parse(data, file="bench.log")
profile = cProfile.Profile()
t = time.perf_counter()
profile.enable()
run()
profile.disable()
total = time.perf_counter() - t
found = {}
for (file, _, name), row in pstats.Stats(profile).stats.items():
    for label, (suffix, func) in stages.items():
        if file.endswith(suffix) and name == func:
            found[label] = found.get(label, 0.0) + row[3]
top = sorted(pstats.Stats(profile).stats.items(), key=lambda kv: -kv[1][2])[:8]
print(json.dumps({"seconds": total, "rows": 0, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "share": {k: round(v / total, 3) for k, v in sorted(found.items(), key=lambda kv: -kv[1])},
                  "top_own_time": {f"{f.rsplit('/', 1)[-1]}:{n}": round(r[2] / total, 3) for (f, _, n), r in top}}))
"""


CHILD_JOB = """
import json, resource, sys, time
from forensics.sources import joblog
data = open(sys.argv[1], "rb").read()
t = time.perf_counter()
result = joblog.parse(data, file="bench.log")
elapsed = time.perf_counter() - t
print(json.dumps({"seconds": elapsed, "rows": result.events.num_rows,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHILD_INGEST = """
import json, resource, shutil, sys, time
import forensics
src, ds, engine, jobs, fresh = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "fresh"
if fresh:
    shutil.rmtree(ds, ignore_errors=True)
t = time.perf_counter()
report = forensics.ingest([src], ds, jobs=jobs, engine=engine)
elapsed = time.perf_counter() - t
if report.count("failed"):
    raise SystemExit(f"{report.count('failed')} incident(s) failed")
uses = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
rss, cpu = max(u.ru_maxrss for u in uses) / 1024, sum(u.ru_utime + u.ru_stime for u in uses)
print(json.dumps({"seconds": elapsed, "rows": report.count("added"), "unchanged": report.count("unchanged"), "rss_mb": rss,
                  "cpu_s": cpu}))
"""

CHILD_DIAGNOSE = """
import json, resource, sys, time
import polars as pl
import forensics
ds = forensics.open_dataset(sys.argv[1])
t = time.perf_counter()
if sys.argv[2] == "read":  # the baseline: read every event of the dataset into memory
    rows = ds.events.collect().height
elif sys.argv[2] == "index":  # what ingest does at its end: the signals index, made anew
    import shutil
    from forensics.mine import signals
    shutil.rmtree(ds.root / signals.FOLDER, ignore_errors=True)
    rows = signals.refresh(ds.root)["rows"]
elif sys.argv[2] == "stats":  # the fleet table by cause (diagnosis included) and the Xid table over every event
    rows = forensics.stats(ds, by="cause").height + forensics.stats(ds, by="xid").height
else:
    if sys.argv[2] == "events":  # as without an index: every incident's events file read
        from forensics.mine import signals
        signals.load = lambda ds, library, ids: (None, list(ids))
    rows = forensics.diagnose(ds).height
elapsed = time.perf_counter() - t
print(json.dumps({"seconds": elapsed, "rows": rows, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHILD_READ = """
import json, resource, sys, time
from forensics.ingest.archive import Limits
from forensics.ingest.discover import find_incidents, members
t = time.perf_counter()
refs = find_incidents([sys.argv[1]]).incidents
total = sum(len(item.member.data or b"") for ref in refs for item in members(ref, Limits()))
elapsed = time.perf_counter() - t
print(json.dumps({"seconds": elapsed, "rows": len(refs), "bytes": total,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHILD_STREAM = """
import json, resource, sys, time
from forensics.cli import main
t = time.perf_counter()
try:
    main(["parse", "--format", "parquet", "-o", sys.argv[1] + ".parquet", sys.argv[1]], standalone_mode=False)
finally:
    elapsed = time.perf_counter() - t
import pyarrow.parquet as pq
rows = pq.ParquetFile(sys.argv[1] + ".parquet").metadata.num_rows
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": elapsed, "rows": rows, "rss_mb": use.ru_maxrss / 1024, "cpu_s": use.ru_utime + use.ru_stime}))
"""


def to_ere(pattern: str) -> str:
    """Translate the prefilter (Python/Rust syntax) into POSIX ERE for ``grep -E``."""
    out = pattern.replace("(?-u:\\b)", "\\b").replace("(?-u:\\B)", "\\B")
    out = out.replace("(?:", "(").replace("*?", "*").replace("+?", "+")
    out = out.replace("[^\\n]", ".").replace("\\n", "")
    out = out.replace("\\d", "[0-9]").replace("\\s", "[[:space:]]").replace("\\w", "[[:alnum:]_]")
    return re.sub(r"\\([/'])", r"\1", out)


def child(code: str, path: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, str(path), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, check=True)  # fmt: skip
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_of(runs: int, fn) -> dict:
    results = [fn() for _ in range(runs)]
    seconds = statistics.median(r["seconds"] for r in results)
    best = min(results, key=lambda r: abs(r["seconds"] - seconds))
    return {**best, "seconds": seconds, "all_seconds": [round(r["seconds"], 3) for r in results]}


def grep_count(pattern: str, path: Path) -> dict:
    """``LC_ALL=C grep -E -c PATTERN PATH``: the baseline every ratio is taken against."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(["grep", "-E", "-c", pattern, str(path)], capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C"})  # fmt: skip
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"grep failed: {proc.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"seconds": elapsed, "rows": int(proc.stdout.strip() or 0), "rss_mb": None, "cpu_s": cpu}


def print_methods(size_mb: float, ours: float, rows: list[tuple[str, dict]]) -> None:
    """One line per method: its (scaled) median seconds, MB/s, ratio to ours, peak RSS and rows."""
    print(f"{'method':<34}{'seconds':>9}{'MB/s':>9}{'ratio':>8}{'peak MB':>9}{'rows':>10}")
    for name, r in rows:
        seconds = r.get("scaled_seconds", r["seconds"])
        rss = f"{r['rss_mb']:.0f}" if r.get("rss_mb") else "-"
        print(f"{name:<34}{seconds:>9.3f}{size_mb / seconds:>9.1f}{seconds / ours:>8.2f}{rss:>9}{r['rows']:>10,}")


def streamed_figures(path: Path, **reference_mb_per_s: float) -> dict:
    """One ``forensics parse --format parquet`` run of ``path``: time, MB/s, peak RSS, rows, and the
    MB/s as a ratio to each reference (``vs_<name>_mb_per_s``)."""
    size_mb = path.stat().st_size / 1e6
    streamed = child(CHILD_STREAM, path)
    mb_per_s = size_mb / streamed["seconds"]
    return {"file_mb": round(size_mb, 1), "seconds": round(streamed["seconds"], 2), "rows": streamed["rows"],
            "mb_per_s": round(mb_per_s, 1), "peak_rss_mb": round(streamed["rss_mb"]),
            **{f"vs_{name}_mb_per_s": round(mb_per_s / ref, 2) for name, ref in reference_mb_per_s.items()}}  # fmt: skip


CHILD_ONE_SMALL = """
import json, resource, statistics, sys, time
from pathlib import Path
from forensics.parse import parse_bytes
data = Path(sys.argv[1]).read_bytes()
parse_bytes(data, file="x")  # the first call builds the grammars and compiles the patterns
times, cpu = [], []
for _ in range(int(sys.argv[2])):
    t, c = time.perf_counter(), time.process_time()
    parse_bytes(data, file="x")
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
print(json.dumps({"seconds": statistics.median(times), "rows": len(times), "median_ms": statistics.median(times) * 1000,
                  "median_cpu_ms": statistics.median(cpu) * 1000,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

#: A ~1 KB real sample for the small-file row of issue 33 (tests/golden/PROVENANCE.md).
ONE_SMALL = HERE.parent / "tests" / "golden" / "kernel" / "syslog-xid79-then-empty-message-line-old-fallen-off-bus-crash-dump-repeated-stamp-01.log"


def first_rows(path: Path, rows: int = 3) -> dict:
    """``forensics parse PATH | head -3``: seconds until the first ``rows`` lines (the header and the
    first rows of the table), and the parser's RSS then (psutil), the process ended after."""
    import psutil

    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "forensics", "parse", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    peak = cpu = 0.0
    for _ in range(rows):
        proc.stdout.readline()  # type: ignore[union-attr]
    elapsed = time.perf_counter() - t
    try:
        peak = psutil.Process(proc.pid).memory_info().rss / 2**20
        times = psutil.Process(proc.pid).cpu_times()
        cpu = times.user + times.system
    except psutil.Error:
        pass
    proc.kill()
    proc.wait()
    return {"seconds": elapsed, "rss_mb": peak, "rows": rows, "cpu_s": cpu}


#: Issue 33's baseline: the families' anchors as a user types them for ``grep -E -c``, a word or phrase
#: per family that matters (Xid and the driver's lines, SXid, AER, the OOM killer, hung tasks, lockups,
#: panics, machine checks, I/O errors), not the 3.4 KB prefilter the parser builds (grep reads that one
#: at ~26 MB/s, these nine terms at ~650 MB/s on the generated kernel log).
KERNEL_ANCHORS = "NVRM|SXid|AER|oom-kill|blocked for more than|soft lockup|Kernel panic|Hardware Error|I/O error"
#: The same for a job's output: NCCL's warnings, Python's tracebacks and exceptions, torchrun's failures,
#: the watchdog's timeouts, a non-finite loss, a killed worker.
JOB_ANCHORS = "NCCL WARN|Traceback|Error|Exception|FAILED|Timeout|timed out|NaN|Killed"

CHILD_IMPORT = """
import json, resource, sys, time
t = time.perf_counter()
import forensics.cli
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": time.perf_counter() - t, "rows": 0, "rss_mb": use.ru_maxrss / 1024,
                  "cpu_s": use.ru_utime + use.ru_stime}))
"""


def issue_33_section(args: argparse.Namespace) -> dict:
    """Each row of issue 33's table, in one run, against ``LC_ALL=C grep -E -c`` with the families'
    anchors (:data:`KERNEL_ANCHORS`, :data:`JOB_ANCHORS`) on the same file: the CLI end to end as a user
    runs it, its peak RSS (``ru_maxrss`` of the child), the target met or missed by how much, and for
    each miss where the time goes (cProfile of the same work on a slice, or the import's share)."""
    from gen_joblog import write as write_job
    from gen_kernel import generate

    OUT.mkdir(exist_ok=True)
    kernel_pattern, job_pattern = KERNEL_ANCHORS, JOB_ANCHORS
    out: dict = {"baseline": {"kernel": f"LC_ALL=C grep -E -c '{KERNEL_ANCHORS}'",
                              "job": f"LC_ALL=C grep -E -c '{JOB_ANCHORS}'"}}  # fmt: skip

    def kernel_log(lines: int, name: str) -> Path:
        path = OUT / name
        if not path.exists():
            with path.open("wb") as f:  # in slices of a million lines: the generator holds a slice
                for start in range(0, lines, 1_000_000):
                    f.write(generate(min(1_000_000, lines - start), seed=1 + start // 1_000_000))
        return path

    def streamed(label: str, path: Path, pattern: str, target_ratio: float, target_rss: float) -> dict:
        grep = median_of(3, lambda: grep_count(pattern, path))
        ours = child(CHILD_STREAM, path)
        mb = path.stat().st_size / 1e6
        ratio = ours["seconds"] / grep["seconds"]
        row = {"file_mb": round(mb, 1), "seconds": round(ours["seconds"], 2), "mb_per_s": round(mb / ours["seconds"], 1),
               "grep_seconds": round(grep["seconds"], 3), "grep_mb_per_s": round(mb / grep["seconds"], 1),
               "grep_matches": grep["rows"], "rows": ours["rows"],
               # (CPU seconds, the whole process with its imports: the machine's load moves wall times)
               "cpu_s": round(ours["cpu_s"], 2), "grep_cpu_s": round(grep["cpu_s"], 3),
               "cpu_over_grep_cpu": round(ours["cpu_s"] / max(grep["cpu_s"], 1e-3), 1),
               "over_grep": round(ratio, 1), "peak_rss_mb": round(ours["rss_mb"]),
               "target": f"<= {target_ratio:g}x grep, <= {target_rss:g} MB",
               "ratio_met": ratio <= target_ratio, "rss_met": ours["rss_mb"] <= target_rss,
               "missed_by": None if ratio <= target_ratio else f"{ratio / target_ratio:.1f}x"}  # fmt: skip
        print(f"  {label:<46} {mb:>7.0f} MB {ours['seconds']:>7.1f} s {row['mb_per_s']:>7.1f} MB/s "
              f"{ratio:>6.1f}x grep ({row['cpu_over_grep_cpu']:.1f}x in CPU)  peak {row['peak_rss_mb']:>5} MB  "
              f"{ours['rows']:>9,} rows")
        return row

    print("issue 33 (the CLI end to end; ratios against LC_ALL=C grep -E -c with the families' anchors):")
    out["kernel_290mb_parquet"] = streamed("kernel log 3 M lines -> parse --format parquet",
                                           kernel_log(args.issue33_lines, f"kernel-{args.issue33_lines}.log"),
                                           kernel_pattern, 8, 500)  # fmt: skip
    out["kernel_290mb_parquet"]["lines"] = args.issue33_lines
    if args.issue33_gb_lines:
        out["kernel_1gb_parquet"] = streamed("kernel log ~1 GB -> parse --format parquet",
                                             kernel_log(args.issue33_gb_lines, f"kernel-{args.issue33_gb_lines}.log"),
                                             kernel_pattern, 8, 500)  # fmt: skip

    def ingested(label: str, log: Path) -> dict:
        """``forensics.ingest`` of an incident holding ``log`` alone (a hard link), one process."""
        src = OUT / f"ingest-{log.stem}"
        (src / "node1").mkdir(parents=True, exist_ok=True)
        if not (src / "node1" / "kern.log").exists():
            os.link(log, src / "node1" / "kern.log")
        r = child(CHILD_INGEST, src, str(OUT / f"ingest-{log.stem}.ds"), "processes", "1", "fresh")
        mb = log.stat().st_size / 1e6
        row = {"file_mb": round(mb, 1), "seconds": round(r["seconds"], 2), "mb_per_s": round(mb / r["seconds"], 1),
               "cpu_s": round(r["cpu_s"], 2), "peak_rss_mb": round(r["rss_mb"]), "target": "<= 500 MB",
               "rss_met": r["rss_mb"] <= 500}  # fmt: skip
        print(f"  {label:<46} {mb:>7.0f} MB {r['seconds']:>7.1f} s {row['mb_per_s']:>7.1f} MB/s {'':>11}  "
              f"peak {row['peak_rss_mb']:>5} MB")
        return row

    out["kernel_290mb_ingest"] = ingested("kernel log 3 M lines -> ingest", OUT / f"kernel-{args.issue33_lines}.log")
    if args.issue33_gb_lines:
        out["kernel_1gb_ingest"] = ingested("kernel log ~1 GB -> ingest", OUT / f"kernel-{args.issue33_gb_lines}.log")
    job = OUT / f"job-{args.job_mb}.log"
    if not job.exists():
        write_job(job, args.job_mb, seed=1)
    out["job_64mb_parquet"] = streamed(f"job log {args.job_mb} MB -> parse --format parquet", job, job_pattern, 30, 400)
    small = child(CHILD_ONE_SMALL, ONE_SMALL, "200")
    out["small_parse_bytes"] = {"file": ONE_SMALL.name, "bytes": ONE_SMALL.stat().st_size,
                                "median_ms": round(small["median_ms"], 2), "median_cpu_ms": round(small["median_cpu_ms"], 2),
                                "target": "<= 5 ms",
                                "met": small["median_ms"] <= 5}  # fmt: skip
    print(f"  {'one ~1 KB real sample, parse_bytes, median':<46} {small['median_ms']:>7.1f} ms (target <= 5 ms)")
    dmesg = kernel_log(args.issue33_head_lines, f"kernel-{args.issue33_head_lines}.log")
    first = median_of(3, lambda: first_rows(dmesg))
    imported = median_of(3, lambda: child(CHILD_IMPORT, dmesg))
    out["head_3_first_rows"] = {"file_mb": round(dmesg.stat().st_size / 1e6, 1), "seconds": round(first["seconds"], 2),
                                "cpu_s": round(first["cpu_s"], 2), "import_forensics_cli_s": round(imported["seconds"], 2),
                                "import_cpu_s": round(imported["cpu_s"], 2),
                                "rss_mb_then": round(first["rss_mb"]), "target": "< 1 s", "met": first["seconds"] < 1}  # fmt: skip
    print(f"  {'forensics parse F | head -3 (first rows)':<46} {out['head_3_first_rows']['file_mb']:>7.0f} MB "
          f"{first['seconds']:>7.2f} s ({first['cpu_s']:.2f} s CPU)  RSS then {first['rss_mb']:.0f} MB (target < 1 s; "
          f"`import forensics.cli` alone {imported['seconds']:.2f} s, {imported['cpu_s']:.2f} s CPU)")
    out["where_time_goes"] = issue_33_misses(out, job)
    return out


#: What issue 33's misses are profiled for: label -> (module file suffix, function), cumulative times.
ISSUE_33_STAGES = {
    "kernel": {
        "chunking (cut where a record starts)": ("forensics/sources/kernel.py", "iter_chunks"),
        "lines (split, dedent)": ("forensics/text.py", "split_lines"),
        "interest scan (hyperscan/re/Polars)": ("forensics/sources/interest.py", "of_interest"),
        "records around the hits": ("forensics/sources/kernel.py", "_around"),
        "envelope regex": ("forensics/sources/envelope.py", "split"),
        "record grouping": ("forensics/sources/kernel.py", "group_records"),
        "records to events": ("forensics/sources/kernel.py", "parse_records"),
        "  Lark and enrichers": ("forensics/families.py", "parse_record"),
        "  events table (templates, details)": ("forensics/sources/kernel.py", "_assemble"),
    },
    "one": {
        "sniff (every source scores the head)": ("forensics/sources/__init__.py", "sniff"),
        "kernel parse_text": ("forensics/sources/kernel.py", "parse_text"),
        "  interest scan": ("forensics/sources/interest.py", "of_interest"),
        "  envelope regex": ("forensics/sources/envelope.py", "split"),
        "  record grouping": ("forensics/sources/kernel.py", "group_records"),
        "  records to events": ("forensics/sources/kernel.py", "parse_records"),
        "  events table": ("forensics/sources/kernel.py", "_assemble"),
        "files row": ("forensics/parse.py", "_files_row"),
    },
}

def issue_33_misses(out: dict, job: Path) -> dict:
    """Where the time goes in each missed row of issue 33: the same work under cProfile (the kernel and the
    job log parsed on a 30 MB / 16 MB slice; the small sample through ``parse_bytes`` 50 times), each
    stage's share (cumulative) and the functions with the most time of their own."""
    found = {}
    kernel = OUT / f"kernel-{out['kernel_290mb_parquet']['lines']}.log" if "lines" in out["kernel_290mb_parquet"] else None
    todo = [("kernel", kernel, 30_000_000, not out["kernel_290mb_parquet"]["ratio_met"]),
            ("job", job, 16_000_000, not out["job_64mb_parquet"]["ratio_met"]),
            ("one", ONE_SMALL, 0, not out["small_parse_bytes"]["met"])]  # fmt: skip
    for mode, path, limit, missed in todo:
        if not missed or path is None:
            continue
        stages = STAGES["job"] if mode == "job" else ISSUE_33_STAGES[mode]
        r = child(CHILD_PROFILE, path, mode, json.dumps(stages), str(limit))
        found[mode] = {"seconds_profiled": round(r["seconds"], 2), "share": r["share"], "top_own_time": r["top_own_time"]}
        print(f"  where the time goes, {mode}: " + ", ".join(f"{k.strip()} {v:.0%}" for k, v in r["share"].items()))
        print(f"    most own time: " + ", ".join(f"{k} {v:.0%}" for k, v in r["top_own_time"].items()))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description="gpu-forensics benchmarks")
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lark-lines", type=int, default=10_000)
    ap.add_argument("--journal-mb", type=int, default=2048, help="size of the generated -o json journal")
    ap.add_argument("--job-mb", type=int, default=64, help="size of the generated job output parsed in memory")
    ap.add_argument("--job-stream-mb", type=int, default=512, help="size of the job output streamed to Parquet")
    ap.add_argument("--incidents", type=int, default=1000, help="incidents in the ingest benchmark")
    ap.add_argument("--diagnose-incidents", type=int, default=10_000, help="incidents in the diagnosis benchmark")
    ap.add_argument("--diagnose-seeds", type=int, default=40, help="synthetic incidents they are copied from")
    ap.add_argument("--quick", action="store_true", help="100k lines, 1 run, 64 MB journal, 8/32 MB job output, 100 incidents")
    ap.add_argument("--issue33-lines", type=int, default=3_000_000, help="lines of issue 33's kernel log (~290 MB)")
    ap.add_argument("--issue33-gb-lines", type=int, default=11_000_000, help="lines of the ~1 GB kernel log (0: none)")
    ap.add_argument("--issue33-head-lines", type=int, default=700_000, help="lines of the ~60 MB dmesg of `| head -3`")
    ap.add_argument("--only", choices=["issue33"], help="run one section; its figures replace those in results.json")
    args = ap.parse_args()
    if args.only == "issue33":
        results_path = HERE / "results.json"
        kept = json.loads(results_path.read_text()) if results_path.exists() else {}
        kept["issue_33"] = issue_33_section(args)
        results_path.write_text(json.dumps(kept, indent=2) + "\n")
        return
    if args.quick:
        args.lines, args.runs, args.journal_mb, args.job_mb, args.job_stream_mb = 100_000, 1, 64, 8, 32
        args.incidents, args.diagnose_incidents, args.diagnose_seeds = 100, 1000, 10

    from gen_journal import write as write_journal
    from gen_kernel import generate

    from forensics.grammar import family_grammar

    OUT.mkdir(exist_ok=True)
    log = OUT / f"kernel-{args.lines}.log"
    if not log.exists():
        log.write_bytes(generate(args.lines, seed=1))
    size_mb = log.stat().st_size / 1e6
    lark_slice = OUT / f"kernel-{args.lines}-slice{args.lark_lines}.log"
    lark_slice.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[: args.lark_lines]))
    slice_mb = lark_slice.stat().st_size / 1e6

    pattern = to_ere(family_grammar("kernel").prefilter_regex())
    results = {
        "grep": median_of(max(5, args.runs), lambda: grep_count(pattern, log)),
        "ours": median_of(args.runs, lambda: child(CHILD_OURS, log)),
        "ours_1thread": median_of(args.runs, lambda: child(CHILD_OURS, log, env={"POLARS_MAX_THREADS": "1"})),
        "re": median_of(args.runs, lambda: child(CHILD_RE, log)),
        "lark_every_record": median_of(args.runs, lambda: child(CHILD_LARK, lark_slice)),
    }
    results["lark_every_record"]["scaled_seconds"] = results["lark_every_record"]["seconds"] * size_mb / slice_mb
    ours = results["ours"]["seconds"]
    summary = {
        "file_mb": round(size_mb, 1),
        "lines": args.lines,
        "ours_mb_per_s": round(size_mb / ours, 1),
        "ours_1thread_mb_per_s": round(size_mb / results["ours_1thread"]["seconds"], 1),
        "ours_over_grep": round(ours / results["grep"]["seconds"], 2),
        "re_over_ours": round(results["re"]["seconds"] / ours, 2),
        "lark_over_ours": round(results["lark_every_record"]["scaled_seconds"] / ours, 2),
        "ours_1thread_over_grep": round(results["ours_1thread"]["seconds"] / results["grep"]["seconds"], 2),
        "grep_mb_per_s": round(size_mb / results["grep"]["seconds"], 1),
        # Issue 2: "at least 100 MB/s per core, i.e. at most 8x the time of grep -E -c" (grep, one core,
        # at ~800 MB/s). The ratio is the figure that does not hang on the machine; MB/s is printed too.
        "targets": {"1thread<=8x_grep (per core)": results["ours_1thread"]["seconds"] <= 8 * results["grep"]["seconds"],
                    "mb_per_s_per_core>=100": size_mb / results["ours_1thread"]["seconds"] >= 100,
                    "ours<=8x_grep": ours <= 8 * results["grep"]["seconds"],
                    "re>=3x_ours": results["re"]["seconds"] >= 3 * ours},  # fmt: skip
    }
    print(f"kernel source: {args.lines:,} lines, {size_mb:.1f} MB, median of {args.runs} runs (grep: {max(5, args.runs)})")
    print_methods(size_mb, ours, [
        ("grep -E -c (prefilter pattern)", results["grep"]),
        ("ours (all cores)", results["ours"]),
        ("ours (POLARS_MAX_THREADS=1)", results["ours_1thread"]),
        ("per-line Python re baseline", results["re"]),
        (f"Lark on every record ({args.lark_lines:,} lines, scaled)", results["lark_every_record"]),
    ])  # fmt: skip
    print("targets:", ", ".join(f"{k} {'OK' if v else 'MISSED'}" for k, v in summary["targets"].items()))

    journal_log = OUT / f"journal-{args.journal_mb}.json"
    if not journal_log.exists():
        write_journal(journal_log, args.journal_mb, seed=1)
    journal = streamed_figures(journal_log, kernel=size_mb / ours)
    print()
    print(f"journal source: -o json export, {journal['file_mb']:,.0f} MB, streamed to Parquet (one run)")
    print(f"{'seconds':>9}{'MB/s':>9}{'peak MB':>9}{'rows':>12}{'MB/s vs kernel':>16}")
    print(f"{journal['seconds']:>9.1f}{journal['mb_per_s']:>9.1f}{journal['peak_rss_mb']:>9}{journal['rows']:>12,}{journal['vs_kernel_mb_per_s']:>16.2f}")
    small = small_section(args)
    job = job_section(args, size_mb / ours)
    ingest = ingest_section(args)
    diagnosis = diagnose_section(args)
    out = {"small_files": small, "kernel": {"summary": summary, "runs": results}, "journal_json_stream": journal,
           "joblog": job, "ingest": ingest, "diagnose": diagnosis}
    print()
    out["issue_33"] = issue_33_section(args)
    out["issue_26_targets"] = speed_targets(out)
    print()
    out["where_time_goes"] = where_time_goes(log, OUT / f"job-{args.job_mb}.log")
    print()
    print("issue 26 targets:")
    for name, t in out["issue_26_targets"].items():
        print(f"  {name:<44} {t['measured']:>9} target {t['target']:<8} {'met' if t['met'] else 'MISSED by ' + t['missed_by']}")
    (HERE / "results.json").write_text(json.dumps(out, indent=2) + "\n")


def small_section(args: argparse.Namespace) -> dict:
    """The fixed cost of one small file: every real golden input of at most 4 KB parsed in one process
    (sources sniffed), against splitting it into lines and searching every family's prefilter in Python."""
    r = child(CHILD_SMALL, HERE.parent / "tests" / "golden", "4096")
    print()
    print(f"small files: {r['rows']} real golden inputs of at most 4 KB (median {r['median_bytes']:.0f} bytes), "
          f"parse_bytes in one process after a first file of {r['first_ms']:.0f} ms (import {r['import_s']:.2f} s)")
    print(f"median {r['median_ms']:.1f} ms per file ({r['median_ms'] / r['baseline_median_ms']:.0f}x a per-line Python "
          f"re pass of every prefilter, {r['baseline_median_ms']:.2f} ms); by source: "
          + ", ".join(f"{k} {v}" for k, v in r["by_source_median_ms"].items()))  # fmt: skip
    return {**r, "over_baseline": round(r["median_ms"] / r["baseline_median_ms"], 1)}


#: The stages whose share of the time :func:`where_time_goes` reports (cumulative, under cProfile, so
#: the Python-side stages are somewhat inflated): label -> (module file suffix, function).
STAGES = {
    "small": {
        "sniff (every source scores the head)": ("forensics/sources/__init__.py", "sniff"),
        "kernel parse": ("forensics/sources/kernel.py", "parse_text"),
        "journal parse": ("forensics/sources/journal.py", "parse"),
        "job output parse": ("forensics/sources/joblog.py", "parse"),
        "  job: prefix peeling": ("forensics/sources/prefix.py", "peel"),
        "  job: record folding": ("forensics/sources/records.py", "group_records"),
        "  job: events and metrics": ("forensics/sources/joblog.py", "_job_events"),
        "nvidia-smi parse": ("forensics/sources/nvsmi.py", "parse"),
    },
    "job": {
        "lines (split, dedent, redraws)": ("forensics/sources/prefix.py", "lines_frame"),
        "prefix peeling": ("forensics/sources/prefix.py", "peel"),
        "record folding": ("forensics/sources/records.py", "group_records"),
        "events and metrics": ("forensics/sources/joblog.py", "_job_events"),
        "  step lines to metrics": ("forensics/sources/metrics.py", "read_metrics"),
        "  rows (family, step and other rows)": ("forensics/sources/joblog.py", "_rows"),
        "  Lark on flagged records": ("forensics/sources/joblog.py", "_parse_flagged"),
        "  step kinds (NaN onsets, overflows)": ("forensics/sources/joblog.py", "_step_kinds"),
    },
    "kernel": {
        "envelope regex": ("forensics/sources/envelope.py", "split"),
        "record grouping": ("forensics/sources/kernel.py", "group_records"),
        "records to events (prefilter, Lark, enrichers, table)": ("forensics/sources/kernel.py", "parse_records"),
        "  of which the events table (templates, details)": ("forensics/sources/kernel.py", "_assemble"),
    },
}


def where_time_goes(kernel_log: Path, job_log: Path) -> dict:
    """Each target's workload once under cProfile: the share of its time each stage takes."""
    golden = HERE.parent / "tests" / "golden"
    out = {}
    for mode, path, limit in (("small", golden, 0), ("job", job_log, 16_000_000), ("kernel", kernel_log, 30_000_000)):
        r = child(CHILD_PROFILE, path, mode, json.dumps(STAGES[mode]), str(limit))
        out[mode] = {"seconds_profiled": round(r["seconds"], 2), "share": r["share"]}
        print(f"where the time goes, {mode}: " + ", ".join(f"{k.strip()} {v:.0%}" for k, v in r["share"].items()))
    return out


def speed_targets(out: dict) -> dict:
    """Each row of issue 26's table: measured, target, met, and by how much it is missed."""
    k, j, i = out["kernel"]["summary"], out["joblog"], out["ingest"]
    kernel_grep = k["ours_over_grep"]
    rows = {
        "small file, median ms (<= 5)": (out["small_files"]["median_ms"], 5.0, "le"),
        "job log in memory, MB/s both cores (>= 50)": (j["summary"]["ours_mb_per_s"], 50.0, "ge"),
        "job log, x grep -E -c (<= 30)": (j["summary"]["ours_over_grep"], 30.0, "le"),
        "job log streamed, peak RSS MB (<= 400)": (j["stream"]["peak_rss_mb"], 400.0, "le"),
        "job log of real progress bars streamed, peak RSS MB (<= 400)": (j["progress_bars_stream"]["peak_rss_mb"], 400.0, "le"),
        "kernel, MB/s both cores (>= 100)": (k["ours_mb_per_s"], 100.0, "ge"),
        "kernel, x grep -E -c (<= 10)": (kernel_grep, 10.0, "le"),
        "ingest, ms per small incident, jobs 1 (<= 15)": (i["ms_per_incident_jobs_1"], 15.0, "le"),
    }
    table = {}
    for name, (measured, target, how) in rows.items():
        met = measured <= target if how == "le" else measured >= target
        factor = measured / target if how == "le" else target / max(measured, 1e-9)
        table[name] = {"measured": round(measured, 1), "target": target, "met": met,
                       "missed_by": "" if met else f"{factor:.1f}x"}  # fmt: skip
    return table


def job_section(args: argparse.Namespace, kernel_mb_per_s: float) -> dict:
    """Job output in memory against grep, then a large file streamed through the CLI."""
    from gen_joblog import write as write_job

    from forensics.grammar import family_grammar

    log = OUT / f"job-{args.job_mb}.log"
    if not log.exists():
        write_job(log, args.job_mb, seed=1)
    size_mb = log.stat().st_size / 1e6
    pattern = "|".join(f"({to_ere(family_grammar(n).prefilter_regex())})" for n in ("nccl", "traceback", "trainlog"))
    results = {
        "grep": median_of(max(5, args.runs), lambda: grep_count(pattern, log)),
        "ours": median_of(args.runs, lambda: child(CHILD_JOB, log)),
        "ours_1thread": median_of(args.runs, lambda: child(CHILD_JOB, log, env={"POLARS_MAX_THREADS": "1"})),
    }
    ours = results["ours"]["seconds"]
    print()
    print(f"job output (nccl + torch + trainlog): {size_mb:.1f} MB, median of {args.runs} runs (grep: {max(5, args.runs)})")
    print_methods(size_mb, ours, [("grep -E -c (union of prefilters)", results["grep"]), ("ours (all cores)", results["ours"]),
                                  ("ours (POLARS_MAX_THREADS=1)", results["ours_1thread"])])  # fmt: skip

    big = OUT / f"job-{args.job_stream_mb}.log"
    if not big.exists():
        write_job(big, args.job_stream_mb, seed=2)
    stream = streamed_figures(big, in_memory=size_mb / ours, kernel=kernel_mb_per_s)
    print(f"streamed to Parquet: {stream['file_mb']:,.0f} MB in {stream['seconds']:.1f} s, {stream['mb_per_s']:.1f} MB/s "
          f"({stream['vs_in_memory_mb_per_s']:.2f}x in memory, {stream['vs_kernel_mb_per_s']:.2f}x kernel), "
          f"peak {stream['peak_rss_mb']} MB, {stream['rows']:,} rows")  # fmt: skip
    bars = progress_bar_log(args.job_mb)
    bar_stream = streamed_figures(bars, generated=stream["mb_per_s"])
    print(f"real progress-bar samples streamed: {bar_stream['file_mb']:,.0f} MB in {bar_stream['seconds']:.1f} s, "
          f"{bar_stream['mb_per_s']:.1f} MB/s ({bar_stream['vs_generated_mb_per_s']:.2f}x the generated log), "
          f"peak {bar_stream['peak_rss_mb']} MB, {bar_stream['rows']:,} rows")  # fmt: skip
    summary = {"file_mb": round(size_mb, 1), "ours_mb_per_s": round(size_mb / ours, 1),
               "ours_1thread_mb_per_s": round(size_mb / results["ours_1thread"]["seconds"], 1),
               "ours_over_grep": round(ours / results["grep"]["seconds"], 2)}  # fmt: skip
    return {"summary": summary, "runs": results, "stream": stream, "progress_bars_stream": bar_stream}


def progress_bar_log(mb: int) -> Path:
    """The real training logs of ``tests/golden/trainlog`` that print progress bars (tqdm, Lightning,
    HF, kohya, …), one after another until the file has ``mb`` MB: the shape of a long run's stdout
    that the generated job log has little of."""
    path = OUT / f"bars-{mb}.log"
    if not path.exists():
        golden = HERE.parent / "tests" / "golden" / "trainlog"
        samples = [p.read_bytes().rstrip(b"\n") + b"\n" for p in sorted(golden.glob("*.log")) if b"%|" in p.read_bytes()]
        one = b"".join(samples)
        path.write_bytes(one * (mb * 1_000_000 // len(one) + 1))
    return path


def ingest_section(args: argparse.Namespace) -> dict:
    """Ingest of many small incidents: one process, two processes, Dask, and an unchanged rerun."""
    from gen_incidents import write as write_incidents

    src = OUT / f"incidents-{args.incidents}"
    if not src.exists():
        write_incidents(src, args.incidents, seed=1)
    ds = OUT / f"incidents-{args.incidents}.ds"
    results = {
        "read": median_of(args.runs, lambda: child(CHILD_READ, src)),
        "jobs_1": median_of(args.runs, lambda: child(CHILD_INGEST, src, str(ds), "processes", "1", "fresh")),
        "unchanged": median_of(args.runs, lambda: child(CHILD_INGEST, src, str(ds), "processes", "1", "again")),
        "jobs_2": median_of(args.runs, lambda: child(CHILD_INGEST, src, str(ds) + "-2", "processes", "2", "fresh")),
        "dask_2": median_of(args.runs, lambda: child(CHILD_INGEST, src, str(ds) + "-dask", "dask", "2", "fresh")),
    }
    input_mb = results["read"]["bytes"] / 1e6
    disk_mb = sum(f.stat().st_size for f in ds.rglob("*") if f.is_file()) / 1e6
    one = results["jobs_1"]["seconds"]
    print()
    print(f"ingest: {args.incidents:,} incidents ({input_mb:.1f} MB decompressed, {_du(src):.1f} MB on disk), "
          f"median of {args.runs} runs")  # fmt: skip
    print(f"{'method':<34}{'seconds':>9}{'incid./s':>10}{'MB/s':>8}{'vs jobs 1':>10}{'peak MB':>9}")
    for name, key in (("read + decompress only (baseline)", "read"), ("ingest --jobs 1", "jobs_1"),
                      ("ingest --jobs 2", "jobs_2"), ("ingest --engine dask (2 workers)", "dask_2"),
                      ("ingest again, nothing changed", "unchanged")):  # fmt: skip
        r = results[key]
        print(f"{name:<34}{r['seconds']:>9.2f}{args.incidents / r['seconds']:>10.1f}{input_mb / r['seconds']:>8.2f}"
              f"{one / r['seconds']:>9.2f}x{r['rss_mb']:>9.0f}")  # fmt: skip
    print(f"dataset: {disk_mb:.1f} MB on disk for {input_mb:.1f} MB of logs ({disk_mb / input_mb:.2f} MB per MB)")
    return {
        "incidents": args.incidents, "input_mb": round(input_mb, 1), "dataset_mb": round(disk_mb, 1),
        "dataset_mb_per_input_mb": round(disk_mb / input_mb, 2),
        "ms_per_incident_jobs_1": round(1000 * one / args.incidents, 1),
        "speedup_jobs_2": round(one / results["jobs_2"]["seconds"], 2),
        "speedup_dask_2": round(one / results["dask_2"]["seconds"], 2),
        "ingest_over_read": round(one / results["read"]["seconds"], 1),
        "runs": results,
    }  # fmt: skip


#: Hosts per incident of the diagnosis benchmark's synthetic incidents: about 2,000 events per incident.
HOSTS = (12, 14)


def diagnose_section(args: argparse.Namespace) -> dict:
    """Diagnosis of many incidents: synthetic incidents ingested once, their events copied under new
    incident ids up to ``--diagnose-incidents``, then `forensics.diagnose` against reading them all."""

    import forensics
    from forensics.synth import synth

    seeds, total = args.diagnose_seeds, args.diagnose_incidents
    src, ds = OUT / f"synth-diag-{seeds}-{HOSTS[0]}-{HOSTS[1]}", OUT / f"synth-diag-{seeds}-{HOSTS[0]}-{HOSTS[1]}.ds"
    if not (ds / "dataset.json").is_file():
        synth(src, seeds, seed=3, hosts_per_incident=HOSTS, lemons=())
        forensics.ingest([src], ds, jobs=os.cpu_count() or 1)
    copies = OUT / f"diagnose-{total}-{seeds}-{HOSTS[0]}-{HOSTS[1]}.ds"
    if not (copies / "dataset.json").is_file():
        _copy_incidents(forensics.open_dataset(ds), copies, total)
    results = {
        "read": median_of(args.runs, lambda: child(CHILD_DIAGNOSE, copies, "read")),
        "index": median_of(args.runs, lambda: child(CHILD_DIAGNOSE, copies, "index")),
        "diagnose": median_of(args.runs, lambda: child(CHILD_DIAGNOSE, copies, "diagnose")),
        "events": median_of(args.runs, lambda: child(CHILD_DIAGNOSE, copies, "events")),
        "stats": median_of(args.runs, lambda: child(CHILD_DIAGNOSE, copies, "stats")),
    }
    events = results["read"]["rows"]
    d, r = results["diagnose"], results["read"]
    print()
    print(f"diagnose: {d['rows']:,} incidents, {events:,} events ({seeds} synthetic incidents of "
          f"{HOSTS[0]}-{HOSTS[1]} hosts, copied), median of {args.runs} runs")  # fmt: skip
    print(f"{'method':<38}{'seconds':>9}{'events/s':>12}{'vs read':>9}{'peak MB':>9}{'rows':>11}")
    for name, key in (("read every event (baseline)", "read"), ("signals index, made anew (at ingest)", "index"),
                      ("forensics.diagnose", "diagnose"), ("forensics.diagnose, no index", "events"),
                      ("stats --by cause, then --by xid", "stats")):  # fmt: skip
        x = results[key]
        print(f"{name:<38}{x['seconds']:>9.2f}{events / x['seconds']:>12,.0f}{x['seconds'] / r['seconds']:>8.2f}x"
              f"{x['rss_mb']:>9.0f}{x['rows']:>11,}")  # fmt: skip
    ok = d["seconds"] < 10 and d["rss_mb"] < 2048
    print(f"target under 10 s and 2 GB: {'OK' if ok else 'MISSED'}")
    return {"incidents": d["rows"], "events": events, "seconds": round(d["seconds"], 2),
            "peak_rss_mb": round(d["rss_mb"]), "over_read": round(d["seconds"] / r["seconds"], 2), "target_met": ok,
            "index_seconds": round(results["index"]["seconds"], 2), "index_rows": results["index"]["rows"],
            "no_index_seconds": round(results["events"]["seconds"], 2),
            "stats_seconds": round(results["stats"]["seconds"], 2), "stats_peak_rss_mb": round(results["stats"]["rss_mb"]),
            "runs": results}  # fmt: skip


def _copy_incidents(seed, out: Path, total: int) -> None:
    """A dataset of ``total`` incidents: the seed dataset's events again and again under new ids (its
    other tables left empty: diagnosis reads events)."""
    import hashlib
    import shutil

    import polars as pl

    from forensics.schema import TABLES
    from forensics.store import Dataset, incident_key

    shutil.rmtree(out, ignore_errors=True)
    store = Dataset.create(out)
    events = seed.events.collect()
    records = seed.incidents.collect()
    by_id = events.partition_by("incident", as_dict=True)
    ids = sorted(records["incident"])
    for n in range(total):
        source = ids[n % len(ids)]
        new_id = f"{source}-copy{n // len(ids):05d}"
        digest = hashlib.blake2b(new_id.encode(), digest_size=16).hexdigest()
        part = by_id.get((source,), events.clear()).with_columns(incident=pl.lit(new_id))
        record = records.filter(pl.col("incident") == source).with_columns(incident=pl.lit(new_id), digest=pl.lit(digest))
        tables = {name: schema.empty_table() for name, schema in TABLES.items()}
        tables["events"] = part.to_arrow().cast(TABLES["events"])
        tables["incidents"] = record.to_arrow().cast(TABLES["incidents"])
        store.commit(incident_key(new_id), tables)


def _du(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


if __name__ == "__main__":
    main()
