"""Disks: ``smartctl -a``/``-x`` (ATA, SAS and NVMe), ``nvme smart-log``, and ``iostat -x`` (with ``-t``).

Producers: smartmontools 5.x–7.x (``SMART overall-health self-assessment test result: PASSED|FAILED!``, the
ATA attribute table in its ``0x0033 … Pre-fail Always`` and ``-x`` ``PO--CK`` layouts, ``WHEN_FAILED``
``FAILING_NOW``/``In_the_past``; SAS ``SMART Health Status: OK``; NVMe ``SMART/Health Information (NVMe Log
0x02)`` with ``Critical Warning: 0x04``, ``Media and Data Integrity Errors:``); nvme-cli ``smart-log``
(``critical_warning : 0``, ``media_errors : 0``, ``num_err_log_entries : 1``); sysstat ``iostat -x`` of every
generation (≤ 9: ``rsec/s … await svctm %util``; 10–11: ``await r_await w_await svctm %util``; 12+: ``r_await
w_await aqu-sz … %util`` without ``await``, 12.5+ without ``svctm``, with ``d/s``/``f/s`` columns), with the
``-t`` time line of each report (``06/10/2014 10:35:34 AM``, ``2023-01-05T10:00:00+0100`` with
``S_TIME_FORMAT=ISO``). Each is a table of numbers or ``name: value`` lines under a device: line patterns
read them; the columns are found by their heads, never by position.

Samples: ``reallocated_sectors``, ``pending_sectors``, ``offline_uncorrectable``, ``reported_uncorrect``,
``crc_errors``, ``temperature_c``, ``power_on_hours`` (ATA raw values); ``critical_warning``,
``media_errors``, ``error_log_entries``, ``available_spare_pct``, ``percentage_used``, ``unsafe_shutdowns``
(NVMe); ``await_ms``, ``r_await_ms``, ``w_await_ms``, ``svctm_ms``, ``util_pct``, ``queue_size``,
``reads_per_s``, ``writes_per_s`` (iostat; ``await_ms`` where sysstat 12+ prints none is the mean of
``r_await`` and ``w_await`` weighted by ``r/s`` and ``w/s``, the quantity ``await`` was). ``device`` is the
device as printed (``/dev/sdb`` from the command line before a smartctl output, ``nvme0`` of smart-log,
``sda`` of iostat). iostat's time lines are the machine's wall clock, read as the SEL's are
(:func:`.telemetry.wall_clock`): in the timezone given, else as UTC and re-read by ingest in the incident's
(``LOCAL_TIME``), like ``dmesg -T``. ``S_TIME_FORMAT=ISO`` prints the offset too: exact given a timezone;
without one its wall clock is kept, as for the other lines, since ingest re-reads every stamp of the
source in the incident's zone (the machine's).

Events ``disk.smart``, one per device and output: ``critical`` when the health self-assessment is FAILED
(or a SAS health other than OK), ``error`` when an attribute is ``FAILING_NOW``, the NVMe critical warning
is non-zero (its bits named: ``spare``, ``temperature``, ``reliability``, ``read_only``,
``volatile_backup``, ``pmr_read_only``) or media errors are counted, ``warning`` when reallocated,
pending or offline-uncorrectable sectors are non-zero. iostat's series gives ``disk.await_high``
(``notice``: await ≥ 200 ms at ≥ 95 % utilization, a rule of ``data/telemetry_rules.toml``).

Example::

    SMART overall-health self-assessment test result: FAILED!
      5 Reallocated_Sector_Ct   0x0033   094   094   036    Pre-fail  Always       -       8256

gives ``reallocated_sectors 8256`` and a ``disk.smart`` ``critical`` event naming both.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import polars as pl

from ..reading.base import SourceResult
from ..reading.fields import to_int
from . import telemetry
from .telemetry import Finding, Reading, number, numbered, other, result

NAME = "disks"
#: iostat's time lines are the machine's wall clock (ingest re-reads them in the incident's timezone).
LOCAL_TIME = True
FORMS = (
    "smartctl -a / -x: ATA (attribute table, both layouts), SAS health, NVMe SMART/Health Information",
    "nvme smart-log (nvme-cli text)",
    "iostat -x [-t] of sysstat 9 to 12.7 (await or r_await/w_await, svctm or not, ISO or locale time lines)",
)

_SMARTCTL_CMD = re.compile(r"smartctl\s+(?:-\S+\s+)*(/dev/\S+)")
_HEALTH = re.compile(r"^SMART overall-health self-assessment test result:\s*(\S+)")
_SAS_HEALTH = re.compile(r"^SMART Health Status:\s*(.+?)\s*$")
_ATTRIBUTE = re.compile(
    r"^\s*(\d{1,3})\s+([A-Za-z][\w-]*)\s+(?:0x[0-9a-fA-F]{4}|[-A-Z]{6})\s+(\d{3})\s+(\d{3})\s+(\d{3}|---)\s+"
    r"(?:(?:Pre-fail|Old_age)\s+(?:Always|Offline)\s+)?(\S+)\s+(\d+)"
)
_KEY_VALUE = re.compile(r"^\s*([A-Za-z][\w .]*?[\w.])\s*:\s+(\S.*?)\s*$")
_SMART_LOG = re.compile(r"^Smart Log for NVME device:(\S+)")
_IOSTAT_HEAD = re.compile(r"^Device:?\s+((?=.*(?:%util|\btps\b)).*\S)\s*$")  # not smartctl's "Device Model:"

#: ATA attributes by id (the names vary by vendor; the ids are the SFF-8035i / ATA ones smartmontools uses).
_ATA = {"5": "reallocated_sectors", "197": "pending_sectors", "198": "offline_uncorrectable",
        "187": "reported_uncorrect", "199": "crc_errors", "194": "temperature_c", "9": "power_on_hours"}  # fmt: skip
#: NVMe health fields, as smartctl and nvme-cli spell them.
_NVME = {
    "critical warning": "critical_warning", "critical_warning": "critical_warning",
    "media and data integrity errors": "media_errors", "media_errors": "media_errors",
    "error information log entries": "error_log_entries", "num_err_log_entries": "error_log_entries",
    "available spare": "available_spare_pct", "available_spare": "available_spare_pct",
    "percentage used": "percentage_used", "percentage_used": "percentage_used",
    "unsafe shutdowns": "unsafe_shutdowns", "unsafe_shutdowns": "unsafe_shutdowns",
    "temperature": "temperature_c", "power on hours": "power_on_hours", "power_on_hours": "power_on_hours",
}  # fmt: skip
#: Counters whose non-zero value is worth a ``disk.smart`` event, how the event names them, and its level.
_COUNTED = (("media_errors", "media errors", "error"), ("reallocated_sectors", "reallocated sectors", "warning"),
            ("pending_sectors", "pending sectors", "warning"),
            ("offline_uncorrectable", "offline uncorrectable sectors", "warning"))  # fmt: skip
_WARNING_BITS = ("spare", "temperature", "reliability", "read_only", "volatile_backup", "pmr_read_only")
_IOSTAT = {"await": "await_ms", "r_await": "r_await_ms", "w_await": "w_await_ms", "svctm": "svctm_ms",
           "%util": "util_pct", "aqu-sz": "queue_size", "avgqu-sz": "queue_size", "r/s": "reads_per_s",
           "w/s": "writes_per_s"}  # fmt: skip


def sniff(head: str) -> float:
    """How sure we are that ``head`` is smartctl, nvme smart-log or iostat -x output."""
    if re.search(r"(?m)^smartctl \d+\.\d+ |^=== START OF (?:INFORMATION|READ SMART DATA|SMART DATA) SECTION ===", head):
        return 0.95
    if re.search(r"(?m)^SMART overall-health self-assessment test result:|^SMART/Health Information \(NVMe Log", head):
        return 0.9
    if re.search(r"(?m)^\s*ID# ATTRIBUTE_NAME\s+FLAG\s+VALUE\s+WORST\s+THRESH", head):
        return 0.9
    if re.search(r"(?m)^Smart Log for NVME device:", head):
        return 0.95
    if re.search(r"(?m)^Device:?\s+(?:rrqm/s|r/s|tps)\s.*%util\s*$", head):
        return 0.95
    if len(re.findall(r"(?m)^\s*\d{1,3} [A-Z][A-Za-z_-]+\s+0x[0-9a-f]{4}\s+\d{3}\s+\d{3}\s+(?:\d{3}|---)\s", head)) >= 2:
        return 0.8
    return 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse smartctl / nvme smart-log / iostat output into ``samples`` and ``disk.smart`` events."""
    return _parse(data, file=file, incident=incident, host=host, timezone=timezone,
                  derive_from="local" if timezone else "assumed")  # fmt: skip


