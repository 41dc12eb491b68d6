"""Patterns for Polars' regex engine (Rust ``regex``), cheap to compile.

Polars compiles a pattern on each call and keeps a small per-thread cache (a few dozen patterns); a
file's parse uses far more than that, so the large ones (prefix forms, envelopes, family anchors) are
compiled again for every file. What makes them slow to compile is Unicode: ``\\d`` and ``\\w`` stand
for thousands of code points, and a 2,000-character alternation of them costs ~7 ms per compile against
~1 ms with ASCII classes. Log structure (stamps, hosts, pids, loggers, identifiers) is ASCII, so the
patterns say so: :func:`ascii_classes` rewrites ``\\d``/``\\w`` (and ``\\D``/``\\W`` outside brackets) as
explicit ASCII classes, inside and outside bracket expressions. ``\\s`` and ``\\b`` stay as they are (cheap,
and a non-breaking space pasted from a web page is still white space).

>>> ascii_classes(r"^\\[(?P<pid>\\d+)\\] [\\w./-]+:\\d+ \\\\d")
'^\\\\[(?P<pid>[0-9]+)\\\\] [0-9A-Za-z_./-]+:[0-9]+ \\\\\\\\d'
>>> ascii_classes(r"[^\\W\\d]{3} \\D\\W")
'[^\\\\W0-9]{3} [^0-9][^0-9A-Za-z_]'
"""

from __future__ import annotations

from functools import lru_cache

_DIGIT, _WORD = "0-9", "0-9A-Za-z_"
_OUTSIDE = {"d": f"[{_DIGIT}]", "w": f"[{_WORD}]", "D": f"[^{_DIGIT}]", "W": f"[^{_WORD}]"}
_INSIDE = {"d": _DIGIT, "w": _WORD}  # a negated class inside brackets has no ASCII spelling: kept


@lru_cache(maxsize=4096)
def ascii_classes(pattern: str) -> str:
    """``pattern`` with ``\\d`` and ``\\w`` (and ``\\D``, ``\\W`` outside brackets) as ASCII classes."""
    if "\\" not in pattern:
        return pattern
    out: list[str] = []
    i, depth, n = 0, 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            table = _INSIDE if depth else _OUTSIDE
            out.append(table.get(e, c + e))
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
