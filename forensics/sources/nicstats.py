"""NIC counters: ``ethtool -S IFACE`` and ``ip -s link`` (``ip -s -s link``, ``ip link``).

Producers: ethtool 3.x–6.x (``NIC statistics:`` then one ``name: value`` per line, names the driver's own:
mlx5 ``rx_discards_phy``, bnx2x per-queue ``[0]: rx_bytes``, be2net ``rxq0: rx_bytes``, virtio_net
``rx_queue_0_drops``); iproute2 ``ip -s link`` before 5.x (``RX: bytes  packets  errors  dropped overrun
mcast``) and after (``RX:  bytes packets errors dropped  missed   mcast``), with ``-s -s`` error lines, a
header line wrapped by a terminal, and ``ip link`` without ``-s``. Both are plain tables of numbers under
a device line: a line pattern reads the device and the ``name: value`` pairs or the column heads and the
values line under them; the names are data (``forensics/data/nic_counters.toml``).

Samples: ``rx_bytes``, ``rx_packets``, ``rx_errors``, ``rx_drops``, ``rx_discards``, ``rx_crc_errors``,
``rx_missed``, ``rx_out_of_buffer``, ``tx_*``, ``link_down_events`` … (a driver's counter with no metric
of the vocabulary is not a sample), and ``carrier`` (1/0) for an interface administratively up.
``device`` is the interface (``eth0``; ``eth0/rxq3`` for a queue's counter); ``ethtool -S`` does not print
it, so it is taken from the command line before the output when there is one.

Events: ``net.link`` ``error`` for an interface administratively ``UP`` without carrier (``NO-CARRIER``,
``state DOWN`` or ``LOWERLAYERDOWN``): a cable, an optic or the switch port. An interface set down
(no ``UP`` flag) gives none: that is a choice, not a fault. Counters growing between two readings of
one device (errors ``warning``, drops ``notice``) and sar's error rates at 1/s or more give
``net.errors_rising`` (rules of ``data/telemetry_rules.toml``).

Example::

    3: eth1: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc mq state DOWN mode DEFAULT group default qlen 1000

gives ``carrier 0`` for ``eth1`` and a ``net.link`` event ``eth1: link down (NO-CARRIER, state DOWN)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from functools import cache
from typing import Any

import polars as pl

from ..reading.base import SourceResult
from ..reading.fields import _data
from ..text import split_lines
from . import telemetry
from .telemetry import Finding, Reading, number, other, result, wall_clock

NAME = "nicstats"
#: sar's clock is the machine's wall clock (ingest re-reads it in the incident's timezone).
LOCAL_TIME = True
FORMS = (
    "ethtool -S IFACE (NIC statistics:, per-queue [N]: / rxqN: / rx_queue_N_ names), after its command line or not",
    "ip -s link / ip -s -s link (iproute2 before and after 5.x column heads), ip link (state, NO-CARRIER)",
    "sar -n DEV / -n EDEV (sysstat 9 to 12; rates per interface and interval, dated by the banner)",
)

_QUOTE = re.compile(r"^(?:> ?|`)")  # a quote marker of a mail, a forum post or inline code
_CODE_END = re.compile(r"`\s*$")
_IP_MORE = re.compile(r"^\s+[a-z][\w/-]*[ :/]")  # link/ether, altname, alias, vf 0 …: the interface's record
_ETHTOOL_CMD = re.compile(r"ethtool\s+(?:-S|--statistics)\s+([\w.:@-]+)")
_ETHTOOL_HEAD = re.compile(r"^\s*NIC statistics:\s*$")
_ETHTOOL_STAT = re.compile(r"^\s+(.+?):\s+(-?\d+)\s*$")
_QUEUE = (re.compile(r"^\[(\d+)\]: (\w+)$"), re.compile(r"^((?:rx|tx)q\d+): (\w+)$"),
          re.compile(r"^(rx|tx)_queue_(\d+)_(\w+)$"))  # fmt: skip
_LINK = re.compile(r"^\s*(?:(\d+):\s+)?([^\s:@]+)(?:@\S+)?: <([A-Z0-9_,-]*)> mtu \d+(.*)$")
_HEADS = re.compile(r"^\s+(RX|TX)(?: errors)?:\s+([a-z][a-z ]*?)\s*$")


@cache
def _names() -> tuple[dict[str, str], dict[str, dict[str, str]], dict[str, str]]:
    """ethtool names → metric, ``ip -s link`` heads (per line kind) → metric, ``sar -n DEV/EDEV`` heads → metric."""
    data = _data("nic_counters.toml")
    ethtool = {name: metric for metric, names in data["ethtool"].items() for name in names}
    return ethtool, data["ip"], data["sar"]


def sniff(head: str) -> float:
    """How sure we are that ``head`` is ``ethtool -S``, ``ip -s link`` or ``sar -n DEV/EDEV`` output."""
    if re.search(r"(?m)^\d\d:\d\d:\d\d(?: [AP]M)?\s+IFACE\s+(?:rxpck/s|rxerr/s)\s", head):
        return 0.95
    if re.search(r"(?m)^(?:> ?)?\s*NIC statistics:\s*\n(?:> ?)?\s+[^\n]+?: \d+", head):
        return 0.95
    links = len(re.findall(r"(?m)^(?:> ?|`)?\s*(?:\d+:\s+)?[^\s:@]+(?:@\S+)?: <[A-Z0-9_,-]*> mtu \d+", head))
    if links and re.search(r"(?m)^(?:> ?)?\s+RX:\s+bytes\s+packets", head):
        return 0.95
    return 0.5 if links else 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse ``ethtool -S`` / ``ip -s link`` output into counter samples and ``net.link`` events."""
    return _parse(data, file=file, incident=incident, host=host, timezone=timezone, sar=_Sar(),
                  derive_from="local" if timezone else "assumed")  # fmt: skip


