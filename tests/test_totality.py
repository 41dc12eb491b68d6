"""Any bytes in, rows out: no exception, every input line in exactly one record."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics
from forensics.parse import parse_bytes
from forensics.reading import base
from forensics.sources import kernel

from .conftest import golden_cases

SAMPLE_LINES = [
    line
    for case in golden_cases("kernel")
    for line in case.read_text("utf-8", "replace").splitlines()[:30]
]


def _check_partition(data: bytes) -> None:
    """With ``all_lines`` the records tile the input; without, the rows are those of them of interest."""
    result = kernel.parse(data, file="x", all_lines=True)
    df = pl.from_arrow(result.events)
    n_lines = result.lines
    interesting = kernel.parse(data, file="x")
    assert interesting.lines == n_lines
    # the rows of interest are rows of the whole read (an `other` row read near them may be grouped otherwise
    # when the lines around it are not read: a continuation line of another format, shuffled in)
    typed = pl.from_arrow(interesting.events).filter(pl.col("kind") != "other")
    assert typed.join(df, on=df.columns, how="anti", nulls_equal=True).height == 0
    assert df.height == result.records
    if n_lines == 0:
        assert df.height == 0
        return
    lines = df["line"].to_list()
    spans = [m.count("\n") + 1 for m in df["message"].to_list()]
    assert lines[0] == 1
    # every line in exactly one record: kernel records tile the lines; a job's output pasted in is read by the job
    # families, whose traceback may fold a later line of its own over an interleaved line of another thread
    # (records.py's gap), so there the records are counted, not laid end to end
    assert sum(spans) == n_lines and len(set(lines)) == len(lines), "records must cover each input line once"
    if not (df["source"] != "kernel").any():
        for here, span, nxt in zip(lines, spans, lines[1:] + [n_lines + 1], strict=True):
            assert here + span == nxt, "records must tile the input lines"
    for detail in df["detail"].to_list():
        json.loads(detail)
    assert set(df["kind"].to_list()) <= forensics.KINDS


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_arbitrary_bytes(data: bytes) -> None:
    _check_partition(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(SAMPLE_LINES), st.text(max_size=80)), max_size=40),
       st.sampled_from(["\n", "\r\n"]))  # fmt: skip
def test_shuffled_real_lines(lines: list[str], newline: str) -> None:
    _check_partition(newline.join(lines).encode("utf-8", "surrogatepass"))


JOB_LINES = [line for source in ("torch", "nccl") for case in golden_cases(source)
             for line in case.read_text("utf-8", "replace").splitlines()[:30]]  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(SAMPLE_LINES), st.sampled_from(JOB_LINES)), max_size=40))
def test_kernel_lines_and_job_lines_shuffled(lines: list[str]) -> None:
    """A kernel log holding a job's lines: the job families read theirs, the records still tile the file."""
    _check_partition("\n".join(lines).encode("utf-8", "surrogatepass"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(SAMPLE_LINES), min_size=1, max_size=30), st.integers(0, 400))
def test_truncated_real_logs(lines: list[str], cut: int) -> None:
    data = "\n".join(lines).encode()
    _check_partition(data[: max(0, len(data) - cut)])


def test_empty_file() -> None:
    parsed = parse_bytes(b"", file="empty.log")
    assert parsed.events.num_rows == 0
    assert parsed.files.to_pylist() == [
        {"incident": "", "file": "empty.log", "source": None, "bytes": 0, "lines": 0, "records": 0,
         "unparsed": 0, "error": None, "host": None, "confidence": 0.0, "families": None}
    ]  # fmt: skip


def test_binary_and_invalid_utf8() -> None:
    data = bytes(range(256)) * 40 + b"\n[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, \xff\xfe fallen off\n"
    parsed = parse_bytes(data, file="bin.log")
    rows = parsed.events.to_pylist()
    assert rows and rows[-1]["kind"] == "gpu.xid" and "\\xff\\xfe" in rows[-1]["message"]
    files = parsed.files.to_pylist()[0]
    assert files["bytes"] == len(data) and files["lines"] == 42 and files["error"] == (
        "claimed by no source and binary (60% of its bytes are not text): lines counted, 1 row(s) with a kind kept")
    text = b"[ 1.0] caf\xe9 au lait\n[ 2.0] NVRM: Xid (PCI:0000:3b:00): 79, \xff\xfe fallen off\n"  # Latin-1: text
    assert parse_bytes(text, file="t.log").files.column("error")[0].as_py() == "2 line(s) not valid UTF-8, kept with \\x escapes"


def test_fifty_megabyte_line() -> None:
    data = b"[ 5.0] " + b"x" * (50 * 1024 * 1024) + b"\n[ 6.0] NVRM: Xid (PCI:0000:3b:00): 48, DBE\n"
    interesting = parse_bytes(data, file="long.log", source="kernel")
    assert [r["kind"] for r in interesting.events.to_pylist()] == ["gpu.xid"]
    assert interesting.files.column("lines").to_pylist() == [2]
    parsed = parse_bytes(data, file="long.log", source="kernel", all_lines=True)
    rows = parsed.events.to_pylist()
    assert [r["kind"] for r in rows] == ["other", "gpu.xid"]
    assert len(rows[0]["message"]) == 50 * 1024 * 1024
    assert len(json.loads(rows[0]["detail"])["template"]) <= base.TEMPLATE_CHARS


