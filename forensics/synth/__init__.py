"""Synthetic incidents with known answers: ``forensics synth -o DIR --incidents N [--seed S]``.

Each incident is a folder (or a ``.tar.gz`` of one) holding, per host, what an engineer copies off a
node after a training job died: raw ``dmesg``, ``kern.log`` or a ``journalctl -o short-iso`` export,
the job's output (NCCL, PyTorch, the training loop, torchrun's report) and an ``nvidia-smi -q``
snapshot; and an ``incident.toml`` with the truth: the root cause, the first-failing host, rank, GPU
(bus id and serial), the job's facts (GPU count, checkpoint interval, last checkpoint) and which
planted repeat offender, if any, caused it.

The fleet (:mod:`.fleet`) is shared by all incidents of a run and changes between them, so the same
card shows up in different slots over time. Everything is drawn from one seed: the same seed gives
byte-identical output (archive member times are fixed).

>>> import tempfile, pathlib
>>> tmp = tempfile.TemporaryDirectory()
>>> out = pathlib.Path(tmp.name) / "synth"
>>> first = synth(out, incidents=3, seed=7).causes
>>> first == synth(out, incidents=3, seed=7).causes  # a rerun replaces its own earlier output
True
>>> sorted(p.name.split(".")[0] for p in out.glob("synth-*"))  # folders or .tar.gz
['synth-000000', 'synth-000001', 'synth-000002']
>>> tmp.cleanup()
"""

from __future__ import annotations

import gzip
import io
import random
import shutil
import tarfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..errors import InputError
from . import telemetry
from .causes import SCENARIOS, WEIGHTS, Ctx
from .fleet import GPU_BUSES, LEMON_KINDS, Fleet
from .job import nccl_init, ras_report, torchrun_report, train_steps
from .logs import Gpu, HostLog, ctime
from .styles import Style

__all__ = ["CAUSES", "LEMON_KINDS", "SynthReport", "synth", "tar_bytes"]

#: Every root cause the generator plants (DESIGN.md's list).
CAUSES = tuple(SCENARIOS)

#: The share of incidents caused by a planted repeat offender (when lemons are planted).
LEMON_SHARE = 0.12
#: The share of incidents packed as a ``.tar.gz``, and of those cut short (a damaged copy).
TARBALL_SHARE = 0.15
CORRUPT_TARBALL_SHARE = 0.05
#: The share of incidents whose hosts print local time (the zone is in ``incident.toml``).
LOCAL_TIME_SHARE = 0.3
ZONES = ("America/Los_Angeles", "Europe/Berlin", "Asia/Shanghai", "Asia/Kolkata")
#: The share of hosts whose clock is minutes off; the rest are within about a second.
BAD_CLOCK_SHARE = 0.03
#: Shares of hosts archived as an nvidia-bug-report, of kern.logs rotated, of incidents with a
#: bystander's dmesg truncated.
BUG_REPORT_SHARE = 0.08
ROTATED_SHARE = 0.4
TRUNCATED_SHARE = 0.05
#: The share of hosts whose NVRM lines were also pasted with their stamps cut off.
NVRM_GREP_SHARE = 0.06
#: The share of bystanders' ``nvidia-smi -q -x`` dumps cut short (pasted by hand, or copied while written).
XML_CUT_SHARE = 0.05
#: The share of hosts whose archive holds a pstore record of an earlier boot's crash.
PSTORE_SHARE = 0.04
MARKER = ".forensics-synth"  # marks a folder this generator wrote, which a later run may replace
MTIME = 1735689600  # 2025-01-01: fixed archive member times, so output is byte-identical per seed
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


@dataclass
class SynthReport:
    out: Path
    incidents: int = 0
    files: int = 0
    bytes: int = 0
    causes: dict[str, int] = field(default_factory=dict)
    lemons: dict[str, str] = field(default_factory=dict)


