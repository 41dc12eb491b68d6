"""gpu-forensics: offline log forensics for GPU training clusters.

>>> import forensics
>>> sorted(forensics.TABLES)
['events', 'files', 'gpus', 'incidents', 'metrics']
"""

from __future__ import annotations

from .errors import ForensicsError, InputError, ParseError, UnknownSourceError
from .parse import parse_bytes, parse_file
from .pci import canonical_bdf
from .schema import EVENTS, FILES, GPUS, INCIDENTS, KINDS, METRICS, TABLES

__all__ = [
    "EVENTS",
    "FILES",
    "ForensicsError",
    "GPUS",
    "INCIDENTS",
    "InputError",
    "KINDS",
    "METRICS",
    "ParseError",
    "TABLES",
    "UnknownSourceError",
    "canonical_bdf",
    "parse_bytes",
    "parse_file",
]

__version__ = "0.1.0"
