"""An incident's telemetry around its first failure: the ``samples`` rows of the failing host in the minutes
before it (and a few after), each with the chart family it is drawn in (``data/series_families.toml``).

The field guides say where a cause that prints no log line shows: the temperature rising, then clocks
falling; power collapsing before the drop; the PCIe link narrowing; error counters growing; disk await high
while the GPUs idle. The report draws these rows on the incident's time axis (:func:`forensics.plots.series_spec`);
:func:`series` gives them to a notebook.

Which rows: the incident's samples on its first failing host (all its hosts when that one has none, or the
failure names no host); the timed ones within ``before`` of the failure and ``after`` it (all of them when
the failure has no time), and the snapshots without a time (a sensor listing, an ``lspci``) as they are.
The failure's time is the diagnosis' first failure, else its earliest timed evidence, as the timeline's.

>>> sorted(family_of())[:3]
['await_ms', 'carrier', 'ecc_dbe']
"""

from __future__ import annotations

import tomllib
from datetime import datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from ._modules import make_callable
from .mine import diagnose
from .mine.language import Library, window_us
from .mine.timeline import one_incident

#: The default window: the minutes before the failure, where the field guides look, and a few after it.
BEFORE = timedelta(minutes=30)
AFTER = timedelta(minutes=5)


@cache
def families() -> list[dict[str, Any]]:
    """The chart families of ``data/series_families.toml``, in drawing order: ``name``, ``title``,
    ``metrics``, ``counter`` (drawn as growth per minute)."""
    text = resources.files("forensics.data").joinpath("series_families.toml").read_text("utf-8")
    return [{"counter": False, **f} for f in tomllib.loads(text)["family"]]


@cache
def family_of() -> dict[str, str]:
    """Metric → the family whose chart draws it."""
    return {m: f["name"] for f in families() for m in f["metrics"]}


def failure_time(diagnosis: dict[str, Any]) -> datetime | None:
    """Where an incident's charts are centred: its first failure's time, else its earliest timed evidence."""
    if diagnosis.get("first_ts") is not None:
        return diagnosis["first_ts"]  # type: ignore[no-any-return]
    return min((e["ts"] for e in diagnosis.get("evidence") or [] if e["ts"] is not None), default=None)


def window(samples: pl.LazyFrame, diagnosis: dict[str, Any], *, before: timedelta = BEFORE,
           after: timedelta = AFTER) -> pl.DataFrame:  # fmt: skip
    """The rows of ``samples`` (the dataset's table) an incident's charts draw, given its ``diagnosis`` (a
    row of :func:`forensics.diagnose`), in host, family, metric, device and time order; columns those of
    ``samples`` and ``family``."""
    known = family_of()
    rows = samples.filter((pl.col("incident") == diagnosis["incident"]) & pl.col("metric").is_in(list(known)))
    host = diagnosis.get("first_host")
    if host is not None:
        on_host = rows.filter(pl.col("host") == host)
        if on_host.select(pl.len()).collect().item():
            rows = on_host
    center = failure_time(diagnosis)
    if center is not None:
        rows = rows.filter(pl.col("ts").is_null() | pl.col("ts").is_between(center - before, center + after))
    order = {f["name"]: i for i, f in enumerate(families())}
    out = rows.with_columns(family=pl.col("metric").replace_strict(known, default=None)).collect()
    return out.sort(pl.col("family").replace_strict(order, return_dtype=pl.Int32), "host", "metric",
                    pl.coalesce("gpu", "device"), pl.col("ts").is_null(), "ts", "file", "line")  # fmt: skip


def series(ds: Any, incident: str | None = None, *, before: str | timedelta = BEFORE, after: str | timedelta = AFTER,
           library: Library | None = None) -> pl.DataFrame:  # fmt: skip
    """The telemetry of ``incident`` (the only one when None) around its first failure, as :func:`window`
    reads it: ``before`` and ``after`` are ``"30m"``-style spans or timedeltas.

    >>> forensics.series(ds, "inc-1").group_by("family").len()   # doctest: +SKIP
    """
    incident = one_incident(ds, incident)
    d = diagnose(ds, incident=incident, library=library)
    if d.height == 0:
        return ds.samples.clear().with_columns(family=pl.lit(None, pl.String)).collect()  # type: ignore[no-any-return]
    return window(ds.samples, d.row(0, named=True), before=_span(before), after=_span(after))


def _span(value: str | timedelta) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(microseconds=window_us(value))


make_callable(__name__, series)
