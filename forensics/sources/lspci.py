"""``lspci -vv`` / ``-vvv``: each PCIe device's link (capability against status) and its error status bits.

Producer: pciutils ``lspci`` 3.x (``ls-caps.c``); seen: 3.2 (flags on the ``LnkSta`` line, ``Speed unknown``,
``CESta: … NonFatalErr+``), 3.5–3.7 (``Speed 16GT/s (ok), Width x16 (ok)``, ``AdvNonFatalErr``), 3.8+
(``Speed 32GT/s, Width x16`` with a state only when ``(downgraded)``), ``-s BDF`` single devices, outputs
indented with tabs or with spaces (pasted, ``sudo lspci | less``), quoted with ``> ``, and excerpts that start
inside a device.

Per device (its header line ``3b:00.0 3D controller: NVIDIA …``; ``device`` is the address as printed, and
``gpu`` its canonical ``0000:3b:00.0`` when it is an NVIDIA display or 3D controller):

* samples ``pcie_gen`` / ``pcie_width`` (``LnkSta``) and ``pcie_gen_max`` / ``pcie_width_max`` (``LnkCap``),
  the generation read from the speed (2.5 GT/s → 1, 5 → 2, 8 → 3, 16 → 4, 32 → 5, 64 → 6);
* a link narrower than its capability: ``gpu.pcie_degraded`` (a GPU) or ``pcie.link`` (any other device),
  severity ``warning``. A link only *slower* than its capability is an ``info`` event (``reason: gen``):
  an idle GPU drops its link to 2.5 GT/s to save power, and the switch port above it follows, so an
  ``lspci`` taken at rest shows ``(downgraded)`` on healthy links; a width below capability never comes
  from power saving. Whether the link was slow under load is the samples' question (with utilization);
  ``nvidia-smi -q`` taken under load answers it too;
* ``UESta`` bits set (``+``): a ``pcie.aer`` event, ``aer_severity`` ``fatal`` when ``UESvrt`` marks a set
  bit fatal, else ``nonfatal``; ``CESta`` bits set: a ``pcie.aer`` ``corrected`` event, ``warning``, or
  ``info`` when ``CEMsk`` masks every set bit (the device logged them, the OS was never told);
  ``AdvNonFatalErr`` and the old spelling ``NonFatalErr`` are one bit, the kernel's ``NonFatalErr``;
  the ``DevSta`` error bits set go into the event's ``devsta``; ``DevSta: NonFatalErr+``/``FatalErr+`` on
  a device without an AER capability is an event of its own.

Lines outside any device (a shell prompt, a ``...``) are ``other`` rows; a capability line the grammar
(``grammars/lspci.lark``) rejects is ``unparsed``.

Example::

    19:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)
    		LnkCap:	Port #0, Speed 32GT/s, Width x16, ASPM not supported
    		LnkSta:	Speed 32GT/s (ok), Width x8 (downgraded)

gives samples ``pcie_gen 5``, ``pcie_width 8``, ``pcie_gen_max 5``, ``pcie_width_max 16`` with
``gpu=0000:19:00.0`` and a ``gpu.pcie_degraded`` event (``PCIe link x8 of x16``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Transformer
from lark.exceptions import LarkError

from .. import catalog
from ..grammar import parser
from ..pci import canonical_bdf
from ..reading.base import SourceResult
from ..reading.fields import to_int
from ..text import split_lines
from .telemetry import Finding, Reading, other, result

NAME = "lspci"
FORMS = (
    "lspci -vv / -vvv (pciutils 3.2 to 3.13): LnkCap, LnkSta, DevSta, UESta, UEMsk, UESvrt, CESta, CEMsk",
    "lspci -s BDF -vvv of one device; tab or space indentation; excerpts starting inside a device",
)

#: A device's first line: its address (any domain width) and class, at the start of the line.
_HEADER = re.compile(r"^(?:> ?)?((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (.*)$")
#: The capability lines read, indented (a quote marker ``> `` allowed before the indentation).
_FIELD = re.compile(r"^(?:> ?)?[ \t]+(LnkCap|LnkSta|DevSta|UESta|UEMsk|UESvrt|CESta|CEMsk):\s*(.*)$")
#: GT/s per generation (PCIe 1.0 to 6.0).
_GEN = {"2.5GT/s": 1, "5GT/s": 2, "8GT/s": 3, "16GT/s": 4, "32GT/s": 5, "64GT/s": 6}
_GPU_CLASS = re.compile(r"^(?:VGA compatible controller|3D controller|Display controller)\b.*\bNVIDIA\b")
_STATUS_ERRORS = ("CorrErr", "NonFatalErr", "FatalErr", "UnsupReq")


class _Value(Transformer):
    """A capability line's value: a list of parts, each a list of ``(name, set)`` flags, words and states."""

    def start(self, parts: list[list[Any]]) -> list[list[Any]]:
        return parts

    def part(self, atoms: list[Any]) -> list[Any]:
        return atoms

    def flag(self, tokens: list[Token]) -> tuple[str, bool]:
        return str(tokens[0]), str(tokens[1]) == "+"

    def word(self, tokens: list[Token]) -> str:
        return str(tokens[0])

    def state(self, tokens: list[Token]) -> dict[str, str]:
        return {"state": str(tokens[0]).strip("()")}


