"""What every source returns, and the shared normalize step into the ``events`` schema."""

from __future__ import annotations

import ipaddress
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


def events_table(rows: pl.DataFrame | list[dict[str, Any]]) -> pa.Table:
    """Normalize to exactly the ``events`` schema of DESIGN.md: column order, types, nullability."""
    if isinstance(rows, list):
        return pa.Table.from_pylist(rows, schema=EVENTS)
    table = rows.select(EVENTS.names).to_arrow()
    return pa.Table.from_arrays(
        [table.column(name).cast(EVENTS.field(name).type) for name in EVENTS.names], schema=EVENTS
    )


def short_host(hosts: pl.Series) -> pl.Series:
    """Host names cut at their first dot (``ip-10-0-0-7.ec2.internal`` → ``ip-10-0-0-7``); IPs kept whole."""
    uniq = {h: _short(h) for h in hosts.drop_nulls().unique().to_list()}
    return hosts.replace_strict(uniq, default=None, return_dtype=pl.String) if uniq else hosts


def _short(host: str) -> str:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.split(".", 1)[0] or host
    return host
