"""The telemetry sources (issue 34): golden pairs read with each source's own ``parse`` (the ``events`` rows
in ``<case>.jsonl``, the ``samples`` rows in ``<case>.samples.jsonl``), sniffing that claims their files and
no other source's, and any bytes in, rows out."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics
from forensics import output, sources
from forensics.schema import SAMPLES

from .conftest import GOLDEN, golden_cases

TELEMETRY = ("lspci", "ibcounters", "nicstats")
CASES = [(source, case) for source in TELEMETRY for case in golden_cases(source)]
IDS = [f"{source}/{case.stem}" for source, case in CASES]
OTHERS = [case for folder in sorted(GOLDEN.iterdir()) if folder.is_dir() and folder.name not in TELEMETRY
          for case in golden_cases(folder.name)]  # fmt: skip


def _rows(table: pa.Table) -> list[dict]:
    return [json.loads(line) for line in output.jsonl_lines(table)]


def _check(path: Path, rows: list[dict], update: bool) -> None:
    if update:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    expected = [json.loads(line) for line in path.read_text("utf-8").splitlines()] if path.exists() else []
    assert rows == expected, path.name


@pytest.mark.parametrize(("source", "case"), CASES, ids=IDS)
def test_golden(source: str, case: Path, update_golden: bool) -> None:
    result = sources.get(source).parse(case.read_bytes(), file=case.name)
    assert result.samples is not None and result.samples.schema == SAMPLES
    _check(case.with_suffix(".jsonl"), _rows(result.events), update_golden)
    _check(case.with_suffix(".samples.jsonl"), _rows(result.samples), update_golden)
    assert set(result.events.column("kind").to_pylist()) <= forensics.KINDS


@pytest.mark.parametrize(("source", "case"), CASES, ids=IDS)
def test_sniff_claims_its_own_files(source: str, case: Path) -> None:
    head = case.read_bytes()[:65536].decode("utf-8", "replace")
    assert sources.sniff(head)[0] == source


@pytest.mark.parametrize("case", OTHERS, ids=[f"{c.parent.name}/{c.stem}" for c in OTHERS])
def test_sniff_leaves_other_sources_files(case: Path) -> None:
    head = case.read_bytes()[:65536].decode("utf-8", "replace")
    assert sources.sniff(head)[0] not in TELEMETRY


@pytest.mark.parametrize("source", TELEMETRY)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000))
def test_any_bytes_in_rows_out(source: str, data: bytes) -> None:
    result = sources.get(source).parse(data, file="x")
    assert result.samples is not None and result.samples.schema == SAMPLES
    assert result.lines == data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    for detail in result.events.column("detail").to_pylist():
        json.loads(detail)


@pytest.mark.parametrize("source", TELEMETRY)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_truncated_and_shuffled_real_lines(source: str, data: st.DataObject) -> None:
    lines = [line for case in golden_cases(source) for line in case.read_text("utf-8").splitlines()]
    picked = data.draw(st.lists(st.sampled_from(lines), max_size=60))
    text = "\n".join(picked).encode()
    cut = data.draw(st.integers(0, len(text)))
    result = sources.get(source).parse(text[:cut], file="x")
    assert result.samples.schema == SAMPLES
