"""Any bytes in, rows out: no exception, every input line in exactly one record."""

from __future__ import annotations

import json

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics
from forensics.parse import parse_bytes
from forensics.sources import base, kernel

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
    assert pl.from_arrow(interesting.events).join(df, on=df.columns, how="anti", nulls_equal=True).height == 0
    assert df.height == result.records
    if n_lines == 0:
        assert df.height == 0
        return
    lines = df["line"].to_list()
    spans = [m.count("\n") + 1 for m in df["message"].to_list()]
    assert lines[0] == 1
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
         "unparsed": 0, "error": None, "host": None, "confidence": 0.0}
    ]  # fmt: skip


def test_binary_and_invalid_utf8() -> None:
    data = bytes(range(256)) * 40 + b"\n[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, \xff\xfe fallen off\n"
    parsed = parse_bytes(data, file="bin.log")
    rows = parsed.events.to_pylist()
    assert rows and rows[-1]["kind"] == "gpu.xid" and "\\xff\\xfe" in rows[-1]["message"]
    files = parsed.files.to_pylist()[0]
    assert files["bytes"] == len(data) and files["lines"] == 42 and "not valid UTF-8" in files["error"]


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