def iter_parse(read: Callable[[int], bytes], *, file: str, incident: str = "", host: str | None = None,
               year: int | None = None, timezone: str | None = None, on_error: str = "keep",
               chunk_bytes: int = telemetry.SERIES_CHUNK_BYTES) -> Iterator[SourceResult]:  # fmt: skip
    """:func:`parse` from ``read(n)`` in chunks, one held at a time (:func:`.telemetry.iter_series`): a day of
    ``iostat -x 1`` is cut where a report starts (its time line, or ``avg-cpu:``/``Device`` after a blank
    line), so each chunk holds whole reports."""
    del year, on_error

    def chunk(data: bytes) -> SourceResult:
        return _parse(data, file=file, incident=incident, host=host, timezone=timezone, derive_from=None)

    yield from telemetry.iter_series(read, chunk, source=NAME, file=file, incident=incident, host=host,
                                     derive_from="local" if timezone else "assumed", size=chunk_bytes,
                                     boundary=_report_start)  # fmt: skip


#: An ``iostat -t`` time line (the locale's ``%x %X`` or ``S_TIME_FORMAT=ISO``): where its report starts.
_TIME_LINE = re.compile(rb"(?m)^(?=[ \t]*(?:\d\d/\d\d/\d\d(?:\d\d)? \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d))")
#: Without ``-t``, a report starts at ``avg-cpu:`` or ``Device`` after a blank line.
_BLANK_THEN_HEAD = re.compile(rb"(?m)^[ \t\r]*\n(?=avg-cpu:|Device:?[ \t])")


