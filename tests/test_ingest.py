"""Ingest: packaging, safety, hosts, clocks, identities, and the dataset's incremental, atomic writes."""

from __future__ import annotations

import gzip
import io
import json
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
import zstandard
from click.testing import CliRunner

import forensics
from forensics.cli import main
from forensics.ingest import discover, incident

from .conftest import FIRST_CORPUS, GOLDEN

SAMPLES = GOLDEN
CORPUS = Path(__file__).parents[1] / "corpus"
DMESG = (
    "[    0.000000] Linux version 5.15.0-91-generic (buildd@lcy02) (gcc 11.4.0) #101-Ubuntu SMP\n"
    "[ 1843.308145] NVRM: GPU at PCI:0000:3b:00: GPU-6a1b2c3d-1111-2222-3333-444455556666\n"
    "[ 1850.100000] pcieport 0000:3a:00.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0\n"
    "[ 1851.308145] NVRM: Xid (PCI:0000:3b:00): 79, pid=2345, name=python, GPU has fallen off the bus.\n"
)
KERNLOG = (
    "Jan 25 10:34:54 node1 kernel: [ 1843.308145] NVRM: GPU at PCI:0000:3b:00: GPU-6a1b2c3d-1111-2222-3333-444455556666\n"
    "Jan 25 10:35:02 node1 kernel: [ 1851.308145] NVRM: Xid (PCI:0000:3b:00): 79, pid=2345, name=python, GPU has fallen off the bus.\n"
)
SOS = "sosreport-gpu7-2025-01-25-abcdef"  # a folder holding only a sosreport tree: the tree is the incident
ISO = "2025-01-25T10:30:00+0000 node1 kernel: usb 1-1: new high-speed USB device number 2\n"


def _tar(members: dict[str, bytes], mode: str = "w") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1737801000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _bug_report() -> bytes:
    sep = b"_" * 44
    nvsmi = (SAMPLES / "nvsmi" / "nvsmi-q-535.129.03-a10-remapped-rows-pending-01.txt").read_bytes()
    sections = [
        b"Start of NVIDIA bug report log file.  Please include this file, along\n"
        b"nvidia-bug-report.sh Version: 35154\nDate: Sat Jan 25 10:40:01 UTC 2025\n"
        b"uname: Linux a10-host 5.15.0-91-generic #101-Ubuntu SMP x86_64\n",
        b"*** /var/log/kern.log\n*** ls: -rw-r----- 1 syslog adm 243 2025-01-25 /var/log/kern.log\n"
        + KERNLOG.replace("node1", "a10-host").encode(),
        b"*** /proc/driver/nvidia/gpus/0000:3b:00.0/information\n*** ls: -r--r--r-- 1 root root 0 x\n"
        b"Model: \t\t NVIDIA A10\nIRQ:   \t\t 150\nGPU UUID: \t GPU-6a1b2c3d-1111-2222-3333-444455556666\n"
        b"Bus Location: \t 0000:3b:00.0\nDevice Minor: \t 0\n",
        b"*** /etc/missing.conf does not exist\n",
        b"/usr/bin/nvidia-smi --query\n\n" + nvsmi,
    ]
    text = sections[0] + b"".join(b"\n" + sep + b"\n\n" + s for s in sections[1:]) + b"\nEnd of NVIDIA bug report log file.\n"
    # one gzip member per section, as nvidia-bug-report.sh writes it
    return b"".join(gzip.compress(part) for part in (text[:300], text[300:2000], text[2000:]))


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """A folder of incidents in every packaging ingest reads."""
    root = tmp_path / "incidents"
    (root / "folder-inc" / "node1").mkdir(parents=True)
    (root / "folder-inc" / "incident.toml").write_text('id = "folder-inc"\n[label]\nroot_cause = "pcie_link"\n')
    (root / "folder-inc" / "node1" / "dmesg").write_text(DMESG)
    (root / "folder-inc" / "node1" / "kern.log").write_text(KERNLOG)
    (root / "folder-inc" / "node1" / "kern.log.1.gz").write_bytes(gzip.compress(ISO.encode()))
    (root / "tgz-inc.tar.gz").write_bytes(gzip.compress(_tar({"node2/dmesg": DMESG.encode()})))
    (root / "zst-inc.tar.zst").write_bytes(zstandard.ZstdCompressor().compress(_tar({"node3/kern.log": KERNLOG.encode()})))
    (root / "xz-inc.tar.xz").write_bytes(_tar({"xz-inc/node4/syslog.xz": _xz(ISO.encode())}, "w:xz"))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("node5/nvidia-bug-report.log.gz", _bug_report())
        z.writestr("node5/inner.tgz", gzip.compress(_tar({"nested/dmesg": DMESG.encode()})))
    (root / "zip-inc.zip").write_bytes(buf.getvalue())
    sos = root / "sos-inc" / "sosreport-gpu7-2025-01-25-abcdef"
    (sos / "var" / "log").mkdir(parents=True)
    (sos / "sos_commands" / "kernel").mkdir(parents=True)
    (sos / "etc").mkdir()
    (sos / "hostname").write_text("gpu7.example.com\n")
    (sos / "var" / "log" / "kern.log").write_text(KERNLOG.replace("node1 ", ""))
    (sos / "sos_commands" / "kernel" / "dmesg").write_text(DMESG)
    (sos / "etc" / "fstab").write_text("UUID=1 / ext4 defaults 0 1\n")
    (root / "README.md").write_text("notes\n")
    return root


