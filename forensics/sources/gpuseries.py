"""GPU time series: ``nvidia-smi dmon`` captures, and the ``samples`` of ``--query-gpu … -l`` loops.

Producers and versions seen (tests/golden/gpuseries, PROVENANCE.md):

- ``nvidia-smi dmon`` of drivers 3xx-5xx: the old header (``# gpu pwr temp sm mem enc dec mclk pclk``, and
  under ``-s v``/``-s e`` ``pviol tviol`` and ``sbecc dbecc pci``), the new one (``gtemp mtemp``, ``jpg
  ofa``, ``fb bar1 ccpm``, ``rxpci txpci``), with or without ``-o D``/``-o T``/``-o DT`` (``#Date`` as
  ``YYYYMMDD``, ``#Time`` as ``HH:MM:SS``), ``-`` for a value the GPU does not support, the header
  repeated every screenful, several captures in one file, other text between them, a capture quoted in a
  mail or a post (``> `` before each line, an escaped ``#``).
- ``nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits] -l N`` loops: the nvsmi source claims the
  file (its ``gpus`` rows and events) and takes its ``samples`` from :func:`query_samples` here; field
  names and aliases as ``--help-query-gpu`` lists them, ``[N/A]``/``[Not Supported]``/``N/A`` are no
  reading, ``timestamp`` ``YYYY/MM/DD HH:MM:SS.mmm``.

Output: ``samples``, one row per GPU per reading per metric (``data/gpu_series.toml`` maps the columns to
the vocabulary: ``power_w``, ``temperature_c``, ``memory_temperature_c``, ``sm_util_pct``,
``mem_util_pct``, ``sm_clock_mhz``, ``mem_clock_mhz``, ``power_violation_pct``, ``thermal_violation``,
``fb_used_mib``, ``ecc_sbe``, ``ecc_dbe``, ``pcie_replays``, ``pcie_rx_mbps``…); ``device`` is the GPU
index as printed, ``gpu`` the bus id when the capture prints it (``pci.bus_id``), else ingest's alignment
of the index (:func:`forensics.ingest.align.align_samples`). Time: the machine's local clock without a
zone (read in the incident's timezone); a ``dmon -o T`` capture has no date, so its rows have no ``ts``.
The events derived from the series are :mod:`forensics.sources.derive`'s.

Why no grammar: a dmon capture is a table of numbers under a header line that names its columns; a
vectorized split by whitespace reads millions of rows in one pass.

Example: ``    0     86     33      -     30     27      0      0      0      0   6250   1710`` under a
``# gpu pwr gtemp mtemp sm mem enc dec jpg ofa mclk pclk`` header → ``power_w`` 86, ``temperature_c`` 33,
``sm_util_pct`` 30, … for device ``0`` (``mtemp`` ``-`` gives no row).
"""

from __future__ import annotations

import io
import re
import tomllib
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources
from typing import Any

import polars as pl
import pyarrow as pa

from ..pci import canonical_bdf
from ..reading.base import SourceResult
from ..schema import SAMPLES
from . import telemetry

NAME = "gpuseries"
FORMS = (
    "nvidia-smi dmon, old (temp, pviol tviol sbecc dbecc) and new (gtemp mtemp) headers, -o D/T/DT, - unsupported",
    "nvidia-smi --query-gpu=... --format=csv -l N loops: samples (the file is claimed by nvsmi)",
)
#: The stamps are the machine's wall clock; a bare-number device is nvidia-smi's GPU index (ingest aligns both).
LOCAL_TIME = True
GPU_INDEX = True

#: Bytes of a capture read at a time. 100 MB of generated dmon streamed to Parquet, CPU s and peak RSS: 2 MB 15.3 s
#: 292 MB, 4 MB 14.7 s 398 MB, 8 MB 14.1 s 709 MB.
CHUNK_BYTES = 4 << 20
_HEADER = r"^\s*#\s*(?:Date\s+)?(?:Time\s+)?gpu\s+\S"


@cache
def columns() -> dict[str, dict[str, tuple[str, str]]]:
    """``data/gpu_series.toml``: ``dmon`` and ``query`` column names → (metric, unit)."""
    data = tomllib.loads(resources.files("forensics.data").joinpath("gpu_series.toml").read_text("utf-8"))
    return {table: {name: (pair[0], pair[1]) for name, pair in data[table].items()} for table in ("dmon", "query")}


