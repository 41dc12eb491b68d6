"""Patterns for Polars' regex engine (Rust ``regex``), cheap to compile.

Polars compiles a pattern on each call and keeps a small per-thread cache (32 patterns, least recently
used out). A file's parse used more than that, so every pattern was compiled again for every file. Two
things keep that cost down. A small file's chains of patterns are searched in Python
(:func:`first_match`), which brings its patterns near the cache's size. And the patterns are cheap to
compile: what makes them slow is Unicode: ``\\d`` and ``\\w`` stand for thousands of code points, and a
2,000-character alternation of them costs ~7 ms per compile against ~1 ms with ASCII classes. Log
structure (stamps, hosts, pids, loggers, identifiers) is ASCII, so the patterns say so:
:func:`ascii_classes` rewrites ``\\d``/``\\w`` (and ``\\D``/``\\W`` outside brackets) as explicit ASCII
classes, inside and outside bracket expressions. ``\\s`` stays as it is (cheap, and a non-breaking space
pasted from a web page is still white space).

Word boundaries are ASCII too (``\\b`` and ``\\B`` outside brackets become ``(?-u:\\b)``, ``(?-u:\\B)``):
Rust's fast engine cannot decide a Unicode boundary next to a non-ASCII character, so on such a line
(a progress bar's blocks, a non-English message) a Unicode ``\\b`` sends the whole search to a slower
engine, 4x slower on the NCCL prefilter and half the speed of a job log of progress bars. Anchors
stand beside ASCII words, where the two differ only next to a non-ASCII letter (``WARNé``). Python's
``re`` spells the ASCII boundary ``(?a:\\b)``: :func:`for_python` gives a pattern to it.

>>> ascii_classes(r"^\\[(?P<pid>\\d+)\\] [\\w./-]+:\\d+ \\\\d")
'^\\\\[(?P<pid>[0-9]+)\\\\] [0-9A-Za-z_./-]+:[0-9]+ \\\\\\\\d'
>>> ascii_classes(r"[^\\W\\d]{3} \\D\\W")
'[^\\\\W0-9]{3} [^0-9][^0-9A-Za-z_]'
>>> ascii_classes(r"\\bWARN\\B[\\b]"), for_python(ascii_classes(r"\\bWARN\\b"))
('(?-u:\\\\b)WARN(?-u:\\\\B)[\\\\b]', '(?a:\\\\b)WARN(?a:\\\\b)')
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

import polars as pl

_DIGIT, _WORD = "0-9", "0-9A-Za-z_"
_OUTSIDE = {"d": f"[{_DIGIT}]", "w": f"[{_WORD}]", "D": f"[^{_DIGIT}]", "W": f"[^{_WORD}]"}
_INSIDE = {"d": _DIGIT, "w": _WORD}  # a negated class inside brackets has no ASCII spelling: kept
_ASCII_FLAG = "(?-u:"  # Rust: a group without Unicode (a word boundary already ASCII is kept as it is)


@lru_cache(maxsize=4096)
def ascii_classes(pattern: str) -> str:
    """``pattern`` with ``\\d`` and ``\\w`` (and ``\\D``, ``\\W`` outside brackets) as ASCII classes, and
    its word boundaries ASCII, in Rust's syntax."""
    if "\\" not in pattern:
        return pattern
    out: list[str] = []
    i, depth, n = 0, 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e in "bB" and not depth and not pattern.endswith(_ASCII_FLAG, 0, i):
                out.append(f"{_ASCII_FLAG}\\{e})")
            else:
                out.append((_INSIDE if depth else _OUTSIDE).get(e, c + e))
            i += 2
            continue
        out.append(c)
        if c == "[":
            depth += 1
            # "[]…]" and "[^]…]": a ] right after the opening is a literal
            j = i + 1 + (pattern[i + 1 : i + 2] == "^")
            if pattern[j : j + 1] == "]":
                out.append(pattern[i + 1 : j + 1])
                i = j
        elif c == "]" and depth:
            depth -= 1
        i += 1
    return "".join(out)


def for_python(pattern: str) -> str:
    """A pattern of :func:`ascii_classes` in the syntax of Python's ``re`` (its ASCII word boundaries)."""
    return pattern.replace("(?-u:\\b)", "(?a:\\b)").replace("(?-u:\\B)", "(?a:\\B)")


#: Up to how many rows :func:`first_match` searches in Python.
PYTHON_ROWS = 256


def first_match(text: pl.Expr, named: Sequence[tuple[str, str]], *, rows: int) -> pl.Expr:
    """The name of the first of ``named`` (name, pattern) whose pattern ``text`` contains, else null: the
    chain ``when(text.str.contains(p0)).then(n0).when(…)…``, for a frame of ``rows`` rows.

    Polars' per-thread cache holds 32 compiled patterns; a chain of twenty, beside a file's other
    patterns, was compiled again for every file, which cost a small file more than the search. Up to
    PYTHON_ROWS rows, the chain runs in Python on patterns compiled once per process (the same patterns,
    in Python's syntax: :func:`for_python`); above, as the chain of Polars searches."""
    if not named:
        return pl.lit(None, pl.String)
    if rows > PYTHON_ROWS:
        expr: Any = pl
        for name, pattern in named:
            expr = expr.when(text.str.contains(pattern)).then(pl.lit(name))
        return expr.otherwise(pl.lit(None, pl.String))
    compiled = _compiled(tuple(named))

    def search(values: pl.Series) -> pl.Series:
        return pl.Series(
            [None if v is None else next((n for n, rx in compiled if rx.search(v)), None) for v in values.to_list()],
            dtype=pl.String,
        )

    return text.map_batches(search, return_dtype=pl.String, is_elementwise=True)


@lru_cache(maxsize=64)
def _compiled(named: tuple[tuple[str, str], ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((name, re.compile(for_python(pattern))) for name, pattern in named)


def structure(pattern: str) -> Iterator[tuple[int, str, int]]:
    """The parentheses and bars of ``pattern`` outside escapes and character classes (``[^]…]`` and
    ``[]…]`` hold a literal ``]``): ``(index, char, depth)``, the depth the character leaves (an opening
    parenthesis counts itself, a closing one does not).

    >>> [(i, c, d) for i, c, d in structure(r"a(b|[|)]c)|\\(d")]
    [(1, '(', 1), (3, '|', 1), (9, ')', 0), (10, '|', 0)]
    """
    depth, i, in_class = 0, 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1 if pattern[i + 1: i + 2] == "^" else 0
            i += 1 if pattern[i + 1: i + 2] == "]" else 0
        elif c in "()|":
            depth += {"(": 1, ")": -1, "|": 0}[c]
            yield i, c, depth
        i += 1