def _report_start(head: bytes) -> re.Pattern[bytes]:
    """Where the reports of the iostat output that starts with ``head`` start: before each time line when it
    prints them (a cut after a blank line would part a report's rows from its time), else after a blank line."""
    return _TIME_LINE if _TIME_LINE.search(head) else _BLANK_THEN_HEAD


def _parse(data: bytes, *, file: str, incident: str, host: str | None, timezone: str | None,
           derive_from: str | None) -> SourceResult:  # fmt: skip
    numbered_lines, bad_utf8 = numbered(data)
    lines = numbered_lines.get_column("text").to_list()
    readings: list[Reading] = []
    findings: list[Finding] = []
    disk = _Disk(None)
    disks = [disk]
    columns: list[str] | None = None
    records = 0
    inside = cpu = False  # inside a smartctl / smart-log output; on iostat's avg-cpu values line
    # iostat's device rows and time lines, read at once (a day of `iostat -x 1` is a million rows); the loop
    # below reads the rest, and skips these
    table, rest = _iostat_frame(numbered_lines, timezone) if _IOSTAT_ANY.search(data) else (None, range(1, len(lines) + 1))
    for n in rest:
        text = lines[n - 1]
        if m := _SMARTCTL_CMD.search(text):
            disk, inside = _Disk(m[1]), False
            disks.append(disk)
            findings.append(other(n, text))
            continue
        elif m := _SMART_LOG.match(text):
            disk = _Disk(m[1])
            disks.append(disk)
        elif text.startswith("smartctl ") and re.match(r"smartctl \d", text):
            if disk.touched:  # a second output without its command line
                disk = _Disk(None)
                disks.append(disk)
        elif m := _HEALTH.match(text) or _SAS_HEALTH.match(text):
            disk.health, disk.health_line = m[1], n
            disk.touched = True
        elif m := _ATTRIBUTE.match(text):
            disk.touched = True
            if metric := _ATA.get(m[1]):
                readings.append(Reading(n, metric, float(m[7]), None, device=disk.device))
                disk.values[metric] = (float(m[7]), n)
            if m[6] in ("FAILING_NOW", "In_the_past"):
                disk.failing.append({"id": to_int(m[1]), "name": m[2], "when_failed": m[6], "line": n})
        elif m := _IOSTAT_HEAD.match(text):
            columns, records = m[1].split(), records + 1
        elif columns is not None and (row := text.split()) and len(row) == len(columns) + 1 and _numbers(row[1:]):
            readings += _iostat(n, row, columns, None)  # (a row of other digits than ASCII: undated)
        elif (m := _KEY_VALUE.match(text)) and (metric := _NVME.get(m[1].strip().lower())):
            disk.touched = True
            value = _nvme_value(m[2])
            if value is not None:
                unit = "C" if metric == "temperature_c" else "%" if metric.endswith(("_pct", "percentage_used")) else None
                readings.append(Reading(n, metric, value, unit, device=disk.device))
                disk.values.setdefault(metric, (value, n))
        elif not text.strip():
            columns = None
        elif re.match(r"^(?:avg-cpu:|Linux \S+ \()", text) or (cpu and _numbers(text.split())):
            cpu = text.startswith("avg-cpu:")  # iostat's banner and CPU lines: its record, no disk reading
            continue
        elif not inside or re.match(r"^(?:\$|#|>)\s", text):  # outside an output, or a prompt
            findings.append(other(n, text))
        if re.match(r"^(?:smartctl \d|=== START OF|Smart Log for NVME|SMART overall-health|SMART/Health Information)", text):
            inside = True
        cpu = False
    records += sum(1 for d in disks if d.touched)  # iostat's reports are counted as their heads are read
    findings += [f for d in disks if (f := d.finding()) is not None]
    return result(readings, findings, lines=len(lines), records=records, unparsed=0, source=NAME, file=file,
                  incident=incident, host=host, invalid_utf8_lines=bad_utf8, text=lines, frame=table,
                  derive_from=derive_from)  # fmt: skip