def synth(
    out: str | Path,
    incidents: int,
    *,
    seed: int = 1,
    hosts_per_incident: tuple[int, int] = (2, 4),
    causes: list[str] | None = None,
    lemons: tuple[str, ...] = LEMON_KINDS,
) -> SynthReport:
    """Write ``incidents`` labelled incidents under ``out``: a new or empty folder, or an earlier synth
    output (which is replaced)."""
    chosen = list(causes or CAUSES)
    unknown = [c for c in chosen if c not in SCENARIOS]
    if unknown:
        raise InputError(f"unknown cause {unknown[0]!r}; causes: {', '.join(CAUSES)}")
    bad = [k for k in lemons if k not in LEMON_KINDS]
    if bad:
        raise InputError(f"unknown lemon kind {bad[0]!r}; kinds: {', '.join(LEMON_KINDS)}")
    low, high = hosts_per_incident
    if not 1 <= low <= high:
        raise InputError(f"--hosts-per-incident {low}-{high}: need 1 <= A <= B")
    if incidents < 0:
        raise InputError("--incidents must be 0 or more")
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise InputError(f"{out}: exists and is not a folder")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise InputError(f"{out}: a folder with other content; give an empty or new folder (or an earlier synth output)")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text(f"forensics synth --incidents {incidents} --seed {seed}\n")
    rng = random.Random(seed)
    fleet = Fleet.build(rng, max(48, incidents, high * 2), lemons)
    report = SynthReport(out, lemons=dict(fleet.lemons))
    when = EPOCH
    for n in range(incidents):
        when += timedelta(hours=rng.expovariate(1 / 8))
        files = _incident(out, n, when, fleet, rng, chosen, (low, high), report)
        report.incidents += 1
        report.files += len(files)
        report.bytes += sum(len(d) for d in files.values())
    return report


