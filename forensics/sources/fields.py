"""What the job-output modules share: their data files (``forensics/data/*.toml``), fields found in a
record's text, and the enricher of a family that has none of its own."""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from typing import Any

from ..families import row


def _data(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files("forensics.data").joinpath(name).read_text("utf-8"))


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _find(pattern: str, text: str, group: int | str = 1) -> str | None:
    m = re.search(pattern, text)
    return m.group(group) if m else None


def _first(text: str) -> str:
    return text.split("\n", 1)[0]


def _generic(parts: dict[str, Any], text: str) -> dict[str, Any]:
    return row(parts["kind"], "info", text=_first(text))
