"""File system usage: ``df`` of coreutils and BusyBox (``-h``, ``-H``, ``-k``, ``-P``, ``-B``, ``-i``, ``-T``).

Producers and forms seen (PROVENANCE.md): GNU coreutils 8.x-9.x ``df`` with the heads ``Filesystem
1K-blocks Used Available Use% Mounted on``, ``-h`` ``Size Used Avail Use%``, ``-P`` ``1024-blocks …
Capacity``, ``-B1M`` ``1M-blocks``, ``-i`` ``Inodes IUsed IFree IUse%``, ``-T`` with a ``Type`` column, a
long device name printed alone on its line and its numbers on the next (coreutils before 8.21 and ``-P``
less outputs), ``-`` for a pseudo file system's inodes; BusyBox ``df`` (the same heads). The columns are
found by their heads, never by position; the mount point is the rest of the line (it may hold spaces).
``-h`` sizes are powers of 1024 (``-H`` prints the same letters for powers of 1000 and cannot be told apart
from a paste: read as 1024).

Samples, one per column per mount (``device`` = the mount point): ``fs_size_bytes``, ``fs_used_bytes``,
``fs_avail_bytes``, ``fs_use_pct``, ``fs_inodes``, ``fs_iused``, ``fs_ifree``, ``fs_iuse_pct``.

Events ``fs.full`` (severity ``error``): a mount at Use% or IUse% ≥ 98, or with nothing available of a
non-zero size. Read-only images that are always full are not: ``squashfs``, ``iso9660`` and ``udf``
mounts, and the loop devices snapd mounts under ``/snap/`` (coreutils prints them at 100%).

Example::

    Filesystem      Size  Used Avail Use% Mounted on
    /dev/md127      218G  207G  4.5M 100% /

gives ``fs_use_pct 100`` for ``/`` and an ``fs.full`` event on that line.
"""

from __future__ import annotations

import re

from ..reading.base import SourceResult
from ..text import split_lines
from .telemetry import Finding, Reading, other, result

NAME = "df"
FORMS = (
    "df [-h|-H|-k|-P|-B SIZE] [-T] (GNU coreutils 8-9, BusyBox): sizes, Use%/Capacity, wrapped device names",
    "df -i [-T]: Inodes IUsed IFree IUse%",
)

#: Column heads → (metric, how the cell reads: "size" in the head's unit, "count", "pct", "text").
_HEADS = {
    "type": (None, "text"), "size": ("fs_size_bytes", "size"), "used": ("fs_used_bytes", "size"),
    "avail": ("fs_avail_bytes", "size"), "available": ("fs_avail_bytes", "size"), "use%": ("fs_use_pct", "pct"),
    "capacity": ("fs_use_pct", "pct"), "inodes": ("fs_inodes", "count"), "iused": ("fs_iused", "count"),
    "ifree": ("fs_ifree", "count"), "iuse%": ("fs_iuse_pct", "pct"), "%iused": ("fs_iuse_pct", "pct"),
}  # fmt: skip
_BLOCKS = re.compile(r"^(\d+)([KMGTPE]?)(?:i?B)?-blocks$", re.IGNORECASE)
_HEADER = re.compile(r"^Filesystem\s+(?:Type\s+)?(?:Size|\S+-blocks|Inodes)\s+(?:Used|IUsed)\s+\S+\s+\S+\s+Mounted on\s*$")
_SIZE = re.compile(r"^(\d+(?:[.,]\d+)?)([KMGTPEZ]?)(?:i?B)?$", re.IGNORECASE)
_POWERS = "KMGTPEZ"
#: Full by construction: read-only images (squashfs, ISO, UDF) and snapd's loop mounts.
_ALWAYS_FULL = re.compile(r"^(?:squashfs|iso9660|udf)$")
FULL_PCT = 98.0