def sniff(head: str) -> float:
    """1.0 when ``head`` holds a dmon header line followed by its units line (``# Idx W C …``)."""
    lines = [re.sub(r"^\s*>\s?", "", line).replace("\\#", "#", 1) for line in head.splitlines()[:200]]
    for n, line in enumerate(lines[:-1]):
        if re.match(_HEADER, line) and re.match(r"^\s*#\s*(?:\S+\s+)*?Idx\b", lines[n + 1]):
            return 1.0
    return 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse ``nvidia-smi dmon`` captures into ``samples`` (and the events derived from them)."""
    del full
    return telemetry.combined(iter_parse(io.BytesIO(data).read, file=file, incident=incident, host=host, year=year,
                                         timezone=timezone, on_error=on_error))  # fmt: skip


def iter_parse(read: Callable[[int], bytes], *, file: str, incident: str = "", host: str | None = None,
               year: int | None = None, timezone: str | None = None, on_error: str = "keep",
               chunk_bytes: int = CHUNK_BYTES) -> Iterator[SourceResult]:  # fmt: skip
    """:func:`parse` from ``read(n)`` in chunks of whole lines, one held at a time (:func:`.telemetry.iter_series`):
    a chunk's rows are read under the last header of the chunks before until one of its own."""
    del year, on_error
    state: dict[str, Any] = {"columns": None, "quoted": None}

    def chunk(data: bytes) -> SourceResult:
        # a capture quoted in a mail or a markdown post: "> " before each line, the header's "#" escaped as "\#"
        # (a quote marks every line: the first chunk's head says it for the file)
        if state["quoted"] is None:
            state["quoted"] = re.search(rb"(?m)^[ \t]*(?:>|\\#)", data[:65536]) is not None
        readings, used, unparsed, other, state["columns"], n, bad = _chunk(data, 1, state["columns"],
                                                                          quoted=state["quoted"], timezone=timezone)  # fmt: skip
        samples = telemetry.samples_table(readings, source=NAME, file=file, incident=incident, host=host)
        frames = [f for f in (unparsed, other) if f.height]
        events = telemetry.events_frame(pl.concat(frames).sort("line") if frames else unparsed, source=NAME, file=file,
                                        incident=incident, host=host)  # fmt: skip
        return SourceResult(events, lines=n, records=used + unparsed.height, unparsed=unparsed.height, error=None,
                            invalid_utf8_lines=bad, samples=samples)  # fmt: skip

    yield from telemetry.iter_series(read, chunk, source=NAME, file=file, incident=incident, host=host,
                                     derive_from="local" if timezone else "assumed", size=chunk_bytes)  # fmt: skip


_LINES = {"line": pl.Int64, "text": pl.String}


