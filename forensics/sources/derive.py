"""Events derived from series, as data (``data/telemetry_rules.toml``): a GPU at a slowdown temperature
or rising 10 °C in 10 minutes, clocks held down by a thermal or power reason, power collapsing or over its
limit, a PCIe link narrower than its maximum, replay or uncorrectable-ECC counters growing, utilization
falling to near 0; a disk's await high at full utilization (iostat); a NIC's errors or drops and an
InfiniBand port's symbol errors or link-downed count growing (ethtool, ip, sar, perfquery).

Each event sits on the reading that trips its rule and names the sample rows it rests on
(``detail.samples``: ``file:line``), with ``detail.metric``, ``value``, ``device`` and the rule's figures.

>>> import pyarrow as pa; from forensics.schema import SAMPLES
>>> s = pa.Table.from_pylist([{"incident": "", "source": "x", "file": "f", "line": n, "device": "0",
...     "metric": "power_w", "value": v} for n, v in [(1, 300.0), (2, 310.0), (3, 305.0), (4, 12.0)]], schema=SAMPLES)
>>> e = events(s); e["kind"].to_list(), e["line"].to_list()
(['gpu.power_drop'], [4])
"""

from __future__ import annotations

import json
import tomllib
from functools import cache
from importlib import resources
from typing import Any

import polars as pl
import pyarrow as pa

_TS = pl.Datetime("us", "UTC")
_OUT = {"line": pl.Int64, "ts": _TS, "gpu": pl.String, "kind": pl.String, "severity": pl.String,
        "message": pl.String, "detail": pl.String}  # fmt: skip


@cache
def rules() -> list[dict[str, Any]]:
    """The rules of ``data/telemetry_rules.toml``, one per metric (a rule may name several: ``metrics``)."""
    data = tomllib.loads(resources.files("forensics.data").joinpath("telemetry_rules.toml").read_text("utf-8"))
    return [{**{k: v for k, v in rule.items() if k != "metrics"}, "metric": metric}
            for rule in data["rule"] for metric in rule.get("metrics", [rule.get("metric")])]  # fmt: skip


def events(samples: pa.Table | pl.DataFrame, *, skip: frozenset[str] = frozenset(), ts_from: str | None = None) -> pl.DataFrame:
    """The events the rules derive from ``samples`` (one file's: the ``samples`` table, or a frame with its
    columns ``file``, ``line``, ``ts``, ``gpu``, ``device``, ``metric``, ``value``), except those of the kinds
    in ``skip`` (a source that derives them itself). ``ts_from`` is said in the detail of the events with a
    time: a wall clock read as UTC for want of a zone (``assumed``) is re-read in the incident's zone by
    ingest, as the samples are."""
    wanted = [r for r in rules() if r["kind"] not in skip]
    frame = watched(samples, _read(wanted))
    if frame.height == 0:
        return pl.DataFrame(schema=_OUT)
    # a GPU's readings by an integer key (windows over strings hash every row); one series per metric sorted by
    # key and line (one integer sort: a sort by two columns costs several), shared by the rules that read it
    frame = frame.with_columns(key=pl.coalesce("gpu", "device").fill_null("").cast(pl.Categorical).to_physical())
    order = pl.col("key").cast(pl.Int64) * (1 << 40) + pl.col("line")
    by_metric = {str(m): part.sort(order) for (m,), part in frame.partition_by("metric", as_dict=True).items()}
    found = [_apply(rule, by_metric, ts_from) for rule in wanted if rule["metric"] in by_metric]
    found = [f for f in found if f.height]
    return pl.concat(found).sort("line", "kind") if found else pl.DataFrame(schema=_OUT)


def metrics() -> list[str]:
    """The metrics the rules read (a rule's own, its ``peer``'s and its ``and_metric``'s)."""
    return _read(rules())


def _read(wanted: list[dict[str, Any]]) -> list[str]:
    return sorted({r["metric"] for r in wanted} | {r[k] for r in wanted for k in ("peer", "and_metric") if k in r})


_COLUMNS = {"file": pl.String, "line": pl.Int64, "ts": _TS, "gpu": pl.String, "device": pl.String, "metric": pl.String,
            "value": pl.Float64}  # fmt: skip


