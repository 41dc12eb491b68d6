"""gpu-forensics: offline log forensics for GPU training clusters.

>>> import forensics
>>> sorted(forensics.TABLES)
['events', 'files', 'gpus', 'identities', 'incidents', 'metrics', 'samples']
"""

from __future__ import annotations

import importlib as _importlib
from typing import Any as _Any

# frames registers the .forensics namespace on Polars frames; stats shares its name with a module the CLI
# imports (which would otherwise hide the function).
from . import frames as frames
from .errors import ForensicsError, InputError, ParseError, UnknownSourceError
from .schema import DIAGNOSES, EVENTS, FILES, GPUS, IDENTITIES, INCIDENTS, KINDS, METRICS, SAMPLES, TABLES
from .stats import stats

#: The rest of the API, imported when first used, so that ``forensics parse F | head`` does not wait for the
#: miners, the report and the store (issue 33): name -> (module, attribute; None for the module itself).
#: ingest, report and series are callable modules: forensics.ingest(paths, dataset), forensics.report(ds, path),
#: forensics.series(ds, incident).
_LAZY: dict[str, tuple[str, str | None]] = {
    "CAUSES": (".mine", "CAUSES"),
    "RuleError": (".mine", "RuleError"),
    "canonical_bdf": (".pci", "canonical_bdf"),
    "diagnose": (".mine", "diagnose"),
    "evaluate": (".mine.evaluate", "evaluate"),
    "ingest": (".ingest", None),
    "load_library": (".mine", "load_library"),
    "open_dataset": (".store", "open_dataset"),
    "parse_bytes": (".parse", "parse_bytes"),
    "parse_file": (".parse", "parse_file"),
    "plots": (".plots", None),
    "precursors": (".mine.precursors", "precursors"),
    "repeat_offenders": (".offenders", "repeat_offenders"),
    "report": (".report", None),
    "sequences": (".mine.precursors", "sequences"),
    "series": (".series", None),
    "timeline": (".mine.timeline", "timeline"),
}


def __getattr__(name: str) -> _Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'forensics' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = _importlib.import_module(module, __name__)
    value = value if attribute is None else getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "CAUSES",
    "DIAGNOSES",
    "EVENTS",
    "FILES",
    "ForensicsError",
    "GPUS",
    "IDENTITIES",
    "INCIDENTS",
    "InputError",
    "KINDS",
    "METRICS",
    "ParseError",
    "RuleError",
    "SAMPLES",
    "TABLES",
    "UnknownSourceError",
    "canonical_bdf",
    "diagnose",
    "evaluate",
    "ingest",
    "load_library",
    "open_dataset",
    "parse_bytes",
    "parse_file",
    "precursors",
    "repeat_offenders",
    "report",
    "sequences",
    "series",
    "stats",
    "timeline",
]

__version__ = "0.1.0"