def _xz(data: bytes) -> bytes:
    import lzma

    return lzma.compress(data)


def test_every_packaging_into_one_dataset(mixed: Path, tmp_path: Path) -> None:
    report = forensics.ingest([mixed], tmp_path / "ds", jobs=1)
    assert [d.status for d in report.done] == ["added"] * 6 and [s.doc for s in report.skipped] == [True]
    ds = forensics.open_dataset(tmp_path / "ds")
    files = ds.files.collect().sort("incident", "file")
    assert files.select("incident", "file", "source", "host").rows() == [
        ("folder-inc", "node1/dmesg", "kernel", "node1"),
        ("folder-inc", "node1/kern.log", "kernel", "node1"),
        ("folder-inc", "node1/kern.log.1.gz", "kernel", "node1"),
        (SOS, "etc/fstab", None, "gpu7"),
        (SOS, "hostname", None, "gpu7"),
        (SOS, "sos_commands/kernel/dmesg", "kernel", "gpu7"),
        (SOS, "var/log/kern.log", "kernel", "gpu7"),
        ("tgz-inc", "node2/dmesg", "kernel", "node2"),
        ("xz-inc", "node4/syslog.xz", "kernel", "node1"),  # the host its lines name
        ("zip-inc", "node5/inner.tgz/nested/dmesg", "kernel", "node5"),
        ("zip-inc", "node5/nvidia-bug-report.log.gz#/etc/missing.conf", None, "a10-host"),
        ("zip-inc", "node5/nvidia-bug-report.log.gz#/proc/driver/nvidia/gpus/0000:3b:00.0/information", None, "a10-host"),
        ("zip-inc", "node5/nvidia-bug-report.log.gz#/usr/bin/nvidia-smi --query", "nvsmi", "a10-host"),
        ("zip-inc", "node5/nvidia-bug-report.log.gz#/var/log/kern.log", "kernel", "a10-host"),
        ("zip-inc", "node5/nvidia-bug-report.log.gz#header", None, "a10-host"),
        ("zst-inc", "node3/kern.log", "kernel", "node1"),
    ]
    assert files.filter(pl.col("source").is_not_null())["records"].min() > 0
    assert files["error"].drop_nulls().to_list() == ["the bug report says: does not exist"]
    # bug-report lines keep the report's numbering; its identity section and nvidia-smi agree
    kern = ds.events.filter(pl.col("file").str.ends_with("#/var/log/kern.log")).collect()
    assert kern["line"].to_list() == [10, 11]  # lines 10-11 of the report
    ids = ds.identities.filter(pl.col("incident") == "zip-inc").collect()
    row = ids.filter(pl.col("gpu") == "0000:3b:00.0").row(0, named=True)
    assert row["uuid"] == "GPU-6a1b2c3d-1111-2222-3333-444455556666" and row["product"] == "NVIDIA A10"
    assert "bug report" in row["learnt_from"]
    labels = json.loads(ds.incidents.filter(pl.col("incident") == "folder-inc").collect()["labels"][0])
    assert labels == {"label": {"root_cause": "pcie_link"}}


def test_raw_dmesg_aligned_to_kern_log_and_year_from_context(mixed: Path) -> None:
    t = incident.read_incident(discover.find_incidents([mixed / "folder-inc"]).incidents[0])
    ev = pl.from_arrow(t.events).with_columns(how=pl.col("detail").str.json_path_match("$.ts_from"))
    xid = ev.filter(pl.col("kind") == "gpu.xid").sort("file")
    raw, wall = xid.row(0, named=True), xid.row(1, named=True)
    assert (raw["file"], raw["how"]) == ("node1/dmesg", "aligned")
    assert wall["ts"].isoformat() == "2025-01-25T10:35:02+00:00"  # year from the ISO stamps beside it
    assert abs((raw["ts"] - wall["ts"]).total_seconds()) < 1
    assert json.loads(wall["detail"])["year_from"] == "context"
    # the AER line exists only in raw dmesg: it is aligned through the same boot
    aer = ev.filter(pl.col("kind") == "pcie.aer").row(0, named=True)
    assert aer["how"] == "aligned" and aer["ts"].isoformat().startswith("2025-01-25T10:35:00.79")
    # identities: the Xid's GPU has the UUID its NVRM identity line gave
    assert pl.from_arrow(t.identities).select("gpu", "uuid").rows() == [
        ("0000:3b:00.0", "GPU-6a1b2c3d-1111-2222-3333-444455556666")
    ]


def _events_of(folder: Path) -> pl.DataFrame:
    t = incident.read_incident(discover.find_incidents([folder]).incidents[0])
    return pl.from_arrow(t.events).with_columns(
        how=pl.col("detail").str.json_path_match("$.ts_from"), by=pl.col("detail").str.json_path_match("$.aligned_by"),
        year_from=pl.col("detail").str.json_path_match("$.year_from"),
    )  # fmt: skip