def iter_parse(read: Callable[[int], bytes], *, file: str, incident: str = "", host: str | None = None,
               year: int | None = None, timezone: str | None = None, on_error: str = "keep",
               chunk_bytes: int = telemetry.SERIES_CHUNK_BYTES) -> Iterator[SourceResult]:  # fmt: skip
    """:func:`parse` from ``read(n)`` in chunks, one held at a time (:func:`.telemetry.iter_series`): a day of
    ``sar -n DEV 1`` is cut before a report's head line, and its banner's date carries to the next chunk."""
    del year, on_error
    sar = _Sar()

    def chunk(data: bytes) -> SourceResult:
        return _parse(data, file=file, incident=incident, host=host, timezone=timezone, sar=sar, derive_from=None)

    yield from telemetry.iter_series(read, chunk, source=NAME, file=file, incident=incident, host=host,
                                     derive_from="local" if timezone else "assumed", size=chunk_bytes,
                                     boundary=_REPORT_START)  # fmt: skip


#: Where a report starts: a blank line before a sar head (``12:00:01 AM IFACE …``) or an interface's line.
_REPORT_START = re.compile(rb"(?m)^[ \t\r]*\n(?=\d\d:\d\d:\d\d(?: [AP]M)?[ \t]+IFACE[ \t]|\d+: \S)")


def _parse(data: bytes, *, file: str, incident: str, host: str | None, timezone: str | None, sar: _Sar,
           derive_from: str | None) -> SourceResult:  # fmt: skip
    series, bad_utf8 = split_lines(data)
    lines = [_CODE_END.sub("", _QUOTE.sub("", s, count=1)) for s in series.to_list()]
    ethtool, heads_of, sar_heads = _names()
    sar.readings, sar.records = [], 0
    readings: list[Reading] = []
    findings: list[Finding] = []
    device: str | None = None
    mode = None  # "ethtool" inside a NIC statistics block, "ip" under an interface line
    records = 0
    skip: set[int] = set()
    for i, text in enumerate(lines):
        n = i + 1
        if i in skip:
            continue
        if sar.read(n, text):
            readings += sar.readings
            sar.readings = []
            mode = None
            continue
        if m := _ETHTOOL_CMD.search(text):
            device = m[1]
            findings.append(other(n, series[i]))
            continue
        if _ETHTOOL_HEAD.match(text):
            mode, records = "ethtool", records + 1
            continue
        if m := _LINK.match(text):
            mode, device, records = "ip", m[2], records + 1
            rest = m[4]
            if "state" not in rest and i + 1 < len(lines) and lines[i + 1].startswith("state "):
                rest, _ = rest + " " + lines[i + 1], skip.add(i + 1)  # a header wrapped by the terminal
            readings_, finding = _link(n, device, m[3].split(","), rest)
            readings += readings_
            findings += [finding] if finding else []
            continue
        if mode == "ethtool" and (m := _ETHTOOL_STAT.match(text)):
            name, where = _queue(m[1], device)
            if name in ethtool:
                readings.append(Reading(n, ethtool[name], number(m[2]), None, device=where))
            continue
        if mode == "ip" and (m := _HEADS.match(text)) and i + 1 < len(lines):
            kind = f"{m[1]} errors" if "errors:" in text.split(m[2])[0] else m[1]
            heads, values = m[2].split(), lines[i + 1].split()
            if values and all(re.fullmatch(r"\d+", v) for v in values):
                skip.add(i + 1)
                for head, value in zip(heads, values, strict=False):
                    if metric := heads_of.get(kind, {}).get(head):
                        readings.append(Reading(i + 2, metric, float(value), None, device=device))
            continue
        if mode == "ip" and _IP_MORE.match(text):
            continue
        if text.strip():
            findings.append(other(n, series[i]))
            if not text[:1].isspace():
                mode = None
    records += sar.records
    readings = _dated(readings, timezone)
    return result(readings, findings, lines=len(lines), records=records, unparsed=0, source=NAME, file=file,
                  incident=incident, host=host, invalid_utf8_lines=bad_utf8, text=lines,
                  derive_from=derive_from)  # fmt: skip


