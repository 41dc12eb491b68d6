"""Golden pairs: ``tests/golden/<source>/<case>.log`` and the rows it must give, ``<case>.jsonl``.

Rewrite with ``pytest --update-golden`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from forensics import output
from forensics.parse import parse_bytes
from forensics import sources

from .conftest import golden_cases

CASES = [(source, case) for source in ("kernel", "journal", "nvsmi") for case in golden_cases(source)]
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
    gpus = _rows(parsed.gpus)
    gpus_path = case.with_suffix(".gpus.jsonl")
    if update_golden and gpus:
        gpus_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in gpus), "utf-8")
    expected_gpus = [json.loads(line) for line in gpus_path.read_text("utf-8").splitlines()] if gpus_path.exists() else []
    assert gpus == expected_gpus


@pytest.mark.parametrize(("source", "case"), CASES, ids=IDS)
def test_fast_path_equals_lark_on_every_record(source: str, case: Path) -> None:
    """The prefilter only saves time: Lark tried on every record gives the same rows."""
    data = case.read_bytes()
    module = sources.get(source)
    fast = module.parse(data, file=case.name)
    full = module.parse(data, file=case.name, full=True)
    assert fast.events.equals(full.events)
    assert (fast.records, fast.unparsed) == (full.records, full.unparsed)
