"""Callable packages: ``forensics.ingest(...)`` and ``forensics.report(...)`` run their function while
the package's modules stay importable (a function of the same name would hide the package)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


def make_callable(name: str, function: Callable[..., Any]) -> None:
    """Make the module ``name`` call ``function`` when called."""

    class _Callable(types.ModuleType):
        __doc__ = sys.modules[name].__doc__

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

    sys.modules[name].__class__ = _Callable
