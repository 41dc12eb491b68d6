"""gpu-forensics: offline log forensics for GPU training clusters.

>>> import forensics
>>> sorted(forensics.TABLES)
['events', 'files', 'gpus', 'identities', 'incidents', 'metrics']
"""

from __future__ import annotations

from . import ingest  # a callable package: forensics.ingest(paths, dataset)
from .errors import ForensicsError, InputError, ParseError, UnknownSourceError
from .parse import parse_bytes, parse_file
from .pci import canonical_bdf
from .schema import EVENTS, FILES, GPUS, IDENTITIES, INCIDENTS, KINDS, METRICS, TABLES
from .store import open_dataset

__all__ = [
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
    "TABLES",
    "UnknownSourceError",
    "canonical_bdf",
    "ingest",
    "open_dataset",
    "parse_bytes",
    "parse_file",
]

__version__ = "0.1.0"
