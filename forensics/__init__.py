"""gpu-forensics: offline log forensics for GPU training clusters.

>>> import forensics
>>> sorted(forensics.TABLES)
['events', 'files', 'gpus', 'identities', 'incidents', 'metrics', 'samples']
"""

from __future__ import annotations

# ingest, report and series are callable modules: forensics.ingest(paths, dataset), forensics.report(ds, path),
# forensics.series(ds, incident);
# frames registers the .forensics namespace on Polars frames.
from . import frames as frames
from . import ingest, report, series
from . import plots as plots
from .errors import ForensicsError, InputError, ParseError, UnknownSourceError
from .mine import CAUSES, RuleError, diagnose, load_library
from .mine.evaluate import evaluate
from .mine.precursors import precursors, sequences
from .mine.timeline import timeline
from .offenders import repeat_offenders
from .parse import parse_bytes, parse_file
from .pci import canonical_bdf
from .schema import DIAGNOSES, EVENTS, FILES, GPUS, IDENTITIES, INCIDENTS, KINDS, METRICS, SAMPLES, TABLES
from .stats import stats
from .store import open_dataset

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