def sniff(head: str) -> float:
    """How sure we are that ``head`` is df output: a df header, and df lines (header, rows, a shell prompt)
    make at least 30% of its non-blank lines."""
    lines = [x for x in head.splitlines() if x.strip()]
    if not any(_HEADER.match(x) for x in lines):
        return 0.0
    rows = sum(1 for x in lines if _HEADER.match(x) or re.match(r"^\S*\s+(?:\S+\s+)?(?:[\d.,]+[KMGTPE]?|-)\s+(?:[\d.,]+[KMGTPE]?|-)\s+(?:[\d.,]+[KMGTPE]?|-)\s+(?:\d+%|-)\s+/", x))
    return 0.9 if rows >= 0.3 * len(lines) else 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse df output into ``samples`` (one per column per mount) and ``fs.full`` events."""
    series, bad_utf8 = split_lines(data)
    lines = series.to_list()
    readings: list[Reading] = []
    findings: list[Finding] = []
    columns: list[tuple[str, str | None, str, float]] | None = None  # (head, metric, reading, unit factor)
    device: tuple[int, str] | None = None  # a long device name alone on its line, waiting for its numbers
    records = 0
    for n, text in enumerate(lines, 1):
        if _HEADER.match(text):
            columns, device = _columns(text), None
            records += 1
            continue
        if columns is not None and device is None and re.fullmatch(r"\S+", text) and _continues(lines, n, columns):
            device = (n, text)
            continue
        row = _row(text, columns, wrapped=device is not None) if columns is not None else None
        if row is None:
            if device is not None:
                findings.append(other(*device))
            device = None
            if text.strip():
                findings.append(other(n, text))
                columns = None if not text.startswith(" ") else columns
            continue
        cells, mount = row
        first = device[0] if device is not None else n
        filesystem = device[1] if device is not None else cells.pop(0)
        device = None
        records += 1
        values: dict[str, float] = {}
        fstype = None
        for (head, metric, how, factor), cell in zip(columns, cells, strict=False):
            if how == "text":
                fstype = cell
            elif metric is not None and (value := _value(cell, how, factor)) is not None:
                values[metric] = value
                readings.append(Reading(n, metric, value, "B" if how == "size" else "%" if how == "pct" else None,
                                        device=mount))  # fmt: skip
        if (finding := _full(first, n, filesystem, fstype, mount, values)) is not None:
            findings.append(finding)
    if device is not None:
        findings.append(other(*device))
    return result(readings, findings, lines=len(lines), records=records, unparsed=0, source=NAME, file=file,
                  incident=incident, host=host, invalid_utf8_lines=bad_utf8, text=lines)  # fmt: skip


def _columns(header: str) -> list[tuple[str, str | None, str, float]]:
    """The columns after ``Filesystem`` and before ``Mounted on``, each with its metric and unit factor."""
    out = []
    for head in header.split()[1:-2]:
        if m := _BLOCKS.match(head):
            out.append((head, "fs_size_bytes", "size", float(m[1]) * 1024 ** (_POWERS.find(m[2].upper()) + 1 if m[2] else 0)))
            continue
        metric, how = _HEADS.get(head.lower(), (None, "text"))
        out.append((head, metric, how, 0.0))
    # "Used" and "Available" count in the blocks of a "N-blocks" head, like the size column
    factor = next((f for _, _, how, f in out if how == "size" and f), 0.0)
    return [(h, m, how, f or factor) for h, m, how, f in out]


def _row(text: str, columns: list[tuple[str, str | None, str, float]], *, wrapped: bool) -> tuple[list[str], str] | None:
    """The cells of a data row (the file system first unless ``wrapped``) and its mount point, or None."""
    count = len(columns) + (0 if wrapped else 1)
    m = re.match(r"^\s*" + r"(\S+)\s+" * count + r"(/.*?|-)\s*$", text)
    if m is None:
        return None
    cells = list(m.groups()[:count])
    numeric = [c for (_, _, how, _), c in zip(columns, cells[0 if wrapped else 1:], strict=False) if how != "text"]
    if not all(re.fullmatch(r"[\d.,]+[KMGTPEZ]?(?:i?B)?%?|-", c, re.IGNORECASE) for c in numeric):
        return None
    return cells, m.group(count + 1)


def _continues(lines: list[str], n: int, columns: list[tuple[str, str | None, str, float]]) -> bool:
    """Does the line after line ``n`` hold a wrapped row's numbers?"""
    return n < len(lines) and lines[n].startswith(" ") and _row(lines[n], columns, wrapped=True) is not None


def _value(cell: str, how: str, factor: float) -> float | None:
    """A cell as a number: a size in bytes (``4.5M``, ``218G`` or blocks of ``factor`` bytes), a count, a %."""
    if cell == "-":
        return None
    if how == "pct":
        return float(cell.rstrip("%")) if re.fullmatch(r"\d+(?:\.\d+)?%?", cell) else None
    m = _SIZE.match(cell)
    if m is None:
        return None
    number = float(m[1].replace(",", "."))
    if m[2]:
        return number * 1024 ** (_POWERS.index(m[2].upper()) + 1)
    return number * factor if how == "size" and factor else number


def _full(first: int, n: int, filesystem: str, fstype: str | None, mount: str,
          values: dict[str, float]) -> Finding | None:  # fmt: skip
    """The ``fs.full`` event of a row, if its mount is full."""
    if (fstype and _ALWAYS_FULL.match(fstype)) or (filesystem.startswith("/dev/loop") and mount.startswith("/snap/")):
        return None
    use, iuse = values.get("fs_use_pct"), values.get("fs_iuse_pct")
    avail, size = values.get("fs_avail_bytes"), values.get("fs_size_bytes")
    reasons = []
    if use is not None and use >= FULL_PCT:
        reasons.append(f"{use:g}% used")
    if iuse is not None and iuse >= FULL_PCT:
        reasons.append(f"{iuse:g}% of inodes used")
    if avail == 0 and size:
        reasons.append("nothing available")
    if not reasons:
        return None
    detail = {"mount": mount, "filesystem": filesystem, "type": fstype, "use_pct": use, "iuse_pct": iuse,
              "avail_bytes": avail, "size_bytes": size}  # fmt: skip
    return Finding(first, "fs.full", "error", f"{mount} ({filesystem}) is full: {', '.join(reasons)}",
                   detail=detail, samples=sorted({first, n}))  # fmt: skip
