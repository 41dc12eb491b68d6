"""BMC sensor snapshots: ``ipmitool sensor``, ``ipmitool sdr`` / ``sdr list`` / ``sdr elist``, FreeIPMI ``ipmi-sensors``.

Producers and versions seen (tests/golden/sensors, PROVENANCE.md):

- ``ipmitool sensor`` (1.8.x): ``CPU1 Temp | 33.000 | degrees C | ok | 5.000 | 5.000 | 10.000 | 95.000 |
  100.000 | 100.000`` — name, reading, unit, status, then the lower non-recoverable, lower critical, lower
  non-critical, upper non-critical, upper critical and upper non-recoverable thresholds (``na`` when the BMC
  has none); discrete sensors print a hex state and ``discrete``.
- ``ipmitool sdr`` / ``sdr list [full]``: ``CPU1 Temp | 29 degrees C | ok`` (``no reading`` / ``ns``).
- ``ipmitool sdr elist``: ``PS2 Status | C9h | ok | 10.2 | Presence detected, Power Supply AC lost``.
- FreeIPMI ``ipmi-sensors`` (1.5-1.6): ``ID | Name | Type | Reading | Units | Event`` with the optional
  ``State`` column (``--output-sensor-state``) and threshold columns (``--output-sensor-thresholds``),
  ``N/A`` for no value, the event quoted (``'OK'``); the header names the columns; without it, what a
  row holds says which form it is. ``--comma-separated-output`` with its header too.

Output: ``samples`` (no time: a snapshot), device = the sensor's name, metric by unit: ``temperature_c``,
``fan_rpm``, ``voltage_v``, ``power_w``, ``current_a``. Events: a reading past its upper critical
threshold (at or above it) or below a fan's or a voltage's lower critical one, or a status the BMC marks
critical (ipmitool ``cr``/``nr``/``ucr``/``lcr``/``unr``/``lnr``, FreeIPMI ``Critical``): ``bmc.thermal``,
``bmc.fan``, ``bmc.power``, or the type's kind (``data/bmc_events.toml``); a discrete state the message
catalogs read (a PSU's ``Power Supply AC lost``) takes their kind. ``detail``: ``sensor``, ``reading``,
``unit``, ``status``, ``threshold`` (the one crossed), ``samples`` (``file:line`` of the reading),
``catalog``.

- ``ipmitool sdr -v`` / ``sdr get NAME`` / ``sensor get NAME``: verbose records (``Sensor ID : CPU Temp
  (0x1)`` then indented ``Key : value`` pairs: ``Sensor Reading : 24 (+/- 0) degrees C``, ``Status``, the
  thresholds, ``Upper critical`` or ``Upper Critical``), read with ``grammars/sensors.lark``, one record at
  a time (a record cut short reads as far as it goes; one the grammar rejects is ``unparsed``).

Why a split for the table forms: each is one line of ``|``-separated columns in a fixed order (a table of
numbers and words), read by a vectorized split; the verbose records have structure and get the grammar.

Example: ``Ambient_Temp | 46.000 | degrees C | ok | na | 5.000 | 7.000 | 37.000 | 40.000 | na`` →
a sample ``temperature_c`` 46 and a ``bmc.thermal`` event (46 ≥ the upper critical 40, though the
BMC says ``ok``).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl
from lark import Transformer
from lark.exceptions import LarkError

from ..grammar import parser
from ..reading.base import SourceResult
from . import bmc, telemetry

NAME = "sensors"
FORMS = (
    "ipmitool sensor [list] (1.8.x), thresholds, discrete states",
    "ipmitool sdr / sdr list [full|all]",
    "ipmitool sdr elist",
    "FreeIPMI ipmi-sensors, with State and threshold columns, | or comma separated",
    "ipmitool sdr -v / sdr get / sensor get (verbose records, grammars/sensors.lark)",
)

_NUM = r"-?\d+(?:\.\d+)?"
_SENSOR = rf"^[^|]+\| *(?:{_NUM}|na|0x[0-9a-fA-F]+) *\| *[^|]+\| *(?:ok|ns|nc|cr|nr|na|0x[0-9a-fA-F]+) *\|"
_SDR = rf"^[^|]+\| *(?:{_NUM} [^|]+|no reading|0x[0-9a-fA-F]+|disabled|Not Readable) *\| *(?:ok|ns|nc|cr|nr|lnc|unc|lcr|ucr|lnr|unr)\s*$"
_ELIST = r"^[^|]+\| *[0-9A-F]{2}h *\| *(?:ok|ns|nc|cr|nr|lnc|unc|lcr|ucr|lnr|unr) *\| *\d+\.\d+ *\|"
_FREEIPMI = r"^\s*\d+ *\| *[^|]+\|[^|]+\|[^|]+\|[^|]+\| *(?:'[^']*'|N/A)\s*$|^\s*\d+ *\|[^|]+\|[^|]+\| *(?:Nominal|Warning|Critical|N/A) *\|"
_FREEIPMI_HEADER = r"^\s*ID *[|,] *Name *[|,] *Type *[|,]"
_UNITS = {"degrees c": "temperature_c", "c": "temperature_c", "rpm": "fan_rpm", "volts": "voltage_v", "v": "voltage_v",
          "watts": "power_w", "w": "power_w", "amps": "current_a", "a": "current_a"}  # fmt: skip
_UNIT_OF = {"temperature_c": "C", "fan_rpm": "RPM", "voltage_v": "V", "power_w": "W", "current_a": "A"}
_KIND_OF = {"temperature_c": "bmc.thermal", "fan_rpm": "bmc.fan", "voltage_v": "bmc.power", "power_w": "bmc.power",
            "current_a": "bmc.power"}  # fmt: skip
_CRITICAL = {"cr": "error", "ucr": "error", "lcr": "error", "nr": "critical", "unr": "critical", "lnr": "critical",
             "Critical": "error", "Upper Critical": "error", "Lower Critical": "error",
             "Upper Non-Recoverable": "critical", "Lower Non-Recoverable": "critical"}  # fmt: skip
_VERBOSE = r"^Sensor ID\s*:"


def sniff(head: str) -> float:
    """1.0 when most of ``head``'s table lines are sensor lines of one of the forms."""
    lines = [line for line in head.splitlines()[:80] if "|" in line or re.match(_FREEIPMI_HEADER, line)]
    hits = sum(1 for line in lines if any(re.match(p, line) for p in (_SENSOR, _SDR, _ELIST, _FREEIPMI, _FREEIPMI_HEADER)))
    if re.search(r"(?m)^Sensor ID\s*: .*\n Entity ID\s*:", head):
        return 1.0
    if not lines:
        return 0.0
    return 1.0 if hits * 2 > len(lines) else 0.4 if hits >= 3 else 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse a sensor snapshot into ``samples`` and the events of sensors past a critical threshold."""
    del year, timezone, on_error, full  # a snapshot prints no time
    df, bad_utf8 = telemetry.numbered(data)
    header = df.filter(pl.col("text").str.contains(_FREEIPMI_HEADER)).head(1)
    sep = "," if header.height and "|" not in header["text"][0] else "|"
    names = [c.strip().lower() for c in header["text"][0].split(sep)] if header.height else None
    form = (
        pl.when(pl.col("text").str.contains(_ELIST)).then(pl.lit("elist"))
        .when(pl.col("text").str.contains(_SDR)).then(pl.lit("sdr"))
        .when(pl.col("text").str.contains(_FREEIPMI) | (pl.lit(names is not None) & pl.col("text").str.contains(r"^\s*\d+ *[|,]")
                                                       & (pl.col("line") > (header["line"][0] if header.height else 0))))
        .then(pl.lit("freeipmi"))
        .when(pl.col("text").str.contains(_SENSOR)).then(pl.lit("sensor"))
    )  # fmt: skip
    verbose, cut, in_records = _verbose(df.get_column("text").to_list())
    df = df.with_columns(form=pl.when(pl.col("line").is_in(list(in_records))).then(pl.lit("verbose")).otherwise(form),
                         f=pl.col("text").str.split(sep).list.eval(pl.element().str.strip_chars()))  # fmt: skip
    rows = pl.concat([_sensor(df.filter(pl.col("form") == "sensor")), _sdr(df.filter(pl.col("form") == "sdr")),
                      _elist(df.filter(pl.col("form") == "elist")),
                      _freeipmi(df.filter(pl.col("form") == "freeipmi"), names), verbose], how="vertical_relaxed").sort("line")  # fmt: skip
    rest = df.filter(pl.col("form").is_null() & (pl.col("text").str.strip_chars() != "")
                     & ~pl.col("text").str.contains(_FREEIPMI_HEADER))  # fmt: skip
    unparsed = pl.concat([telemetry.unparsed_frame(rest.filter(pl.col("text").str.contains(r"\|"))),
                          telemetry.unparsed_frame(df.filter(pl.col("line").is_in(cut)).select("line", "text"))])  # fmt: skip
    other = telemetry.unparsed_frame(rest.filter(~pl.col("text").str.contains(r"\|")), kind="other")
    events = _events(rows, file=file)
    frames = [f for f in (events, unparsed, other) if f.height]
    table = telemetry.events_frame(pl.concat(frames, how="diagonal_relaxed").sort("line") if frames else events,
                                   source=NAME, file=file, incident=incident, host=host)  # fmt: skip
    readings = rows.filter(pl.col("metric").is_not_null()).select(
        "line", ts=pl.lit(None, pl.Datetime("us", "UTC")), gpu=pl.lit(None, pl.String), device=pl.col("name"),
        metric="metric", value="value", unit=pl.col("metric").replace_strict(_UNIT_OF, default=None))  # fmt: skip
    samples = telemetry.samples_table(readings, source=NAME, file=file, incident=incident, host=host)
    return SourceResult(table, lines=df.height, records=rows.height + unparsed.height, unparsed=unparsed.height,
                        error=None, invalid_utf8_lines=bad_utf8, samples=samples)  # fmt: skip


_ROW = {"line": pl.Int64, "text": pl.String, "name": pl.String, "type": pl.String, "value": pl.Float64,
        "metric": pl.String, "status": pl.String, "state": pl.String, "lcr": pl.Float64, "ucr": pl.Float64}  # fmt: skip


def _number(e: pl.Expr) -> pl.Expr:
    return e.str.extract(rf"^({_NUM})$", 1).cast(pl.Float64, strict=False)


def _metric(unit: pl.Expr) -> pl.Expr:
    return unit.str.strip_chars().str.to_lowercase().replace_strict(_UNITS, default=None)


def _sensor(df: pl.DataFrame) -> pl.DataFrame:
    f = pl.col("f")
    return df.select("line", "text", name=f.list.get(0), type=pl.lit(None, pl.String), value=_number(f.list.get(1)),
                     metric=_metric(f.list.get(2)), status=f.list.get(3), state=pl.lit(None, pl.String),
                     lcr=_number(f.list.get(5, null_on_oob=True)), ucr=_number(f.list.get(8, null_on_oob=True)))  # fmt: skip


def _sdr(df: pl.DataFrame) -> pl.DataFrame:
    f = pl.col("f")
    reading = f.list.get(1)
    return df.select("line", "text", name=f.list.get(0), type=pl.lit(None, pl.String),
                     value=reading.str.extract(rf"^({_NUM}) ", 1).cast(pl.Float64, strict=False),
                     metric=_metric(reading.str.replace(rf"^{_NUM} ", "")), status=f.list.get(2),
                     state=pl.lit(None, pl.String), lcr=pl.lit(None, pl.Float64), ucr=pl.lit(None, pl.Float64))  # fmt: skip


def _elist(df: pl.DataFrame) -> pl.DataFrame:
    f = pl.col("f")
    reading = f.list.slice(4).list.join(" | ")
    return df.select("line", "text", name=f.list.get(0), type=pl.lit(None, pl.String),
                     value=reading.str.extract(rf"^({_NUM}) ", 1).cast(pl.Float64, strict=False),
                     metric=_metric(reading.str.extract(rf"^{_NUM} (.+)$", 1)), status=f.list.get(2),
                     state=pl.lit(None, pl.String), lcr=pl.lit(None, pl.Float64), ucr=pl.lit(None, pl.Float64))  # fmt: skip


def _freeipmi(df: pl.DataFrame, names: list[str] | None) -> pl.DataFrame:
    """Columns by the header's names; without a header, ``ID | Name | Type [| State] | Reading | Units | Event``
    (the State column is there when the fourth field is a state word)."""
    f = pl.col("f")
    if df.height == 0:
        return pl.DataFrame(schema=_ROW)
    if names:
        at = {name: i for i, name in enumerate(names)}

        def col(name: str) -> pl.Expr:
            return f.list.get(at[name], null_on_oob=True) if name in at else pl.lit(None, pl.String)

        reading, units, state = col("reading"), col("units"), col("state")
        lcr, ucr = col("lower c"), col("upper c")
    else:
        stated = f.list.get(3).is_in(["Nominal", "Warning", "Critical", "N/A"]) & (f.list.len() >= 7)
        shift = pl.when(stated).then(1).otherwise(0)
        reading, units = f.list.get(3 + shift), f.list.get(4 + shift)
        state = pl.when(stated).then(f.list.get(3))
        lcr = ucr = pl.lit(None, pl.String)
    return df.select("line", "text", name=f.list.get(1), type=f.list.get(2), value=_number(reading),
                     metric=_metric(units), status=pl.lit(None, pl.String), state=state.replace("N/A", None),
                     lcr=_number(lcr), ucr=_number(ucr))  # fmt: skip


def _events(rows: pl.DataFrame, *, file: str) -> pl.DataFrame:
    """A reading past its critical threshold, a status the BMC marks critical, a state the catalogs read."""
    if rows.height == 0:
        return pl.DataFrame(schema={"line": pl.Int64})
    read = bmc.catalog_reading(rows["text"])
    above = pl.col("ucr").is_not_null() & (pl.col("value") >= pl.col("ucr")) & (pl.col("metric") != "fan_rpm")
    below = pl.col("lcr").is_not_null() & (pl.col("value") <= pl.col("lcr")) & pl.col("metric").is_in(["fan_rpm", "voltage_v"])
    flagged = pl.coalesce(pl.col("status"), pl.col("state")).replace_strict(_CRITICAL, default=None)
    out = rows.with_row_index("i").join(read, on="i", how="left").with_columns(
        crossed=pl.when(above).then(pl.col("ucr")).when(below).then(pl.col("lcr")),
        flagged=flagged,
    ).filter(pl.col("crossed").is_not_null() | pl.col("flagged").is_not_null() | pl.col("cat_kind").is_not_null())
    if out.height == 0:
        return pl.DataFrame(schema={"line": pl.Int64})
    typed = bmc.bmc_kind(out["type"].fill_null(""), out["name"])
    out = out.with_columns(
        kind=pl.coalesce("cat_kind", pl.col("metric").replace_strict(_KIND_OF, default=None), typed),
        severity=pl.coalesce("flagged", pl.lit("error")),
        message=pl.col("text").str.strip_chars(),
        sensor="name", reading="value", unit=pl.col("metric").replace_strict(_UNIT_OF, default=None),
        threshold="crossed", status=pl.coalesce("status", "state"), catalog="catalog",
        samples=pl.when(pl.col("metric").is_not_null() & pl.col("value").is_not_null())
        .then(pl.concat_list(pl.concat_str(pl.lit(f"{file}:"), pl.col("line").cast(pl.String)))),
    )  # fmt: skip
    detail = telemetry.detail_json(out, ["sensor", "reading", "unit", "status", "threshold", "samples", "catalog"])
    return out.with_columns(detail=detail, ts=pl.lit(None, pl.Datetime("us", "UTC"))).select(
        "line", "ts", "kind", "severity", "message", "detail")


# ----------------------------------------------------------------------------------------- verbose records


class _Record(Transformer):  # type: ignore[type-arg]
    """A verbose record as ``{key: value}`` (keys lower-cased, ``sensor id`` first)."""

    def start(self, items: list[tuple[str, str]]) -> dict[str, str]:
        return dict(items)

    def head(self, items: list[Any]) -> tuple[str, str]:
        return "sensor id", str(items[1]).strip()

    def pair(self, items: list[Any]) -> tuple[str, str]:
        return str(items[0]).strip().lower(), str(items[1]).strip() if len(items) > 1 else ""


def _verbose(lines: list[str]) -> tuple[pl.DataFrame, list[int], set[int]]:
    """The rows of ``sdr -v`` / ``sdr get`` / ``sensor get`` records (``grammars/sensors.lark``), the first
    lines of the records the grammar rejects, and every line the records hold."""
    starts = [n for n, line in enumerate(lines) if re.match(_VERBOSE, line)]
    if not starts:
        return pl.DataFrame(schema=_ROW), [], set()
    lark = parser("sensors", _Record)
    rows, cut, held = [], [], set()
    for start in starts:
        end = start + 1
        while end < len(lines) and lines[end].startswith(" ") and ":" in lines[end]:
            end += 1
        held.update(range(start + 1, end + 1))
        try:
            record = lark.parse("\n".join(lines[start:end]) + "\n")
        except LarkError:
            cut.append(start + 1)
            continue
        rows.append(_verbose_row(start + 1, "\n".join(lines[start:end]), record))
    return pl.DataFrame(rows, schema=_ROW, orient="row"), cut, held


def _verbose_row(line: int, text: str, record: dict[str, str]) -> tuple[Any, ...]:
    reading = re.match(rf"({_NUM})(?: \(\+/- [\d.]+\))? (.+)$", record.get("sensor reading", ""))
    kind = next((v for k, v in record.items() if k.startswith("sensor type")), "")

    def threshold(name: str) -> float | None:
        value = record.get(name, "")
        return float(value) if re.fullmatch(_NUM, value) else None

    return (line, text, re.sub(r" \(0x[0-9a-fA-F]+\)$", "", record["sensor id"]), re.sub(r" \(0x[0-9a-fA-F]+\)$", "", kind),
            float(reading[1]) if reading else None, _UNITS.get(reading[2].strip().lower()) if reading else None,
            record.get("status"), None, threshold("lower critical"), threshold("upper critical"))  # fmt: skip
