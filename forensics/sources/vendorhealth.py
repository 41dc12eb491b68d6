"""Vendor health tools: HPE ``hpasmcli`` (``show powersupply``, ``show iml``), ``hplog -v``/``-p``; PSU PMBus
readouts of Supermicro ``ipmicfg -pminfo`` / ``SMCIPMITool … pminfo``.

Producers and versions seen (tests/golden/vendorhealth, PROVENANCE.md; the HPE layouts as lausser/check_hpasm
4.10 reads them in ``plugins-scripts/HP/Proliant/Component/*/CLI.pm``):

- ``hpasmcli -s "show powersupply"`` or ``hpasmcli> SHOW POWERSUPPLY`` (hp-health 8-10): a block per bay,
  ``Power supply #2`` then tab-indented ``Present  : Yes``, ``Redundant: No``, ``Condition: FAILED``,
  ``Hotplug  : Supported``, ``Power    : 35 Watts`` (no ``Power`` line when the supply gives none), or
  ``Power Supply not present``.
- ``hplog -p``: ``ID     TYPE        LOCATION      STATUS  REDUNDANT`` then `` 1  Standard     Pwr. Supply
  Bay Failed     No`` per bay.
- ``hplog -v`` (the Integrated Management Log): ``ID   Severity       Initial Time      Update Time       Count``
  then per record ``0139 Critical       18:50  07/19/2022 18:50  07/19/2022 0001`` and ``LOG: <description>``
  (the initial time is the event's; the update time and the count say how often it recurred).
- ``ipmicfg -pminfo`` / ``SMCIPMITool <bmc> … pminfo`` (Supermicro): per module an optional ``[SlaveAddress =
  78h] [Module 1]``, then `` Item | Value`` rows: ``Status | [STATUS OK] (00h)`` (or ``OK``, or ``OFF (28 4A)``:
  the PMBus STATUS_WORD in hex), ``Input Voltage | 227.2 V``, ``Main Output Current | 9.37 A``, ``Temperature 1 |
  33C/91F``, ``Fan 1 | 3968 RPM``, ``Input Power | 126 W``, serial and revision rows.
- ``hpasmcli -s "show fans"`` (``Fan  Location  Present Speed  of max  Redundant  Partner  Hot-pluggable``, a
  rule, then ``#1   PROCESSOR_ZONE  Yes     NORMAL  22%     Yes        2        Yes``; ``FAILED`` in the speed
  column for a failed fan, the layout check_hpasm's ``FanSubsystem/CLI.pm`` reads) and ``show temp`` (``Sensor
  Location  Temp  Threshold``, then ``#2        PROCESSOR_ZONE       40C/104F   70C/158F``, ``-`` for a sensor
  not installed), alone or in one ``hpasmcli -s 'show fans; show powersupply; show temp'``.
- ``hpasmcli -s "show iml"`` (the same log): ``Event: 31 Added: 09/22/2011 05:11`` then
  ``CRITICAL: POST Messages - POST Error: 1615-Power Supply Failure ...`` (severity, class, description),
  an all-zero ``00/00/0000 00:00`` stamp when the ROM logged it before the clock was set.

Output: a snapshot's readings as ``samples`` (no time: ``power_w`` per supply; a PMBus module's
``voltage_v``, ``current_a``, ``temperature_c``, ``fan_rpm``, ``power_w``, the device naming the module and
the reading, ``Module 1 Input Voltage``; ``show fans``'s ``fan_pct`` per ``Fan #1 SYSTEM``, ``show temp``'s
``temperature_c`` per ``Sensor #2 PROCESSOR_ZONE``) and an event per supply whose condition or status is not
``Ok``/``Normal`` (``bmc.psu``; a PMBus status word's set bits named by the PMBus specification in
``detail.pmbus``; what a message catalog reads it as,
``data/messages/vendor.toml``); an event per IML record, its kind the catalogs' reading (a POST 1615 is
``bmc.psu``, an "Uncorrectable PCI Express Error" ``bmc.pcie``), else its class's and words' (the BMC
rules of ``data/bmc_events.toml``). ``detail``: ``psu``, ``present``, ``redundant``, ``condition`` /
``status``, ``power_w``; IML ``id``, ``class``, ``state`` (the IML severity), ``count`` and ``updated``
(``hplog -v``), ``catalog``, ``ts_from``. A fan reading ``FAILED`` is a ``bmc.fan`` event (``error``), a
temperature at or above its sensor's threshold a ``bmc.thermal`` one (``warning``).
Severity: the IML's own (``CRITICAL``/``Critical`` → error, or critical when the wording says so, ``CAUTION`` → warning,
``INFORMATIONAL``/``REPAIRED`` → info), a failed supply ``critical`` (another condition ``warning``).

Time: an IML stamp is the server's wall clock without a zone (read in the incident's timezone, like
``dmesg -T``); snapshots carry none.

Why no grammar: each form is a few fixed ``Key : value`` or column layouts that one regular expression
per line reads; the words inside are what the message catalogs read.

Example: ``Power supply #2`` / ``Condition: FAILED`` / ``Power    : 35 Watts`` → a ``bmc.psu`` event
(``critical``, catalog ``vendor.hpe_hpasmcli_psu_condition_failed``) and a sample ``power_w`` 35.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from ..reading import envelope
from ..reading.base import SourceResult
from ..reading.fields import to_float, to_int
from ..text import split_lines
from . import bmc, telemetry

NAME = "vendorhealth"
FORMS = (
    "hpasmcli show powersupply (-s or at its prompt): Power supply #N blocks",
    "hplog -p: ID TYPE LOCATION STATUS REDUNDANT table",
    "hpasmcli show fans / show temp tables (-s, one command or several): #N LOCATION rows",
    "hpasmcli show iml: Event: N Added: date time / SEVERITY: Class - Description",
    "hplog -v: ID Severity Initial Time Update Time Count / LOG: description",
    "ipmicfg -pminfo / SMCIPMITool pminfo (Supermicro PSU PMBus readout): Item | Value rows per module",
)
_PSU = re.compile(r"^\s*Power supply #(?P<psu>\d+)\s*$")
_PSU_FIELD = re.compile(r"^\s+(?P<key>Present|Redundant|Condition|Hotplug|Power)\s*:\s*(?P<value>.*?)\s*$")
_PSU_ABSENT = re.compile(r"^\s+Power Supply not present\s*$")
_HPLOG_HEADER = re.compile(r"^\s*ID\s+TYPE\s+LOCATION\s+STATUS\s+REDUNDANT\s*$")
_HPLOG_ROW = re.compile(r"^\s*(?P<psu>\d+)\s+(?P<type>\S+)\s+(?P<location>.+?)\s+(?P<status>\S+)\s+(?P<redundant>Yes|No|N/A)\s*$")
_IML_HEAD = re.compile(r"^\s*Event:\s+(?P<id>\d+)\s+\w+:\s+(?P<date>\d\d/\d\d/\d{4})\s+(?P<time>\d\d:\d\d)\s*$")
_HPLOG_V = re.compile(r"^\s*(?P<id>[0-9A-Fa-f]{4})\s+(?P<severity>[A-Z][a-z]+)\s+(?P<time>\d\d:\d\d)\s+(?P<date>\d\d/\d\d/\d{4})"
                      r"\s+(?P<utime>\d\d:\d\d)\s+(?P<udate>\d\d/\d\d/\d{4})\s+(?P<count>\d+)\s*$")
_HPLOG_V_LOG = re.compile(r"^\s*LOG:\s*(?P<text>.*?)\s*$")
_HPLOG_V_HEADER = re.compile(r"^\s*ID\s+Severity\s+Initial Time\s+Update Time\s+Count\s*$")
_FAN_HEADER = re.compile(r"^\s*Fan\s+Location\s+Present\s+Speed\s+of max\s+Redundant\s+Partner\s+Hot-pluggable\s*$")
#: A ``show fans`` row; the location may run into the Present column (``SCSI_BACKPLANE_ZONEYes``, check_hpasm).
_FAN_ROW = re.compile(r"^\s*#(?P<n>\d+)\s+(?P<location>[\w#/-]+?)\s*(?P<present>Yes|No|N/A|FAILED)\s+(?P<speed>\S+)\s+"
                      r"(?P<pct>\d+%?|N/A|-|FAILED)\s+(?P<redundant>\S+)\s+(?P<partner>\S+)\s+(?P<hotplug>\S+)\s*$")
_TEMP_HEADER = re.compile(r"^\s*Sensor\s+Location\s+Temp\s+Threshold\s*$")
_TEMP_ROW = re.compile(r"^\s*#(?P<n>\d+)\s+(?P<location>[\w#/-]+)\s+(?:(?P<c>-?\d+)C/-?\d+F|-)\s+(?:(?P<limit>\d+)C/\d+F|-)\s*$")
_TABLE_RULE = re.compile(r"^\s*-{3,}(?:\s+-{3,})+\s*$")
_PM_MODULE = re.compile(r"^\s*\[SlaveAddress = (?P<addr>\w+)\]\s*\[Module (?P<module>\d+)\]\s*$")
_PM_HEADER = re.compile(r"^\s*Item\s+\|\s+Value\s*$")
_PM_ROW = re.compile(r"^\s*(?P<key>[A-Za-z][\w ./()+-]*?)\s*\|\s*(?P<value>.*?)\s*$")
_PM_RULE = re.compile(r"^\s*-{3,}\s*\|\s*-{3,}\s*$")
#: What a PMBus readout's value is, by its row: (pattern of the row's name, metric, pattern of the number).
_PM_METRICS = ((r"(?i)voltage", "voltage_v", r"^(-?\d+(?:\.\d+)?)\s*V$"), (r"(?i)current", "current_a", r"^(-?\d+(?:\.\d+)?)\s*A$"),
               (r"(?i)power", "power_w", r"^(-?\d+(?:\.\d+)?)\s*W$"), (r"(?i)temperature", "temperature_c", r"^(-?\d+(?:\.\d+)?)C\b"),
               (r"(?i)^fan", "fan_rpm", r"^(-?\d+(?:\.\d+)?)\s*RPM$"))  # fmt: skip
#: PMBus STATUS_WORD bits, high to low (PMBus Power System Management Protocol Specification Part II rev. 1.2,
#: sections 17.1 STATUS_BYTE and 17.2 STATUS_WORD).
_PMBUS_BITS = ("VOUT", "IOUT/POUT", "INPUT", "MFR_SPECIFIC", "POWER_GOOD#", "FANS", "OTHER", "UNKNOWN",
               "BUSY", "OFF", "VOUT_OV_FAULT", "IOUT_OC_FAULT", "VIN_UV_FAULT", "TEMPERATURE", "CML", "NONE_OF_THE_ABOVE")
_IML_BODY = re.compile(r"^\s*(?P<severity>[A-Z]+):\s+(?P<cls>.*?)\s+-\s+(?P<text>.*?)\s*$")
#: An IML severity as the BMC state it amounts to (the [state] table of ``data/bmc_events.toml``).
_IML_STATE = {"CRITICAL": "Critical", "CAUTION": "Warning", "INFORMATIONAL": "OK", "INFO": "OK", "REPAIRED": "OK",
              "INFORMATION": "OK", "UNKNOWN": None}
_OK = {"ok", "normal", "n/a", "nonexistent", "absent", "-"}
#: The kind of a ``show fans`` / ``show temp`` row's event when no catalog row reads it.
_FORM_KIND = {"fan": "bmc.fan", "temp": "bmc.thermal"}


def sniff(head: str) -> float:
    """1.0 when ``head`` holds a power-supply block, an ``hplog -p`` header or an IML record."""
    lines = head.splitlines()[:400]
    for i, line in enumerate(lines):
        if _HPLOG_HEADER.match(line) or _HPLOG_V_HEADER.match(line) or _FAN_HEADER.match(line) or _TEMP_HEADER.match(line):
            return 1.0
        if _HPLOG_V.match(line) and i + 1 < len(lines) and _HPLOG_V_LOG.match(lines[i + 1]):
            return 1.0
        if _PM_HEADER.match(line) and i + 2 < len(lines) and _PM_RULE.match(lines[i + 1]):
            return 1.0
        if _PSU.match(line) and any(_PSU_FIELD.match(n) or _PSU_ABSENT.match(n) for n in lines[i + 1 : i + 3]):
            return 1.0
        if _IML_HEAD.match(line) and i + 1 < len(lines) and _IML_BODY.match(lines[i + 1]):
            return 1.0
    return 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse a vendor health tool's output into events (failed supplies, IML records) and samples."""
    del year, on_error, full  # IML stamps carry their year; nothing is strict here
    series, bad_utf8 = split_lines(data)
    lines = [line or "" for line in series.to_list()]
    records: list[dict[str, Any]] = []
    readings: list[dict[str, Any]] = []
    claimed: set[int] = set()
    i = modules = 0
    while i < len(lines):
        read = _record_at(lines, i, modules)
        if read is None:
            if (_HPLOG_HEADER.match(lines[i]) or _HPLOG_V_HEADER.match(lines[i]) or _FAN_HEADER.match(lines[i])
                    or _TEMP_HEADER.match(lines[i]) or _TABLE_RULE.match(lines[i]) or re.match(r"^\s*-{20,}\s*$", lines[i])):
                claimed.add(i + 1)
            i += 1
            continue
        end, record, found = read
        claimed.update(range(i + 1, end + 1))
        records.append(record)
        readings.extend(found)
        modules += record["form"] == "pmbus"
        i = end
    frame = _finish(pl.DataFrame(records, schema=_RECORD, orient="row"), timezone=timezone)
    rest = pl.DataFrame({"text": series}).with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64)) \
        .filter(~pl.col("line").is_in(sorted(claimed)) & (pl.col("text").str.strip_chars() != ""))  # fmt: skip
    other = telemetry.unparsed_frame(rest, kind="other")
    rows = pl.concat([frame, other], how="diagonal_relaxed").sort("line") if other.height else frame
    events = telemetry.events_frame(rows.filter(pl.col("kind").is_not_null()), source=NAME, file=file,
                                         incident=incident, host=host)  # fmt: skip
    read = pl.DataFrame(readings, schema={"line": pl.Int64, "device": pl.String, "metric": pl.String,
                                          "value": pl.Float64, "unit": pl.String}, orient="row")  # fmt: skip
    samples = telemetry.samples_table(read.with_columns(ts=pl.lit(None, pl.Datetime("us", "UTC")),
                                                             gpu=pl.lit(None, pl.String)),
                                           source=NAME, file=file, incident=incident, host=host)  # fmt: skip
    return SourceResult(events, lines=len(lines), records=len(records) + other.height, unparsed=0, error=None,
                        invalid_utf8_lines=bad_utf8, samples=samples)  # fmt: skip