def _chunk(data: bytes, first: int, columns: str | None, *, quoted: bool, timezone: str | None,
           ) -> tuple[pl.DataFrame, int, pl.DataFrame, pl.DataFrame, str | None, int, int]:  # fmt: skip
    """The readings of a chunk of whole lines numbered from ``first``, under the header names ``columns`` of
    the chunk before until one of its own: (readings, rows read, unparsed and other lines as events, the last
    header's names, lines, lines not UTF-8)."""
    df, bad_utf8 = telemetry.numbered(data)
    df = df.with_columns(pl.col("line") + (first - 1)).rename({"text": "raw"})
    df = df.with_columns(text=pl.col("raw").str.replace(r"^\s*>\s?", "").str.replace(r"^(\s*)\\#", "${1}#")
                         if quoted else pl.col("raw"))  # fmt: skip
    df = df.with_columns(header=pl.col("text").str.contains(_HEADER))
    # each row belongs to the header above it; dmon repeats its header, so rows are read per distinct header
    # (a few), never per header line (one every screenful)
    # (each header's names computed on the header lines alone: a when/then computes its branch on every row)
    heads = df.filter("header").select("line", names=pl.col("text").str.strip_chars().str.strip_chars_start("#")
                                       .str.strip_chars().str.to_lowercase().str.replace_all(r"\s+", " "))  # fmt: skip
    df = df.join(heads, on="line", how="left", maintain_order="left").with_columns(
        columns=pl.col("names").forward_fill().fill_null(pl.lit(columns, pl.String))).drop("names")  # fmt: skip
    last = df.get_column("columns")[-1] if df.height else columns
    body = df.filter(~pl.col("header") & pl.col("columns").is_not_null() & ~pl.col("text").str.contains(r"^\s*#"))
    body = body.with_columns(norm=telemetry.single_spaced(body.get_column("text")))
    parts, used = [], []
    for (names_text,) in body.select("columns").unique(maintain_order=True).iter_rows():
        names = names_text.split(" ")
        # a row has as many cells as its header names: split once, each cell a field
        rows = body.filter((pl.col("columns") == names_text) & (pl.col("norm") != "")
                           & (pl.col("norm").str.count_matches(" ") == len(names) - 1))  # fmt: skip
        used.append(rows.select("line"))
        cells = rows.select("line", split=pl.col("norm").str.split_exact(" ", len(names) - 1)).unnest("split")
        parts.append(_dmon_block(cells, names, timezone=timezone))
    readings = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema=telemetry.READINGS)
    taken = pl.concat(used) if used else pl.DataFrame(schema={"line": pl.Int64})
    rest = df.join(taken, on="line", how="anti").filter(
        ~pl.col("text").str.contains(r"^\s*#") & (pl.col("text").str.strip_chars() != ""))  # fmt: skip
    # a dmon row cut short (a ^C, a truncated capture) is a row the header does not fit: unparsed
    numeric = pl.col("text").str.contains(r"^\s*\d[\d:]*\s+[\d-]")
    unparsed = telemetry.unparsed_frame(rest.filter(numeric).select("line", text="raw"))
    other = telemetry.unparsed_frame(rest.filter(~numeric).select("line", text="raw"), kind="other")
    return readings, taken.height, unparsed, other, last, df.height, bad_utf8


def _dmon_block(rows: pl.DataFrame, names: list[str], *, timezone: str | None) -> pl.DataFrame:
    """The readings of the rows under one header: one per row and mapped column."""
    if rows.height == 0:
        return pl.DataFrame(schema=telemetry.READINGS)
    at = {name: i for i, name in enumerate(names)}

    def token(i: int) -> pl.Expr:
        return pl.col(f"field_{i}")

    date = token(at["date"]) if "date" in at else None
    time = token(at["time"]) if "time" in at else None
    if date is not None and time is not None:
        stamp = pl.concat_str(date.str.slice(0, 4), pl.lit("-"), date.str.slice(4, 2), pl.lit("-"), date.str.slice(6, 2),
                              pl.lit("T"), time)  # fmt: skip
    elif date is not None:
        stamp = pl.concat_str(date.str.slice(0, 4), pl.lit("-"), date.str.slice(4, 2), pl.lit("-"), date.str.slice(6, 2),
                              pl.lit("T00:00:00"))  # fmt: skip
    else:
        stamp = pl.lit(None, pl.String)  # -o T alone: a time of an unknown day
    # a stamp is read once, not once per GPU and row (the same second on every GPU's row)
    stamped = rows.with_columns(stamp=stamp)
    ts, _ = telemetry.wall_clock(pl.col("stamp"), timezone)
    times = stamped.select(pl.col("stamp").unique()).with_columns(ts=ts)
    base = stamped.join(times, on="stamp", how="left", nulls_equal=True, maintain_order="left").with_columns(
        device=token(at["gpu"]))  # fmt: skip
    # every mapped column cast at once and stacked (column after column, as the rows of one metric each)
    mapped = {f"field_{i}": hit for name, i in at.items() if (hit := columns()["dmon"].get(name))}
    if not mapped:
        return pl.DataFrame(schema=telemetry.READINGS)
    wide = base.select("line", "ts", "device", *[pl.col(c).cast(pl.Float64, strict=False) for c in mapped])
    long = wide.unpivot(list(mapped), index=["line", "ts", "device"], variable_name="field")
    # the metric and unit of each stacked column, repeated (cheaper than mapping the column's name per row)
    def repeated(k: int) -> pl.Series:
        return pl.concat([pl.repeat(hit[k], wide.height, dtype=pl.String, eager=True) for hit in mapped.values()])

    return long.select("line", "ts", gpu=pl.lit(None, pl.String), device="device", metric=repeated(0), value="value",
                       unit=repeated(1))  # fmt: skip