# -- the real samples, mutated (issue 32: a mutated CUDA OOM line, `73.952.19 MiB free`, raised) ---------

from forensics.parse import count_lines  # noqa: E402
from forensics.sources import SOURCES  # noqa: E402

REAL = {name: golden_cases(name) for name in SOURCES}
#: What a number in a log may become when a paste, a terminal or a disk garbles it.
NUMBER_FORMS = [b"{n}.{n}", b"{n}.", b".{n}", b"{n},{n}", b"-{n}", b"{n}e999", b"9" * 5000, b"0x", b"", b"\xd9\xa3{n}",
                b"{n}" * 40, b"nan", b"-0", b"{n}:{n}"]  # fmt: skip


def _mutated(data: bytes, draw: st.DrawFn) -> bytes:
    """``data`` after one to five garblings: a flipped bit, a digit swapped for punctuation, a number
    rewritten, a cut, a line repeated."""
    for op in draw(st.lists(st.sampled_from(["flip", "digit", "number", "cut", "repeat"]), min_size=1, max_size=5)):
        if not data:
            break
        if op == "flip":
            i = draw(st.integers(0, len(data) - 1))
            data = data[:i] + bytes([data[i] ^ (1 << draw(st.integers(0, 7)))]) + data[i + 1 :]
        elif op == "cut":
            data = data[: draw(st.integers(0, len(data)))]
        elif op == "repeat":
            lines = data.splitlines(keepends=True)
            i = draw(st.integers(0, len(lines) - 1))
            data = b"".join(lines[: i + 1] + [lines[i]] * draw(st.integers(1, 3)) + lines[i + 1 :])
        else:
            spans = [m.span() for m in re.finditer(rb"\d+" if op == "number" else rb"\d", data)]
            if not spans:
                continue
            start, end = draw(st.sampled_from(spans[:2000]))
            if op == "digit":
                new = draw(st.sampled_from([b".", b",", b"-", b":", b"/", b" ", b"x", b"e", b"\0"]))
            else:
                new = draw(st.sampled_from(NUMBER_FORMS)).replace(b"{n}", data[start:end])
            data = data[:start] + new + data[end:]
    return data


def _check_total(data: bytes, source: str) -> None:
    """``parse`` of ``data`` (by sniffing, and read as ``source``) gives rows of the schema and counts
    every line."""
    for name in ("auto", source):
        parsed = parse_bytes(data, file="mutated", source=name)
        assert parsed.files.column("lines")[0].as_py() == count_lines(data)
        assert set(parsed.events.column("kind").to_pylist()) <= forensics.KINDS
        for detail in parsed.events.column("detail").to_pylist():
            json.loads(detail)


@pytest.mark.parametrize("source", sorted(REAL))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_real_samples(source: str, data: st.DataObject) -> None:
    sample = data.draw(st.sampled_from(REAL[source]), label="sample")
    text = sample.read_bytes()[:8000]
    _check_total(data.draw(st.builds(lambda: None).flatmap(lambda _: st.composite(
        lambda draw: _mutated(text, draw))())), source)  # fmt: skip


@pytest.mark.parametrize("source", sorted(REAL))
def test_every_real_number_garbled(source: str) -> None:
    """Every number of eight real samples of ``source`` written the ways a paste garbles it, in turn."""
    samples = REAL[source][:: max(1, len(REAL[source]) // 8)]
    for sample in samples:
        text = sample.read_bytes()[:4000]
        for form in (b"{n}.{n}.19", b"9" * 30, b"{n}e999", b"\xd9\xa3{n}"):
            _check_total(re.sub(rb"\d+(?:\.\d+)?", lambda m: form.replace(b"{n}", m[0]), text), source)
        first = re.search(rb"\d+", text)
        if first:  # one number of 5,000 digits (int() refuses more than 4,300)
            _check_total(text[: first.start()] + b"9" * 5000 + text[first.end() :], source)


WATCHDOG = (
    "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran "
    "for 600060 milliseconds before timing out.")


@pytest.mark.parametrize("lines", [
    # the job's glog stamp has no year: it takes the kernel line's, whether that line is of interest or not
    ["kern  :info  : 2025-01-17T15:36:25,394334+00:00 Compat-mlnx-ofed backport release: 13ed7ba", WATCHDOG],
    # a traceback folds its later line over another thread's interleaved one: each line still in one record
    ["Traceback (most recent call last):", WATCHDOG, "Traceback (most recent call last):"],
])  # fmt: skip
def test_what_hypothesis_found_in_a_kernel_log_holding_job_lines(lines: list[str]) -> None:
    """Two inputs hypothesis found (CI of 2026-12-07): the interest path dated the job's row differently from the
    all-lines path, and the tiling check did not allow a traceback folded over an interleaved line."""
    _check_partition("\n".join(lines).encode())
