"""BMC event logs: ``ipmitool sel list`` / ``sel elist``, FreeIPMI ``ipmi-sel``, Redfish ``LogEntry`` JSON.

Producers and versions seen (tests/golden/sel, PROVENANCE.md):

- ``ipmitool sel list`` and ``sel elist`` (1.8.x): ``   1a | 03/14/2023 | 02:11:45 | Power Supply #0x51 |
  Failure detected | Asserted``, the sensor column holding the sensor type then the SDR name (``elist``) or
  number (``list``); ``Pre-Init`` records with no time; threshold records ending ``| Reading 96 >
  Threshold 95 degrees C`` (with or without the ``Asserted`` column, which 1.8.12-1.8.17 printed only for
  discrete events).
- FreeIPMI ``ipmi-sel`` (1.5-1.6): ``ID | Date | Time | Name | Type [| State] [| Event Direction] | Event``,
  dates ``Jul-20-2017`` or ``PostInit``; with or without its header line.
- Redfish ``LogEntry`` collections and single entries (DMTF schema v1_3 to v1_19: iDRAC ``Logs/Sel`` and
  ``LogServices/Sel``, iLO, Supermicro, OpenBMC/HGX ``EventLog``), pretty or compact, ``SensorType`` and
  ``EntryCode`` plain or as iDRAC 7/8's ``[{"Member": …}]``; a cut-off or pasted excerpt of one is read
  entry by entry.

Output: one event per record. Kinds: the message catalogs' reading (``data/messages/ipmi.toml``,
``vendor.toml``: a failed PSU is ``bmc.psu``, an uncorrectable ECC ``bmc.memory``…), else the sensor type's
(``data/bmc_events.toml``): ``bmc.psu``, ``bmc.power``, ``bmc.thermal``, ``bmc.fan``, ``bmc.memory``,
``bmc.pcie``, ``bmc.cpu``, ``bmc.drive``, ``bmc.gpu`` (a sensor named for a GPU), ``bmc.event``.
``detail``: ``id``, ``sensor``, ``type`` (FreeIPMI, Redfish), ``event``, ``asserted`` (false for a
deasserted record), ``state`` (FreeIPMI's State, Redfish's Severity), ``reading`` and ``threshold``,
``dimm`` (a memory record's module), ``gpu_index``, ``catalog``, ``ts_from``. Severity: ``info`` when
deasserted, else the graver of the BMC's own state and the wording.

Time: the SEL prints the BMC's wall clock without a zone: read in the incident's timezone, like
``dmesg -T`` (``ts_from`` ``local``, or ``assumed`` UTC when none is known). Redfish's ``Created`` carries
its offset (``printed``).

Why no grammar: a SEL record is one line of ``|``-separated columns in an order each tool fixes (a
table), so a vectorized split reads a million records in one pass; the words inside the columns are what
the message catalogs read. JSON is read with the json module.

Example: ``  1a | 03/14/2023 | 02:11:45 | Power Supply #0x51 | Failure detected | Asserted`` → ``bmc.psu``,
severity ``critical``, ``detail.catalog`` ``ipmi.psu_failure``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl

from ..reading.base import SourceResult
from . import bmc, telemetry

NAME = "sel"
FORMS = (
    "ipmitool sel list / sel elist (1.8.x), Pre-Init records, threshold readings",
    "FreeIPMI ipmi-sel, with or without header, State and Event Direction columns",
    "ipmitool sel get / sel list -v / sel elist -v records (SEL Record ID : ... blocks), OEM-decoded or not",
    "Redfish LogEntry JSON (iDRAC Sel/Lclog, iLO, Supermicro, OpenBMC/HGX EventLog), whole or excerpted",
)

_IPMITOOL = r"^\s*[0-9a-fA-F]{1,8} +\| *(?:\d\d/\d\d/\d{4}|Pre-Init) *\| *[^|]*\|[^|]+\|"
_FREEIPMI = r"^\s*\d+ *\| *(?:[A-Z][a-z]{2}-\d\d-\d{4}|PostInit|N/A) *\| *[^|]*\|[^|]+\|[^|]+\|"
_FREEIPMI_HEADER = r"^\s*ID *\| *Date *\| *Time *\| *Name *\| *Type *\|"
_REDFISH = re.compile(r'"@odata\.type"\s*:\s*"#LogEntry\.|"EntryType"\s*:\s*"(?:SEL|Event|Oem)"')
_DIMM = r"(?i)((?:CPU|P)\s*\d+[\s_-]*)?(DIMM[\s_#-]*[A-Z]?\d*[A-Z]?\d*)"
_READING = r"Reading ([-\d.]+) *[<>] *Threshold ([-\d.]+)"


def sniff(head: str) -> float:
    """1.0 when ``head`` opens with SEL records (most of its first table lines), holds a verbose record or a
    Redfish LogEntry."""
    if _REDFISH.search(head[:65536]):
        return 1.0
    if re.search(r"(?m)^\s*SEL Record ID\s*:\s*[0-9a-fA-F]+\s*$", head) and re.search(
            r"(?m)^\s*(?:Event Direction|Sensor Type)\s*:", head):  # fmt: skip
        return 1.0
    lines = [line for line in head.splitlines()[:60] if "|" in line]
    if not lines:
        return 0.0
    sel = sum(1 for line in lines if re.match(_IPMITOOL, line) or re.match(_FREEIPMI, line) or re.match(_FREEIPMI_HEADER, line))
    return 1.0 if sel * 2 > len(lines) else 0.5 if sel else 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse a BMC event log into events (one per record)."""
    del year, on_error, full  # every SEL stamp carries its year; nothing is strict here
    df, bad_utf8 = telemetry.numbered(data)
    if _REDFISH.search(data[:1 << 20].decode("utf-8", "replace")):
        frame, unparsed = _redfish(data.decode("utf-8", "backslashreplace"), timezone=timezone)
    else:
        frame, unparsed = _tables(df, timezone=timezone)
    rows = pl.concat([frame, unparsed], how="diagonal_relaxed").sort("line") if unparsed.height else frame
    events = telemetry.events_frame(rows, source=NAME, file=file, incident=incident, host=host)
    bad = int(unparsed.filter(pl.col("kind") == "unparsed").height) if unparsed.height else 0
    return SourceResult(events, lines=df.height, records=frame.height + bad, unparsed=bad, error=None,
                        invalid_utf8_lines=bad_utf8)  # fmt: skip