class _Sar:
    """``sar -n DEV`` / ``-n EDEV`` reports: a ``HH:MM:SS IFACE <heads>`` line, then one row per interface and
    interval; the date is the banner's (``Linux 5.4.0 (host) \t08/29/18 \t_x86_64_``), the clock the
    machine's (read in the incident's zone; a clock going back means the next day). ``Average:`` rows are
    the report's own summary, not a reading."""

    _BANNER = re.compile(r"^Linux \S+ \(\S+\)\s+(\d\d/\d\d/\d\d(?:\d\d)?|\d{4}-\d\d-\d\d)\b")
    _HEAD = re.compile(r"^(\d\d:\d\d:\d\d(?: [AP]M)?)\s+IFACE\s+(.*\S)\s*$")
    _ROW = re.compile(r"^(\d\d:\d\d:\d\d(?: [AP]M)?|Average:)\s+(\S+)\s+([-\d.,\s]+?)\s*$")

    def __init__(self) -> None:
        self.day: date | None = None
        self.last: datetime | None = None
        self.heads: list[str] | None = None
        self.readings: list[Reading] = []
        self.records = 0

    def read(self, n: int, text: str) -> bool:
        """Whether ``text`` is a line of a sar report (its readings are then in ``readings``)."""
        if m := self._BANNER.match(text):
            fmt = "%Y-%m-%d" if "-" in m[1] else "%m/%d/%Y" if len(m[1]) == 10 else "%m/%d/%y"
            self.day, self.last = datetime.strptime(m[1], fmt).date(), None
            return False
        if m := self._HEAD.match(text):
            self.heads, self.records = m[2].split(), self.records + 1
            return True
        if self.heads is None or not (m := self._ROW.match(text)):
            return False
        values = m[3].split()
        if len(values) != len(self.heads):
            return False
        if m[1] != "Average:":
            ts = self._time(m[1])
            metrics = _names()[2]
            self.readings += [Reading(n, metrics[h], number(v.replace(",", ".")), _unit(metrics[h]), device=m[2], ts=ts)
                              for h, v in zip(self.heads, values, strict=True) if h in metrics]  # fmt: skip
        return True

    def _time(self, clock: str) -> datetime | None:
        """The wall clock of a row (naive; :func:`_dated` reads it in the incident's zone)."""
        if self.day is None:
            return None
        stamp = datetime.combine(self.day, datetime.strptime(clock, "%I:%M:%S %p" if clock[-1] == "M" else "%H:%M:%S").time())
        if self.last is not None and stamp < self.last - timedelta(hours=12):
            self.day = self.day + timedelta(days=1)  # past midnight
            stamp = stamp + timedelta(days=1)
        self.last = stamp
        return stamp


def _dated(readings: list[Reading], timezone: str | None) -> list[Reading]:
    """``readings`` with their wall-clock times (sar's) read as the SEL's are (:func:`.telemetry.wall_clock`)."""
    clocks = sorted({r.ts for r in readings if r.ts is not None})
    if not clocks:
        return readings
    ts, _ = wall_clock(pl.col("s"), timezone)
    utc = pl.DataFrame({"s": [c.isoformat() for c in clocks]}).select(ts).to_series().to_list()
    to_utc = dict(zip(clocks, utc, strict=True))
    for r in readings:
        r.ts = to_utc.get(r.ts) if r.ts is not None else None
    return readings


def _unit(metric: str) -> str | None:
    return "%" if metric.endswith("_pct") else "kB/s" if metric.endswith("_kb_per_s") else "1/s"



def _queue(name: str, device: str | None) -> tuple[str, str | None]:
    """A per-queue counter's plain name and its device (``eth0/rxq3``)."""
    if m := _QUEUE[0].match(name):
        return m[2], f"{device or ''}/q{m[1]}"
    if m := _QUEUE[1].match(name):
        return m[2], f"{device or ''}/{m[1]}"
    if m := _QUEUE[2].match(name):
        return f"{m[1]}_{m[3]}", f"{device or ''}/{m[1]}q{m[2]}"
    return name, device


def _link(n: int, device: str, flags: list[str], rest: str) -> tuple[list[Reading], Finding | None]:
    """The carrier sample and the link event of one ``ip link`` interface line."""
    state = m[1] if (m := re.search(r"\bstate (\S+)", rest)) else None
    if "UP" not in flags:
        return [], None
    carrier = "LOWER_UP" in flags and "NO-CARRIER" not in flags
    readings = [Reading(n, "carrier", 1.0 if carrier else 0.0, None, device=device)]
    if carrier and state not in ("DOWN", "LOWERLAYERDOWN"):
        return readings, None
    why = ", ".join(x for x in ("NO-CARRIER" if "NO-CARRIER" in flags else None, f"state {state}" if state else None) if x)
    detail: dict[str, Any] = {"device": device, "state": state, "flags": flags}
    return readings, Finding(n, "net.link", "error", f"{device}: link down ({why or 'no carrier'})", detail=detail,
                             samples=[n])  # fmt: skip