def _record_at(lines: list[str], i: int, modules: int) -> tuple[int, dict[str, Any], list[dict[str, Any]]] | None:
    """The record starting at line index ``i`` (its end index, the record, its readings), or None.
    ``modules`` counts the PMBus modules before it (naming one printed without its header)."""
    text, after = lines[i], lines[i + 1] if i + 1 < len(lines) else ""
    if m := _PSU.match(text):
        return _psu_block(lines, i, m["psu"])
    if (module := _PM_MODULE.match(text)) or (_PM_HEADER.match(text) and _PM_RULE.match(after)):
        return _pmbus_block(lines, i, f"Module {module['module']}" if module else f"Module {modules + 1}")
    if (m := _HPLOG_V.match(text)) and (b := _HPLOG_V_LOG.match(after)):
        return i + 2, _hplog_record(i + 1, m, b), []
    if m := _FAN_ROW.match(text):
        return i + 1, *_fan_row(i + 1, m)
    if m := _TEMP_ROW.match(text):
        return i + 1, *_temp_row(i + 1, m)
    if m := _HPLOG_ROW.match(text):
        fields = {"Condition": m["status"], "Redundant": m["redundant"], "Location": m["location"].strip()}
        return i + 1, _psu_record(i + 1, m["psu"], fields, [text]), []
    if (m := _IML_HEAD.match(text)) and (b := _IML_BODY.match(after)):
        return i + 2, _iml_record(i + 1, m, b), []
    return None