def test_raw_dmesg_aligned_by_journal_realtime_and_monotonic(tmp_path: Path) -> None:
    """journald reads a kernel message a few ms after printk: realtime - monotonic is the boot start."""
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    (inc / "incident.toml").write_text('id = "ja"\n')
    (inc / "node1" / "dmesg").write_text(DMESG)
    boot_us = 1737800000_000000  # 2025-01-25T10:13:20Z
    entries = []
    for line in DMESG.splitlines()[1:]:
        uptime, message = line[1:].split("] ", 1)
        mono = round(float(uptime) * 1e6) + 3_000
        entries.append({"__REALTIME_TIMESTAMP": str(boot_us + mono), "__MONOTONIC_TIMESTAMP": str(mono),
                        "_BOOT_ID": "5c1a", "_HOSTNAME": "node1", "_TRANSPORT": "kernel",
                        "SYSLOG_IDENTIFIER": "kernel", "PRIORITY": "3", "MESSAGE": message})  # fmt: skip
    (inc / "node1" / "journal.json").write_text("".join(json.dumps(e) + "\n" for e in entries))
    dmesg = _events_of(inc).filter(pl.col("file") == "node1/dmesg")
    assert dmesg["how"].to_list() == ["aligned"] * 4 and set(dmesg["by"]) == {"node1/journal.json"}
    assert [t.isoformat() for t in dmesg["ts"]] == [
        "2025-01-25T10:13:20+00:00", "2025-01-25T10:44:03.308145+00:00",
        "2025-01-25T10:44:10.100000+00:00", "2025-01-25T10:44:11.308145+00:00",
    ]  # fmt: skip


