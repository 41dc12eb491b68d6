"""The lines of interest of a line-oriented log, found in one multi-pattern pass.

A kernel log or a journal is mostly lines that say nothing about a failure (probes, audit, veth, USB).
Only the records with a line of interest are split, timestamped, parsed and kept as events; the other
lines are counted in the file's ``files`` row (``forensics parse --all-lines`` keeps them as ``other``
rows). A line is of interest when it holds:

* an anchor of a family of the source's grammar (the grammar's prefilter: every event of a kind),
* an anchor of a message catalog (:func:`forensics.messages.load`: smartd's mail, a container runtime's
  error, a BMC's SEL line inside a kern.log: the diagnosis reads these ``other`` rows),
* a word of trouble (:data:`forensics.messages.TROUBLE`),
* a journal's marker (``-- Boot … --``, ``-- Reboot --``: the boot numbers) or a kernel's hello
  (``Linux version``: a boot).

Two engines find them, with the same result. Up to :data:`HYPERSCAN_BYTES` the patterns run in Polars
(Rust ``regex``), one pass each: a pass costs little on a small file, and a combined alternation of
them all sends Rust's engine to its slow path. Above, when the ``hyperscan`` wheel is installed, one
Hyperscan scan of the chunk's bytes finds every match of the ~600 alternatives at once (~400 MB/s on
this machine, against ~20 MB/s for the passes); its matches are a superset of the lines of interest
(``\\s`` and ``[^|]`` may run over a newline in a scan of the whole chunk), so the lines it names are
checked by the Polars passes, which see only those. The compiled database is kept on disk
(:func:`_cache_dir`): compiling it takes seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from .. import messages
from ..regex import for_python, structure

#: Up to this many lines the patterns run in Python (``re``, compiled once per process).
PYTHON_ROWS = 256
#: Above this many bytes per chunk the lines of interest are found with Hyperscan (when installed): the
#: Polars passes of the ~600 alternatives take ~0.25 s over a 1 MiB chunk, a log's first (its first rows
#: wait for it), where loading the database and scanning take less.
HYPERSCAN_BYTES = 64 << 10

#: Markers that number boots or open a boot (the journal's, the kernel's hello).
MARKERS = r"^[ \t>]*-- (?:Boot [0-9a-f]{32}|Reboot|Logs begin at |Journal begins at |No entries)|Linux version \d"


def patterns(prefilters: tuple[str, ...]) -> tuple[str, ...]:
    """The patterns (Rust syntax) whose union makes a line of interest, for sources whose grammars have
    these ``prefilters``."""
    return (*prefilters, *_catalog_anchors(), messages.TROUBLE, MARKERS)


@cache
def _catalog_anchors() -> tuple[str, ...]:
    """The message catalogs' anchors (:meth:`forensics.messages.Catalog.anchors`), kept on disk under the
    digest of the catalogs and of the code that reads them: reading the ~40 TOML files takes ~0.5 s, the
    most of what a ``parse`` pays before its first row."""
    from .. import regex

    digest = hashlib.sha256()
    for suffix in (".toml", ".csv"):
        for name, text in messages._data_files(suffix):
            digest.update(f"{name}\0{len(text)}\0".encode() + text.encode())
    for module in (messages, regex):
        digest.update(Path(module.__file__ or "").read_bytes())
    path = _cache_dir() / f"anchors-{digest.hexdigest()[:24]}.json"
    try:
        found = json.loads(path.read_text("utf-8"))
        if isinstance(found, list) and all(isinstance(a, str) for a in found):
            return tuple(found)
    except (OSError, ValueError):
        pass
    anchors = tuple(messages.load().anchors())
    _write(path, json.dumps(anchors).encode())
    return anchors


def _write(path: Path, data: bytes) -> None:
    """``data`` into ``path`` whole or not at all (a failed write is ignored: the cache is an aid)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        pass


