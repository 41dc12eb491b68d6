"""Event tables as text: a readable table, a summary by kind, JSON Lines, CSV. No I/O here.

JSON Lines: one object per row with DESIGN.md's column names, ``ts`` as ISO-8601 UTC ending in ``Z``,
``detail`` as a JSON object. Built in Polars, so a million rows take about a second.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import polars as pl
import pyarrow as pa

_TS = "%Y-%m-%dT%H:%M:%S%.6fZ"
_MESSAGE_CHARS = 100


def _frame(events: pa.Table) -> pl.DataFrame:
    return pl.from_arrow(events)  # type: ignore[return-value]


def jsonl_lines(events: pa.Table, *, chunk: int = 200_000) -> Iterator[str]:
    """One JSON object per event row, in column order."""
    df = _frame(events)
    if "detail" not in df.columns:  # another table (gpus, metrics): plain JSON objects
        for start in range(0, df.height, chunk):
            part = df.slice(start, chunk).with_columns(pl.col("ts").dt.strftime(_TS))
            yield from part.select(_object(part)).to_series().to_list()
        return
    head = [c for c in df.columns if c != "detail"]
    for start in range(0, df.height, chunk):
        part = df.slice(start, chunk).with_columns(pl.col("ts").dt.strftime(_TS))
        row = pl.struct(head).struct.json_encode()
        # Splice the detail object in raw: it is JSON already, and must not become a string.
        encoded = part.select(
            pl.concat_str(row.str.head(-1), pl.lit(',"detail":'), pl.col("detail"), pl.lit("}"))
        ).to_series()
        yield from encoded.to_list()


def _object(df: pl.DataFrame) -> pl.Expr:
    """Each row as a JSON object; a float that is NaN or ±inf (which JSON cannot spell) becomes the
    string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` rather than a silent null."""
    fields = []
    for name, dtype in df.schema.items():
        key = f"{json.dumps(name)}:"
        col = pl.col(name)
        if dtype.is_float():
            value = (
                pl.when(col.is_null()).then(pl.lit("null"))
                .when(col.is_nan()).then(pl.lit('"NaN"'))
                .when(col == float("inf")).then(pl.lit('"Infinity"'))
                .when(col == float("-inf")).then(pl.lit('"-Infinity"'))
                .otherwise(pl.struct(col).struct.json_encode().str.slice(len(key) + 1).str.head(-1))
            )  # fmt: skip
        else:
            value = pl.struct(col).struct.json_encode().str.slice(len(key) + 1).str.head(-1)
        fields.append(pl.concat_str(pl.lit(key), value))
    return pl.concat_str(pl.lit("{"), pl.concat_str(fields, separator=","), pl.lit("}"))


def csv_text(events: pa.Table, *, header: bool = True) -> str:
    """CSV (with a header unless ``header=False``); ``detail`` stays a JSON string, ``ts`` ISO-8601 with ``Z``."""
    df = _frame(events).with_columns(pl.col("ts").dt.strftime(_TS))
    # CSV has no lists: a list column (clocks_event_reasons) becomes "a;b".
    return df.with_columns(pl.col(pl.List(pl.String)).list.join(";")).write_csv(include_header=header)


def table_text(events: pa.Table) -> str:
    """An aligned, human-readable table: line, time, host, kind, severity, gpu, code, message."""
    df = _frame(events)
    if df.height == 0:
        return "(no events)\n"
    view = df.select(
        pl.concat_str(pl.col("file").str.split("/").list.last(), pl.lit(":"), pl.col("line").cast(pl.String)).alias("where"),
        pl.coalesce(
            pl.col("ts").dt.strftime("%Y-%m-%d %H:%M:%S"),
            pl.col("uptime_s").map_batches(lambda s: s.round(6).cast(pl.String) + "s", return_dtype=pl.String),
            pl.lit("-"),
        ).alias("time"),
        pl.col("host").fill_null("-"),
        pl.col("kind"),
        pl.col("severity"),
        pl.col("gpu").fill_null("-"),
        pl.col("code").cast(pl.String).fill_null("-"),
        pl.col("message").str.split("\n").list.first().str.slice(0, _MESSAGE_CHARS).alias("message"),
    )
    rows = view.rows()
    names = ["WHERE", "TIME", "HOST", "KIND", "SEVERITY", "GPU", "CODE", "MESSAGE"]
    widths = [max(len(names[i]), *(len(r[i]) for r in rows)) for i in range(len(names) - 1)]
    out = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=False)) + "  MESSAGE"]
    for r in rows:
        out.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=False)) + "  " + r[-1])
    return "\n".join(line.rstrip() for line in out) + "\n"


def summary_counts(events: pa.Table) -> pl.DataFrame:
    """Events per source and kind, most frequent first."""
    return (
        _frame(events)
        .group_by("source", "kind")
        .agg(events=pl.len(), files=pl.col("file").n_unique())
        .sort(["events", "source", "kind"], descending=[True, False, False])
    )


def summary_text(events: pa.Table, files: pa.Table) -> str:
    """What was parsed: files, lines, records and unparsed, then the events by kind."""
    f = pl.from_arrow(files)
    counts = summary_counts(events)
    lines = [
        f"{f.height} file(s), {f['bytes'].sum():,} bytes, {f['lines'].sum():,} lines, "
        f"{f['records'].sum():,} records, {f['unparsed'].sum():,} unparsed"
    ]
    width = max([len(k) for k in counts["kind"].to_list()] + [4])
    lines.append(f"{'SOURCE':<8}  {'KIND':<{width}}  {'EVENTS':>8}  {'FILES':>5}")
    for source, kind, n, nfiles in counts.iter_rows():
        lines.append(f"{source:<8}  {kind:<{width}}  {n:>8,}  {nfiles:>5}")
    return "\n".join(lines) + "\n"


def dataset_text(ds: object) -> str:
    """What a dataset holds: rows per table, then events per source and kind, and the files' totals."""
    import polars as pl

    tables = {name: getattr(ds, name) for name in ("incidents", "files", "events", "gpus", "metrics", "identities")}
    sizes = {name: lf.select(pl.len()).collect().item() for name, lf in tables.items()}
    files = tables["files"].select(
        pl.len().alias("n"), pl.col("bytes").sum(), pl.col("lines").sum(), pl.col("records").sum(),
        pl.col("unparsed").sum(), pl.col("source").is_null().sum().alias("unclaimed"),
        pl.col("error").is_not_null().sum().alias("errors"),
    ).collect().row(0, named=True)
    out = [
        "  ".join(f"{name} {n:,}" for name, n in sizes.items()),
        f"files: {files['bytes'] or 0:,} bytes, {files['lines'] or 0:,} lines, {files['records'] or 0:,} records, "
        f"{files['unparsed'] or 0:,} unparsed, {files['unclaimed']:,} claimed by no source, {files['errors']:,} with an error",
    ]
    counts = (
        tables["events"].group_by("source", "kind")
        .agg(events=pl.len(), incidents=pl.col("incident").n_unique())
        .sort(["events", "source", "kind"], descending=[True, False, False]).collect()
    )  # fmt: skip
    width = max([len(k) for k in counts["kind"].to_list()] + [4])
    out.append(f"{'SOURCE':<8}  {'KIND':<{width}}  {'EVENTS':>8}  {'INCIDENTS':>9}")
    for source, kind, n, incidents in counts.iter_rows():
        out.append(f"{source:<8}  {kind:<{width}}  {n:>8,}  {incidents:>9}")
    return "\n".join(out) + "\n"