def _incident(out: Path, n: int, when: datetime, fleet: Fleet, rng: random.Random, chosen: list[str],
              hosts_range: tuple[int, int], report: SynthReport) -> dict[str, bytes]:  # fmt: skip
    iid = f"synth-{n:06d}"
    lemon = None
    if fleet.lemons and rng.random() < LEMON_SHARE:
        lemon = rng.choice(sorted(fleet.lemons))
    if lemon == "card":
        cause = "gpu_memory"
        fail_host, fail_bus = fleet.where(fleet.lemons["card"])
    elif lemon == "slot":
        cause = "pcie_link"
        fail_host, fail_bus = fleet.lemons["slot"].split("/")
    elif lemon == "node":
        cause = rng.choice(["host_memory", "gpu_hardware"])
        fail_host, fail_bus = fleet.lemons["node"], rng.choice(GPU_BUSES)
    else:
        cause = rng.choices(chosen, weights=[WEIGHTS[c] for c in chosen])[0]
        healthy = [h for h in fleet.hosts if h != fleet.lemons.get("node")]
        fail_host, fail_bus = rng.choice(healthy), rng.choice(GPU_BUSES)
        if f"{fail_host}/{fail_bus}" == fleet.lemons.get("slot") or fleet.cards[(fail_host, fail_bus)].serial == fleet.lemons.get("card"):
            fail_bus = next(b for b in GPU_BUSES if b != fail_bus)
    report.causes[cause] = report.causes.get(cause, 0) + 1
    k = rng.randint(*hosts_range)
    others = rng.sample([h for h in fleet.hosts if h != fail_host], k - 1)
    hosts = sorted([fail_host, *others])
    world = 8 * k
    fail = when
    started = fail - timedelta(seconds=rng.randrange(2 * 3600, 30 * 3600))
    tz = "UTC" if rng.random() >= LOCAL_TIME_SHARE else rng.choice(ZONES)
    logs: list[HostLog] = []
    for i, host in enumerate(hosts):
        boot = started - timedelta(seconds=rng.randrange(600, 40 * 86400))
        gpus = [Gpu(bus, fleet.cards[(host, bus)], minor, 8 * i + minor, 10000 + rng.randrange(50000) + minor,
                    fleet.domains[host]) for minor, bus in enumerate(GPU_BUSES)]  # fmt: skip
        # NTP keeps clocks within a second or so; now and then a host's has drifted by minutes.
        skew = rng.uniform(90, 300) * rng.choice([-1, 1]) if rng.random() < BAD_CLOCK_SHARE else rng.gauss(0, 0.6)
        # The host's second stream (seeded by what the first drew) draws the forms added since: new
        # forms mostly leave the rest of a seed's corpus as it was.
        side = random.Random(f"{host}/{boot.isoformat()}")
        # A third, for the forms of the real samples gathered in December 2026: the second's draws stay.
        late = random.Random(f"{host}/{boot.isoformat()}/late")
        log = HostLog(host, boot, gpus, rng, skew_s=round(skew, 3), tz=tz, style=Style.draw(rng, side, late),
                      side=side, late=late)  # fmt: skip
        log.boot_messages("4.4.0-210-generic" if log.style.kernel == "4.4" else
                          rng.choice(["5.15.0-119-generic", "5.15.0-91-generic", "6.8.0-45-generic"]))  # fmt: skip
        log.noise(started, fail, misleading=host != fail_host)
        logs.append(log)
    first = next(log for log in logs if log.host == fail_host)
    ctx = Ctx(rng, logs, fail, first, first.gpu(fail_bus), seq=rng.randrange(2000, 90000))
    SCENARIOS[cause](ctx)
    if ctx.at_start:  # the job failed at initialisation: it never trained
        started = fail - timedelta(seconds=20 + rng.randrange(40))
    interval = rng.choice([1800, 3600])
    steps, step, at = [], 100, started + timedelta(seconds=90)
    while at < fail - timedelta(seconds=30) and not ctx.at_start:
        steps.append((step, at))
        step, at = step + 100, at + timedelta(seconds=110 + rng.random() * 4)
    nan_from = None
    if cause == "numerical" and len(steps) > 4:
        nan_from = steps[-3][0]
    spike = rng.choice(steps)[0] if steps and rng.random() < 0.3 else None
    comm = rng.getrandbits(40) | 1 << 44
    for log in logs:
        if log.host not in ctx.silent:  # (a host whose container never started printed nothing)
            nccl_init(log, started + timedelta(seconds=20), world, comm)
    train_steps(logs[-1], rng, started, steps, nan_from, spike)
    end = fail + timedelta(seconds=610)
    for log in logs:
        if log.host in ctx.failed:
            at = end + timedelta(seconds=rng.random())
            if log.host not in ctx.silent:  # (no agent ran there)
                torchrun_report(log, at, ctx.failed[log.host])
    last_ckpt = started + timedelta(seconds=interval * int((fail - started).total_seconds() // interval))
    first_serial = ctx.g.card.serial
    fleet.after_failure(rng, fail_host, fail_bus, cause)

    files: dict[str, bytes] = {"incident.toml": b""}  # first in a tarball: a damaged one keeps its label
    damage: list[str] = []
    for i, log in enumerate(logs):
        taken = end + timedelta(seconds=120 + rng.randrange(600))
        if rng.random() < BUG_REPORT_SHARE:
            files[f"{log.host}/nvidia-bug-report.log.gz"] = gzip.compress(_bug_report(log, taken), mtime=0)
        else:
            files.update(_host_files(log, started, taken, syslog=bool((n + i) % 2), rng=rng))
        files[f"{log.host}/train.log"] = log.job_log().encode()
    files.update(telemetry.files(ctx.log, cause, ctx.g, fail, end))  # what the field guides say shows it
    if cause == "hang" and logs[0].style.nccl == "2.26":  # someone asked NCCL's RAS what the job waits on
        files[f"{logs[0].host}/ncclras.txt"] = ras_report(logs[0], logs, ctx.seq, ctx.g).encode()
    bystanders = [log.host for log in logs if log.host != ctx.log.host and f"{log.host}/dmesg.log" in files]
    if bystanders and rng.random() < TRUNCATED_SHARE:  # copied while still being written
        name = f"{rng.choice(bystanders)}/dmesg.log"
        files[name] = files[name][: rng.randrange(len(files[name]) * 2 // 3, len(files[name]))]
        damage.append(f"{name} truncated")
    for log in logs:  # a bystander's nvidia-smi -q -x pasted by hand, its end cut off (not well-formed)
        name = f"{log.host}/nvidia-smi-q.xml"
        cut = log.side.random() < XML_CUT_SHARE
        if cut and log is not ctx.log and name in files and files[name].startswith(b"<?xml"):
            files[name] = files[name][: log.side.randrange(len(files[name]) // 2, len(files[name]) - 20)]
            damage.append(f"{name} truncated")
    label = {
        "root_cause": cause, "first_host": ctx.log.host, "first_rank": ctx.g.rank,
        "first_gpu": None if ctx.host_level else f"{ctx.g.pci}:00.0",
        "first_serial": None if ctx.host_level else first_serial,
        "failed_at": f"{fail:%Y-%m-%dT%H:%M:%SZ}", "lemon": lemon,
    }  # fmt: skip
    job = {"name": rng.choice(["pretrain-llm-70b", "pretrain-llm-8b", "sft-13b", "vlm-34b"]), "gpus": world,
           "hosts": len(hosts), "checkpoint_interval_s": interval,
           "last_checkpoint": f"{last_ckpt:%Y-%m-%dT%H:%M:%SZ}", "started": f"{started:%Y-%m-%dT%H:%M:%SZ}"}  # fmt: skip
    tarball = rng.random() < TARBALL_SHARE
    cut = tarball and rng.random() < CORRUPT_TARBALL_SHARE
    if cut:
        damage.append("archive cut short")
    synth_facts = {"generator": "forensics.synth", "lemon_card": fleet.lemons.get("card"),
                   "lemon_slot": fleet.lemons.get("slot"), "lemon_node": fleet.lemons.get("node"),
                   "damage": "; ".join(damage) or None}  # fmt: skip
    files["incident.toml"] = _toml({"id": iid, "timezone": tz}, {"label": label, "job": job, "synth": synth_facts,
                                    "synth.clock_skew_s": {log.host: log.skew_s for log in logs}}).encode()  # fmt: skip
    if tarball:
        data = _tarball(iid, files)
        (out / f"{iid}.tar.gz").write_bytes(data[: len(data) * 9 // 10] if cut else data)
    else:
        for name, data in files.items():
            path = out / iid / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return files


def _host_files(log: HostLog, start: datetime, taken: datetime, *, syslog: bool, rng: random.Random) -> dict[str, bytes]:
    """A host's logs as separate files: raw dmesg, kern.log (sometimes rotated, the older part
    compressed) or the journal (text, ``-o json`` or ``-o export``), the nvidia-smi snapshot (``-q``
    text or ``-q -x`` XML) and, on some hosts, a ``--query-gpu`` CSV loop."""
    out = {f"{log.host}/dmesg.log": log.dmesg().encode()}
    if syslog:
        lines = log.kern_log().encode().splitlines(keepends=True)
        if len(lines) > 10 and rng.random() < ROTATED_SHARE:
            cut = len(lines) * 3 // 5
            older = b"".join(lines[:cut])
            if rng.random() < 0.5:
                out[f"{log.host}/kern.log.1.gz"] = gzip.compress(older, mtime=0)
            else:
                out[f"{log.host}/kern.log.1"] = older
            lines = lines[cut:]
        out[f"{log.host}/kern.log"] = b"".join(lines)
    elif log.style.journal in ("json", "json-spaced", "export"):
        out[f"{log.host}/journal.{'export' if log.style.journal == 'export' else 'json'}"] = log.journal_export()
    else:
        out[f"{log.host}/journal.log"] = log.journal().encode()
    if log.side.random() < NVRM_GREP_SHARE and any(m.startswith("NVRM: ") for _, m in log.kernel):
        out[f"{log.host}/nvrm.txt"] = log.nvrm_grep().encode()
    text = log.style.smi_form == "text"
    dump = log.unreachable() or (log.nvidia_smi(taken) if text else log.nvidia_smi_xml(taken))
    out[f"{log.host}/nvidia-smi-q.{'txt' if text else 'xml'}"] = dump.encode()
    if rng.random() < PSTORE_SHARE:  # an earlier boot's crash, kept by pstore and copied along
        out[f"{log.host}/pstore/dmesg-erst-{rng.getrandbits(63)}"] = log.pstore(rng).encode()
    if log.style.smi_csv:
        out[f"{log.host}/nvidia-smi-query.csv"] = log.nvidia_smi_csv(start, taken).encode()
    return out


def _bug_report(log: HostLog, taken: datetime) -> bytes:
    """``nvidia-bug-report.sh`` output for a host: its prologue, kern.log, dmesg and nvidia-smi -q."""
    shown = log.wall(taken)
    sep = "\n" + "_" * 44 + "\n\n"
    sections = [
        f"Start of NVIDIA bug report log file.  Please include this file, along\nnvidia-bug-report.sh Version: "
        f"35154\nDate: {ctime(shown)[:-5]} {shown.tzname()} {shown.year}\nuname: Linux {log.host} 5.15.0-119-generic "
        "#129-Ubuntu SMP Fri Aug 2 19:25:20 UTC 2024 x86_64 x86_64 x86_64 GNU/Linux\n",
        f"*** /var/log/kern.log\n*** ls: -rw-r----- 1 syslog adm 0 {shown:%Y-%m-%d %H:%M:%S}.000000000 {shown:%z} "
        f"/var/log/kern.log\n{log.kern_log()}",
        f"dmesg:\n\n{log.dmesg()}",
        f"/usr/bin/nvidia-smi --query\n\n{log.nvidia_smi(taken)}",
    ]  # fmt: skip
    return (sections[0] + "".join(sep + s for s in sections[1:]) + "\nEnd of NVIDIA bug report log file.\n").encode()


def _toml(top: dict[str, object], tables: dict[str, dict[str, object]]) -> str:
    def value(v: object) -> str:
        if isinstance(v, bool):
            return str(v).lower()
        return str(v) if isinstance(v, int | float) else f'"{v}"'

    lines = [f"{k} = {value(v)}" for k, v in top.items() if v is not None]
    for name, table in tables.items():
        lines += ["", f"[{name}]", *(f"{k} = {value(v)}" for k, v in table.items() if v is not None)]
    return "\n".join(lines) + "\n"


def tar_bytes(root: str, files: dict[str, bytes]) -> bytes:
    """An uncompressed tar of ``files`` under the folder ``root``, in the given order, with fixed
    member times (so the same files give the same bytes)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{root}/{name}")
            info.size, info.mtime, info.mode = len(data), MTIME, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _tarball(root: str, files: dict[str, bytes]) -> bytes:
    return gzip.compress(tar_bytes(root, files), mtime=0)  # incident.toml comes first in ``files``
