"""What the sources share: their data files (``forensics/data/*.toml``), fields found in a record's text,
the numbers read from it (:func:`to_int`, :func:`to_float`: the one way every source turns log text into
a number), and the enricher of a family that has none of its own."""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from typing import Any

from ..families import row


def _data(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files("forensics.data").joinpath(name).read_text("utf-8"))


#: The range of the int64 columns a number goes to; one outside it is not a number a tool printed.
_INT64 = range(-(1 << 63), 1 << 63)


def to_int(text: object, base: int = 10) -> int | None:
    """The integer ``text`` spells, or None: a malformed, cut or absurd number in a log (``73.952.19``,
    5,000 digits, ``1e999``) stays in the message and its field is null, never an exception.

    >>> to_int("79"), to_int("ff", 16), to_int("73.952"), to_int("9" * 5000), to_int(float("inf")), to_int(None)
    (79, 255, None, None, None, None)
    """
    if text is None:
        return None
    try:
        value = int(text, base) if isinstance(text, str) else int(text)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None
    return value if value in _INT64 else None


def to_float(text: object) -> float | None:
    """The number ``text`` spells, or None (see :func:`to_int`).

    >>> to_float("73.95"), to_float("73.952.19"), to_float("nan") != to_float("nan"), to_float(None)
    (73.95, None, True, None)
    """
    if text is None:
        return None
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None


def _find(pattern: str, text: str, group: int | str = 1) -> str | None:
    m = re.search(pattern, text)
    return m.group(group) if m else None


def _first(text: str) -> str:
    return text.split("\n", 1)[0]


def _generic(parts: dict[str, Any], text: str) -> dict[str, Any]:
    return row(parts["kind"], "info", text=_first(text))
