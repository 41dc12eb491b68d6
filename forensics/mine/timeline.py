"""One incident on one clock: every source of every host in time order, the evidence marked.

Rows with a time come in time order; rows without one (sources that print none) follow, in file and
line order. ``mark`` is the row's role in the diagnosis (``failure``, ``precursor``, ``related``,
``follower``) or null.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl

from ..errors import InputError
from .diagnose import diagnose
from .language import Library, glob_regex, known_kinds, window_us

#: Kinds left out unless asked for: every line no family claimed, and every training step.
QUIET_KINDS = ("other", "train.step")


def timeline(ds: Any, incident: str | None = None, *, around: datetime | str | None = None,
             window: str | timedelta = "10m", kinds: list[str] | None = None,
             library: Library | None = None) -> pl.DataFrame:  # fmt: skip
    """The events of ``incident`` (the only one when None) with ``mark``; ``around`` (a time, or
    ``"failure"`` for the diagnosed first failure, or the earliest timed evidence when it has no time)
    keeps the rows within ± ``window`` (``"10m"`` or a timedelta) of it; ``kinds`` (names or globs,
    or ``["all"]`` for every kind) keep those kinds, default all but :data:`QUIET_KINDS`."""
    half = timedelta(microseconds=window_us(window))
    if kinds and "all" not in kinds:
        known_kinds(kinds, option="--kinds")
    incident = one_incident(ds, incident)
    events = ds.events.filter(pl.col("incident") == incident).collect()
    d = diagnose(events.lazy(), incident=incident, library=library)
    out = marked(events, d, kinds=kinds)
    if around is not None:
        if around == "failure":
            timed = [e["ts"] for e in (d["evidence"][0] if d.height else []) if e["ts"] is not None]
            center = d["first_ts"][0] if d.height and d["first_ts"][0] is not None else min(timed, default=None)
            if center is None:
                raise InputError(f"{incident}: the first failure has no time; give --around a time")
        elif isinstance(around, str):
            center = parse_time(around)
        else:
            center = around
        out = out.filter(pl.col("ts").is_between(center - half, center + half))
    return out


def one_incident(ds: Any, incident: str | None) -> str:
    """``incident``, checked to be in ``ds``; when None, the dataset's only one (else an :class:`InputError`)."""
    ids = ds.incidents.select("incident").collect().get_column("incident").to_list()
    if not ids:
        raise InputError("the dataset holds no incident")
    if incident is None:
        if len(ids) != 1:
            raise InputError(f"{len(ids)} incidents in the dataset: name one with --incident ({', '.join(sorted(ids)[:5])}…)")
        return ids[0]  # type: ignore[no-any-return]
    if incident not in ids:
        raise InputError(f"no incident {incident!r} in the dataset")
    return incident


#: The columns of a timeline.
COLUMNS = ("incident", "ts", "uptime_s", "host", "source", "kind", "severity", "gpu", "rank", "code", "file", "line",
           "mark", "message")  # fmt: skip


def marked(events: pl.DataFrame, diagnoses: pl.DataFrame, *, kinds: list[str] | None = None) -> pl.DataFrame:
    """``events`` (of one or many incidents) with each row's ``mark`` from ``diagnoses``' evidence,
    kept by ``kinds`` (``["all"]``: every kind; default: all but :data:`QUIET_KINDS`, marked rows always), in
    timeline order."""
    marks = (
        diagnoses.select("incident", "evidence").explode("evidence").drop_nulls("evidence")
        .select("incident", pl.col("evidence").struct.field("file", "line", "kind"),
                mark=pl.col("evidence").struct.field("role"))
        .unique(["incident", "file", "line", "kind"], keep="first", maintain_order=True)
    )  # fmt: skip
    keys = ["incident", "file", "line", "kind"]
    out = events.join(marks.cast({"line": events.schema["line"]}), on=keys, how="left", maintain_order="left")
    if kinds and "all" in kinds:
        pass
    elif kinds:
        out = out.filter(pl.col("kind").str.contains(glob_regex(kinds)))
    else:
        out = out.filter(~pl.col("kind").is_in(QUIET_KINDS) | pl.col("mark").is_not_null())
    return out.sort("incident", pl.col("ts").is_null(), "ts", "file", "line").select(COLUMNS)


def parse_time(text: str) -> datetime:
    """An ISO-8601 time; without a zone it is UTC."""
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--around {text!r}: expected an ISO time such as 2025-01-01T02:08:00Z, or 'failure'") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)