_IOSTAT_ANY = re.compile(rb"(?m)^Device:?[ \t]")
#: The date forms of ``iostat -t``'s time lines (the locale's ``%x``: ``06/10/2014``, ``10/10/23``).
_DATES = ("%m/%d/%Y", "%m/%d/%y")


def _iostat_frame(numbered_lines: pl.DataFrame, timezone: str | None) -> tuple[pl.DataFrame | None, list[int]]:
    """The readings of every iostat device row (columns of :func:`result`'s ``frame``) and the lines left for
    the line loop (not a row, a time line, a blank line or iostat's banner and CPU lines). A row belongs to the ``Device`` head above it until a blank line; its
    time is the last time line above it (as the line loop reads the heads: ``_IOSTAT_HEAD``)."""
    t = pl.col("text")
    stripped = t.str.strip_chars()
    head = t.str.contains(r"^Device:?\s+\S.*(?:%util|\btps\b)")
    df = numbered_lines.with_columns(head=head)
    # each head's columns, computed on the head lines alone (a when/then computes its branch on every row)
    heads = df.filter("head").select("line", named=t.str.replace(r"^Device:?\s+", "").str.replace_all(r"\s+", " ")
                                     .str.strip_chars())  # fmt: skip
    df = df.join(heads, on="line", how="left", maintain_order="left").select(
        "line", "text", "head", cols=pl.when("head").then("named").when(stripped == "").then(pl.lit("")).forward_fill())
    # the time lines, as the SEL's stamps are read (telemetry.wall_clock): "10/10/23 09:01:40 PM" a wall clock,
    # S_TIME_FORMAT=ISO's "2023-01-05T10:00:00+0100" exact
    iso = stripped.str.contains(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d{4}|Z)?$")
    dated = pl.col("text").str.contains(r"^\s*(?:\d\d/\d\d/\d\d(?:\d\d)? \d\d:\d\d:\d\d(?: [AP]M)?|\d{4}-\d\d-\d\dT\S+)\s*$")
    printed = stripped if timezone else stripped.str.replace(r"(?:[+-]\d{4}|Z)$", "")  # (see the docstring)
    stamp = pl.when(iso).then(printed).otherwise(
        telemetry.iso_stamp(stripped.str.extract(r"^(\S+)", 1), stripped.str.extract(r"^\S+ (.*)$", 1), _DATES))
    ts, _ = telemetry.wall_clock(pl.col("iso"), timezone)
    stamps = df.filter(dated).select("line", iso=stamp).select("line", stamp=ts).drop_nulls("stamp")
    df = df.join(stamps, on="line", how="left", maintain_order="left").with_columns(ts=pl.col("stamp").forward_fill())
    number = r"-?[0-9]+(?:[.,][0-9]+)?"  # ASCII digits: a row of other digits is the loop's (Python reads them)
    norm = t.str.replace_all(r"[ \t\r\f\v]+", " ").str.strip_chars()  # (ASCII spaces: cheaper; a row with others is the loop's)
    inside = df.filter(~pl.col("head") & (pl.col("cols").fill_null("") != "")).with_columns(norm=norm)
    parts, taken = [], []
    for (cols,), block in inside.group_by("cols", maintain_order=True):
        names = str(cols).split(" ")
        # a device and one number per column, as the loop's split() and _numbers() read a row
        # (a repeat count in the pattern costs a state per repeat: count the spaces instead)
        rows = block.filter((pl.col("norm").str.count_matches(" ", literal=True) == len(names))
                            & pl.col("norm").str.contains(rf"^\S+(?: {number})+$"))  # fmt: skip
        taken.append(rows.select("line"))
        cells = rows.select("line", "ts", split=pl.col("norm").str.split_exact(" ", len(names))).unnest("split")
        comma = rows.get_column("norm").str.contains(",", literal=True).any()  # a locale's decimal comma
        field = [pl.col(f"field_{i + 1}") for i in range(len(names))]
        named = {name: (f.str.replace(",", ".", literal=True) if comma else f).cast(pl.Float64, strict=False)
                 for name, f in zip(names, field, strict=True)}  # fmt: skip
        metrics = [(metric, named[col], _unit(metric)) for col, metric in _IOSTAT.items() if col in named]
        if "await" not in named and {"r_await", "w_await", "r/s", "w/s"} <= set(named):
            ops = named["r/s"] + named["w/s"]
            mean = (named["r/s"] * named["r_await"] + named["w/s"] * named["w_await"]) / ops
            metrics.append(("await_ms", pl.when(ops != 0).then(mean.round(3)).otherwise(0.0), "ms"))
        parts += [cells.select("line", "ts", device=pl.col("field_0"), metric=pl.lit(metric), value=value,
                               unit=pl.lit(unit, pl.String), order=pl.lit(k))
                  for k, (metric, value, unit) in enumerate(metrics)]  # fmt: skip
    # the lines read here, and those the loop would only pass over: blank lines, iostat's banner and CPU lines
    cpu = df.filter(t.shift(1).str.starts_with("avg-cpu:")).filter(norm.str.contains(rf"^{number}(?: {number})*$"))
    quiet = pl.col("stamp").is_not_null() | (stripped == "") | t.str.contains(r"^(?:avg-cpu:|Linux \S+ \()")
    rest = (df.join(pl.concat([*taken, cpu.select("line")]), on="line", how="anti")
            .filter(~quiet).get_column("line").to_list())  # fmt: skip
    if not parts:
        return None, rest
    frame = pl.concat(parts).sort("line", "order").drop("order")
    return frame.with_columns(gpu=pl.lit(None, pl.String)), rest


