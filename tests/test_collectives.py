"""Collectives compared across ranks (forensics.mine.collectives): real per-rank logs whose ranks disagree."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

import forensics
from forensics.mine import collectives
from forensics.parse import parse_bytes

ROOT = Path(__file__).parents[1]
NCCL_147 = ROOT / "corpus/hang-nccl-147-ddp-first-broadcast-count-mismatch/learnfair062"
SWIFT_10183 = ROOT / "corpus/hang-msswift-10183-minicpmo-ddp-buffer-broadcast-shape-mismatch/node-a/train.log"
COLUMNS = ["incident", "host", "source", "file", "line", "ts", "kind", "severity", "gpu", "rank", "code", "message",
           "detail"]  # fmt: skip


def _rows(files: dict[str, bytes]) -> pl.DataFrame:
    frames = [pl.from_arrow(parse_bytes(data, file=name, incident="i", all_lines=True).events) for name, data in files.items()]
    return pl.concat(frames).select(COLUMNS)  # type: ignore[union-attr]


def test_ranks_broadcasting_different_counts_at_one_op_count_are_a_mismatch() -> None:
    """NVIDIA/nccl#147: at opCount 0 rank 0 broadcasts 25503912 elements of type 6, the other ranks 53 of
    type 4 (NCCL_DEBUG_SUBSYS=COLL). The row sits on the rank that differs from the most."""
    files = {p.name: p.read_bytes() for p in NCCL_147.iterdir()}
    found = collectives.derived(_rows(files))
    assert found.height == 1
    row = found.row(0, named=True)
    assert row["kind"] == "nccl.coll_mismatch" and "count 25503912" in row["message"]
    detail = json.loads(row["detail"])
    assert (detail["opcount"], detail["op"], detail["count"]) == (0, "Broadcast", 25503912)
    counts = sorted(detail["signatures"].values())
    assert counts[0] == 1 and counts[-1] >= 4 and detail["ranks"] >= 6


def test_ranks_that_agree_are_no_mismatch() -> None:
    """The same logs without rank 0's lines: every rank left called the same collectives."""
    files = {p.name: b"".join(line for line in p.read_bytes().splitlines(keepends=True) if b"count 25503912" not in line)
             for p in NCCL_147.iterdir()}  # fmt: skip
    assert collectives.derived(_rows(files)).height == 0


def test_watchdogs_timing_out_on_different_work_at_one_seqnum_are_a_mismatch() -> None:
    """modelscope/ms-swift#10183: at SeqNum 7219 of the default group rank 3's watchdog times out on a
    BROADCAST of 64 elements, rank 2's on one of 24084544 (a DDP buffer of another shape)."""
    found = collectives.derived(_rows({"train.log": SWIFT_10183.read_bytes()}))
    assert found.height == 1
    detail = json.loads(found.item(0, "detail"))
    assert (detail["seq"], detail["op"]) == (7219, "BROADCAST") and detail["ranks"] == 2
    assert len(detail["signatures"]) == 2


def test_a_mismatch_is_diagnosed_as_a_hang(tmp_path: Path) -> None:
    forensics.ingest([NCCL_147.parent], tmp_path / "ds", jobs=1)
    d = forensics.diagnose(forensics.open_dataset(tmp_path / "ds")).row(0, named=True)
    assert (d["root_cause"], d["rule"]) == ("hang", "collectives-diverge")
    assert any(e["kind"] == "nccl.coll_mismatch" and e["line"] == 3 for e in d["evidence"])
