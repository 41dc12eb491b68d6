"""Which events precede a failure, how often, how long before: Polars queries over an events frame.

:func:`precursors` and :func:`sequences` take the events (a LazyFrame such as ``ds.events``, or a
DataFrame) and return DataFrames, like every analysis of the API; their window is a duration string
like the command line's (``"30m"``) or a timedelta.

A **target** is the first event matching ``KIND[:CODE]`` per key (``gpu``: incident, host and GPU;
``host``; ``incident``) — duplicates of one message in dmesg and kern.log count once. An **item** is
an event kind, and ``kind:code`` for events with a code. For every item seen on a target's key in the
``window`` before it:

- ``support``: how many targets it preceded; ``confidence``: support / targets;
- ``base_rate``: the share of all keys of the dataset where the item occurs at all;
- ``lift``: confidence / base_rate (above 1: it announces the target more than it is simply common);
- ``lead_p10_s``, ``lead_median_s``, ``lead_p90_s``: seconds from the item's first occurrence in the
  window to the target.

:func:`sequences` counts ordered chains of 1–3 items followed by the target (length 2–4 in all),
pruned Apriori-style: only items with at least ``min_support`` targets take part.
"""

from __future__ import annotations

import polars as pl

from datetime import timedelta

from ..errors import InputError
from ..schema import KINDS
from .engine import KEYS
from .language import known_kinds, window_us

#: Kinds that say nothing by themselves: lines no family claimed, and every training step.
NOISE_KINDS = ("other", "unparsed", "train.step")


def parse_target(text: str) -> tuple[str, int | None]:
    """``"gpu.xid:79"`` → ``("gpu.xid", 79)``; ``"host.oom_kill"`` → ``("host.oom_kill", None)``; a kind
    not in the vocabulary raises :class:`~forensics.errors.InputError` naming the closest ones."""
    kind, sep, code = text.strip().partition(":")
    if not kind or (sep and not code.lstrip("-").isdigit()):
        raise InputError(f"--target {text!r}: expected KIND or KIND:CODE, for example gpu.xid:79")
    if kind not in KINDS:
        known_kinds([kind], option="--target")
        raise InputError(f"--target {text!r}: one kind, not a pattern")
    return kind, int(code) if sep else None


def _is_target(kind: str, code: int | None) -> pl.Expr:
    e = pl.col("kind") == kind
    return e & (pl.col("code") == code) if code is not None else e