class _Disk:
    """What one smartctl / smart-log output said of its device."""

    def __init__(self, device: str | None) -> None:
        self.device = device
        self.health: str | None = None
        self.health_line = 0
        self.values: dict[str, tuple[float, int]] = {}
        self.failing: list[dict[str, Any]] = []
        self.touched = False

    def finding(self) -> Finding | None:
        reasons: list[str] = []
        severity = "warning"
        lines: list[int] = []
        failed = self.health is not None and self.health.rstrip("!").upper() not in ("PASSED", "OK")
        if failed:
            reasons.append(f"health {self.health}")
            severity, lines = "critical", [self.health_line]
        if self.failing:
            reasons += [f"{a['name']} {a['when_failed']}" for a in self.failing]
            severity = "critical" if failed else "error"
            lines += [a["line"] for a in self.failing]
        warning, line = self.values.get("critical_warning", (0.0, 0))
        bits = [name for i, name in enumerate(_WARNING_BITS) if (to_int(warning) or 0) >> i & 1]
        if warning:
            reasons.append(f"critical warning 0x{to_int(warning) or 0:02x} ({', '.join(bits) or 'reserved bits'})")
            severity, lines = ("critical" if failed else "error"), lines + [line]
        for metric, label, level in _COUNTED:
            value, line = self.values.get(metric, (0.0, 0))
            if value:
                reasons.append(f"{value:g} {label}")
                lines.append(line)
                if level == "error" and severity == "warning":
                    severity = "error"
        if not reasons:
            return None
        where = self.health_line or min(lines)
        detail = {"device": self.device, "health": self.health, "failing": self.failing or None,
                  "critical_warning_bits": bits or None,
                  **{k: v for k, (v, _) in self.values.items()}}  # fmt: skip
        return Finding(where, "disk.smart", severity, f"{self.device or 'disk'}: {'; '.join(reasons)}",
                       detail=detail, samples=lines)  # fmt: skip


