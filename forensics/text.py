"""Bytes to lines, vectorized, for every line-oriented source.

Any bytes are accepted: a newline scan in numpy builds an Arrow string array over the original buffer
(no per-line Python objects). Lines that are not valid UTF-8 are decoded with ``backslashreplace``, so
no byte is lost and the row still says exactly what was there; their count is reported.

>>> lines, bad = split_lines(b"a\\r\\nb\\n\\xffc")
>>> lines.to_list(), bad
(['a', 'b', '\\\\xffc'], 1)
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (registers pa.compute)

from .regex import for_python

#: Up to this many lines :func:`contains` searches in Python, on patterns compiled once per process: a
#: Polars search is a query plan of its own (~0.1–1 ms whatever the rows), which a small file pays for
#: every pattern.
PYTHON_LINES = 256
#: ... and up to this many characters in all: Python's backtracking engine is no match for Rust's linear one
#: on a long line (a 50 MB line without a newline).
PYTHON_CHARS = 64 << 10


def split_lines(data: bytes) -> tuple[pl.Series, int]:
    """Split ``data`` into lines (without ``\\n`` or a trailing ``\\r``); return them and the invalid-UTF-8 count."""
    if not data:
        return pl.Series("line", [], dtype=pl.String), 0
    if not data.endswith(b"\n"):
        data += b"\n"
    if len(data) <= PYTHON_CHARS and data.count(b"\n") <= PYTHON_LINES:  # (a few lines: no Arrow arrays)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            split = [x[:-1] if x.endswith("\r") else x for x in text.split("\n")[:-1]]
            return pl.Series("line", split, dtype=pl.String), 0
    binary = _binary_lines(data)
    try:
        strings = binary.cast(pa.large_string())
    except pa.ArrowInvalid:
        # Rare path: escape the bad bytes (lossless), split again, and count the lines that grew.
        fixed = _binary_lines(data.decode("utf-8", "backslashreplace").encode("utf-8"))
        grew = pa.compute.not_equal(pa.compute.binary_length(binary), pa.compute.binary_length(fixed))
        bad = int(pa.compute.sum(grew).as_py() or 0)
        strings = fixed.cast(pa.large_string())
    else:
        bad = 0
    lines = pl.Series("line", pl.from_arrow(strings), dtype=pl.String)
    if lines.len() <= PYTHON_LINES and not any(x.endswith("\r") for x in lines.to_list()):
        return lines, bad
    crlf = lines.str.ends_with("\r")
    if crlf.any():  # CRLF files; a lone \r inside a line (progress bars) stays
        lines = pl.select(
            pl.when(crlf).then(lines.str.slice(0, lines.str.len_chars() - 1)).otherwise(lines)
        ).to_series()
    return lines.alias("line"), bad


def small_key(lines: pl.Series, most: int) -> tuple[str, int] | None:
    """Up to ``most`` lines as one hashable value (a memo's key: a small file's sniff and its parse read the
    same lines), or None: more lines, or a line that holds a newline (the joined text would not say them).

    >>> small_key(pl.Series(["a", ""]), 10), small_key(pl.Series(["a\\nb"]), 10), small_key(pl.Series(["a"]), 0)
    (('a\\n', 2), None, None)
    """
    n = lines.len()
    if n > most:
        return None
    text = "\n".join(lines.to_list())
    return (text, n) if text.count("\n") == max(n - 1, 0) else None


def key_lines(key: tuple[str, int]) -> pl.Series:
    """The lines a :func:`small_key` stands for."""
    text, n = key
    return pl.Series("line", text.split("\n") if n else [], dtype=pl.String)


def contains(lines: pl.Series, pattern: str, *, null: bool | None = None) -> pl.Series:
    """``lines.str.contains(pattern)`` (a pattern of :func:`forensics.regex.ascii_classes`), searched in
    Python up to :data:`PYTHON_LINES` lines; a null line gives ``null``.

    >>> contains(pl.Series(["NVRM: Xid", "usb 1-1", None]), r"Xid|\\bPCIe\\b").to_list()
    [True, False, None]
    """
    values = lines.to_list() if lines.len() <= PYTHON_LINES else None
    if values is None or sum(len(x) for x in values if x) > PYTHON_CHARS:
        found = lines.str.contains(pattern)
        return found if null is None else found.fill_null(null)
    rx = _python_re(pattern)
    return pl.Series(lines.name, [null if x is None else rx.search(x) is not None for x in values], dtype=pl.Boolean)


def few(lines: pl.Series, most: int = PYTHON_LINES) -> bool:
    """Whether ``lines`` are few and short enough to be read in Python (:data:`PYTHON_LINES`,
    :data:`PYTHON_CHARS`)."""
    return lines.len() <= most and sum(len(x) for x in lines.to_list() if x) <= PYTHON_CHARS


@lru_cache(maxsize=64)
def _python_re(pattern: str) -> re.Pattern[str]:
    return re.compile(for_python(pattern))


def dedent(lines: pl.Series, least: int = 2) -> pl.Series:
    """A paste indented as a whole (a markdown code block, a quote in an e-mail) loses the indentation
    every non-blank line shares, when it is ``least`` columns or more: the log's own indentation (NVRM
    and traceback continuation lines) is what is left. (A kernel log's lines never all start with a
    space, so one column is a paste's there; a trainer may print every line after one.)

    >>> dedent(pl.Series(["    [ 1.0] NVRM: a", "", "        NVRM: b"])).to_list()
    ['[ 1.0] NVRM: a', '', '    NVRM: b']
    >>> dedent(pl.Series(["[ 1.0] a", "    b"])).to_list()
    ['[ 1.0] a', '    b']
    >>> dedent(pl.Series([" [ 1.0] a", " [ 2.0] b"]), least=1).to_list()
    ['[ 1.0] a', '[ 2.0] b']
    """
    for pad in (" ", "\t"):
        first = _first_text(lines)
        if first is None:
            return lines
        if not first.startswith(pad):  # a line with text starts at column 0: nothing to take
            continue
        text = lines.filter(lines.str.strip_chars() != "")
        common = (text.str.len_chars() - text.str.strip_chars_start(pad).str.len_chars()).min()
        if common is None or common < (least if pad == " " else 1):
            continue
        lines = pl.select(
            pl.when(lines.str.strip_chars() == "").then(lines).otherwise(lines.str.slice(int(common)))
        ).to_series().alias(lines.name)
    return lines


#: What Polars' ``str.strip_chars()`` strips (Rust's ``char::is_whitespace``; Python's ``str.strip()``
#: also strips U+001C..U+001F).
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _first_text(lines: pl.Series, head: int = 64) -> str | None:
    """The first line that is not blank (see :data:`WHITESPACE`), or None. It is almost always among
    the first few, read in Python; past them Polars finds it."""
    for line in lines.head(head).to_list():
        if line is not None and line.strip(WHITESPACE):
            return line
    if lines.len() <= head:
        return None
    rows = (lines.str.strip_chars() != "").arg_true()
    return lines[rows[0]] if rows.len() else None


def _binary_lines(data: bytes) -> pa.LargeBinaryArray:
    """One binary value per line, without its "\\n" (``data`` ends with one)."""
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    offsets = np.zeros(len(newlines) + 1, dtype=np.int64)
    offsets[1:] = newlines + 1
    with_nl = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(newlines), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    return pa.compute.binary_slice(with_nl, 0, -1)
