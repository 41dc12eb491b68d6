"""Canonical PCI addresses: every spelling of a GPU's bus id becomes ``0000:3b:00.0``.

Spellings handled (FACTS.md §C4): NVRM Xid ``PCI:0000:3b:00`` (no function), old NVRM ``0000:03:00``,
kernel/sysfs/AER ``0000:3b:00.0``, NVSwitch ``PCI:0000:05:00.0``, nvidia-smi/NVML ``00000000:3B:00.0``,
NCCL ``busId 3b000`` (bus+device+function as hex), and bare ``3b:00.0``.

>>> canonical_bdf("PCI:0000:3B:00")
'0000:3b:00.0'
>>> canonical_bdf("00000000:3B:00.0")
'0000:3b:00.0'
>>> canonical_bdf("3b000", nccl=True)
'0000:3b:00.0'
"""

from __future__ import annotations

import re

_BDF = re.compile(
    r"^(?:PCI:)?(?:(?P<dom>[0-9A-Fa-f]{1,8}):)?(?P<bus>[0-9A-Fa-f]{1,2}):(?P<dev>[0-9A-Fa-f]{1,2})"
    r"(?:\.(?P<fn>[0-7]))?$"
)
_NCCL = re.compile(r"^(?:(?P<dom>[0-9A-Fa-f]{1,8}):)?(?P<bdf>[0-9A-Fa-f]{4,9})$")


def canonical_bdf(text: str | None, *, nccl: bool = False) -> str | None:
    """Return ``dddd:bb:dd.f`` in lower case, or None when ``text`` is not a PCI address.

    A missing function becomes ``.0`` (NVRM prints GPUs without it; GPUs are function 0).
    Domains wider than 16 bits are not real on Linux, so ``00000000`` folds to ``0000``.
    """
    if not text:
        return None
    text = text.strip()
    if nccl:
        m = _NCCL.match(text)
        if not m:
            return None
        # NCCL strips the separators from NVML's "00000000:3B:00.0": bus, device, function nibbles.
        value = int(m["bdf"], 16)
        dom = int(m["dom"] or "0", 16) or value >> 20
        return f"{dom & 0xFFFF:04x}:{(value >> 12) & 0xFF:02x}:{(value >> 4) & 0xFF:02x}.{value & 0x7}"
    m = _BDF.match(text)
    if not m:
        return None
    dom = int(m["dom"] or "0", 16)
    if dom > 0xFFFF:
        return None
    return f"{dom:04x}:{int(m['bus'], 16):02x}:{int(m['dev'], 16):02x}.{m['fn'] or '0'}"


def requester_id_bdf(rid: str, domain: str | None = None) -> str | None:
    """Decode an old AER ``id=00e5`` (16-bit requester id: bus 8 bits, device 5, function 3)."""
    try:
        value = int(rid, 16)
    except ValueError:
        return None
    dom = int(domain, 16) if domain else 0
    return f"{dom:04x}:{value >> 8:02x}:{(value >> 3) & 0x1F:02x}.{value & 0x7}"