def watched(samples: pa.Table | pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """The rows of ``samples`` of the metrics ``names``, with the columns the rules use (filtered as a frame: a
    filter of the Arrow table copies every string column)."""
    if isinstance(samples, pa.Table):
        if samples.num_rows == 0:
            return pl.DataFrame(schema=_COLUMNS)
        frame = pl.from_arrow(samples.select(list(_COLUMNS)))
        assert isinstance(frame, pl.DataFrame)
    else:
        frame = samples.select(list(_COLUMNS))
    return frame.filter(pl.col("metric").is_in(names))


def _apply(rule: dict[str, Any], by_metric: dict[str, pl.DataFrame], ts_from: str | None) -> pl.DataFrame:
    s = by_metric[rule["metric"]]
    if s.height == 0:
        return pl.DataFrame(schema=_OUT)
    # each series is sorted by key and line: a reading's predecessor is the row before when that row has the same
    # key (shifts and masks, not windows over the key: a window partitions every row)
    v, key, line = pl.col("value"), pl.col("key"), pl.col("line")
    same = (key == key.shift(1)).fill_null(False)
    prev_line = pl.when(same).then(line.shift(1))
    rows = ["line"]  # the columns naming the sample rows of an event, built for the hits only
    test = rule["test"]
    if test == "at_least":
        s = s.with_columns(hit=v >= rule["value"], limit=pl.lit(float(rule["value"])))
    elif test == "mask":
        bits = sum(rule["bits"])
        s = s.with_columns(hit=(v.cast(pl.Int64) & bits) != 0, mask=v.cast(pl.Int64))
    elif test == "grow":
        before = pl.when(same).then(v.shift(1))
        s = s.with_columns(hit=v > before, before=before, prev_line=prev_line)
        rows = ["prev_line", "line"]
    elif test == "collapse":
        s = _collapse(s, rule).with_columns(prev_line=prev_line)
        rows = ["first_line", "prev_line", "line"]
    elif test == "rise":
        s = _rise(s, rule)
        rows = ["low_line", "line"]
    elif test in ("over_peer", "below_peer"):
        if rule["peer"] not in by_metric:
            return pl.DataFrame(schema=_OUT)
        peer = by_metric[rule["peer"]].select("key", "line", limit="value", peer_line="line")
        s = s.join(peer, on=["key", "line"], how="inner").sort("key", "line")
        s = s.with_columns(hit=(v > pl.col("limit")) if test == "over_peer" else (v < pl.col("limit")))
    else:
        raise ValueError(f"telemetry_rules.toml: unknown test {test!r}")
    if "and_metric" in rule:  # and the same row's other reading at least so high (await at full utilization)
        other = by_metric.get(rule["and_metric"], pl.DataFrame(schema={"key": pl.UInt32, "line": pl.Int64, "value": pl.Float64}))
        other = other.select("key", "line", also=pl.col("value"))
        s = s.join(other, on=["key", "line"], how="left").sort("key", "line")
        s = s.with_columns(hit=pl.col("hit") & (pl.col("also") >= rule["and_at_least"]))
    # a condition that holds over consecutive readings is one event, at its start
    hit = pl.col("hit").fill_null(False)
    same = (key == key.shift(1)).fill_null(False)  # (again: a join may have dropped rows)
    start = s.filter(hit & ~(same & hit.shift(1).fill_null(False)))
    return _rows(start.with_columns(rows=pl.concat_list(rows)), rule, ts_from)


def _collapse(s: pl.DataFrame, rule: dict[str, Any]) -> pl.DataFrame:
    """Each reading against the median of the (up to) ``window`` readings of the same key before it (at least 3).
    The k-th reading of a key (k < window) takes the median of the k before it: a rolling median of each width
    k over the whole sorted column, picked by the reading's place in its key."""
    window, least = rule["window"], min(3, rule["window"])
    v, key, line = pl.col("value"), pl.col("key"), pl.col("line")
    index = pl.int_range(pl.len(), dtype=pl.Int64)
    start = pl.when((key != key.shift(1)).fill_null(True)).then(index).forward_fill()
    s = s.with_columns(place=index - start, first_line=pl.when((key != key.shift(1)).fill_null(True)).then(line).forward_fill())
    place = pl.col("place")
    before = s.select(pl.when(place >= window).then(v.shift(1).rolling_median(window, min_samples=window))).to_series()
    # the first readings of each key (a few per key) read on their own: a rolling median per width over the
    # whole column costs one pass each (their predecessors are first readings too, so the frame holds them)
    head = s.with_row_index("row").filter(place < window)
    if head.height and window > least:
        median = pl.when(place == least).then(v.shift(1).rolling_median(least, min_samples=least))
        for k in range(least + 1, window):
            median = median.when(place == k).then(v.shift(1).rolling_median(k, min_samples=k))
        head = head.select("row", median.alias("before"))
        before = before.scatter(head.get_column("row"), head.get_column("before"))
    first = pl.when(place >= window).then(line.shift(window)).otherwise(pl.col("first_line"))
    s = s.with_columns(before=before.alias("before")).with_columns(first_line=first)
    return s.with_columns(hit=(pl.col("before") >= rule["from_at_least"]) & (v <= pl.col("before") * rule["fraction"]))


def _rise(s: pl.DataFrame, rule: dict[str, Any]) -> pl.DataFrame:
    """Each reading against the lowest one of the same GPU within ``within_s`` seconds before it."""
    timed = s.filter(pl.col("ts").is_not_null()).sort("key", "ts")
    if timed.height == 0:
        return s.with_columns(hit=pl.lit(False), low_line=pl.lit(None, pl.Int64))
    # one time axis for every key, each key's readings ~3,000 years after the key before's: a rolling window
    # over it never reaches into another key (and partitions nothing)
    axis = pl.col("ts").dt.epoch("us") + pl.col("key").cast(pl.Int64) * 10**17
    window = f"{int(rule['within_s']) * 10**6}i"
    low = timed.with_columns(axis=axis).with_columns(
        low=pl.col("value").rolling_min_by("axis", window_size=window, closed="both"))
    low = low.with_columns(hit=pl.col("value") - pl.col("low") >= rule["by"])
    # the line and time of that lowest reading, for the event's samples and span
    lows = low.select("key", "axis", low_ts="ts", low_line="line", low="value")
    low = low.join_asof(lows, on="axis", by=["key", "low"], strategy="backward",
                        tolerance=int(rule["within_s"]) * 10**6, check_sortedness=False)  # fmt: skip
    return low.with_columns(delta=pl.col("value") - pl.col("low"),
                            span=(pl.col("ts") - pl.col("low_ts")).dt.total_seconds()).sort("key", "line")  # fmt: skip


def _rows(hits: pl.DataFrame, rule: dict[str, Any], ts_from: str | None) -> pl.DataFrame:
    out = []
    for r in hits.iter_rows(named=True):
        figures = {k: r[k] for k in ("value", "limit", "before", "delta", "span", "mask", "also") if r.get(k) is not None}
        message = rule["says"].format_map(_Defaults({**figures, "device": r.get("device") or "?", "metric": rule["metric"]}))
        shown = {rule.get("and_metric", k) if k == "also" else k: v for k, v in figures.items()}  # util_pct, not also
        detail = {"metric": rule["metric"], "device": r.get("device"), **shown, "rule": rule["test"],
                  "samples": [f"{r['file']}:{n}" for n in dict.fromkeys(r["rows"] or []) if n is not None],
                  "ts_from": ts_from if r["ts"] is not None else None}
        out.append({"line": r["line"], "ts": r["ts"], "gpu": r.get("gpu"), "kind": rule["kind"],
                    "severity": rule["severity"], "message": message,
                    "detail": json.dumps({k: v for k, v in detail.items() if v is not None}, ensure_ascii=False)})
    return pl.DataFrame(out, schema=_OUT)


class _Defaults(dict):  # type: ignore[type-arg]
    """Format figures a rule's sentence names but a reading lacks as ``?``."""

    def __missing__(self, key: str) -> str:
        return "?"
