"""What every source returns, and the shared normalize step into the ``events`` schema."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ..regex import ascii_classes, for_python
from ..schema import EVENTS

#: Queries over more rows than this run on Polars' streaming engine, which bounds their memory; smaller
#: ones run in memory, where the streaming engine's set-up (milliseconds) would dominate a small file.
STREAMING_ROWS = 50_000

#: How long the ``template`` of an ``other`` record may be; the message itself is never cut.
TEMPLATE_CHARS = 256


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
    metrics: pa.Table | None = None  # training logs: one row per step and metric
    samples: pa.Table | None = None  # telemetry: one row per reading (schema.SAMPLES)
    year: int | None = None  # line-oriented logs: the year of the last year-less stamp (carried to the next chunk)
    month: int | None = None  # and its month: a New Year crossed between two chunks is followed
    host: str | None = None  # line-oriented logs: the host its first lines name most (rows of no interest too)


def shift_lines(table: pa.Table, by: int) -> pa.Table:
    """``table`` (rows with a ``line``) with its lines moved ``by`` on: a piece of a file numbered in the file."""
    if not by or table.num_rows == 0:
        return table
    i = table.schema.get_field_index("line")
    return table.set_column(i, table.schema.field(i), pc.add(table.column(i), by).cast(table.schema.field(i).type))


def count_lines(data: bytes) -> int:
    """Lines in ``data``, the last one counted even without its newline."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def collect(frame: pl.LazyFrame, rows: int) -> pl.DataFrame:
    """``frame`` collected on the engine that suits ``rows`` input rows (``frame.pipe(collect, n)``)."""
    return frame.collect(engine="streaming" if rows > STREAMING_ROWS else "in-memory")


def events_table(rows: pl.DataFrame | list[dict[str, Any]]) -> pa.Table:
    """Normalize to exactly the ``events`` schema of DESIGN.md: column order, types, nullability."""
    if isinstance(rows, list):
        return pa.Table.from_pylist(rows, schema=EVENTS)
    return to_schema(rows, EVENTS)


def to_schema(rows: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    """``rows`` as exactly ``schema``: its columns in its order, cast to its types."""
    # (each column read as it is, not a plan selecting them: a small file's rows cost no query)
    columns = [rows.get_column(n).to_arrow() for n in schema.names]
    return pa.Table.from_arrays([c.cast(schema.field(n).type) for c, n in zip(columns, schema.names, strict=True)],
                                schema=schema)  # fmt: skip


@cache
def mask_regex() -> str:
    """The masks of ``data/masks.toml`` as one alternation (every match becomes ``<*>``)."""
    data = tomllib.loads(resources.files("forensics.data").joinpath("masks.toml").read_text("utf-8"))
    return ascii_classes("|".join(f"(?:{m['regex']})" for m in data["masks"]))


def template_expr(message: pl.Expr) -> pl.Expr:
    """The ``template`` of a message: masked (Drain-style), at most TEMPLATE_CHARS long."""
    return message.str.replace_all(mask_regex(), "<*>").str.slice(0, TEMPLATE_CHARS)


def template(message: str) -> str:
    """:func:`template_expr` of one message, in Python (a few rows: no query).

    >>> template("eth0: link up at 10000 Mbps")
    'eth<*>: link up at <*> Mbps'
    """
    return _mask_python().sub("<*>", message)[:TEMPLATE_CHARS]


@cache
def _mask_python() -> re.Pattern[str]:
    return re.compile(for_python(mask_regex()))


_HOST_WHOLE = r"^\d{1,3}(?:\.\d{1,3}){3}$|:"


def short_host(host: pl.Expr) -> pl.Expr:
    """Host names as the events table keeps them: the short name (IP addresses stay whole)."""
    return pl.when(host.str.contains(_HOST_WHOLE)).then(host).otherwise(host.str.split(".").list.first())


def short_host_of(host: str | None) -> str | None:
    """:func:`short_host` of one name, in Python."""
    return host if host is None or re.search(_HOST_WHOLE, host) else host.split(".")[0]


def json_row(fields: dict[str, Any]) -> str:
    """A dict as Polars' ``struct.json_encode`` writes it (nulls kept, no spaces); its values are strings,
    integers or nulls (Polars and Python print some floats differently)."""
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
