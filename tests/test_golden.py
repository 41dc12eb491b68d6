"""Golden pairs: ``tests/golden/<source>/<case>.log`` and the rows it must give, ``<case>.jsonl``.

Rewrite with ``pytest --update-golden`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from forensics import output, sources
from forensics.parse import parse_bytes

from .conftest import golden_cases

SOURCES = ("kernel", "journal", "nvsmi", "nccl", "torch", "trainlog", "sel", "sensors", "gpuseries", "vendorhealth",
           "stacks")
CASES = [(source, case) for source in SOURCES for case in golden_cases(source)]
IDS = [f"{source}/{case.stem}" for source, case in CASES]


def _rows(table: pa.Table) -> list[dict]:
    return [json.loads(line) for line in output.jsonl_lines(table)]


@pytest.mark.parametrize(("source", "case"), CASES, ids=IDS)
def test_golden(source: str, case: Path, update_golden: bool) -> None:
    parsed = parse_bytes(case.read_bytes(), file=case.name, source=source)
    rows = _rows(parsed.events)
    expected_path = case.with_suffix(".jsonl")
    if update_golden:
        expected_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    expected = [json.loads(line) for line in expected_path.read_text("utf-8").splitlines()]
    assert rows == expected
    for table in ("gpus", "metrics", "samples"):  # the other tables a source fills, when it fills them
        got = _rows(getattr(parsed, table))
        path = case.with_suffix(f".{table}.jsonl")
        if update_golden and got:
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in got), "utf-8")
        expected_rows = [json.loads(line) for line in path.read_text("utf-8").splitlines()] if path.exists() else []
        assert got == expected_rows, table


@pytest.mark.parametrize(("source", "case"), CASES, ids=IDS)
def test_fast_path_equals_lark_on_every_record(source: str, case: Path) -> None:
    """The prefilter and the lines of interest only save time: Lark tried on every record of every line
    gives the same rows for the records of interest, and every other row it gives is ``other``."""
    data = case.read_bytes()
    module = sources.get(source)
    fast = module.parse(data, file=case.name)
    full = module.parse(data, file=case.name, full=True)
    fast_rows, full_rows = _rows(fast.events), _rows(full.events)
    kept = {(r["line"], r["source"]) for r in fast_rows}
    assert fast_rows == [r for r in full_rows if (r["line"], r["source"]) in kept]
    assert all(r["kind"] == "other" for r in full_rows if (r["line"], r["source"]) not in kept)
    assert fast.unparsed == full.unparsed and fast.records <= full.records
    if fast.metrics is not None:  # NaN losses are rows too: compare printed rows, where NaN equals NaN
        assert _rows(fast.metrics) == _rows(full.metrics)