# ------------------------------------------------------------------------------------ ipmitool, FreeIPMI


def _tables(df: pl.DataFrame, *, timezone: str | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Records of the ``|`` forms in the numbered lines ``df``, and the lines that are none (``unparsed`` when
    they hold a ``|``)."""
    header = df.filter(pl.col("text").str.contains(_FREEIPMI_HEADER))
    names = [c.strip().lower() for c in header["text"][0].split("|")] if header.height else None
    fields = pl.col("text").str.split("|").list.eval(pl.element().str.strip_chars())
    tool = pl.when(pl.col("text").str.contains(_IPMITOOL)).then(pl.lit("ipmitool")) \
        .when(pl.col("text").str.contains(_FREEIPMI)).then(pl.lit("freeipmi"))  # fmt: skip
    verbose, claimed = _verbose(df.get_column("text"))
    df = df.with_columns(tool=tool, f=fields).with_columns(
        tool=pl.when(pl.col("line").is_in(claimed)).then(pl.lit("verbose")).otherwise("tool"))
    records = pl.concat([_ipmitool(df.filter(pl.col("tool") == "ipmitool")),
                         _freeipmi(df.filter(pl.col("tool") == "freeipmi"), names), verbose],
                        how="vertical_relaxed")  # fmt: skip
    rest = df.filter(pl.col("tool").is_null() & (pl.col("text").str.strip_chars() != "")
                     & ~pl.col("text").str.contains(_FREEIPMI_HEADER))  # fmt: skip
    unparsed = pl.concat([
        telemetry.unparsed_frame(rest.filter(pl.col("text").str.contains(r"\|"))),
        telemetry.unparsed_frame(rest.filter(~pl.col("text").str.contains(r"\|")), kind="other"),
    ])  # fmt: skip
    return _finish(records.sort("line"), timezone=timezone), unparsed


_RECORD = {"line": pl.Int64, "text": pl.String, "id": pl.String, "stamp": pl.String, "sensor": pl.String,
           "type": pl.String, "name": pl.String, "event": pl.String, "state": pl.String, "asserted": pl.Boolean,
           "extra": pl.String}  # fmt: skip


def _ipmitool(df: pl.DataFrame) -> pl.DataFrame:
    """``id | date | time | sensor | event [| Asserted|Deasserted] [| extra]``."""
    if df.height == 0:
        return pl.DataFrame(schema=_RECORD)
    f = pl.col("f")
    tail = f.list.slice(5)
    direction = tail.list.first()
    has_direction = direction.is_in(["Asserted", "Deasserted"])
    return df.select(
        "line", "text", id=f.list.get(0), stamp=telemetry.iso_stamp(f.list.get(1), f.list.get(2), "%m/%d/%Y"),
        sensor=f.list.get(3), type=pl.lit(None, pl.String), name=pl.lit(None, pl.String), event=f.list.get(4),
        state=pl.lit(None, pl.String),
        asserted=pl.when(direction == "Deasserted").then(False).when(direction == "Asserted").then(True),
        extra=pl.when(has_direction).then(tail.list.slice(1)).otherwise(tail).list.join(" | ").replace("", None),
    )  # fmt: skip


def _freeipmi(df: pl.DataFrame, names: list[str] | None) -> pl.DataFrame:
    """``ID | Date | Time | Name | Type [| State] [| Event Direction] | Event``: the header names the optional
    columns; without it, what a column holds says which it is."""
    if df.height == 0:
        return pl.DataFrame(schema=_RECORD)
    f = pl.col("f")
    n = f.list.len()
    if names:
        at = {name: i for i, name in enumerate(names)}
        state = f.list.get(at["state"], null_on_oob=True) if "state" in at else pl.lit(None, pl.String)
        direction = f.list.get(at["event direction"], null_on_oob=True) if "event direction" in at else pl.lit(None, pl.String)
        event = f.list.get(at.get("event", len(names) - 1), null_on_oob=True)
    else:
        middle = f.list.slice(5, n - 6)
        state = middle.list.eval(pl.element().filter(pl.element().is_in(["Nominal", "Warning", "Critical", "N/A"]))).list.first()
        direction = middle.list.eval(pl.element().filter(pl.element().str.contains("ssertion"))).list.first()
        event = f.list.last()
    return df.select(
        "line", "text", id=f.list.get(0), stamp=telemetry.iso_stamp(f.list.get(1), f.list.get(2), "%b-%d-%Y"),
        sensor=pl.concat_str(f.list.get(4), pl.lit(" "), f.list.get(3)), type=f.list.get(4), name=f.list.get(3),
        event=event, state=state.replace("N/A", None),
        asserted=pl.when(direction.str.starts_with("Deassertion")).then(False)
        .when(direction.str.starts_with("Assertion")).then(True),
        extra=pl.lit(None, pl.String),
    )  # fmt: skip


#: ``ipmitool sel get ID`` / ``sel list -v`` / ``sel elist -v``: a record is a block of ``Name : value`` lines.
_VERBOSE_START = re.compile(r"^\s*SEL Record ID\s*:\s*(?P<id>[0-9a-fA-F]+)\s*$")
_FIELD = re.compile(r"^\s*(?P<key>[A-Za-z][\w ()/.+-]*?)\s*:\s?(?P<value>.*)$")


def _verbose(lines: pl.Series) -> tuple[pl.DataFrame, list[int]]:
    """The records of ipmitool's verbose form, and the lines their blocks hold. A block runs from its ``SEL
    Record ID`` line over its fields, the sensor's fields ``sel get`` adds after a blank line and the
    indented lines an OEM decoder prints, to the first line that is none of those."""
    if not lines.str.contains(_VERBOSE_START.pattern).any():
        return pl.DataFrame(schema=_RECORD), []
    text = lines.to_list()
    rows: list[dict[str, Any]] = []
    claimed: list[int] = []
    i = 0
    while i < len(text):
        start = _VERBOSE_START.match(text[i] or "")
        if not start:
            i += 1
            continue
        fields: dict[str, str] = {}
        j = i + 1
        while j < len(text):
            line = text[j] or ""
            if _VERBOSE_START.match(line) or (line.strip() and not line[0].isspace() and not _FIELD.match(line)):
                break
            if not line.strip() and not (j + 1 < len(text) and _FIELD.match(text[j + 1] or "")
                                         and not _VERBOSE_START.match(text[j + 1] or "")):  # fmt: skip
                break
            field = _FIELD.match(line)
            if field:
                fields.setdefault(field["key"].strip(), field["value"].strip())
            j += 1
        claimed.extend(range(i + 1, j + 1))
        rows.append(_verbose_row(i + 1, start["id"], fields))
        i = j
    return pl.DataFrame(rows, schema=_RECORD, orient="row"), claimed


def _verbose_row(line: int, record_id: str, f: dict[str, str]) -> dict[str, Any]:
    """One verbose block as a record: its text is the ``sel elist`` line it stands for (``Processor CPU0_Status
    | Thermal Trip | Asserted``), so the catalogs read it as they read the table forms."""
    kind = f.get("Sensor Type") or f.get("Sensor Type (Discrete)") or f.get("Sensor Type (Threshold)") or ""
    name = re.sub(r"\s*\(0x[0-9a-fA-F]+\)$", "", f.get("Sensor ID", "")) or (
        f"#0x{f['Sensor Number']}" if f.get("Sensor Number") else "")
    direction = f.get("Event Direction", "")
    asserted = False if direction.startswith("Deassert") else True if direction.startswith("Assert") else None
    event = f.get("Description", "")
    reading = re.match(r"[-\d.]+", f.get("Trigger Reading", ""))
    threshold = re.match(r"[-\d.]+", f.get("Trigger Threshold", ""))
    extra = f"Reading {reading[0]} > Threshold {threshold[0]}" if reading and threshold else None
    sensor = f"{kind} {name}".strip()
    if not sensor and not event:  # an OEM record (type c0-ff): its fields, as `sel list` prints them
        sensor = f"OEM record {f.get('Record Type', '').split(' ')[0]}".strip()
        event = " | ".join(v for k, v in f.items() if k not in ("Record Type", "Timestamp") and v)
    said = "Asserted" if asserted else "Deasserted" if asserted is False else ""
    stamp = re.fullmatch(r"(\d\d)/(\d\d)/(\d{4}) (\d\d:\d\d:\d\d)", f.get("Timestamp", ""))
    return {"line": line, "text": " | ".join(p for p in (sensor, event, said, extra) if p), "id": record_id,
            "stamp": f"{stamp[3]}-{stamp[1]}-{stamp[2]}T{stamp[4]}" if stamp else None, "sensor": sensor,
            "type": kind or None, "name": name or None, "event": event or None, "state": None, "asserted": asserted,
            "extra": extra}  # fmt: skip


def _finish(records: pl.DataFrame, *, timezone: str | None) -> pl.DataFrame:
    """Kinds, severities, times and details of the records."""
    if records.height == 0:
        return pl.DataFrame(schema={"line": pl.Int64})
    ts, how = telemetry.wall_clock(pl.col("stamp"), timezone)
    read = bmc.catalog_reading(records["text"])
    out = records.with_row_index("i").join(read, on="i", how="left").with_columns(
        ts=ts, ts_from=how,
        kind=pl.coalesce("cat_kind", bmc.bmc_kind(records["type"].fill_null(records["sensor"]), records["sensor"])),
        severity=bmc.severity(records["event"] + pl.Series([" "] * records.height) + records["extra"].fill_null(""),
                                    state=records["state"], asserted=records["asserted"]),
        gpu_index=bmc.gpu_index(records["sensor"]),
        dimm=pl.col("sensor").str.extract(_DIMM, 2).str.replace_all(r"[\s_#-]+", "")
        .fill_null(pl.col("extra").str.extract(_DIMM, 2).str.replace_all(r"[\s_#-]+", "")),
        reading=pl.col("extra").str.extract(_READING, 1).cast(pl.Float64, strict=False),
        threshold=pl.col("extra").str.extract(_READING, 2).cast(pl.Float64, strict=False),
        message=pl.col("text").str.strip_chars(),
    )  # fmt: skip
    out = out.with_columns(dimm=pl.when(pl.col("kind") == "bmc.memory").then(pl.col("dimm")))
    detail = telemetry.detail_json(out, ["id", "sensor", "type", "event", "asserted", "state", "reading", "threshold",
                                         "dimm", "gpu_index", "extra", "catalog", "ts_from"])  # fmt: skip
    return out.with_columns(detail=detail).select("line", "ts", "kind", "severity", "message", "detail")


# ---------------------------------------------------------------------------------------------- Redfish


def _redfish(text: str, *, timezone: str | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """LogEntry objects of a collection, a single entry, or an excerpt of either (read entry by entry)."""
    entries: list[tuple[int, dict[str, Any]]] = []
    gaps: list[tuple[int, str]] = []
    try:
        _walk(json.loads(text), entries, text)
    except ValueError:  # JSONDecodeError, or a number too long for int()
        gaps = _scan(text, entries)
    left = telemetry.unparsed_frame(pl.DataFrame(gaps, schema={"line": pl.Int64, "text": pl.String}, orient="row"))
    if not entries:
        return pl.DataFrame(schema={"line": pl.Int64}), telemetry.unparsed_frame(
            pl.DataFrame({"line": [1], "text": [text[:2000]]}, schema={"line": pl.Int64, "text": pl.String}))
    rows = [_entry_row(line, e) for line, e in entries]
    records = pl.DataFrame(rows, schema=_RECORD | {"created": pl.String, "code": pl.String, "message_id": pl.String},
                           orient="row")  # fmt: skip
    ts, how = telemetry.wall_clock(pl.col("created"), timezone)
    read = bmc.catalog_reading(records["text"])
    out = records.with_row_index("i").join(read, on="i", how="left").with_columns(
        ts=ts, ts_from=how,
        kind=pl.coalesce("cat_kind", bmc.bmc_kind(records["type"], records["text"],
                                                        records["text"] + " " + records["message_id"].fill_null(""))),
        severity=bmc.severity(records["text"], state=records["state"], asserted=records["asserted"]),
        gpu_index=bmc.gpu_index(records["text"]),
        dimm=pl.col("text").str.extract(_DIMM, 2).str.replace_all(r"[\s_#-]+", ""),
        message=pl.col("text"),
    )  # fmt: skip
    out = out.with_columns(dimm=pl.when(pl.col("kind") == "bmc.memory").then(pl.col("dimm")))
    detail = telemetry.detail_json(out, ["id", "type", "event", "asserted", "state", "message_id", "gpu_index", "dimm",
                                         "catalog", "ts_from"])  # fmt: skip
    return out.with_columns(detail=detail).select("line", "ts", "kind", "severity", "message", "detail").sort("line"), left


def _is_entry(value: Any) -> bool:
    return isinstance(value, dict) and ("LogEntry." in str(value.get("@odata.type", ""))
                                        or ("EntryType" in value and ("Message" in value or "Created" in value)))  # fmt: skip


def _walk(value: Any, out: list[tuple[int, dict[str, Any]]], text: str) -> None:
    """Every LogEntry in a parsed document, with the line its ``@odata.id`` (or ``Id``) is printed on."""
    if _is_entry(value):
        anchor = json.dumps(value.get("@odata.id") or value.get("Id") or "")
        at = text.find(anchor) if anchor != '""' else -1
        out.append((text.count("\n", 0, at) + 1 if at >= 0 else 1, value))
        return
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        _walk(child, out, text)


#: Text between whole entries that holds these keys is a cut entry (a collection's own header is not).
_CUT_ENTRY = re.compile(r'"(?:Message|MessageId|Created|EntryType|EntryCode|Severity|SensorType)"\s*:')


def _scan(text: str, out: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, str]]:
    """The whole LogEntry objects of an excerpt (a cut-off collection, a pasted part of one); returns the
    text between them that holds a part of an entry (:data:`_CUT_ENTRY`): its first line and the text."""
    decoder = json.JSONDecoder()
    gaps: list[tuple[int, str]] = []
    done = 0
    at = text.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:  # JSONDecodeError, or a number too long for int()
            at = text.find("{", at + 1)
            continue
        if _is_entry(value):
            gaps.append((done, text[done:at]))
            out.append((text.count("\n", 0, at) + 1, value))
            done, at = end, text.find("{", end)
        else:
            at = text.find("{", at + 1)
    gaps.append((done, text[done:]))
    return [(text.count("\n", 0, start + len(gap) - len(gap.lstrip())) + 1, gap.strip()[:2000])
            for start, gap in gaps if _CUT_ENTRY.search(gap)]


def _members(value: Any) -> str | None:
    """A property iDRAC 7/8 print as ``[{"Member": "Assert"}]``, or plain."""
    if isinstance(value, list):
        return ", ".join(str(v.get("Member", v)) if isinstance(v, dict) else str(v) for v in value) or None
    return None if value is None else str(value)


def _entry_row(line: int, e: dict[str, Any]) -> dict[str, Any]:
    """One LogEntry as a record: its text joins sensor type, entry code and message as the SEL columns
    would (``Temperature | Upper Critical - going high | …``), so the catalogs read it like a SEL line."""
    sensor_type, code = _members(e.get("SensorType")), _members(e.get("EntryCode"))
    message = str(e.get("Message") or "").strip()
    text = " | ".join(p for p in (sensor_type, code, message) if p)
    asserted = False if code and code.startswith("Deassert") else True if code == "Assert" else None
    return {"line": line, "text": text or json.dumps(e)[:500], "id": str(e.get("Id") or "") or None, "stamp": None,
            "sensor": sensor_type, "type": sensor_type, "name": None, "event": code, "state": e.get("Severity"),
            "asserted": asserted, "extra": None, "created": e.get("Created") or e.get("EventTimestamp"), "code": code,
            "message_id": e.get("MessageId")}  # fmt: skip
