"""What the telemetry sources share: the file's numbered lines they start from (:func:`numbered`), their
readings as ``samples`` rows, the events they derive, and the ``SourceResult`` that carries both
(DESIGN.md, "samples").

Two ways in, one way out. A source that reads its output line by line (``lspci``, ``ibcounters``,
``nicstats``, ``dcgm``, ``disks``) collects :class:`Reading` rows (one per value) and :class:`Finding` rows (a
port not ``Active``, a link trained below its capability, a failed test) and hands them to :func:`result`. A
source that reads its lines at once (``sel``, ``sensors``, ``gpuseries``, and ``disks`` for iostat's rows)
builds Polars frames: readings with the columns :data:`READINGS` (:func:`samples_table`), events with
``line``, ``ts``, ``kind``, ``severity``, ``message``, ``detail`` (:func:`events_frame`, :func:`unparsed_frame`
for the lines no form read). Both end in the same ``samples`` and ``events`` schemas. A derived event names
the sample rows it was read from in ``detail.samples`` (``file:line`` list), and every line that is neither
a reading nor blank nor a known header is an ``other`` row, so nothing is lost. What a BMC record is about
is :mod:`.bmc`'s.

>>> r = result([Reading(3, "pcie_width", 8.0, device="3b:00.0")], [], lines=4, records=1, unparsed=0,
...            source="lspci", file="f")
>>> r.samples.column("metric").to_pylist(), r.events.num_rows
(['pcie_width'], 0)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ..reading import envelope
from ..reading.base import SourceResult, events_table, shift_lines, template_expr
from ..schema import SAMPLES
from ..text import split_lines
from . import derive

_TS = pl.Datetime("us", "UTC")
#: The columns a source's long frame of readings has before :func:`samples_table` adds the file's own.
READINGS = {"line": pl.Int64, "ts": _TS, "gpu": pl.String, "device": pl.String, "metric": pl.String,
            "value": pl.Float64, "unit": pl.String}  # fmt: skip


def numbered(data: bytes) -> tuple[pl.DataFrame, int]:
    """The parse prologue: ``data``'s lines as a frame (``line`` from 1, ``text``) and how many were not UTF-8.

    >>> numbered(b"a\\nb\\n")[0].rows()
    [(1, 'a'), (2, 'b')]
    """
    lines, bad_utf8 = split_lines(data)
    return pl.DataFrame({"text": lines}).with_row_index("line", offset=1).select(pl.col("line").cast(pl.Int64), "text"), bad_utf8


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


def line_chunks(data: bytes, size: int) -> Iterator[bytes]:
    """``data`` in chunks of whole lines of about ``size`` bytes (a line longer than that is a chunk of its own).
    For series whose records are one line each (dmon rows); a job log's records span lines (``chunks``).

    >>> list(line_chunks(b"a\\nbb\\nc", 2))
    [b'a\\n', b'bb\\n', b'c']
    """
    start = 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + size) + 1
        if end <= start:  # no line end within size: the line that is there, whole
            end = data.find(b"\n", start + size) + 1 or len(data)
        if start + size >= len(data):
            end = len(data)
        yield data[start:end]
        start = end


def iso_stamp(date: pl.Expr, time: pl.Expr, form: str | tuple[str, ...]) -> pl.Expr:
    """An ISO wall-clock stamp from a date column printed in ``form`` (or the first of several forms that
    reads it) and a time column (null when the date is none: ``Pre-Init``, ``PostInit``); a 12-hour time
    with ``AM``/``PM`` and a trailing zone name are read too. What :func:`wall_clock` reads.

    >>> pl.select(iso_stamp(pl.lit("10/10/23"), pl.lit("09:01:40 PM"), ("%m/%d/%Y", "%m/%d/%y"))).item()
    '2023-10-10T21:01:40'
    """
    forms = (form,) if isinstance(form, str) else form
    # a 4-digit year form reads "10/10/23" as the year 23: try a form only where its year is as wide
    day = pl.coalesce([date.str.strptime(pl.Date, f, strict=False) if "%Y" not in f else
                       pl.when(date.str.contains(r"\d{4}")).then(date.str.strptime(pl.Date, f, strict=False))
                       for f in forms])  # fmt: skip
    hms = time.str.extract(r"(\d{1,2}:\d\d:\d\d)", 1)
    pm = time.str.contains(r"(?i)\bPM\b")
    am = time.str.contains(r"(?i)\bAM\b")
    hour = hms.str.split(":").list.first().cast(pl.Int32, strict=False)
    hour24 = pl.when(pm & (hour < 12)).then(hour + 12).when(am & (hour == 12)).then(0).otherwise(hour)
    clock = pl.concat_str(hour24.cast(pl.String).str.zfill(2), pl.lit(":"), hms.str.split(":").list.slice(1).list.join(":"))
    return pl.concat_str(day.dt.strftime("%Y-%m-%d"), pl.lit("T"), clock)


def single_spaced(text: pl.Series) -> pl.Series:
    """``text`` with its runs of blanks as one space, stripped: what a split by one space reads as a table's
    cells. Runs of spaces alone (a table printed with spaces, as dmon and iostat print) halve at each literal
    pass, several times cheaper than a regex.

    >>> single_spaced(pl.Series(["  0   86        33  ", "a\tb"])).to_list()
    ['0 86 33', 'a b']
    """
    if text.str.contains(r"[\t\r\f\v]").any():
        return text.str.replace_all(r"[ \t\r\f\v]+", " ").str.strip_chars()
    text = text.str.strip_chars()
    while text.str.contains("  ", literal=True).any():
        text = text.str.replace_all("  ", " ", literal=True)
    return text


def wall_clock(stamp: pl.Expr, timezone: str | None) -> tuple[pl.Expr, pl.Expr]:
    """The UTC time of ISO stamps a machine printed, and how it was read (``ts_from``): with an offset exact
    (``printed``); without one its wall clock, read in ``timezone`` (``local``) or, none given, as UTC
    (``assumed``), which ingest re-reads in the incident's zone — the SEL, iostat, sar and nvidia-smi's
    series are read as ``dmesg -T`` is (:func:`envelope.to_utc`). A source's ``LOCAL_TIME = True`` has
    ingest re-read its samples' stamps.

    >>> ts, how = wall_clock(pl.col("s"), "Europe/Paris")
    >>> pl.DataFrame({"s": ["2023-10-10T21:01:40", "2023-10-10T21:01:40+0100"]}).select(ts, how).rows()[0][1]
    'local'
    """
    return envelope.to_utc(stamp, pl.lit("iso"), year=None, timezone=timezone)


def other(line: int, text: str) -> Finding:
    """A line of the file that is no reading: kept as an ``other`` row."""
    return Finding(line, "other", "info", text)


def result(readings: list[Reading], findings: list[Finding], *, lines: int, records: int, unparsed: int,
           source: str, file: str, incident: str = "", host: str | None = None, error: str | None = None,
           invalid_utf8_lines: int = 0, text: list[str] | None = None,
           frame: pl.DataFrame | None = None, derive_from: str | None = None) -> SourceResult:  # fmt: skip
    """The ``events`` and ``samples`` tables of one file, in line order. Given the file's ``text`` (its
    lines), a derived event's message is its summary followed by the lines it was read from, as printed:
    the message catalogs read those lines (``State: Down``, ``… test result: FAILED!``) whatever the summary.
    A source that reads its series vectorized gives them as ``frame`` (columns line, ts, gpu, device, metric,
    value, unit) beside its ``readings``. Given ``derive_from`` (``local``, ``assumed``: how the stamps were
    read), the events the rules of ``data/telemetry_rules.toml`` derive from the samples are added
    (:mod:`.derive`)."""
    samples = pa.Table.from_pylist(
        [{"incident": incident, "host": host, "source": source, "file": file, "line": r.line, "ts": r.ts,
          "gpu": r.gpu, "device": r.device, "metric": r.metric, "value": r.value, "unit": r.unit}
         for r in sorted(readings, key=lambda r: r.line) if r.value is not None],
        schema=SAMPLES,
    )  # fmt: skip
    if frame is not None and frame.height:
        more = samples_table(frame.select(list(READINGS)).cast(READINGS), source=source, file=file,  # type: ignore[arg-type]
                             incident=incident, host=host)  # fmt: skip
        samples = pa.concat_tables([samples, more]).sort_by("line") if samples.num_rows else more
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
    if derive_from is not None and (derived := derive.events(samples, ts_from=derive_from)).height:
        more = events_frame(derived, source=source, file=file, incident=incident, host=host)
        events = pa.concat_tables([events, more]).sort_by("line")
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


# -------------------------------------------------------------------------------- sources that read frames


def samples_table(readings: pl.DataFrame, *, source: str, file: str, incident: str, host: str | None) -> pa.Table:
    """``readings`` (columns :data:`READINGS`) as ``samples`` rows of one file; rows without a value are dropped
    (a ``-``, ``N/A`` or ``na`` is no reading)."""
    if readings.height == 0:
        return SAMPLES.empty_table()
    rows = readings.filter(pl.col("value").is_not_null() & pl.col("value").is_finite())
    # the file's own columns made once and repeated; the others through Arrow's plain strings (a cast from
    # Polars' string views copies every one)
    fixed = {"incident": incident, "host": host, "source": source, "file": file}
    at = pa.array(np.zeros(rows.height, dtype=np.int32))
    arrays = [pa.array([fixed[f.name]], f.type).take(at) if f.name in fixed else
              rows.get_column(f.name).to_arrow(compat_level=pl.CompatLevel.oldest()).cast(f.type) for f in SAMPLES]  # fmt: skip
    return pa.Table.from_arrays(arrays, schema=SAMPLES)


def events_frame(frame: pl.DataFrame, *, source: str, file: str, incident: str, host: str | None) -> pa.Table:
    """Event rows from ``frame`` (``line``, ``ts``, ``kind``, ``severity``, ``message``, ``detail`` as JSON
    text, and optionally ``gpu``, ``code``, ``uptime_s``) in the ``events`` schema."""
    if frame.height == 0:
        return events_table([])
    fill = {"gpu": pl.String, "code": pl.Int64, "uptime_s": pl.Float64, "rank": pl.Int32, "pid": pl.Int64,
            "ts": _TS}  # fmt: skip
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in fill.items() if name not in frame.columns]
    out = frame.with_columns(*missing, incident=pl.lit(incident), host=pl.lit(host, pl.String), source=pl.lit(source),
                             file=pl.lit(file))  # fmt: skip
    return events_table(out)


def detail_json(frame: pl.DataFrame, columns: list[str]) -> pl.Series:
    """Each row's ``columns`` as a JSON object, nulls left out (a row's ``detail``)."""
    return pl.Series("detail", [json.dumps({k: v for k, v in row.items() if v is not None}, ensure_ascii=False)
                                for row in frame.select(columns).iter_rows(named=True)], dtype=pl.String)  # fmt: skip


def unparsed_frame(lines: pl.DataFrame, *, kind: str = "unparsed") -> pl.DataFrame:
    """``lines`` (``line``, ``text``) as events no source family read (kept and counted)."""
    return lines.select(
        "line", pl.lit(None, _TS).alias("ts"), kind=pl.lit(kind), severity=pl.lit("info" if kind == "other" else "warning"),
        message=pl.col("text"), detail=pl.lit("{}"),
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ series streamed

#: Bytes of a series read at a time when it is streamed (:func:`iter_series`): the work frames of a chunk take
#: tens of times its bytes (100 MB of dmon: 4 MB chunks peak at 398 MB, 8 MB ones at 709 MB for 4% less CPU);
#: what is carried to the next (a header's names, the readings the rules still look back at) stays small, so
#: the peak follows the chunk, not the file.
SERIES_CHUNK_BYTES = 4 << 20
#: Where a series may be cut: a pattern whose match ends where a report starts, or a function of the input's
#: first block that gives it (or none: any line end).
Boundary = re.Pattern[bytes] | Callable[[bytes], re.Pattern[bytes] | None] | None
#: How far a chunk may grow while looking for a place its ``boundary`` allows a cut (a report of a few KB
#: always finds one; a file with none is then cut at a line end).
MAX_CHUNK_BYTES = 64 << 20


def cut_chunks(read: Callable[[int], bytes], size: int, boundary: Boundary = None) -> Iterator[bytes]:
    """Chunks of whole lines from ``read(n)``, each of about ``size`` bytes: cut where ``boundary`` last matches
    in it (at the match's end: a report's first line, so no report spans a cut), else at its last line end
    (a chunk with no boundary grows up to :data:`MAX_CHUNK_BYTES` first). ``boundary`` may be a function of
    the input's first block that gives the pattern (a form read from the head: iostat with or without ``-t``).

    >>> import io, re
    >>> list(cut_chunks(io.BytesIO(b"h\\n1\\n2\\nh\\n3\\n").read, 7, re.compile(rb"(?m)^(?=h)")))
    [b'h\\n1\\n2\\n', b'h\\n3\\n']
    """
    pending = b""
    while True:
        block = read(size)
        if callable(boundary):
            boundary = boundary(block)
        buf = pending + block
        if not block:
            if buf:
                yield buf
            return
        end = buf.rfind(b"\n") + 1
        if not end:
            pending = buf
            continue
        cut = end
        if boundary is not None:
            # the last boundary after the chunk's first line (the tail first: a regex pass over the whole buffer
            # for every chunk costs as much as reading it)
            first = buf.find(b"\n") + 1
            tail = max(first, end - size // 2)
            found = [m.end() for m in boundary.finditer(buf, tail, end) if m.end() > first]
            found = found or [m.end() for m in boundary.finditer(buf, first, tail) if m.end() > first]
            if found:
                cut = found[-1]
            elif len(buf) < max(size, MAX_CHUNK_BYTES):
                pending = buf
                continue
        yield buf[:cut]
        pending = buf[cut:]


#: At most so many readings of one series are carried for a rule's look-back in time (10 minutes of readings
#: every 0.15 s): a series whose stamps do not move (a capture pasted again and again) keeps memory bounded.
CARRIED_READINGS = 4096


class CarriedDerive:
    """The events the rules derive from a series read in chunks: each chunk's samples are read after the
    readings of the chunks before that the rules still look back at (for each device and metric the last few,
    and those within the longest ``within_s`` of its last one), so a chunk's cut changes no event."""

    def __init__(self, ts_from: str | None) -> None:
        self.ts_from = ts_from
        self.context: pl.DataFrame | None = None
        wanted = derive.rules()
        self.metrics = derive.metrics()
        self.last = 1 + max([r.get("window", 1) for r in wanted] or [1])
        self.seconds = max([r.get("within_s", 0) for r in wanted] or [0])

    def events(self, samples: pa.Table) -> pl.DataFrame:
        """The events of ``samples`` (a chunk's, numbered in the file) not derived from an earlier chunk."""
        watched = derive.watched(samples, self.metrics)
        carried = self.context is not None and self.context.height > 0
        both = pl.concat([self.context, watched]) if carried else watched  # type: ignore[list-item]
        found = derive.events(both, ts_from=self.ts_from)
        if carried:
            found = found.filter(pl.col("line") > self.context.get_column("line").max())  # type: ignore[union-attr]
        self.context = self._tail(both)
        return found

    def _tail(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The rows of ``frame`` (in line order) the rules may still look back at from the next chunk."""
        if frame.height == 0:
            return frame
        by = [pl.coalesce("gpu", "device"), pl.col("metric")]
        back = pl.int_range(pl.len()).reverse().over(by)  # 0 for a series' last reading
        recent = (pl.col("ts") >= (pl.col("ts").max() - pl.duration(seconds=self.seconds)).over(by)).fill_null(False)
        return frame.filter((back < self.last) | recent & (back < CARRIED_READINGS))


def iter_series(read: Callable[[int], bytes], parse_chunk: Callable[[bytes], SourceResult], *, source: str,
                file: str, incident: str, host: str | None, derive_from: str | None,
                size: int = SERIES_CHUNK_BYTES, boundary: Boundary = None) -> Iterator[SourceResult]:  # fmt: skip
    """A series read from ``read(n)`` in chunks of whole lines (:func:`cut_chunks`), one held at a time:
    ``parse_chunk`` reads a chunk (numbered from 1, without the derived events; it may carry what a header
    said to the next), and each result holds that chunk's rows numbered in the file, its ``records`` and
    ``unparsed``, its events derived from the series (``derive_from``: how the stamps were read; None: none
    derived), and the ``lines`` and ``invalid_utf8_lines`` of the file so far (the last result's are the
    file's), as the kernel source's chunks do."""
    lines = bad = 0
    carried = CarriedDerive(derive_from) if derive_from is not None else None
    for chunk in cut_chunks(read, size, boundary):
        part = parse_chunk(chunk)
        samples = shift_lines(part.samples if part.samples is not None else SAMPLES.empty_table(), lines)
        events = _shift_events(part.events, lines, file)
        if carried is not None and (derived := carried.events(samples)).height:
            more = events_frame(derived, source=source, file=file, incident=incident, host=host)
            events = pa.concat_tables([events, more]).sort_by("line") if events.num_rows else more
        lines, bad = lines + part.lines, bad + part.invalid_utf8_lines
        yield SourceResult(events, lines=lines, records=part.records, unparsed=part.unparsed, error=part.error,
                           invalid_utf8_lines=bad, samples=samples)  # fmt: skip
    if not lines:
        yield SourceResult(events_table([]), lines=0, records=0, unparsed=0, error=None, samples=SAMPLES.empty_table())


def combined(parts: Iterable[SourceResult]) -> SourceResult:
    """One result of the chunks of :func:`iter_series` (what ``parse`` of the whole input gives)."""
    pieces = list(parts)
    last = pieces[-1]
    events = [p.events for p in pieces if p.events.num_rows]
    samples = [p.samples for p in pieces if p.samples is not None and p.samples.num_rows]
    return SourceResult(pa.concat_tables(events) if events else events_table([]), lines=last.lines,
                        records=sum(p.records for p in pieces), unparsed=sum(p.unparsed for p in pieces),
                        error=next((p.error for p in pieces if p.error), None), invalid_utf8_lines=last.invalid_utf8_lines,
                        samples=pa.concat_tables(samples) if samples else SAMPLES.empty_table())  # fmt: skip


def _shift_events(events: pa.Table, by: int, file: str) -> pa.Table:
    """A chunk's events numbered in the file: their ``line`` and the ``file:line`` of their ``detail.samples``."""
    if not by or events.num_rows == 0:
        return events
    events = shift_lines(events, by)
    details = events.column("detail").to_pylist()
    if not any(d and '"samples"' in d for d in details):
        return events
    prefix = f"{file}:"

    def moved(text: str | None) -> str | None:
        if not text or '"samples"' not in text:
            return text
        detail = json.loads(text)
        detail["samples"] = [f"{prefix}{int(s[len(prefix):]) + by}" if s.startswith(prefix) and s[len(prefix):].isdigit()
                             else s for s in detail.get("samples", [])]  # fmt: skip
        return json.dumps(detail, ensure_ascii=False)

    i = events.schema.get_field_index("detail")
    return events.set_column(i, events.schema.field(i), pa.array([moved(d) for d in details], events.schema.field(i).type))