def of_interest(lines: pl.Series, data: bytes | None, prefilters: tuple[str, ...]) -> pl.Series:
    """Which of ``lines`` are of interest (a Boolean column). ``data`` is the bytes the lines were split
    from, one line per ``\\n`` (for the Hyperscan scan), or None."""
    pats = patterns(prefilters)
    big = data is not None and len(data) >= HYPERSCAN_BYTES
    if (big or len(lines) <= PYTHON_ROWS) and (db := _database(pats)) is not None:
        if data is None or b"\r" in data:  # (the lines as read: dedented, without their carriage returns)
            data = "\n".join(lines.to_list()).encode("utf-8", "surrogateescape") + b"\n"
        rows = _scan(db, data, len(lines))
        # a match of the whole chunk may run over a line's end (``\s``, ``[^|]``): each line is scanned alone
        keep = [_matches(db, line.encode("utf-8", "surrogateescape")) for line in lines.gather(rows).to_list()]
        out = pl.Series("interest", [False] * len(lines), dtype=pl.Boolean)
        if rows.len():
            out.scatter(rows.filter(pl.Series(keep, dtype=pl.Boolean)), True)
        return out
    return _passes(lines, pats)


def _matches(db: object, text: bytes) -> bool:
    """Whether ``text`` holds a match (the scan stops at the first)."""
    import hyperscan

    try:
        db.scan(text, match_event_handler=lambda *_: True)  # type: ignore[attr-defined]
    except hyperscan.ScanTerminated:
        return True
    return False


def _passes(lines: pl.Series, pats: tuple[str, ...]) -> pl.Series:
    if lines.len() == 0:
        return pl.Series("interest", [], dtype=pl.Boolean)
    if lines.len() <= PYTHON_ROWS:  # (compiled once per process: Polars would compile them again per call)
        compiled = _python(pats)
        return pl.Series("interest", [any(rx.search(line) for rx in compiled) for line in lines.to_list()],
                         dtype=pl.Boolean)  # fmt: skip
    return pl.select(pl.any_horizontal(pl.lit(lines).str.contains(p) for p in pats).alias("interest")).to_series()


@cache
def _python(pats: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(for_python(p)) for p in pats)


def _scan(db: object, data: bytes, n_lines: int) -> pl.Series:
    """The rows of the lines a match of the database ends on."""
    ends: list[int] = []
    db.scan(data, match_event_handler=lambda _id, _from, to, _flags, _ctx: ends.append(to))  # type: ignore[attr-defined]
    if not ends:
        return pl.Series("row", [], dtype=pl.UInt32)
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    # A match ends after its last byte: the line of byte ``to - 1`` (the newlines before it)
    rows = np.unique(np.searchsorted(newlines, np.asarray(ends, dtype=np.int64) - 1, side="left"))
    return pl.Series("row", rows[rows < n_lines], dtype=pl.UInt32)


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of ``pattern`` (Hyperscan limits one expression's size)."""
    cuts = [i for i, c, depth in structure(pattern) if c == "|" and depth == 0]
    return [pattern[a + 1: b] for a, b in zip([-1, *cuts], [*cuts, len(pattern)], strict=True)]


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpu-forensics"


@cache
def _database(pats: tuple[str, ...]) -> object | None:
    """The Hyperscan database of ``pats`` (block mode), or None without the wheel or when a pattern
    cannot be compiled (then the Polars passes do all the work)."""
    try:
        import hyperscan
    except ImportError:
        return None
    found: set[tuple[bytes, int]] = set()
    for pattern in pats:
        for alt in _alternatives(for_python(pattern).replace("(?a:\\b)", "\\b").replace("(?a:\\B)", "\\B")):
            flag = hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_ALLOWEMPTY
            if alt.startswith("(?i)"):
                alt, flag = alt[4:], flag | hyperscan.HS_FLAG_CASELESS
            found.add((alt.encode(), flag))
    exprs, flags = zip(*sorted(found), strict=True) if found else ((), ())  # (in one order: the key is stable)
    # (a catalog lists a group's names in no fixed order: the key sorts them)
    canonical = b"\0".join(sorted(b"|".join(sorted(re.split(rb"[|()]|\?:", e))) for e in exprs))
    key = hashlib.sha256(canonical + repr(sorted(flags)).encode() + hyperscan.__version__.encode()).hexdigest()[:24]
    path = _cache_dir() / f"interest-{key}.hsdb"
    try:
        loaded = hyperscan.loadb(path.read_bytes(), hyperscan.HS_MODE_BLOCK)
        loaded.scratch = hyperscan.Scratch(loaded)  # (a loaded database has none of its own)
        return loaded
    except (OSError, hyperscan.error):
        pass
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    try:
        db.compile(expressions=list(exprs), ids=list(range(len(exprs))), elements=len(exprs), flags=list(flags))
    except hyperscan.error:
        return None
    _write(path, hyperscan.dumpb(db))
    return db