# --------------------------------------------------------------------------------------- --query-gpu loops


def query_samples(records: list[dict[str, Any]], *, source: str, file: str, incident: str, host: str | None,
                  timezone: str | None) -> pa.Table:  # fmt: skip
    """``samples`` of ``--query-gpu`` rows (field name → printed value, and ``line``; nvsmi's reading of the
    CSV): every field :func:`columns` maps, for the GPU the row names (``pci.bus_id``, else ``index``, else
    its UUID as the device), in the row's order of fields. Read as frames, one per header (a loop prints a
    few): a value is read as :func:`_value` reads it."""
    known = columns()["query"]
    by_header: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in records:
        by_header.setdefault(tuple(r), []).append(r)
    parts = []
    for names, rows in by_header.items():
        mapped = [name for name in names if name in known]
        if not mapped:
            continue
        frame = pl.DataFrame({name: [r[name] for r in rows] for name in names},
                             schema={name: pl.Int64 if name == "line" else pl.String for name in names})  # fmt: skip
        bus, device = (_first_printed(names, "pci.bus_id", "gpu_bus_id"), _first_printed(names, "index", "uuid", "gpu_uuid"))
        stamp = pl.col("timestamp") if "timestamp" in names else pl.lit(None, pl.String)
        wide = frame.select("line", stamp=stamp, bus=bus, device=device,
                            **{f"v{i}": _value_expr(pl.col(name)) for i, name in enumerate(mapped)})  # fmt: skip
        long = wide.unpivot([f"v{i}" for i in range(len(mapped))], index=["line", "stamp", "bus", "device"],
                            variable_name="k").drop_nulls("value")  # fmt: skip
        order = pl.col("k").str.slice(1).cast(pl.Int32)
        parts.append(long.with_columns(
            order=order, metric=order.replace_strict(dict(enumerate(known[n][0] for n in mapped)), return_dtype=pl.String),
            unit=order.replace_strict(dict(enumerate(known[n][1] for n in mapped)), return_dtype=pl.String)).drop("k"))  # fmt: skip
    if not parts:
        return SAMPLES.empty_table()
    frame = pl.concat(parts).sort("line", "order")
    buses = frame.get_column("bus").drop_nulls().unique().to_list()
    frame = frame.with_columns(gpu=pl.col("bus").replace_strict({b: canonical_bdf(b) for b in buses}, default=None,
                                                                  return_dtype=pl.String))  # fmt: skip
    iso = pl.col("stamp").str.replace_all("/", "-").str.replace(" ", "T")
    ts, _ = telemetry.wall_clock(iso, timezone)
    readings = frame.with_columns(ts=ts).select(list(telemetry.READINGS))
    return telemetry.samples_table(readings, source=source, file=file, incident=incident, host=host)


def _first_printed(names: tuple[str, ...], *fields: str) -> pl.Expr:
    """The first of ``fields`` a row prints (an empty cell is none)."""
    printed = [pl.when(pl.col(f) != "").then(pl.col(f)) for f in fields if f in names]
    return pl.coalesce(printed) if printed else pl.lit(None, pl.String)


def _value_expr(printed: pl.Expr) -> pl.Expr:
    """:func:`_value` of a column."""
    text = printed.str.strip_chars()
    hexadecimal = text.str.contains(r"^0x[0-9a-fA-F]+$")
    return (pl.when(hexadecimal).then(text.str.slice(2).str.to_integer(base=16, dtype=pl.UInt64, strict=False).cast(pl.Float64))
            .otherwise(text.str.extract(r"^(-?[0-9]+(?:\.[0-9]+)?)(?:\s*\S+)?$", 1).cast(pl.Float64, strict=False)))  # fmt: skip


def _value(printed: Any) -> float | None:
    """A printed value as a number: units dropped (``83.92 W``, ``26 %``), a hex mask as its integer; none for
    ``[N/A]``, ``[Not Supported]``, ``N/A``."""
    text = str(printed or "").strip()
    if not text or text.startswith("[") or text in ("N/A", "-"):
        return None
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return float(int(text, 16))
    m = re.match(r"^(-?\d+(?:\.\d+)?)(?:\s*\S+)?$", text)
    return float(m[1]) if m else None
