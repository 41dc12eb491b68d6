"""InfiniBand ports and their counters: ``ibstat``, ``ibstatus``, ``perfquery`` (and ``-x``), ``ibqueryerrors``.

Producers: infiniband-diags 1.x and rdma-core 20+ (``ibstat``, ``perfquery``, ``ibqueryerrors``), the
``ibstatus`` script; seen with tab and space indentation, ``ibstat`` cut by ``ibpanic:`` when a device
vanishes, ``perfquery`` with and without its ``# Port counters: Lid N port P`` line and with the old short
names (``SymbolErrors:``, ``LinkDowned:``), and output quoted with ``> `` in a mail. Each form is lines of
``key: value`` (``ibstat``, ``ibstatus``), ``Name:.....value`` (``perfquery``) or ``[Name == value]`` runs
(``ibqueryerrors``) under a device line: a line pattern per form reads them, the counter names are data
(``forensics/data/ib_counters.toml``).

Samples (``device`` ``mlx5_0/1`` — CA and port — for ``ibstat``/``ibstatus``; ``lid 10/1`` for ``perfquery``;
the node's name or GUID and the port for ``ibqueryerrors``):

* ``link_state`` (the IB PortState number: 1 Down, 2 Initializing, 3 Armed, 4 Active, 5 ActiveDefer),
  ``phys_state`` (1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp,
  6 LinkErrorRecovery, 7 PhyTest), ``rate_gbps``;
* the counters: ``symbol_errors``, ``link_downed``, ``link_error_recovery``, ``port_rcv_errors``,
  ``xmit_discards``, ``xmit_wait``, ``xmit_data`` … (raw values; rates are a query).

Events ``net.link``: a port not ``Active`` or not ``LinkUp`` (``error`` when the physical link is
``Polling`` — no peer, a cable or the switch port — or training/recovering; ``warning`` when it is
``Disabled`` or only the logical state lags, e.g. ``Initializing`` without a subnet manager), and an
``Active`` port at a rate below the other ``Active`` ports of its kind (same CA type and link layer) in
the same output (``warning``, ``reason: rate``): neither ``ibstat`` nor ``ibstatus`` prints a port's
capability, its siblings are the yardstick. Counter values give no event here: a snapshot of counters
kept since the last reset says nothing of *when*; their growth between two readings of one
port is (``net.errors_rising``, a rule of ``data/telemetry_rules.toml``).

Example::

    CA 'mlx5_10'
    	Port 1:
    		State: Down
    		Physical state: Polling
    		Rate: 10

gives samples ``link_state 1``, ``phys_state 2``, ``rate_gbps 10`` for ``mlx5_10/1`` and a ``net.link``
``error`` event ``mlx5_10/1: port Down (Polling)``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cache
from typing import Any

from ..reading.base import SourceResult
from ..reading.fields import _data
from ..text import split_lines
from .telemetry import Finding, Reading, number, other, result

NAME = "ibcounters"
FORMS = (
    "ibstat (CA 'mlx5_0' / Port 1: / State, Physical state, Rate, Link layer), with an ibpanic: line",
    "ibstatus (Infiniband device 'mlx5_0' port 1 status: / state: 4: ACTIVE / rate: 200 Gb/sec (4X HDR))",
    "perfquery and perfquery -x (# Port counters: Lid N port P / Name:....value; old short names)",
    "ibqueryerrors (Errors for \"node\" / GUID 0x… port N: [Name == value] …)",
)

_QUOTE = re.compile(r"^> ?")  # the quote marker of a mail or a forum post
_IBSTAT_CA = re.compile(r"^CA '([^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^\s+Port (\d+):\s*$")
_IBSTAT_FIELD = re.compile(r"^\s+(CA type|State|Physical state|Rate|Link layer):\s*(.*?)\s*$")
_IBSTATUS_DEVICE = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:\s*$")
_IBSTATUS_FIELD = re.compile(r"^\s+(state|phys state|rate|link_layer):\s*(.*?)\s*$")
_PERF_HEADER = re.compile(r"^# Port (?:extended )?counters: Lid (\d+) (?:port (\d+)|all ports)", re.IGNORECASE)
_PERF_FIELD = re.compile(r"^([A-Za-z0-9]+):\.{2,}(\S+)\s*$")
_QERR_NODE = re.compile(r"^Errors for (.*?)\s*$")
_QERR_PORT = re.compile(r"^\s+GUID (0x[0-9a-fA-F]+) port (\w+):(.*)$")
_QERR_VALUE = re.compile(r"\[(\w+) == (\d+)\]")

#: The IB PortState and PortPhysicalState numbers (IBA vol. 1, 14.2.5.6) by the words the tools print.
_STATES = {"down": 1, "initializing": 2, "init": 2, "armed": 3, "active": 4, "activedefer": 5}
_PHYS = {"sleep": 1, "polling": 2, "disabled": 3, "portconfigurationtraining": 4, "linkup": 5,
         "linkerrorrecovery": 6, "phytest": 7, "phy test": 7}  # fmt: skip


@cache
def _counters() -> dict[str, tuple[str, str | None]]:
    """Every printed counter name → (metric, unit)."""
    return {name: (c["metric"], c.get("unit")) for c in _data("ib_counters.toml")["counter"] for name in c["names"]}


def sniff(head: str) -> float:
    """How sure we are that ``head`` is one of the four outputs."""
    if re.search(r"(?m)^(?:> ?)?CA '[^']+'\s*\n(?:> ?)?\s+CA type:", head):
        return 0.95
    if re.search(r"(?m)^(?:> ?)?Infiniband device '[^']+' port \d+ status:", head):
        return 0.95
    if re.search(r"(?mi)^(?:> ?)?# Port (?:extended )?counters: Lid \d+", head):
        return 0.95
    if re.search(r"(?m)^(?:> ?)?Errors for .*\n(?:> ?)?\s+GUID 0x[0-9a-fA-F]+ port \w+: \[\w+ == \d+\]", head):
        return 0.95
    names = set(re.findall(r"(?m)^(?:> ?)?([A-Za-z0-9]+):\.{2,}\d", head))
    return 0.8 if len(names & set(_counters())) >= 3 else 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse ``ibstat``/``ibstatus``/``perfquery``/``ibqueryerrors`` output into samples and ``net.link`` events."""
    series, bad_utf8 = split_lines(data)
    lines = series.to_list()
    ports: dict[str, dict[str, Any]] = {}  # device → what ibstat/ibstatus said of it
    readings: list[Reading] = []
    findings: list[Finding] = []
    ca = ca_type = device = node = None  # node: the ibqueryerrors node of the lines being read
    records = 0
    for n, line in enumerate(lines, 1):
        text = _QUOTE.sub("", line, count=1)
        if m := _IBSTAT_CA.match(text):
            ca, ca_type, device = m[1], None, None
            records += 1
        elif ca and (m := _IBSTAT_PORT.match(text)):
            device = f"{ca}/{m[1]}"
            ports[device] = {"line": n, "ca_type": ca_type}
        elif m := _IBSTATUS_DEVICE.match(text):
            ca, ca_type, device = m[1], None, f"{m[1]}/{m[2]}"
            ports[device] = {"line": n, "ca_type": None}
            records += 1
        elif ca and (m := _IBSTAT_FIELD.match(text) or _IBSTATUS_FIELD.match(text)):
            key, value = m[1].lower().replace("_", " "), m[2]
            if key == "ca type":
                ca_type = value
            elif device is not None:
                readings += _port_field(ports[device], device, key, value, n)
        elif m := _PERF_HEADER.match(text):
            ca, device = None, f"lid {m[1]}/{m[2] or 'all'}"
            records += 1
        elif m := _PERF_FIELD.match(text):
            if m[1] == "PortSelect" and device is None:  # perfquery without its header line
                device = f"port {m[2]}"
                records += 1
            if m[1] in _counters():
                metric, unit = _counters()[m[1]]
                readings.append(Reading(n, metric, number(m[2]), unit, device=device))
        elif m := _QERR_NODE.match(text):
            ca, device = None, None
            node = _find(r'"(.*)"', m[1]) or m[1] or None  # `Errors for 0x2c90… "SX6036"`: its name
            records += 1
        elif m := _QERR_PORT.match(text):
            where = f"{node or m[1]}/{m[2]}"
            for name, value in _QERR_VALUE.findall(m[3]):
                if name in _counters():
                    metric, unit = _counters()[name]
                    readings.append(Reading(n, metric, float(value), unit, device=where))
        elif text.strip() and not (ca and text[:1].isspace()):  # ibpanic:, ## Summary, a prompt
            findings.append(other(n, line))
            ca = None  # ibstat's CA ends (ibpanic:); a counter's device stays (a header cut by a mail)
    findings += _links(ports, readings)
    return result(readings, findings, lines=len(lines), records=records, unparsed=0, source=NAME, file=file,
                  incident=incident, host=host, invalid_utf8_lines=bad_utf8, text=lines,
                  derive_from="assumed")  # fmt: skip  (perfquery prints no time)