def _psu_block(lines: list[str], i: int, psu: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """``Power supply #N`` and its indented fields."""
    j, fields = i + 1, {}
    while j < len(lines) and (f := _PSU_FIELD.match(lines[j]) or _PSU_ABSENT.match(lines[j])):
        fields[f.groupdict().get("key", "Present")] = f.groupdict().get("value", "No")
        j += 1
    watts = re.match(r"(\d+(?:\.\d+)?)\s*Watts", fields.get("Power", ""))
    found = [{"line": i + 1, "device": f"Power supply #{psu}", "metric": "power_w", "value": to_float(watts[1]),
              "unit": "W"}] if watts else []  # fmt: skip
    return j, _psu_record(i + 1, psu, fields, lines[i:j]), found


def _pmbus_block(lines: list[str], i: int, module: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """A PMBus module: its optional ``[SlaveAddress …] [Module N]`` line, then ``Item | Value`` rows."""
    j = i + 1 if _PM_MODULE.match(lines[i]) else i
    rows: list[tuple[int, str, str]] = []
    row: re.Match[str] | None = None
    while j < len(lines) and (_PM_RULE.match(lines[j]) or (row := _PM_ROW.match(lines[j]))):
        if row is not None and not _PM_HEADER.match(lines[j]) and not _PM_RULE.match(lines[j]):
            rows.append((j + 1, row["key"], row["value"]))
        j, row = j + 1, None
    return j, _pmbus_record(i + 1, module, rows), _pmbus_readings(module, rows)


def _fan_row(line: int, m: re.Match[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A ``show fans`` row: its share of full speed as ``fan_pct``; a fault (``bmc.fan``, ``error``) when its
    speed or presence reads ``FAILED`` (check_hpasm's reading of the layout: FAILED in the speed column)."""
    failed = "FAILED" in (m["speed"].upper(), m["present"].upper(), m["pct"].upper())
    pct = re.match(r"(\d+)%?$", m["pct"])
    found = [{"line": line, "device": f"Fan #{m['n']} {m['location']}", "metric": "fan_pct", "value": float(pct[1]),
              "unit": "%"}] if pct and m["present"] == "Yes" else []  # fmt: skip
    record = {"line": line, "text": m.string.strip(), "form": "fan", "id": m["n"], "stamp": None, "cls": None,
              "state": None, "psu": None, "present": m["present"], "redundant": m["redundant"], "condition": m["speed"],
              "location": m["location"], "power_w": None, "fault": failed, "count": None, "updated": None,
              "pmbus": None, "level": "error"}  # fmt: skip
    return record, found


def _temp_row(line: int, m: re.Match[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A ``show temp`` row: its reading as ``temperature_c`` (``-``: a sensor not installed, no reading); a fault
    (``bmc.thermal``, ``warning``) when the reading is at or above the sensor's threshold."""
    c, limit = (float(m[k]) if m[k] is not None else None for k in ("c", "limit"))
    found = [{"line": line, "device": f"Sensor #{m['n']} {m['location']}", "metric": "temperature_c", "value": c,
              "unit": "C"}] if c is not None else []  # fmt: skip
    record = {"line": line, "text": m.string.strip(), "form": "temp", "id": m["n"], "stamp": None, "cls": None,
              "state": None, "psu": None, "present": None, "redundant": None,
              "condition": f"{c:g} C at or above its threshold {limit:g} C" if c is not None and limit else None,
              "location": m["location"], "power_w": None, "fault": c is not None and limit is not None and c >= limit,
              "count": None, "updated": None, "pmbus": None, "level": "warning"}  # fmt: skip
    return record, found


_RECORD = {"line": pl.Int64, "text": pl.String, "form": pl.String, "id": pl.String, "stamp": pl.String,
           "cls": pl.String, "state": pl.String, "psu": pl.String, "present": pl.String, "redundant": pl.String,
           "condition": pl.String, "location": pl.String, "power_w": pl.Float64, "fault": pl.Boolean,
           "count": pl.Int64, "updated": pl.String, "pmbus": pl.String, "level": pl.String}  # fmt: skip


def _psu_record(line: int, psu: str, f: dict[str, str], printed: list[str]) -> dict[str, Any]:
    """A supply's block or table row; its text is the printed block joined (``Power supply #2 | Present: Yes |
    Condition: FAILED | …``) or the printed row, which the catalogs read."""
    condition = f.get("Condition")
    watts = re.match(r"(\d+(?:\.\d+)?)", f.get("Power", ""))
    return {"line": line, "text": " | ".join(re.sub(r"\s*:\s*", ": ", p.strip()) for p in printed if p.strip()),
            "form": "psu", "id": None, "stamp": None, "cls": None, "state": None, "psu": psu,
            "present": f.get("Present"), "redundant": f.get("Redundant"), "condition": condition,
            "location": f.get("Location"), "power_w": to_float(watts[1]) if watts else None,
            "fault": condition is not None and condition.lower() not in _OK, "count": None, "updated": None,
            "pmbus": None, "level": None}  # fmt: skip


def _iml_record(line: int, head: re.Match[str], body: re.Match[str]) -> dict[str, Any]:
    month, day, year = head["date"].split("/")
    stamp = None if year == "0000" else f"{year}-{month}-{day}T{head['time']}:00"
    return {"line": line, "text": body["text"], "form": "iml", "id": head["id"], "stamp": stamp, "cls": body["cls"],
            "state": body["severity"], "psu": None, "present": None, "redundant": None, "condition": None,
            "location": None, "power_w": None, "fault": True, "count": None, "updated": None, "pmbus": None,
            "level": None}  # fmt: skip


def _pmbus_record(line: int, module: str, rows: list[tuple[int, str, str]]) -> dict[str, Any]:
    """A PMBus module's status: a fault unless it says OK; its status word's set bits go to ``pmbus``."""
    status = next((v for _, k, v in rows if k == "Status"), None)
    word = re.search(r"\(([0-9A-Fa-f]{2})\s?([0-9A-Fa-f]{2})?h?\)", status or "")
    bits = None
    if word and word[2]:  # a two-byte STATUS_WORD; one byte is the STATUS_BYTE (the low half)
        value = int(word[1] + word[2], 16)
        bits = ",".join(name for i, name in enumerate(_PMBUS_BITS) if value & (1 << (15 - i)))
    elif word:
        value = int(word[1], 16)
        bits = ",".join(name for i, name in enumerate(_PMBUS_BITS[8:]) if value & (1 << (7 - i)))
    ok = status is not None and re.search(r"(?i)\bOK\b", status) is not None
    return {"line": line, "text": f"{module} | Status | {status}" if status else module, "form": "pmbus", "id": None,
            "stamp": None, "cls": None, "state": None, "psu": module, "present": None, "redundant": None,
            "condition": status, "location": None, "power_w": None, "fault": status is not None and not ok,
            "count": None, "updated": None, "pmbus": bits or None, "level": None}  # fmt: skip


def _pmbus_readings(module: str, rows: list[tuple[int, str, str]]) -> list[dict[str, Any]]:
    out = []
    for line, key, value in rows:
        for name, metric, number in _PM_METRICS:
            if re.search(name, key) and (m := re.search(number, value)):
                out.append({"line": line, "device": f"{module} {key}", "metric": metric, "value": to_float(m[1]),
                            "unit": {"voltage_v": "V", "current_a": "A", "power_w": "W", "temperature_c": "C",
                                     "fan_rpm": "RPM"}[metric]})  # fmt: skip
                break
    return out


def _hplog_record(line: int, head: re.Match[str], log: re.Match[str]) -> dict[str, Any]:
    month, day, year = head["date"].split("/")
    return {"line": line, "text": log["text"], "form": "iml", "id": head["id"], "stamp": f"{year}-{month}-{day}T{head['time']}:00",
            "cls": None, "state": head["severity"].upper(), "psu": None, "present": None, "redundant": None,
            "condition": None, "location": None, "power_w": None, "fault": True, "count": to_int(head["count"]),
            "updated": f"{head['udate']} {head['utime']}", "pmbus": None, "level": None}  # fmt: skip


def _finish(records: pl.DataFrame, *, timezone: str | None) -> pl.DataFrame:
    """Events of the records that are faults (every IML record; a supply not ``Ok``)."""
    records = records.filter(pl.col("fault"))
    if records.height == 0:
        return pl.DataFrame(schema={"line": pl.Int64, "kind": pl.String})
    ts, how = envelope.to_utc(pl.col("stamp"), pl.lit("iso"), year=None, timezone=timezone)
    read = bmc.catalog_reading(records["text"])
    state = records["state"].replace_strict(_IML_STATE, default=None)
    psu = records["form"].is_in(["psu", "pmbus"])
    kind = bmc.bmc_kind(pl.Series([None] * records.height, dtype=pl.String), records["cls"], records["text"])
    out = records.with_row_index("i").join(read, on="i", how="left").with_columns(
        ts=ts, ts_from=pl.when(pl.col("stamp").is_not_null()).then(how),
        kind=pl.coalesce("cat_kind", pl.when(pl.Series(psu)).then(pl.lit("bmc.psu")),
                         pl.col("form").replace_strict(_FORM_KIND, default=None), pl.Series(kind)),
        severity=pl.when(pl.col("level").is_not_null()).then(pl.col("level")).when(pl.Series(psu)).then(
            pl.when(pl.col("condition").str.contains(r"(?i)^(?:failed|off)\b")).then(pl.lit("critical")).otherwise(pl.lit("warning"))
        ).otherwise(
            bmc.severity(records["text"], state=state)),
        message=pl.col("text"), state=pl.col("state"), cls=pl.col("cls"),
    )  # fmt: skip
    detail = telemetry.detail_json(out.rename({"cls": "class"}),
                                        ["id", "class", "state", "psu", "present", "redundant", "condition",
                                         "location", "power_w", "count", "updated", "pmbus", "catalog", "ts_from"])  # fmt: skip
    return out.with_columns(detail=detail).select("line", "ts", "kind", "severity", "message", "detail")
