"""The small-input path (a few hundred lines read in Python, not as Polars queries) gives the rows the
column path gives: every kernel and journal golden input parsed both ways, and the stages compared on
their own where the whole parse would hide a difference behind the interest filter."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from forensics import text
from forensics.parse import parse_bytes
from forensics.reading import envelope
from forensics.sources import kernel
from forensics.text import dedent, split_lines

from .conftest import golden_cases

CASES = [c for source in ("kernel", "journal") for c in golden_cases(source)]


def _columns_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stage on its column path, whatever the input's size."""
    monkeypatch.setattr(kernel, "SMALL_LINES", -1)
    monkeypatch.setattr(kernel, "PYTHON_LINES", -1)
    monkeypatch.setattr(text, "PYTHON_LINES", -1)


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("all_lines", [False, True])
def test_small_path_gives_the_column_path_rows(case, all_lines: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    data = case.read_bytes()
    if data.count(b"\n") > kernel.SMALL_LINES:
        pytest.skip("read on the column path either way")
    small = parse_bytes(data, file=case.name, all_lines=all_lines)
    _columns_only(monkeypatch)
    columns = parse_bytes(data, file=case.name, all_lines=all_lines)
    assert small.source == columns.source
    assert small.events.to_pylist() == columns.events.to_pylist()
    assert small.files.to_pylist() == columns.files.to_pylist()


@pytest.mark.parametrize("share", [None, 0.2, 0.9, 1.0])
def test_grouping_in_python_is_the_column_grouping(share: float | None, monkeypatch: pytest.MonkeyPatch) -> None:
    small = kernel.SMALL_LINES
    compared = 0
    for case in CASES:
        lines = dedent(split_lines(case.read_bytes())[0].head(small), least=1)
        env = envelope.split(lines)
        in_python = kernel.group_records(env, lines, stamp_share=share)
        with monkeypatch.context() as m:
            m.setattr(kernel, "SMALL_LINES", -1)
            assert_frame_equal(in_python, kernel.group_records(env, lines, stamp_share=share))
        compared += 1
    assert compared == len(CASES) > 100


def test_staged_stamps_are_to_utc() -> None:
    compared = 0
    for case in CASES:
        env = envelope.split(split_lines(case.read_bytes())[0].head(3000))
        if env.get_column("stamp").null_count() == env.height:
            continue
        for year, timezone, month_before in ((2024, None, None), (None, "Europe/Paris", None), (2023, "America/New_York", 11)):
            ts, how = envelope.to_utc_in(env, "stamp", pl.col("stamp_kind"), year=year, timezone=timezone,
                                         month_before=month_before)  # fmt: skip
            expected = envelope.to_utc(pl.col("stamp"), pl.col("stamp_kind"), year=year, timezone=timezone,
                                       month_before=month_before)  # fmt: skip
            assert_frame_equal(env.select(ts=ts, how=how), env.select(ts=expected[0], how=expected[1]))
            compared += 1
    assert compared > 100


def test_lines_split_in_python_are_the_arrow_split(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few lines are split in Python: the lines (CRLF ends cut, a lone ``\\r`` kept) and the count of
    invalid UTF-8 lines the Arrow split gives, for every golden input and a few edge cases."""
    inputs = [c.read_bytes() for source in ("kernel", "journal", "nccl", "trainlog") for c in golden_cases(source)]
    inputs += [b"a\r\nb\rc\n\n", b"x", b"\r\n\r", b"\xc3\xa9\n\xff\n", b"\n\n"]
    compared = 0
    for data in inputs:
        if data.count(b"\n") > text.PYTHON_LINES or len(data) > text.PYTHON_CHARS:
            continue
        lines, bad = split_lines(data)
        with monkeypatch.context() as m:
            m.setattr(text, "PYTHON_CHARS", -1)
            arrow_lines, arrow_bad = split_lines(data)
        assert (lines.to_list(), bad) == (arrow_lines.to_list(), arrow_bad)
        compared += 1
    assert compared > 100