def _port_field(port: dict[str, Any], device: str, key: str, value: str, n: int) -> list[Reading]:
    """The sample of one ``ibstat``/``ibstatus`` port line (and what the port's event needs)."""
    word = re.sub(r"^\d+:\s*", "", value).strip()
    if key == "state":
        port.update(state=word, state_line=n)
        return [Reading(n, "link_state", _STATES.get(word.lower().replace(" ", "")), None, device=device)]
    if key in ("physical state", "phys state"):
        port.update(phys=word, phys_line=n)
        return [Reading(n, "phys_state", _PHYS.get(word.lower()) or _PHYS.get(word.lower().replace(" ", "")),
                        None, device=device)]  # fmt: skip
    if key == "rate":
        rate = number(value.split()[0]) if value.split() else None
        port.update(rate=rate, rate_line=n, speed=_find(r"\((.*)\)", value))
        return [Reading(n, "rate_gbps", rate, "Gb/s", device=device)]
    port["link_layer"] = value
    return []


def _find(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m[1] if m else None


def _links(ports: dict[str, dict[str, Any]], readings: list[Reading]) -> list[Finding]:
    """``net.link`` events: ports not Active/LinkUp, and Active ports slower than their siblings."""
    out: list[Finding] = []
    fastest: dict[tuple[Any, Any], float] = defaultdict(float)
    for p in ports.values():
        if (p.get("state") or "").lower() == "active" and p.get("rate"):
            key = (p.get("ca_type"), p.get("link_layer"))
            fastest[key] = max(fastest[key], p["rate"])
    for device, p in ports.items():
        state, phys = p.get("state"), p.get("phys")
        lines = [p[k] for k in ("state_line", "phys_line", "rate_line") if k in p]
        detail = {"device": device, "state": state, "phys_state": phys, "rate_gbps": p.get("rate"),
                  "speed": p.get("speed"), "link_layer": p.get("link_layer"), "ca_type": p.get("ca_type")}  # fmt: skip
        if state is None and phys is None:
            continue
        if (state or "").lower() != "active" or (phys is not None and phys.lower() != "linkup"):
            down_phys = (phys or "").lower()
            severity = "warning" if down_phys in ("disabled", "linkup", "") else "error"
            text = f"{device}: port {state or '?'} ({phys or '?'})"
            out.append(Finding(p.get("state_line", p["line"]), "net.link", severity, text, detail=detail, samples=lines))
            continue
        top = fastest[(p.get("ca_type"), p.get("link_layer"))]
        if p.get("rate") and p["rate"] < top:
            out.append(Finding(p.get("rate_line", p["line"]), "net.link", "warning",
                               f"{device}: port Active at {p['rate']:g} Gb/s, its siblings at {top:g}",
                               detail={**detail, "reason": "rate", "rate_max_seen": top}, samples=lines))  # fmt: skip
    return out