def _nvme_value(text: str) -> float | None:
    """An NVMe field's number: ``0x04``, ``100%``, ``4,804``, ``42 C (315 Kelvin)``, ``28 Celsius``."""
    first = text.split()[0] if text.split() else ""
    return number(first)


def _numbers(cells: list[str]) -> bool:
    return all(re.fullmatch(r"-?\d+(?:[.,]\d+)?", c) for c in cells)


def _iostat(n: int, row: list[str], columns: list[str], ts: datetime | None) -> list[Reading]:
    """The samples of one iostat device row (sysstat prints a comma as decimal mark in some locales)."""
    device, values = row[0], dict(zip(columns, (float(c.replace(",", ".")) for c in row[1:]), strict=True))
    out = [Reading(n, metric, values[col], _unit(metric), device=device, ts=ts)
           for col, metric in _IOSTAT.items() if col in values]  # fmt: skip
    if "await" not in values and {"r_await", "w_await", "r/s", "w/s"} <= set(values):
        ops = values["r/s"] + values["w/s"]
        mean = (values["r/s"] * values["r_await"] + values["w/s"] * values["w_await"]) / ops if ops else 0.0
        out.append(Reading(n, "await_ms", round(mean, 3), "ms", device=device, ts=ts))
    return out


def _unit(metric: str) -> str | None:
    return "ms" if metric.endswith("_ms") else "%" if metric.endswith("_pct") else "1/s" if metric.endswith("_per_s") else None