@dataclass
class _Device:
    line: int
    address: str | None
    description: str
    fields: dict[str, tuple[int, list[list[Any]]]] = field(default_factory=dict)

    @property
    def gpu(self) -> str | None:
        return canonical_bdf(self.address) if self.address and _GPU_CLASS.search(self.description) else None


def sniff(head: str) -> float:
    """How sure we are that ``head`` is ``lspci -vv`` output: a device header followed by its capability
    lines (``LnkCap``/``LnkSta``/``DevSta``/``UESta``), or such lines tab-indented under each other."""
    lines = head.splitlines()[:400]
    headers = sum(1 for s in lines if _HEADER.match(s))
    fields = sum(1 for s in lines if _FIELD.match(s))
    if not fields:
        return 0.0
    if headers and any(re.match(r"^(?:> ?)?[ \t]+(?:Control|Status|Subsystem|Capabilities):", s) for s in lines):
        return 0.95
    return 0.6 if fields >= 2 and re.search(r"LnkSta:\s*Speed|UESta:\s*DLP[+-]", head) else 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse ``lspci -vv`` output into ``samples`` (the links) and ``events`` (degraded links, AER bits)."""
    series, bad_utf8 = split_lines(data)
    lines = series.to_list()
    lark = parser(NAME, _Value)
    devices: list[_Device] = []
    findings: list[Finding] = []
    unparsed = 0
    current: _Device | None = None
    for number, text in enumerate(lines, 1):
        if m := _HEADER.match(text):
            current = _Device(number, m[1], m[2])
            devices.append(current)
        elif m := _FIELD.match(text):
            if current is None:  # an excerpt that starts inside a device
                current = _Device(number, None, "")
                devices.append(current)
            try:
                current.fields.setdefault(m[1], (number, lark.parse(m[2])))
            except LarkError as exc:
                if on_error == "raise":
                    raise
                unparsed += 1
                findings.append(Finding(number, "unparsed", "warning", text, detail={"error": str(exc).splitlines()[0]}))
        elif not text.strip() or (current is not None and (text[:1].isspace() or text.startswith(">"))):
            continue  # a blank line, or a line of the device's record that says nothing read here
        else:  # a shell prompt, a note, lines of an excerpt before its first device
            findings.append(other(number, text))
            current = current if text[:1].isspace() or text.strip() == "..." else None
    readings: list[Reading] = []
    for device in devices:
        r, f = _read(device)
        readings += r
        findings += f
    return result(readings, findings, lines=len(lines), records=len(devices), unparsed=unparsed, source=NAME,
                  file=file, incident=incident, host=host, invalid_utf8_lines=bad_utf8, text=lines)  # fmt: skip


def _link(parts: list[list[Any]]) -> tuple[int | None, int | None, str | None, str | None]:
    """Generation and width of a LnkCap/LnkSta value, and their states (``ok``, ``downgraded``)."""
    gen = width = gen_state = width_state = None
    for part in parts:
        words = [a for a in part if isinstance(a, str)]
        state = next((a["state"] for a in part if isinstance(a, dict)), None)
        if len(words) >= 2 and words[0] == "Speed":
            gen, gen_state = _GEN.get(words[1]), state
        elif len(words) >= 2 and words[0] == "Width" and re.fullmatch(r"x\d+", words[1]):
            width, width_state = to_int(words[1][1:]), state
    return gen, width, gen_state, width_state


def _flags(parts: list[list[Any]]) -> dict[str, bool]:
    return {name: on for part in parts for name, on in (a for a in part if isinstance(a, tuple))}


def _read(device: _Device) -> tuple[list[Reading], list[Finding]]:
    """The samples and events of one device."""
    gpu, where = device.gpu, device.address or "PCI device"
    readings: list[Reading] = []
    findings: list[Finding] = []
    cap_line, cap = device.fields.get("LnkCap", (None, None))
    sta_line, sta = device.fields.get("LnkSta", (None, None))
    gen_max, width_max = _link(cap)[:2] if cap else (None, None)
    gen, width, gen_state, width_state = _link(sta) if sta else (None, None, None, None)
    for line, metric, value in ((sta_line, "pcie_gen", gen), (sta_line, "pcie_width", width),
                                (cap_line, "pcie_gen_max", gen_max), (cap_line, "pcie_width_max", width_max)):  # fmt: skip
        if line is not None and value is not None:
            readings.append(Reading(line, metric, float(value), device=device.address, gpu=gpu))
    link = {"width": width, "width_max": width_max, "gen": gen, "gen_max": gen_max, "device": device.address,
            "description": device.description or None}  # fmt: skip
    kind = "gpu.pcie_degraded" if gpu else "pcie.link"
    lines = [n for n in (sta_line, cap_line) if n is not None]
    # without LnkCap (an excerpt), lspci's own "(downgraded)" says the link is below its capability
    narrow = width_max and width is not None and width < width_max if cap else width_state == "downgraded"
    slow = gen and gen_max and gen < gen_max if cap else gen_state == "downgraded"
    if sta_line is not None and narrow:
        of = f" of x{width_max}" if width_max else " (downgraded)"
        findings.append(Finding(sta_line, kind, "warning", f"{where}: PCIe link x{width}{of}", gpu=gpu,
                                detail={"reason": "width", **link}, samples=lines))  # fmt: skip
    elif sta_line is not None and slow:
        of = f" of {gen_max}" if gen_max else " (downgraded)"
        findings.append(Finding(sta_line, kind, "info", f"{where}: PCIe gen {gen}{of}", gpu=gpu,
                                detail={"reason": "gen", **link}, samples=lines))  # fmt: skip
    findings += _errors(device, gpu, where)
    return readings, findings


def _errors(device: _Device, gpu: str | None, where: str) -> list[Finding]:
    """The ``pcie.aer`` events of a device's AER and device status bits."""
    out: list[Finding] = []
    devsta_line, devsta = device.fields.get("DevSta", (None, None))
    status = [n for n, on in _flags(devsta).items() if on and n in _STATUS_ERRORS] if devsta else []
    ue_line, ue = device.fields.get("UESta", (None, None))
    if ue is not None:
        set_bits = [catalog.aer_short_name(n) for n, on in _flags(ue).items() if on]
        severity_flags = _flags(device.fields["UESvrt"][1]) if "UESvrt" in device.fields else {}
        masked = _flags(device.fields["UEMsk"][1]) if "UEMsk" in device.fields else {}
        if set_bits:
            fatal = [b for b in set_bits if severity_flags.get(b)]
            aer_severity = "fatal" if fatal else "nonfatal"
            out.append(_aer(ue_line, aer_severity, set_bits, gpu, where, devsta=status or None,
                            masked=[b for b in set_bits if masked.get(b)] or None))  # fmt: skip
    ce_line, ce = device.fields.get("CESta", (None, None))
    if ce is not None:
        masked = _flags(device.fields["CEMsk"][1]) if "CEMsk" in device.fields else {}
        set_names = [n for n, on in _flags(ce).items() if on]
        if set_names:
            hidden = [catalog.aer_short_name(_ce_name(n)) for n in set_names if masked.get(n)]
            event = _aer(ce_line, "corrected", [catalog.aer_short_name(_ce_name(n)) for n in set_names], gpu, where,
                         devsta=status or None, masked=hidden or None)  # fmt: skip
            if len(hidden) == len(set_names):  # logged by the device, never reported to the OS
                event.severity = "info"
            out.append(event)
    if not out and devsta_line is not None and {"NonFatalErr", "FatalErr"} & set(status):
        out.append(_aer(devsta_line, "fatal" if "FatalErr" in status else "nonfatal", [], gpu, where, devsta=status))
    return out


def _ce_name(name: str) -> str:
    """The correctable bit 13 under both spellings lspci used: ``AdvNonFatalErr`` (3.3+) and ``NonFatalErr``."""
    return "NonFatalErr" if name in ("AdvNonFatalErr", "NonFatalErr") else name


def _aer(line: int, aer_severity: str, bits: list[str], gpu: str | None, where: str, **detail: Any) -> Finding:
    severity = {"corrected": "warning", "nonfatal": "error", "fatal": "critical"}[aer_severity]
    named = ", ".join(bits) or ", ".join(detail.get("devsta") or [])
    text = f"{where}: AER {aer_severity} status set: {named}"
    layer = catalog.aer_layer(bits, aer_severity) if bits else None
    agent = catalog.aer_agent(bits) if bits else None
    return Finding(line, "pcie.aer", severity, text, gpu=gpu,
                   detail={"aer_severity": aer_severity, "bits": bits, "layer": layer, "agent": agent, "port": None,
                           **detail}, samples=[line])  # fmt: skip
