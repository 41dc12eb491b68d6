"""What the telemetry sources share: their readings as ``samples`` rows, the events they derive, and the
``SourceResult`` that carries both (DESIGN.md, "samples").

A telemetry source (``lspci``, ``ibcounters``, ``nicstats``, ``dcgm``, ``disks``) reads a command's output
into :class:`Reading` rows (one per value) and :class:`Finding` rows (a port not ``Active``, a link trained
below its capability, a failed test); :func:`result` turns them into the two tables. A derived event names
the sample rows it was read from in ``detail.samples`` (``file:line`` list), and every line that is neither
a reading nor blank nor a known header is an ``other`` row, so nothing is lost.

>>> r = result([Reading(3, "pcie_width", 8.0, device="3b:00.0")], [], lines=4, records=1, unparsed=0,
...            source="lspci", file="f")
>>> r.samples.column("metric").to_pylist(), r.events.num_rows
(['pcie_width'], 0)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl
import pyarrow as pa

from ..schema import SAMPLES
from .base import SourceResult, events_table, template_expr, to_schema


@dataclass
class Reading:
    """One value of one metric of one device, read at ``line`` (and ``ts`` when the output printed one)."""

    line: int
    metric: str
    value: float | None
    unit: str | None = None
    device: str | None = None
    gpu: str | None = None
    ts: datetime | None = None


@dataclass
class Finding:
    """An event a source derives from what it read."""

    line: int
    kind: str
    severity: str
    message: str
    gpu: str | None = None
    code: int | None = None
    ts: datetime | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    samples: list[int] = field(default_factory=list)  # the lines of the readings it was read from
    pid: int | None = None  # the process it is about, when printed (a stack dump's thread)


def number(text: str | None) -> float | None:
    """A printed number as a float (``1,234`` and ``12.5%`` too), or None for ``-``, ``N/A`` and words.

    >>> number("1,234"), number("12.5%"), number("N/A"), number("0x1f")
    (1234.0, 12.5, None, 31.0)
    """
    if text is None:
        return None
    text = text.strip().rstrip("%").replace(",", "")
    try:
        value = float(int(text, 16)) if text.lower().startswith("0x") else float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def zone(timezone: str | None) -> ZoneInfo:
    """The zone a machine's wall-clock times are read in: the incident's, else UTC (an unknown name: UTC)."""
    try:
        return ZoneInfo(timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def other(line: int, text: str) -> Finding:
    """A line of the file that is no reading: kept as an ``other`` row."""
    return Finding(line, "other", "info", text)


def result(readings: list[Reading], findings: list[Finding], *, lines: int, records: int, unparsed: int,
           source: str, file: str, incident: str = "", host: str | None = None, error: str | None = None,
           invalid_utf8_lines: int = 0, text: list[str] | None = None,
           frame: pl.DataFrame | None = None) -> SourceResult:  # fmt: skip
    """The ``events`` and ``samples`` tables of one file, in line order. Given the file's ``text`` (its
    lines), a derived event's message is its summary followed by the lines it was read from, as printed:
    the message catalogs read those lines (``State: Down``, ``… test result: FAILED!``) whatever the summary.
    A source that reads its series vectorized gives them as ``frame`` (columns line, ts, gpu, device, metric,
    value, unit) beside its ``readings``."""
    samples = pa.Table.from_pylist(
        [{"incident": incident, "host": host, "source": source, "file": file, "line": r.line, "ts": r.ts,
          "gpu": r.gpu, "device": r.device, "metric": r.metric, "value": r.value, "unit": r.unit}
         for r in sorted(readings, key=lambda r: r.line) if r.value is not None],
        schema=SAMPLES,
    )  # fmt: skip
    if frame is not None and frame.height:
        more = frame.filter(pl.col("value").is_not_null()).with_columns(
            incident=pl.lit(incident), host=pl.lit(host, pl.String), source=pl.lit(source), file=pl.lit(file))
        samples = pa.concat_tables([samples, to_schema(more, SAMPLES)]).sort_by("line")
    findings = sorted(findings, key=lambda f: f.line)
    if text is not None:
        for f in findings:
            quoted = [text[n - 1] for n in sorted(set(f.samples)) if 0 < n <= len(text) and text[n - 1] != f.message]
            f.message = "\n".join([f.message, *quoted])
    templates = iter(_templates([f.message for f in findings if f.kind == "other"]))
    events = events_table(
        [{"incident": incident, "host": host, "source": source, "file": file, "line": f.line, "ts": f.ts,
          "uptime_s": None, "kind": f.kind, "severity": f.severity, "gpu": f.gpu, "rank": None, "pid": f.pid,
          "code": f.code, "message": f.message,
          "detail": json.dumps({"template": next(templates)} if f.kind == "other" else _detail(f, file),
                               ensure_ascii=False)}
         for f in findings]
    )  # fmt: skip
    return SourceResult(events, lines=lines, records=records, unparsed=unparsed, error=error,
                        invalid_utf8_lines=invalid_utf8_lines, samples=samples)  # fmt: skip


def _templates(messages: list[str]) -> list[str]:
    """The masked ``template`` of each ``other`` row's message (one vectorized pass)."""
    if not messages:
        return []
    return pl.select(template_expr(pl.Series("m", messages, dtype=pl.String))).to_series().to_list()


def _detail(f: Finding, file: str) -> dict[str, Any]:
    detail = {k: v for k, v in f.detail.items() if v is not None}
    if f.samples:
        detail["samples"] = [f"{file}:{n}" for n in sorted(set(f.samples))]
    return detail
