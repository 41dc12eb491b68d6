"""Knowledge tables shipped as data: the Xid catalog and the PCIe AER bit names.

>>> xid(79).mnemonic
'ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS'
>>> aer_short_name("Replay Timer Timeout")
'Timeout'
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from importlib import resources


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("forensics.data").joinpath(name).read_text("utf-8")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return list(csv.DictReader(io.StringIO(body)))


@dataclass(frozen=True)
class XidEntry:
    code: int
    mnemonic: str | None
    description: str
    immediate_action: str | None
    investigatory_action: str | None
    causes: list[str]
    gpud: str | None


@cache
def xid_catalog() -> dict[int, XidEntry]:
    """Every Xid code of ``data/xid_catalog.csv`` (NVIDIA's catalog as carried by gpud)."""
    out: dict[int, XidEntry] = {}
    for row in _rows("xid_catalog.csv"):
        code = int(row["code"])
        out[code] = XidEntry(
            code=code,
            mnemonic=row["mnemonic"] or None,
            description=row["description"],
            immediate_action=None if row["immediate_action"] in ("", "-") else row["immediate_action"],
            investigatory_action=None if row["investigatory_action"] in ("", "-") else row["investigatory_action"],
            causes=row["causes"].split(),
            gpud=row["gpud"] or None,
        )
    return out


def xid(code: int) -> XidEntry | None:
    """The catalog entry of an Xid, or None for a code the catalog does not define (e.g. 999)."""
    return xid_catalog().get(code)


@cache
def _aer_table() -> list[dict[str, str]]:
    return _rows("aer_bits.csv")


@cache
def _aer_names() -> dict[str, str]:
    out: dict[str, str] = {}
    for row in _aer_table():
        out[row["short"].lower()] = row["short"]
        out[row["long"].lower()] = row["short"]
    return out


def aer_short_name(name: str) -> str:
    """The kernel's short name for an AER bit printed by its long or short name (unknown names kept)."""
    return _aer_names().get(" ".join(name.split()).lower(), " ".join(name.split()))


def aer_bits_from_status(status: int, aer_severity: str) -> list[str]:
    """Decode a status register value into bit short names (for records whose bit lines are missing)."""
    cls = "correctable" if aer_severity == "corrected" else "uncorrectable"
    return [r["short"] for r in _aer_table() if r["class"] == cls and status >> int(r["bit"]) & 1]


def aer_layer(bits: list[str], aer_severity: str) -> str:
    """The layer the kernel derives from the set bits (aer.c: Physical, Data Link, else Transaction)."""
    if "RxErr" in bits:
        return "Physical Layer"
    if set(bits) & {"BadTLP", "BadDLLP", "Rollover", "Timeout"} or (aer_severity != "corrected" and "DLP" in bits):
        return "Data Link Layer"
    return "Transaction Layer"


def aer_agent(bits: list[str]) -> str:
    """The agent the kernel derives from the set bits (aer.c)."""
    if "CmpltAbrt" in bits:
        return "Completer"
    if set(bits) & {"CmpltTO", "UnsupReq"}:
        return "Requester"
    if set(bits) & {"Rollover", "Timeout"}:
        return "Transmitter"
    return "Receiver"