def test_yearless_journal_gets_its_years_across_new_year(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    (inc / "node2").mkdir()
    (inc / "incident.toml").write_text('id = "ny"\n')
    (inc / "node1" / "journal.txt").write_text(
        "Dec 31 23:59:58 node1 systemd[1]: Starting nvidia-persistenced.service...\n"
        "Dec 31 23:59:59 node1 nvidia-persistenced[812]: Started (812)\n"
        "Jan 01 00:00:03 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=2345, name=python, GPU has fallen off the bus.\n"
    )  # fmt: skip
    (inc / "node2" / "dmesg-iso.log").write_text(
        "2025-01-01T00:00:05,000000+00:00 NVRM: Xid (PCI:0000:1b:00): 45, pid=2346, name=python, Ch 00000010\n"
    )
    journal = _events_of(inc).filter(pl.col("file") == "node1/journal.txt")
    assert [t.isoformat() for t in journal["ts"]] == [
        "2024-12-31T23:59:58+00:00", "2024-12-31T23:59:59+00:00", "2025-01-01T00:00:03+00:00",
    ]  # fmt: skip
    assert set(journal["year_from"]) == {"context"} and set(journal["how"]) == {"assumed"}


def test_a_serial_line_without_a_bus_belongs_to_the_gpu_above(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    (inc / "node1" / "dmesg").write_text(
        "[   22.100000] NVRM: GPU at PCI:0000:18:00: GPU-11111111-2222-3333-4444-555555555555\n"
        "[   22.100000] NVRM: GPU Board Serial Number: 1654922000011\n"
        "[   22.500000] NVRM: GPU at PCI:0000:2a:00: GPU-66666666-2222-3333-4444-555555555555\n"
        "[   22.500000] NVRM: GPU Board Serial Number: 1654922000022\n"
    )
    ids = pl.from_arrow(incident.read_incident(discover.find_incidents([inc]).incidents[0]).identities)
    assert ids.select("gpu", "serial").rows() == [("0000:18:00.0", "1654922000011"), ("0000:2a:00.0", "1654922000022")]


def test_timezone_from_incident_toml(tmp_path: Path) -> None:
    inc = tmp_path / "tz"
    (inc / "h").mkdir(parents=True)
    (inc / "incident.toml").write_text('timezone = "America/New_York"\nyear = 2025\n')
    (inc / "h" / "syslog").write_text(KERNLOG)
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    ev = pl.from_arrow(t.events)
    assert ev["ts"][0].isoformat() == "2025-01-25T15:34:54+00:00"
    assert json.loads(ev["detail"][0])["ts_from"] == "local"


def assert_same_dataset(one: Path, two: Path) -> None:
    """Every table of the two datasets holds the same rows (row order aside)."""
    a, b = forensics.open_dataset(one), forensics.open_dataset(two)
    order = {"identities": ["incident", "host", "gpu"], "files": ["incident", "file"], "incidents": ["incident"]}
    for name in forensics.schema.TABLES:
        by = order.get(name, ["incident", "file", "line"])
        got, want = a.table(name).collect(), b.table(name).collect()
        assert got.height == want.height and got.sort(by, nulls_last=True).equals(want.sort(by, nulls_last=True)), name


def test_reingest_adds_nothing_and_jobs_agree(mixed: Path, tmp_path: Path) -> None:
    one = forensics.ingest([mixed], tmp_path / "one", jobs=1)
    again = forensics.ingest([mixed], tmp_path / "one", jobs=1)
    assert again.count("unchanged") == 6 and again.count("added") == 0
    forensics.ingest([mixed], tmp_path / "two", jobs=2)
    assert_same_dataset(tmp_path / "one", tmp_path / "two")
    # a changed incident is replaced, not duplicated
    (mixed / "folder-inc" / "node1" / "dmesg").write_text(DMESG + "[ 1900.000000] NVRM: Xid (PCI:0000:3b:00): 48, DBE\n")
    changed = forensics.ingest([mixed], tmp_path / "one", jobs=1)
    assert [d.status for d in changed.done].count("replaced") == 1
    events = forensics.open_dataset(tmp_path / "one").events.filter(pl.col("incident") == "folder-inc").collect()
    assert events.filter(pl.col("kind") == "gpu.xid")["code"].sort().to_list() == [48, 79, 79]
    assert len(list((tmp_path / "one" / "events").glob("*.parquet"))) == 6 and one.count("added") == 6


def test_dask_engine_gives_the_same_dataset(mixed: Path, tmp_path: Path) -> None:
    from distributed import LocalCluster

    forensics.ingest([mixed], tmp_path / "one", jobs=1)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        seen: list[str] = []
        report = forensics.ingest([mixed], tmp_path / "dask", engine="dask", scheduler=cluster.scheduler_address,
                                  progress=lambda done, n, total: seen.append(f"{n}/{total}"))  # fmt: skip
        again = forensics.ingest([mixed], tmp_path / "dask", engine="dask", scheduler=cluster.scheduler_address)
    assert report.count("added") == 6 and seen == [f"{n}/6" for n in range(1, 7)]
    assert again.count("unchanged") == 6
    assert_same_dataset(tmp_path / "dask", tmp_path / "one")


def test_kill_9_during_ingest_then_rerun(tmp_path: Path) -> None:
    """A real SIGKILL of the CLI in the middle of a run; the rerun completes the same dataset."""
    roots = FIRST_CORPUS  # 15 incidents
    ds = tmp_path / "ds"
    run = subprocess.Popen([sys.executable, "-m", "forensics", "ingest", *map(str, roots), "-o", str(ds), "-j", "1", "-q"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    while run.poll() is None and time.monotonic() < deadline:
        if len(list((ds / "incidents").glob("*.parquet"))) >= 3:
            break
        time.sleep(0.01)
    run.kill()
    assert run.wait() == -signal.SIGKILL, "the run ended before it could be killed"
    committed = len(list((ds / "incidents").glob("*.parquet")))
    assert 3 <= committed < 15
    forensics.open_dataset(ds).events.collect()  # readable as it was left
    rerun = forensics.ingest(roots, ds, jobs=1)
    assert rerun.count("unchanged") == committed and rerun.count("added") == 15 - committed
    forensics.ingest(roots, tmp_path / "clean", jobs=1)
    assert_same_dataset(ds, tmp_path / "clean")
    assert sorted(p.name for p in (ds / "events").iterdir()) == sorted(p.name for p in (tmp_path / "clean" / "events").iterdir())


def test_killed_run_leaves_a_readable_dataset(mixed: Path, tmp_path: Path) -> None:
    """A kill after an incident's table files are written but before its record commits."""
    ds = tmp_path / "ds"
    forensics.ingest([mixed / "folder-inc"], ds, jobs=1)
    before = forensics.open_dataset(ds).events.collect()
    store = forensics.store.Dataset.open(ds)
    ref = discover.find_incidents([mixed / "tgz-inc.tar.gz"]).incidents[0]
    tables = incident.read_incident(ref).tables()
    key = forensics.store.incident_key(ref.id)
    digest = tables["incidents"].column("digest")[0].as_py()
    forensics.store._write_parquet(store.part_path("events", key, digest), tables["events"])  # then "kill -9"
    (ds / "events" / ".half.parquet.123.tmp").write_bytes(b"PAR1 garbage")
    assert forensics.open_dataset(ds).events.collect().equals(before)
    forensics.ingest([mixed / "folder-inc", mixed / "tgz-inc.tar.gz"], ds, jobs=1)
    clean = tmp_path / "clean"
    forensics.ingest([mixed / "folder-inc", mixed / "tgz-inc.tar.gz"], clean, jobs=1)
    got = forensics.open_dataset(ds).events.collect().sort("incident", "file", "line")
    assert got.equals(forensics.open_dataset(clean).events.collect().sort("incident", "file", "line"))
    assert sorted(p.name for p in (ds / "events").iterdir()) == sorted(p.name for p in (clean / "events").iterdir())


def test_hostile_archives(tmp_path: Path) -> None:
    root = tmp_path / "hostile"
    root.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("../../evil", DMESG.encode()), ("/etc/cron.d/x", b"* * * * * root sh\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("h/passwd")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    (root / "traversal.tar").write_bytes(buf.getvalue())
    (root / "truncated.tar.gz").write_bytes(gzip.compress(_tar({"a/dmesg": DMESG.encode(), "b/dmesg": DMESG.encode() * 400}))[:900])
    # a gzip bomb: one member of 64 MiB of zeros, repeated: 2 GiB decompressed from about 4 MB
    member = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
    bomb = root / "bomb"
    bomb.mkdir()
    (bomb / "zeros.log.gz").write_bytes(member * 32)
    (bomb / "dmesg").write_text(DMESG)
    report = forensics.ingest([root], tmp_path / "ds", jobs=1, max_file_bytes=128 << 20)
    assert {d.id: d.status for d in report.done} == {"bomb": "added", "traversal": "added", "truncated": "added"}
    files = forensics.open_dataset(tmp_path / "ds").files.collect().sort("incident", "file")
    rows = {(r["incident"], r["file"]): r for r in files.iter_rows(named=True)}
    assert "over" not in str(rows[("bomb", "dmesg")]["error"]) and rows[("bomb", "dmesg")]["records"] > 0
    assert "more than the file cap of 134,217,728 bytes" in rows[("bomb", "zeros.log.gz")]["error"]
    assert rows[("traversal", "evil")]["source"] == "kernel" and "leaves the archive" in rows[("traversal", "evil")]["error"]
    assert "leaves the archive" in rows[("traversal", "etc/cron.d/x")]["error"]
    assert rows[("traversal", "h/passwd")]["error"] == "symbolic link to '/etc/passwd'; not followed"
    truncated = [r for k, r in rows.items() if k[0] == "truncated"]
    assert any(r["error"] and "truncated or corrupt" in r["error"] for r in truncated)
    assert not (tmp_path / "evil").exists() and not (tmp_path.parent / "evil").exists()


def test_cli_ingest_corpus(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["ingest", *map(str, FIRST_CORPUS), "-o", str(tmp_path / "ds"), "--quiet"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"{tmp_path / 'ds'}: 15 added, 0 replaced, 0 unchanged, 0 failed"
    assert lines[1] == "incidents 15  files 15  events 735  gpus 1  metrics 0  identities 3"
    assert lines[2] == ("files: 151,746 bytes, 1,029 lines, 735 records, 0 unparsed, 0 claimed by no source, "
                        "0 with an error")  # fmt: skip
    assert lines[4].split() == ["kernel", "gpu.xid", "653", "4"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ingest", "/nonexistent/x", "-o", "{tmp}/ds"], "Error: /nonexistent/x: no such file or directory"),
        (["ingest", "{corpus}", "-o", "{corpus}"], "a folder that is not a gpu-forensics dataset (no dataset.json)"),
        (["ingest", "{corpus}", "-o", "{tmp}/ds", "--max-file-bytes", "lots"], "is not a byte count"),
        (["ingest", "{corpus}", "-o", "{tmp}/ds", "--scheduler", "udp://sched:8786"],
         "Error: cannot reach the Dask scheduler at udp://sched:8786: unknown address scheme 'udp'"),
        (["ingest", "{corpus}", "-o", "{tmp}/ds", "--engine", "processes", "--scheduler", "tcp://sched:8786"],
         "Error: --scheduler runs on a Dask cluster; it cannot be combined with --engine processes"),
    ],
)
def test_cli_ingest_errors(tmp_path: Path, args: list[str], message: str) -> None:
    args = [a.format(tmp=tmp_path, corpus=CORPUS) for a in args]
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0 and message in result.output.replace("\n", " ")


# -- found by the generator's printed forms -----------------------------------------------------------


def test_syslog_without_a_host_keeps_the_kernel_uptime() -> None:
    line = b"Feb 23 03:28:16 kernel: [68183.615790] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
    ev = pl.from_arrow(forensics.parse_bytes(line, file="kern.log", source="kernel", year=2025).events)
    assert ev.select("kind", "code", "uptime_s").row(0) == ("gpu.xid", 79, 68183.61579)
    assert ev["message"][0].startswith("NVRM: Xid")


def test_a_launcher_prefixed_torchrun_report_stays_one_report() -> None:
    """A job log is parsed in chunks cut where no record spans; the indented report lines behind a
    launcher's prefix once looked like a safe place to cut, splitting the report."""
    entry = ["[{n}]:", "  time      : 2025-01-02_13:44:02", "  host      : h1", "  rank      : {n} (local_rank: {n})",
             "  exitcode  : -6 (pid: 4{n})", "  error_file: <N/A>", "  traceback : Signal 6 (SIGABRT) received by PID 4{n}"]  # fmt: skip
    report = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 60, "train.py FAILED",
              "-" * 60, "Failures:", *[line.format(n=n) for n in range(1, 8) for line in entry], "-" * 60,
              "Root Cause (first observed failure):", *[line.format(n=0) for line in entry], "=" * 60]  # fmt: skip
    for prefix in ("", "h1: h1: ", "[1,0]<stdout>:", "[0] "):
        data = "".join(f"{prefix}{line}\n" for line in report).encode()
        parsed = forensics.parse_bytes(data, file="train.log", source="torch")
        ev = pl.from_arrow(parsed.events)
        assert pl.from_arrow(parsed.files)["unparsed"][0] == 0, prefix
        failed = ev.filter(pl.col("kind") == "job.child_failed")
        assert failed.height == 8 and failed["detail"].str.contains('"root_cause": ?"?true').sum() == 1, prefix


def test_untimed_lines_take_the_time_of_their_twin_and_addresses_are_the_folders_host(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    (inc / "node2").mkdir()
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."
    (inc / "node1" / "dmesg.log").write_text(f"[  +0.000000] usb 1-1: new device\n[  +4.100000] {xid}\n")  # --reltime
    (inc / "node1" / "kern.log").write_text(f"Jan 25 10:35:02 node1 kernel: [ 1851.308145] {xid}\n")
    (inc / "node2" / "dmesg.log").write_text(f"10.0.0.7: kern: warning: [2025-01-25T10:35:02.5Z]: {xid}\n")  # Talos
    (inc / "incident.toml").write_text('id = "twins"\nyear = 2025\n')
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    ev = pl.from_arrow(t.events).filter(pl.col("kind") == "gpu.xid").sort("file")
    assert ev.select("file", "host").rows() == [("node1/dmesg.log", "node1"), ("node1/kern.log", "node1"),
                                               ("node2/dmesg.log", "node2")]  # fmt: skip
    twin = ev.row(0, named=True)
    assert twin["ts"] == ev["ts"][1] and '"ts_from":"twin"' in twin["detail"].replace(" ", "")
    assert set(pl.from_arrow(t.files)["host"]) == {"node1", "node2"}


def test_a_line_pasted_without_its_stamp_takes_the_moment_its_timed_copies_share(tmp_path: Path) -> None:
    """An Xid pasted with its stamp cut off (``kernel: NVRM: …``), beside the dmesg and kern.log that both
    print it at one moment, is of that moment: an earlier job's Xid 13 must not look like this job's."""
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    xid = "NVRM: Xid (PCI:0000:3b:00): 13, pid=6718, name=python, Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Out Of Range Address"
    (inc / "node1" / "dmesg.log").write_text(f"[Sat Jan 25 10:35:02 2025] {xid}\n")
    (inc / "node1" / "kern.log").write_text(f"Jan 25 10:35:02 node1 kernel: [ 1851.308145] {xid}\n")
    (inc / "node1" / "nvrm.txt").write_text(f"kernel: {xid}\n")
    (inc / "node1" / "later.log").write_text(f"Jan 25 12:00:00 node1 kernel: [ 7249.0] {xid}\n"
                                             f"kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")  # fmt: skip
    (inc / "incident.toml").write_text('id = "pasted"\nyear = 2025\n')
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    ev = pl.from_arrow(t.events).filter(pl.col("kind") == "gpu.xid").sort("file")
    pasted = ev.filter(pl.col("file") == "node1/nvrm.txt").row(0, named=True)
    assert pasted["ts"] is None  # a third copy two hours later: which moment is not known
    (inc / "node1" / "later.log").unlink()
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    ev = pl.from_arrow(t.events).filter(pl.col("kind") == "gpu.xid").sort("file")
    pasted = ev.filter(pl.col("file") == "node1/nvrm.txt").row(0, named=True)
    assert pasted["ts"] == datetime(2025, 1, 25, 10, 35, 2, tzinfo=UTC) and '"aligned_by":"node1/' in pasted["detail"].replace(" ", "")


def test_a_container_host_name_is_the_folder_host_when_the_folder_names_one(tmp_path: Path) -> None:
    """NCCL and torchrun in a container name the container's host name (``user``, a hex id): in a
    folder whose other files name one host, that name is the host's; a name another folder's files
    give as their host, or a folder that names no host, is left as it is."""
    def job(name: str) -> str:
        return (f"{name}:4711:4798 [3] NCCL INFO comm 0x7f00 rank 3 nranks 16 cudaDev 3 busId 5d000 - Init COMPLETE\n"
                f"{name}:4711:4790 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<4321> "
                "with error 12, opcode 0, len 0, vendor err 129\n")  # fmt: skip

    inc = tmp_path / "inc"
    for folder in ("gpu-node-007", "gpu-node-008", "gpu-node-009", "logs"):
        (inc / folder).mkdir(parents=True)
    # pdsh by address in front of the container's NCCL lines, beside a dmesg that names no host
    (inc / "gpu-node-009" / "dmesg.log").write_text("[ 1851.308145] usb 1-1: new device\n")
    (inc / "gpu-node-009" / "train.log").write_text("".join(f"10.0.0.9: 10.0.0.9: {line}\n" for line in job("user").splitlines()))
    (inc / "gpu-node-007" / "kern.log").write_text("Jan 25 10:35:02 gpu-node-007 kernel: [ 1851.308145] usb 1-1: new device\n")
    (inc / "gpu-node-007" / "train.log").write_text(job("user"))
    (inc / "gpu-node-008" / "kern.log").write_text("Jan 25 10:35:02 gpu-node-008 kernel: [ 1851.308145] usb 1-1: new device\n")
    (inc / "gpu-node-008" / "train.log").write_text(job("gpu-node-007"))  # the head node's copy of a rank's output
    (inc / "logs" / "train.log").write_text(job("9f2c4a7b3e1d"))
    (inc / "incident.toml").write_text('id = "containers"\nyear = 2025\n')
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    files = dict(pl.from_arrow(t.files).select("file", "host").iter_rows())
    assert files == {"gpu-node-007/kern.log": "gpu-node-007", "gpu-node-007/train.log": "gpu-node-007",
                     "gpu-node-008/kern.log": "gpu-node-008", "gpu-node-008/train.log": "gpu-node-007",
                     "gpu-node-009/dmesg.log": "gpu-node-009", "gpu-node-009/train.log": "gpu-node-009",
                     "logs/train.log": "9f2c4a7b3e1d"}  # fmt: skip
    ev = pl.from_arrow(t.events).filter(pl.col("kind") == "nccl.net_error")
    assert dict(ev.select("file", "host").iter_rows()) == {"gpu-node-007/train.log": "gpu-node-007",
                                                          "gpu-node-008/train.log": "gpu-node-007",
                                                          "gpu-node-009/train.log": "gpu-node-009",
                                                          "logs/train.log": "9f2c4a7b3e1d"}  # fmt: skip


def test_nvidia_smi_prints_local_time(tmp_path: Path) -> None:
    """``nvidia-smi``'s stamps carry no zone: in an incident of a zone they are that zone's (a thermal
    slowdown seen at 02:31 in Los Angeles is 10:31 UTC, minutes after the job died, not eight hours before)."""
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    col = 42
    (inc / "node1" / "nvidia-smi-q.txt").write_text("\n".join([
        "==============NVSMI LOG==============", "", f"{'Timestamp':<{col}}: Fri Feb 14 02:31:50 2025",
        f"{'Driver Version':<{col}}: 550.90.07", "", f"{'Attached GPUs':<{col}}: 1", "GPU 00000000:DB:00.0",
        f"    {'Product Name':<{col - 4}}: NVIDIA H100 80GB HBM3", "    Clocks Event Reasons",
        f"        {'HW Slowdown':<{col - 8}}: Active", f"            {'HW Thermal Slowdown':<{col - 12}}: Active", ""]))  # fmt: skip
    (inc / "incident.toml").write_text('id = "local"\ntimezone = "America/Los_Angeles"\n')
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    (event,) = pl.from_arrow(t.events).filter(pl.col("kind") == "gpu.thermal_slowdown").rows(named=True)
    expected = datetime(2025, 2, 14, 10, 31, 50, tzinfo=UTC)
    assert event["ts"] == expected and '"ts_from":"local"' in event["detail"].replace(" ", "")
    assert pl.from_arrow(t.gpus)["ts"].to_list() == [expected]


def test_a_pdsh_address_beside_nccls_host_name_and_a_late_host_name_are_the_hosts(tmp_path: Path) -> None:
    """pdsh run by address prefixes each line with it, NCCL names the host: one machine. A journal's
    first lines of a boot say ``localhost``: no machine's name, so the file's host."""
    inc = tmp_path / "inc"
    (inc / "gpu-node-007").mkdir(parents=True)
    pre = "10.20.1.7: 10.20.1.7: "
    (inc / "gpu-node-007" / "train.log").write_text(
        f"{pre}gpu-node-007:4711:4798 [3] NCCL INFO comm 0x7f00 rank 3 nranks 16 cudaDev 3 busId 5d000 - Init COMPLETE\n"
        f"{pre}[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        "600450 milliseconds before timing out.\n"
    )  # fmt: skip
    (inc / "gpu-node-007" / "journal.log").write_text(
        "-- Boot 4f1f0a6ad8b04e3c9a8c1f1c2a3b4c5d --\n"
        "2025-01-25T10:00:01+0000 localhost kernel: Linux version 5.15.0-119-generic (buildd@lcy02-amd64-080)\n"
        "2025-01-25T10:00:09+0000 gpu-node-007 systemd[1]: Started Journal Service.\n"
        "2025-01-25T10:35:02+0000 gpu-node-007 kernel: NVRM: Xid (PCI:0000:5d:00): 79, GPU has fallen off the bus.\n"
    )
    (inc / "incident.toml").write_text('id = "aliases"\n')
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    ev = pl.from_arrow(t.events)
    assert set(ev["host"]) == {"gpu-node-007"} and set(pl.from_arrow(t.files)["host"]) == {"gpu-node-007"}
    assert ev.filter(pl.col("kind") == "torch.watchdog_timeout")["rank"].to_list() == [3]


def test_a_redacted_host_name_names_no_machine(tmp_path: Path) -> None:
    """A copy whose host names were redacted says ``<cluster_name>`` where NCCL named the host: the
    rows are the folder's host's (they made a host of their own)."""
    inc = tmp_path / "inc"
    (inc / "gpu-node-007").mkdir(parents=True)
    (inc / "gpu-node-007" / "train.log").write_text("".join(
        f"<cluster_name>:47{r}1:47{r}8 [{r}] NCCL INFO comm 0x7f0{r} rank {r} nranks 8 cudaDev {r} busId {r + 1}8000 - Init "
        f"COMPLETE\n" for r in range(4)) + "<cluster_name>:4701:4790 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got "
        "completion from peer 10.0.0.7<4321> with error 12, opcode 0, len 0, vendor err 129\n")  # fmt: skip
    (inc / "incident.toml").write_text('id = "redacted"\n')
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    ev = pl.from_arrow(t.events)
    assert set(ev["host"]) == {"gpu-node-007"} and set(pl.from_arrow(t.files)["host"]) == {"gpu-node-007"}
    assert ev.filter(pl.col("kind") == "nccl.net_error")["rank"].to_list() == [0]


def test_samples_get_the_incidents_zone_and_gpus() -> None:
    """Wall-clock stamps of a local-time source move to the incident's zone; a UUID or an nvidia-smi index
    becomes the bus id (the index only where a full list of the host's GPUs is known)."""
    from datetime import UTC, datetime

    from forensics.ingest import align

    ids = pl.DataFrame({"host": ["a", "a", "b"], "gpu": ["0000:3b:00.0", "0000:18:00.0", "0000:5e:00.0"],
                        "uuid": ["GPU-aa", None, "GPU-bb"], "learnt_from": [["nvidia-smi"], ["nvidia-smi"], ["NVRM"]]})  # fmt: skip
    noon = datetime(2025, 1, 1, 12, tzinfo=UTC)
    samples = pl.DataFrame({
        "host": ["a", "a", "a", "b", "b"], "source": ["local", "local", "utc", "local", "local"],
        "ts": [noon] * 5, "gpu": [None, None, None, None, "00000000:5E:00.0"], "device": ["1", "GPU-aa", "0", "0", "x"],
    })  # fmt: skip
    out = align.align_samples(samples, ids, timezone="Europe/Paris", local_sources=frozenset({"local"}),
                              index_sources=frozenset({"local"}))  # fmt: skip
    assert out["gpu"].to_list() == ["0000:3b:00.0", "0000:3b:00.0", None, None, "0000:5e:00.0"]
    assert [t.hour for t in out["ts"]] == [11, 11, 12, 11, 11]


# -- issue 32: nothing skipped or lost in silence --------------------------------------------------------

XID = "[ 1851.308145] NVRM: Xid (PCI:0000:3b:00): 79, pid=2345, name=python, GPU has fallen off the bus.\n"


def test_a_folder_of_symbolic_links_to_incidents_reads_every_one(tmp_path: Path) -> None:
    """20 links to incident folders: every one read; a loop, a second link and a broken one are named."""
    real, links = tmp_path / "real", tmp_path / "links"
    links.mkdir()
    for i in range(20):
        (real / f"job-{i:02}" / "node1").mkdir(parents=True)
        (real / f"job-{i:02}" / "node1" / "dmesg").write_text(XID)
        (links / f"job-{i:02}").symlink_to(real / f"job-{i:02}", target_is_directory=True)
    (links / "job-03-again").symlink_to(real / "job-03", target_is_directory=True)
    (links / "loop").symlink_to(links, target_is_directory=True)
    (links / "gone").symlink_to(tmp_path / "nowhere")
    report = forensics.ingest([links], tmp_path / "ds", jobs=1)
    assert sorted(d.id for d in report.done if d.status == "added") == [f"job-{i:02}" for i in range(20)]
    assert {s.path.name: s.why for s in report.skipped} == {
        "job-03-again": f"a symbolic link to {real / 'job-03'}, a folder read already; skipped",
        "loop": f"a symbolic link to {links}, a folder read already; skipped",
        "gone": f"a broken symbolic link to {str(tmp_path / 'nowhere')!r}; skipped",
    }
    assert forensics.open_dataset(tmp_path / "ds").events.collect().height == 20


def test_links_inside_an_incident_are_followed_once_and_named_otherwise(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    (inc / "node1" / "logs").mkdir(parents=True)
    (inc / "incident.toml").write_text('id = "inc"\n')
    (inc / "node1" / "logs" / "dmesg").write_text(XID)
    (inc / "node2").symlink_to(inc / "node1", target_is_directory=True)  # a second name for one folder
    (inc / "node1" / "logs" / "up").symlink_to(inc, target_is_directory=True)  # a loop
    (inc / "node1" / "kern.log").symlink_to(inc / "node1" / "logs" / "dmesg")
    (inc / "node1" / "outside").symlink_to(tmp_path, target_is_directory=True)
    (inc / "node1" / "gone").symlink_to(tmp_path / "nowhere")
    forensics.ingest([inc], tmp_path / "ds", jobs=1)
    files = forensics.open_dataset(tmp_path / "ds").files.collect().sort("file")
    assert dict(files.select("file", "error").iter_rows()) == {
        "node1/gone": f"broken symbolic link to {str(tmp_path / 'nowhere')!r}; not followed",
        "node1/kern.log": None,
        "node1/logs/dmesg": None,
        "node1/logs/up": f"symbolic link to {str(inc)!r}, a folder read already; not followed",
        "node1/outside": f"symbolic link to {str(tmp_path)!r} outside the incident; not followed",
        "node2": f"symbolic link to {str(inc / 'node1')!r}, a folder read already; not followed",
    }


def _cli(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


def test_ingest_names_every_problem_and_exits_3_when_an_incident_is_not_read_whole(tmp_path: Path) -> None:
    root = tmp_path / "incidents"
    (root / "cut" / "node1").mkdir(parents=True)
    (root / "cut" / "node1" / "dmesg").write_text(XID)
    whole = gzip.compress("".join(f"[{i:6}.000000] usb {i}-1: new device\n" for i in range(5000)).encode())
    (root / "cut" / "node1" / "kern.log.gz").write_bytes(whole[: len(whole) // 2])
    (root / "cut" / "node1" / "uname.txt").write_text("Linux node1 5.15.0-91-generic #101-Ubuntu SMP x86_64\nnode1\nup 3 days\n")
    (root / "cut" / "node1" / "core").write_bytes(bytes(range(256)) * 64)
    (root / "empty" / "node1").mkdir(parents=True)
    (root / "empty" / "node1" / "blank.log").write_text("")
    (root / "nothing").mkdir()
    (root / "README.md").write_text("notes\n")
    ds = tmp_path / "ds"
    code, out, err = _cli(["ingest", str(root), "-o", str(ds), "--quiet"])
    assert code == 3
    assert out.splitlines()[0] == f"{ds}: 3 added, 0 replaced, 0 unchanged, 0 failed"
    assert err.splitlines() == [
        "Warning: cut: node1/kern.log.gz: not read whole: truncated or corrupt stream after 66,048 bytes: "
        "Compressed file ended before the end-of-stream marker was reached",
        "Warning: empty: empty incident: its 1 file(s) gave no row",
        "Warning: nothing: empty incident: it holds no file",
        "Error: 1 of 3 incident(s) not read whole (named above); what could be read is stored",
    ]
    code, out, err = _cli(["ingest", str(root / "cut"), "-o", str(tmp_path / "ds2")])
    assert code == 3
    notes = [line for line in err.splitlines() if line.startswith("Note:")]
    assert notes == [
        "Note: cut: node1/core: claimed by no source and binary (60% of its bytes are not text): lines counted, 0 row(s) with a kind kept",
        "Note: cut: node1/uname.txt: claimed by no source; its 3 line(s) kept as other rows",
    ]
    files = forensics.open_dataset(tmp_path / "ds2").files.collect()
    assert files.filter(pl.col("file") == "node1/kern.log.gz").get_column("error").to_list() == [
        "truncated or corrupt stream after 66,048 bytes: Compressed file ended before the end-of-stream marker was reached"]


def test_ingest_of_whole_incidents_exits_0_even_with_unclaimed_files(tmp_path: Path) -> None:
    inc = tmp_path / "inc" / "node1"
    inc.mkdir(parents=True)
    (inc / "dmesg").write_text(XID)
    (inc / "ibstat.txt").write_text("CA 'mlx5_0'\n")
    code, out, err = _cli(["ingest", str(inc.parent), "-o", str(tmp_path / "ds"), "-q"])
    assert (code, err) == (0, "")
