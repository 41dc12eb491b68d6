"""The ``.forensics`` namespace on Polars frames: the queries one types again and again in a notebook.

Importing :mod:`forensics` registers it on LazyFrames and DataFrames of the events table (and of any
frame with the same columns)::

    ds.events.forensics.incident("job-123").forensics.kinds("gpu.*", "pcie.*").collect()
    ds.events.forensics.xid(79, 48).forensics.detail("name", "action").collect()
    ds.events.forensics.errors().forensics.around("2025-03-01T10:00:00Z", "5m").collect()

Each method returns a frame of the same type, so they chain with each other and with Polars' own.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Generic, TypeVar

import polars as pl

from .pci import canonical_bdf
from .schema import SEVERITIES

F = TypeVar("F", pl.DataFrame, pl.LazyFrame)


@pl.api.register_lazyframe_namespace("forensics")
@pl.api.register_dataframe_namespace("forensics")
class Forensics(Generic[F]):
    """Query helpers over an events frame (``ds.events`` or a timeline)."""

    def __init__(self, frame: F) -> None:
        self._frame = frame

    def kinds(self, *patterns: str) -> F:
        """Rows whose kind matches one of ``patterns`` (names or globs: ``gpu.*``)."""
        from .mine.language import glob_regex  # (the miners load when a frame uses them, not at import)

        return self._frame.filter(pl.col("kind").str.contains(glob_regex(list(patterns))))

    def xid(self, *codes: int) -> F:
        """Xid events (``gpu.xid``), of ``codes`` when given."""
        rows = self._frame.filter(pl.col("kind") == "gpu.xid")
        return rows.filter(pl.col("code").is_in(list(codes))) if codes else rows

    def errors(self, at_least: str = "error") -> F:
        """Rows of severity ``at_least`` or worse (one of ``debug`` … ``critical``)."""
        if at_least not in SEVERITIES:
            raise ValueError(f"severity {at_least!r}: one of {', '.join(SEVERITIES)}")
        return self._frame.filter(pl.col("severity").is_in(list(SEVERITIES[SEVERITIES.index(at_least) :])))

    def incident(self, *ids: str) -> F:
        """Rows of these incidents."""
        return self._frame.filter(pl.col("incident").is_in(list(ids)))

    def host(self, *hosts: str) -> F:
        """Rows of these hosts."""
        return self._frame.filter(pl.col("host").is_in(list(hosts)))

    def gpu(self, address: str, host: str | None = None) -> F:
        """Rows of the GPU at PCI ``address`` (any spelling: ``3b:00.0``, ``00000000:3B:00.0``), on ``host`` when given."""
        bdf = canonical_bdf(address)
        if bdf is None:
            raise ValueError(f"{address!r} is not a PCI address")
        rows = self._frame.filter(pl.col("gpu") == bdf)
        return rows if host is None else rows.filter(pl.col("host") == host)

    def around(self, when: datetime | str, window: str | timedelta = "10m") -> F:
        """Rows within ± ``window`` (``30s``, ``10m``, ``2h`` or a timedelta) of ``when`` (a time or an ISO string)."""
        from .mine.timeline import parse_time

        center = parse_time(when) if isinstance(when, str) else when
        from .mine.language import duration_us

        half = window if isinstance(window, timedelta) else timedelta(microseconds=duration_us(window))
        return self._frame.filter(pl.col("ts").is_between(center - half, center + half))

    def detail(self, *fields: str) -> F:
        """The ``detail`` JSON's ``fields`` as string columns of their own (null where absent)."""
        return self._frame.with_columns(pl.col("detail").str.json_path_match(f"$.{f}").alias(f) for f in fields)

    def counts(self, *by: str) -> F:
        """Rows per ``by`` (default: source and kind), most first."""
        keys = list(by) or ["source", "kind"]
        return self._frame.group_by(keys).agg(events=pl.len(), incidents=pl.col("incident").n_unique()).sort(
            ["events", *keys], descending=[True, *([False] * len(keys))])  # fmt: skip
