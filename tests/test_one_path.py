"""``forensics parse`` and ``forensics ingest`` read a file through one path and give it the same rows
(issue 32: a partial ``nvidia-smi -q`` dump gave 10 rows under one and 0 under the other). Ingest keeps
every record (its clocks are aligned on lines of no interest too); ``parse --all-lines`` does the same,
while ``parse`` alone gives a line-oriented log's records of interest (issue 33)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import polars as pl
import pytest

import forensics
from forensics.ingest.discover import IncidentRef
from forensics.ingest.incident import read_incident
from forensics.parse import parse_path

from .conftest import GOLDEN

#: What a row says, whichever command read it (ingest adds the host, the incident and aligned clocks).
SAID = ["line", "source", "kind", "code", "message"]
SOURCES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


@pytest.mark.parametrize("source", SOURCES)
def test_parse_and_ingest_give_every_golden_input_the_same_rows(source: str) -> None:
    folder = GOLDEN / source
    inputs = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix != ".jsonl")
    ingested = read_incident(IncidentRef(source, folder))
    events = pl.from_arrow(ingested.events)
    files = pl.from_arrow(ingested.files)
    for path in inputs:
        parsed = parse_path(path, all_lines=True)
        alone = pl.from_arrow(parsed.events).select(SAID).sort("line", "message")
        together = events.filter(pl.col("file") == path.name).select(SAID).sort("line", "message")
        assert alone.to_dicts() == together.to_dicts(), path.name
        row = files.filter(pl.col("file") == path.name).row(0, named=True)
        assert (row["source"], row["lines"], row["records"]) == (parsed.source, *(
            parsed.files.column(c)[0].as_py() for c in ("lines", "records"))), path.name  # fmt: skip


def _both(tmp_path: Path, name: str, data: bytes) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """The rows ``parse`` and ``ingest`` give ``data`` as the file ``name``, and ingest's files row."""
    folder = tmp_path / "incident"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    parsed = pl.from_arrow(forensics.parse_file(folder / name, all_lines=True)).select(SAID)
    forensics.ingest([folder], tmp_path / "ds", jobs=1)
    ds = forensics.open_dataset(tmp_path / "ds")
    ingested = ds.events.filter(pl.col("file") == name).select(SAID).collect()
    row = ds.files.filter(pl.col("file") == name).collect().row(0, named=True)
    return parsed, ingested, row


def test_a_dump_cut_before_its_header_gives_its_lines_to_both(tmp_path: Path) -> None:
    """The tail of a real ``nvidia-smi -q`` dump (no header: no source claims it) is kept line by line."""
    dump = (GOLDEN / "nvsmi" / "nvsmi-q-535.129.03-a10-remapped-rows-pending-01.txt").read_bytes()
    tail = b"".join(dump.splitlines(keepends=True)[-10:])
    parsed, ingested, row = _both(tmp_path, "smi-tail.txt", tail)
    assert parsed.height == ingested.height == 5 and parsed.equals(ingested)  # indented lines join their heading
    assert parsed.get_column("line").to_list() == [1, 2, 5, 7, 10]
    assert (row["source"], row["lines"], row["records"], row["error"]) == (None, 10, 5, None)


def test_random_bytes_give_no_rows_and_the_files_row_says_why(tmp_path: Path) -> None:
    data = random.Random(32).randbytes(2 << 20)
    parsed, ingested, row = _both(tmp_path, "core.bin", data)
    assert parsed.height == ingested.height == 0
    assert row["source"] is None and row["lines"] == data.count(b"\n") + 1 and row["records"] == 0
    assert row["error"].startswith("claimed by no source and binary (") and row["error"].endswith(
        "of its bytes are not text): lines counted, 0 row(s) with a kind kept")  # fmt: skip


def test_a_binary_file_keeps_the_rows_with_a_kind(tmp_path: Path) -> None:
    """A core dump's bytes, then a real Xid line (tests/golden/kernel): the Xid is kept, the bytes are not."""
    xid = next(line for case in sorted((GOLDEN / "kernel").iterdir()) if case.suffix != ".jsonl"
               for line in case.read_bytes().splitlines(keepends=True) if b"NVRM: Xid" in line)  # fmt: skip
    data = random.Random(7).randbytes(20_000) + b"\n" + xid
    parsed, ingested, row = _both(tmp_path, "core", data)
    assert parsed.equals(ingested) and parsed.get_column("kind").to_list() == ["gpu.xid"]
    assert row["lines"] == data.count(b"\n") + (not data.endswith(b"\n")) and row["records"] == 1


def test_a_log_with_a_run_of_nul_bytes_is_still_read(tmp_path: Path) -> None:
    """A log cut by a crash holds a run of NUL bytes (preallocated blocks) before the lines after reboot."""
    text = b"app started\n" + b"\0" * 4096 + b"app started again\nerror: widget lost\n"
    parsed, ingested, row = _both(tmp_path, "app.log", text)
    assert parsed.height == ingested.height == 3 and row["error"] is None
