"""The command line: exact output, exit codes, nothing lost on error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from forensics.cli import main

XID = "[Fri Apr  5 21:29:39 2024] NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
NVME = "[11457.533097] nvme nvme2: I/O 0 QID 0 timeout, reset controller\n[11457.6] random noise 42\n"


@pytest.fixture
def logs(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "xid.log").write_text(XID)
    (tmp_path / "nvme.log").write_text(NVME)
    (tmp_path / "bad.log").write_text("[ 1.0] pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: zz\n")
    return {p.stem: p for p in tmp_path.iterdir()}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_table(logs: dict[str, Path]) -> None:
    code, out, _ = run("parse", str(logs["nvme"]))
    assert code == 0
    assert out == (
        "WHERE       TIME           HOST  KIND       SEVERITY  GPU  CODE  MESSAGE\n"
        "nvme.log:1  11457.533097s  -     disk.nvme  error     -    -     nvme nvme2: I/O 0 QID 0 timeout, reset controller\n"
    )
    code, out, _ = run("parse", "--all-lines", str(logs["nvme"]))  # the line of no interest too
    assert code == 0
    assert out == (
        "WHERE       TIME           HOST  KIND       SEVERITY  GPU  CODE  MESSAGE\n"
        "nvme.log:1  11457.533097s  -     disk.nvme  error     -    -     nvme nvme2: I/O 0 QID 0 timeout, reset controller\n"
        "nvme.log:2  11457.6s       -     other      info      -    -     random noise 42\n"
    )


def test_summary(logs: dict[str, Path]) -> None:
    code, out, _ = run("parse", "--format", "summary", str(logs["nvme"]), str(logs["xid"]))
    assert code == 0
    assert out == (
        "2 file(s), 211 bytes, 3 lines, 2 records, 0 unparsed\n"
        "SOURCE    KIND         EVENTS  FILES\n"
        "kernel    disk.nvme         1      1\n"
        "kernel    gpu.xid           1      1\n"
    )


def test_jsonl(logs: dict[str, Path]) -> None:
    code, out, _ = run("parse", "--format", "jsonl", str(logs["xid"]))
    assert code == 0
    row = json.loads(out)
    assert list(row) == ["incident", "host", "source", "file", "line", "ts", "uptime_s", "kind", "severity",
                         "gpu", "rank", "pid", "code", "message", "detail"]  # fmt: skip
    assert row["ts"] == "2024-04-05T21:29:39.000000Z"
    assert (row["kind"], row["code"], row["gpu"], row["severity"]) == ("gpu.xid", 79, "0000:a1:00.0", "critical")
    assert isinstance(row["detail"], dict) and row["detail"]["action"] == "RESTART_BM"


def test_csv_and_parquet(logs: dict[str, Path], tmp_path: Path) -> None:
    code, out, _ = run("parse", "--format", "csv", str(logs["xid"]))
    assert code == 0 and out.splitlines()[0].startswith("incident,host,source,file,line,ts,")
    target = tmp_path / "events.parquet"
    code, out, _ = run("parse", "--format", "parquet", "-o", str(target), str(logs["xid"]), str(logs["nvme"]))
    assert code == 0 and out == ""
    assert pq.read_table(target).num_rows == 2  # (nvme.log's second line is of no interest)


def test_missing_file() -> None:
    code, out, err = run("parse", "missing.log")
    assert (code, out, err) == (1, "", "Error: missing.log: no such file\n")


def test_directory(tmp_path: Path) -> None:
    code, _, err = run("parse", str(tmp_path))
    assert code == 1 and err == f"Error: {tmp_path}: is a directory\n"


def test_unknown_source(logs: dict[str, Path]) -> None:
    code, _, err = run("parse", "--source", "kernl", str(logs["xid"]))
    assert (code, err) == (1, "Error: Unknown source 'kernl'. Did you mean 'kernel'?\n")


def test_parquet_needs_output(logs: dict[str, Path]) -> None:
    code, _, err = run("parse", "--format", "parquet", str(logs["xid"]))
    assert (code, err) == (1, "Error: --format parquet needs -o FILE\n")


def test_on_error_modes(logs: dict[str, Path], tmp_path: Path) -> None:
    code, out, _ = run("parse", "--format", "jsonl", str(logs["bad"]))
    assert code == 0 and json.loads(out)["kind"] == "unparsed"
    code, _, err = run("parse", "--on-error", "warn", "--format", "summary", str(logs["bad"]))
    assert code == 0 and err.startswith(f"Warning: {logs['bad']}: 1 unparsed record(s); first at line 1: pcie.aer:")
    # raise: a clear one-line error, and an existing output file is left as it was.
    target = tmp_path / "out.jsonl"
    target.write_text("keep me\n")
    code, _, err = run("parse", "--on-error", "raise", "--format", "jsonl", "-o", str(target), str(logs["xid"]), str(logs["bad"]))
    assert code == 1 and err.startswith(f"Error: {logs['bad']}:1: pcie.aer:") and err.count("\n") == 1
    assert target.read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out.jsonl", *(p.name for p in logs.values())])


JOB = (
    "[1,0]<stdout>:gpu07:4211:4300 [0] NCCL INFO comm 0x5581 rank 0 nranks 2 cudaDev 0 busId 3b000 - Init COMPLETE\n"
    "[1,0]<stdout>: iter 100: loss 2.3125, time 101.20ms, mfu 31.20%\n"
    "[1,0]<stdout>: iter 110: loss nan, time 99.80ms, mfu 31.40%\n"
)


def test_job_log_events_and_metrics(tmp_path: Path) -> None:
    job = tmp_path / "job.log"
    job.write_text(JOB)
    code, out, _ = run("parse", str(job))
    assert code == 0
    assert out == (
        "WHERE      TIME  HOST   KIND                  SEVERITY  GPU           CODE  MESSAGE\n"
        "job.log:1  -     gpu07  nccl.init             info      0000:3b:00.0  -     NCCL INFO comm 0x5581 rank 0 nranks 2 cudaDev 0 busId 3b000 - Init COMPLETE\n"
        "job.log:3  -     -      train.loss_nonfinite  error     -             110   iter 110: loss nan, time 99.80ms, mfu 31.40%\n"
    )  # fmt: skip
    code, out, _ = run("parse", "--table", "metrics", "--format", "jsonl", str(job))
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["line"], r["rank"], r["step"], r["name"], r["value"]) for r in rows] == [
        (2, 0, 100, "loss", 2.3125), (2, 0, 100, "step_time_s", 0.1012), (2, 0, 100, "mfu", 31.2),
        (3, 0, 110, "loss", "NaN"), (3, 0, 110, "step_time_s", 0.0998), (3, 0, 110, "mfu", 31.4),
    ]  # fmt: skip
    code, _, err = run("parse", "--table", "metrics", str(job))
    assert code == 1 and err == "Error: --table metrics prints as jsonl, csv or parquet\n"


def test_sources_lists_forms() -> None:
    code, out, _ = run("sources")
    assert code == 0
    lines = out.splitlines()
    assert [line for line in lines if not line.startswith("  ")] == [
        "nvsmi", "journal", "kernel", "nccl", "torch", "trainlog", "lspci", "ibcounters", "nicstats", "dcgm", "disks",
        "df", "sel", "sensors", "gpuseries", "vendorhealth", "stacks"]  # fmt: skip
    assert "  - dmesg -T / --ctime" in lines and "  - journalctl -o export (binary-safe fields)" in lines
    assert "  - nvme smart-log (nvme-cli text)" in lines
    assert "  - ipmitool sdr -v / sdr get / sensor get (verbose records, grammars/sensors.lark)" in lines
    assert "  - hplog -p: ID TYPE LOCATION STATUS REDUNDANT table" in lines


def test_every_command_is_in_the_readme() -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text("utf-8")
    for name in main.commands:
        assert f"forensics {name}" in readme, name


# -- issue 32: the command line's input points -------------------------------------------------------


USAGE_ERROR = 2  # click's status for a value its option type refuses


@pytest.mark.parametrize(
    ("args", "code", "error"),
    [
        (["parse", "{xid}", "--timezone", "Mars/Base"], 1,
         "Error: timezone 'Mars/Base' is not an IANA time zone name (for example UTC, Europe/Berlin, America/New_York)"),
        (["parse", "{xid}", "--timezone", "America"], 1,
         "Error: timezone 'America' is not an IANA time zone name (for example UTC, Europe/Berlin, America/New_York)"),
        (["parse", "{xid}", "--timezone", ""], 1,
         "Error: timezone '' is not an IANA time zone name (for example UTC, Europe/Berlin, America/New_York)"),
        (["parse", "{xid}", "--year", "0"], 1, "Error: year 0 is out of range: give one from 1970 to 9998"),
        (["parse", "{xid}", "--year", "99999"], 1, "Error: year 99999 is out of range: give one from 1970 to 9998"),
        (["parse", "{xid}", "--year", "soon"], USAGE_ERROR, "Error: Invalid value for '--year': 'soon' is not a valid integer."),
        (["parse", "{xid}", "--format", "xml"], USAGE_ERROR,
         "Error: Invalid value for '--format': 'xml' is not one of 'table', 'summary', 'jsonl', 'csv', 'parquet'."),
        (["parse", "{xid}", "--source", "kernl"], 1, "Error: Unknown source 'kernl'. Did you mean 'kernel'?"),
        (["ingest", "{xid}", "-o", "{tmp}/ds", "-j", "0"], USAGE_ERROR,
         "Error: Invalid value for '--jobs' / '-j': 0 is not in the range x>=1."),
        (["ingest", "{xid}", "-o", "{tmp}/ds", "--max-file-bytes", "0"], USAGE_ERROR,
         "Error: Invalid value for '--max-file-bytes': '0' is not a byte count such as 512M or 2G"),
        (["mine", "{tmp}", "--target", "gpu.xid", "--window", "0s"], USAGE_ERROR,
         "Error: Invalid value for '--window': '0s' is not a duration above 0 and up to 3650d"),
        (["timeline", "{tmp}", "--window", "99999999999h"], USAGE_ERROR,
         "Error: Invalid value for '--window': '99999999999h' is not a duration above 0 and up to 3650d"),
    ],
)
def test_a_bad_option_value_is_one_error_line(logs: dict[str, Path], tmp_path: Path, args: list[str], code: int,
                                              error: str) -> None:  # fmt: skip
    got, out, err = run(*(a.format(xid=logs["xid"], tmp=tmp_path) for a in args))
    assert (got, out) == (code, "")
    assert [line for line in err.splitlines() if line.startswith("Error")] == [error]
    assert "Traceback" not in err


def test_dash_reads_standard_input(logs: dict[str, Path]) -> None:
    result = CliRunner().invoke(main, ["parse", "-", "--format", "jsonl", "--all-lines"], input=NVME)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.exit_code == 0 and [(r["file"], r["line"], r["kind"]) for r in rows] == [
        ("<stdin>", 1, "disk.nvme"), ("<stdin>", 2, "other")]
    result = CliRunner().invoke(main, ["parse", "-", str(logs["xid"]), "--all-lines"], input=NVME)
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["WHERE", "<stdin>:1", "<stdin>:2", "xid.log:1"]


def test_files_of_one_name_are_told_apart(tmp_path: Path) -> None:
    for host in ("node1", "node2"):
        (tmp_path / host).mkdir()
        (tmp_path / host / "job.log").write_text(NVME)
    code, out, _ = run("parse", str(tmp_path / "node1" / "job.log"), str(tmp_path / "node2" / "job.log"), "--all-lines")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == [
        "WHERE", f"{tmp_path}/node1/job.log:1", f"{tmp_path}/node1/job.log:2",
        f"{tmp_path}/node2/job.log:1", f"{tmp_path}/node2/job.log:2"]  # fmt: skip


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_an_output_file_gets_the_umasks_mode(logs: dict[str, Path], tmp_path: Path, fmt: str) -> None:
    import os

    saved = os.umask(0o027)
    try:
        code, _, _ = run("parse", str(logs["xid"]), "--format", fmt, "-o", str(tmp_path / f"x.{fmt}"))
    finally:
        os.umask(saved)
    assert code == 0 and (tmp_path / f"x.{fmt}").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize(
    ("fmt", "first"),
    [
        ("jsonl", '{"incident":"","host":null,"source":"kernel","file":"nvme.log","line":1,"ts":null,'
                  '"uptime_s":11457.533097,"kind":"disk.nvme","severity":"error","gpu":null,"rank":null,"pid":null,'
                  '"code":null,"message":"nvme nvme2: I/O 0 QID 0 timeout, reset controller","detail":{"device": '
                  '"nvme2", "text": "nvme nvme2: I/O 0 QID 0 timeout, reset controller", "qid": 0, "status": null, '
                  '"removed": false}}\n'),
        ("csv", "incident,host,source,file,line,ts,uptime_s,kind,severity,gpu,rank,pid,code,message,detail\n"),
        ("table", "WHERE           TIME           HOST  KIND       SEVERITY  GPU  CODE  MESSAGE\n"),
    ],
)
def test_closed_pipe(tmp_path: Path, fmt: str, first: str) -> None:
    """``forensics parse F | head -1``: the first rows come while the file is read, and when the reader
    closes the pipe the command stops with no traceback and exit status 1 (Python's and click's rule for
    EPIPE), not after reading the whole file."""
    import subprocess
    import sys

    lines = (f"[{11457 + i}.533097] nvme nvme2: I/O {i % 64} QID 0 timeout, reset controller\n" for i in range(40_000))
    (tmp_path / "nvme.log").write_text("".join(lines))  # 3 MB; its rows are far more than a pipe's buffer
    proc = subprocess.Popen([sys.executable, "-m", "forensics", "parse", "nvme.log", "--format", fmt],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    got = proc.stdout.readline().decode()
    proc.stdout.close()
    assert (got, proc.stderr.read(), proc.wait(timeout=120)) == (first, b"", 1)
