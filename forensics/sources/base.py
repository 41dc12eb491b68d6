"""What every source returns, and the shared normalize step into the ``events`` schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa

from ..schema import EVENTS


@dataclass
class SourceResult:
    """Rows of one file (or bug-report section) and the counts that go into its ``files`` row."""

    events: pa.Table
    lines: int
    records: int
    unparsed: int
    error: str | None
    invalid_utf8_lines: int = 0
    gpus: pa.Table | None = None  # nvidia-smi dumps: one row per GPU per dump


def events_table(rows: pl.DataFrame | list[dict[str, Any]]) -> pa.Table:
    """Normalize to exactly the ``events`` schema of DESIGN.md: column order, types, nullability."""
    if isinstance(rows, list):
        return pa.Table.from_pylist(rows, schema=EVENTS)
    table = rows.select(EVENTS.names).to_arrow()
    return pa.Table.from_arrays(
        [table.column(name).cast(EVENTS.field(name).type) for name in EVENTS.names], schema=EVENTS
    )
