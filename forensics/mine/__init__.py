"""Diagnosis and sequence mining: rules as data (``rules/*.toml``) compiled to Polars queries."""

from __future__ import annotations

from .diagnose import diagnose
from .language import CAUSES, Library, RuleError, load_library

__all__ = ["CAUSES", "Library", "RuleError", "diagnose", "load_library"]