def _items(events: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """One row per event and item (its kind, and kind:code when it has a code), timed rows only."""
    base = events.filter(pl.col("ts").is_not_null() & ~pl.col("kind").is_in(NOISE_KINDS)).select(
        *keys, "kind", "code", t=pl.col("ts").dt.epoch("us")
    ).drop_nulls(keys)
    with_code = base.filter(pl.col("code").is_not_null()).with_columns(
        item=pl.concat_str("kind", pl.lit(":"), pl.col("code").cast(pl.String))
    )
    # ``fine``: the most specific item of its event (sequences use only those: no "gpu.xid → gpu.xid:45").
    kinds = base.with_columns(item=pl.col("kind"), fine=pl.col("code").is_null())
    return pl.concat([kinds, with_code.with_columns(fine=pl.lit(True))]).drop("code")


def targets(events: pl.LazyFrame, kind: str, code: int | None, by: str = "host") -> pl.LazyFrame:
    """The first timed target event per key: the key columns and ``t_target`` (µs)."""
    keys = KEYS[by]
    return (
        events.filter(_is_target(kind, code) & pl.col("ts").is_not_null())
        .drop_nulls(keys)
        .group_by(keys)
        .agg(t_target=pl.col("ts").dt.epoch("us").min())
    )


def _before(events: pl.LazyFrame, kind: str, code: int | None, by: str, window: int) -> pl.LazyFrame:
    """Per target and item, the item's first occurrence in the window before the target."""
    keys = KEYS[by]
    t = targets(events, kind, code, by)
    own = _is_target(kind, code)
    items = _items(events.filter(~own), keys)
    return (
        t.join(items, on=keys)
        .filter((pl.col("t") < pl.col("t_target")) & (pl.col("t") >= pl.col("t_target") - window))
        .group_by(*keys, "t_target", "item")
        .agg(t_first=pl.col("t").min(), fine=pl.col("fine").first())
    )


def precursors(events: pl.LazyFrame | pl.DataFrame, kind: str, code: int | None = None, *, by: str = "host",
               window: str | timedelta = "30m") -> pl.DataFrame:  # fmt: skip
    """Every item that precedes the target within ``window`` (``"30m"`` or a timedelta) before it on
    the same key, ranked by lift then support (see the module's doc for the columns)."""
    return _precursors(events.lazy(), kind, code, by=by, window=window_us(window)).collect()


def _precursors(events: pl.LazyFrame, kind: str, code: int | None, *, by: str, window: int) -> pl.LazyFrame:
    if by not in KEYS:
        raise InputError(f"--by {by!r}: one of {', '.join(KEYS)}")
    keys = KEYS[by]
    n_targets = targets(events, kind, code, by).select(pl.len().alias("targets"))
    units = _items(events, keys).select(*keys, "item").unique()  # the base rate counts every key
    n_units = units.select(*keys).unique().select(pl.len().alias("units"))
    base = units.group_by("item").agg(present=pl.len()).join(n_units, how="cross").with_columns(
        base_rate=pl.col("present") / pl.col("units")
    )
    lead = (pl.col("t_target") - pl.col("t_first")) / 1e6
    found = _before(events, kind, code, by, window).group_by("item").agg(
        support=pl.len(),
        lead_p10_s=lead.quantile(0.1, "linear"),
        lead_median_s=lead.median(),
        lead_p90_s=lead.quantile(0.9, "linear"),
    )
    return (
        found.join(n_targets, how="cross")
        .join(base.select("item", "base_rate"), on="item", how="left")
        .with_columns(confidence=pl.col("support") / pl.col("targets"))
        .with_columns(lift=pl.col("confidence") / pl.col("base_rate"))
        .select("item", "support", "targets", "confidence", "base_rate", "lift", "lead_p10_s", "lead_median_s",
                "lead_p90_s")  # fmt: skip
        .sort(["lift", "support", "item"], descending=[True, True, False])
    )


def sequences(events: pl.LazyFrame | pl.DataFrame, kind: str, code: int | None = None, *, by: str = "host",
              window: str | timedelta = "30m", min_support: int = 2, max_length: int = 4) -> pl.DataFrame:  # fmt: skip
    """Frequent ordered sequences ``a → … → target`` (2 to ``max_length`` events) within ``window``
    (``"30m"`` or a timedelta): ``sequence`` (items joined by `` → ``), ``length``, ``support``,
    ``confidence``."""
    if by not in KEYS:
        raise InputError(f"--by {by!r}: one of {', '.join(KEYS)}")
    return _sequences(events.lazy(), kind, code, by=by, window=window_us(window), min_support=min_support,
                      max_length=max_length).collect()  # fmt: skip


def _sequences(events: pl.LazyFrame, kind: str, code: int | None, *, by: str, window: int, min_support: int,
               max_length: int) -> pl.LazyFrame:  # fmt: skip
    keys = KEYS[by]
    target_name = kind if code is None else f"{kind}:{code}"
    # Collected once: every level of the search below reads it (a lazy plan would rescan the events).
    first = _before(events, kind, code, by, window).collect().lazy()
    first = first.filter("fine")
    frequent = first.group_by("item").agg(n=pl.len()).filter(pl.col("n") >= min_support).select("item")
    steps = first.join(frequent, on="item").with_columns(tid=pl.struct(*keys))
    n_targets = targets(events, kind, code, by).select(pl.len().alias("targets")).collect().lazy()
    level = steps.select("tid", seq="item", t_last="t_first")
    out = []
    for length in range(2, max_length + 1):
        if length > 2:
            level = (
                level.join(steps.select("tid", "item", t_next="t_first"), on="tid")
                .filter(pl.col("t_next") > pl.col("t_last"))
                .select("tid", seq=pl.concat_str("seq", pl.lit(" → "), "item"), t_last="t_next")
            )
            # Apriori: keep only sequences frequent enough to extend.
            keep = level.group_by("seq").agg(n=pl.len()).filter(pl.col("n") >= min_support).select("seq")
            level = level.join(keep, on="seq")
        counted = level.select("tid", "seq").unique().group_by("seq").agg(support=pl.len())
        out.append(counted.filter(pl.col("support") >= min_support).with_columns(length=pl.lit(length, pl.Int32)))
    return (
        pl.concat(out)
        .join(n_targets, how="cross")
        .select(
            sequence=pl.concat_str("seq", pl.lit(f" → {target_name}")),
            length="length", support="support", confidence=pl.col("support") / pl.col("targets"),
        )  # fmt: skip
        .sort(["support", "length", "sequence"], descending=[True, True, False])
    )
