"""Postmortem statistics over many incidents: what broke how often, where, and at what cost.

Built on the diagnoses (never on ``incident.toml``'s labels). Shares are recomputed from counts, so
they add up to 100% (the published tables that do not, like Llama 3's, copied percentages).

- **when** an incident happened: its first failure's time, else its last event's;
- **the window**: from the first to the last incident; MTBF = window / incidents (overall and per
  group), interruptions per day = incidents / window days;
- **lost GPU-hours** of an incident, from ``incident.toml``'s ``[job]``: ``gpus`` × (the failure −
  ``last_checkpoint``) when the last checkpoint is known, else ``gpus`` × ``checkpoint_interval_s`` / 2
  (a failure falls on average half an interval after a checkpoint); unknown without ``gpus``. The
  ``basis`` column says which was used;
- **lead time** of a chain: from its earliest precursor to its failure row, when both have a time
  (precursors seen only after the failure, such as an ``nvidia-smi`` snapshot taken afterwards, do not count).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from .errors import InputError

#: The component each root cause belongs to (a Llama-3-style grouping). A hang is known (a rank stopped
#: in a collective, the straggler named), so it is a component of its own, not "Unknown".
COMPONENTS = {
    "pcie_link": "PCIe", "gpu_hardware": "GPU", "gpu_memory": "GPU memory", "nvlink": "NVLink",
    "thermal": "Cooling", "power": "Power", "network": "Network", "numerical": "Model / data",
    "code_bug": "Software", "gpu_oom": "Software", "host_oom": "Host", "host_memory": "Host",
    "storage": "Storage", "driver": "Platform software", "container_runtime": "Platform software",
    "hang": "Collective hang", "unknown": "Unknown",
}  # fmt: skip
BY = ("cause", "component", "rule", "host", "gpu", "xid", "xid_gpu", "month", "job", "unread")


def incident_facts(ds: Any, diagnoses: pl.DataFrame) -> pl.DataFrame:
    """One row per incident: its diagnosis, when it happened, its job and the GPU-hours it cost."""
    labels = pl.col("labels")
    records = ds.incidents.select(
        "incident", last_ts="last_ts",
        job=labels.str.json_path_match("$.job.name"),
        gpus=labels.str.json_path_match("$.job.gpus").cast(pl.Int64, strict=False),
        interval_s=labels.str.json_path_match("$.job.checkpoint_interval_s").cast(pl.Float64, strict=False),
        last_checkpoint=labels.str.json_path_match("$.job.last_checkpoint")
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%#z", strict=False, time_unit="us", time_zone="UTC"),
    ).collect()  # fmt: skip
    # Precursors after the failure (a snapshot taken afterwards, matched with order "any") are not lead.
    ts, role = pl.element().struct.field("ts"), pl.element().struct.field("role")
    failed = ts.filter(role == "failure").min()
    lead = pl.col("evidence").list.eval(
        failed - ts.filter((role == "precursor") & (ts <= failed)).min()
    ).list.first().dt.total_microseconds() / 1e6
    d = diagnoses.select("incident", "root_cause", "rule", "confidence", "first_host", "first_gpu", "first_ts",
                         lead_time_s=lead)  # fmt: skip
    out = d.join(records, on="incident", how="left").with_columns(when=pl.coalesce("first_ts", "last_ts"))
    since = (pl.col("when") - pl.col("last_checkpoint")).dt.total_microseconds() / 3.6e9
    return out.with_columns(
        component=pl.col("root_cause").replace_strict(COMPONENTS, default="Unknown"),
        gpu_hours_lost=pl.when(pl.col("gpus").is_null()).then(None)
        .when(pl.col("last_checkpoint").is_not_null() & (since >= 0)).then(pl.col("gpus") * since)
        .when(pl.col("interval_s").is_not_null()).then(pl.col("gpus") * pl.col("interval_s") / 7200),
        basis=pl.when(pl.col("gpus").is_null()).then(pl.lit("unknown: no [job] gpus"))
        .when(pl.col("last_checkpoint").is_not_null() & (since >= 0)).then(pl.lit("last checkpoint"))
        .when(pl.col("interval_s").is_not_null()).then(pl.lit("half the checkpoint interval"))
        .otherwise(pl.lit("unknown: no checkpoint facts")),
    ).drop("last_ts")  # fmt: skip


def summary(facts: pl.DataFrame) -> dict[str, Any]:
    """The whole fleet: incidents, window, interruptions per day, MTBF, GPU-hours lost."""
    first, last = facts["when"].min(), facts["when"].max()
    hours = (last - first).total_seconds() / 3600 if first is not None and last is not None else None  # type: ignore[operator]
    n = facts.height
    return {
        "incidents": n,
        "first": first, "last": last, "window_days": None if hours is None else round(hours / 24, 2),
        "per_day": round(n / (hours / 24), 3) if hours else None,
        "mtbf_h": round(hours / n, 2) if hours and n else None,
        "gpu_hours_lost": round(float(facts["gpu_hours_lost"].sum()), 1) if facts["gpu_hours_lost"].is_not_null().any() else None,
        "gpu_hours_unknown": int(facts["gpu_hours_lost"].is_null().sum()),
    }  # fmt: skip


def stats(ds: Any, by: str = "cause", *, diagnoses: pl.DataFrame | None = None) -> pl.DataFrame:
    """The table by ``by`` (one of :data:`BY`): count, share (count / total), MTBF over the fleet's
    window, GPU-hours lost, median lead time (``rule``: per chain, the rule that fired; for ``host`` and ``gpu`` also the count's exact 95%
    Poisson interval, ``ci_low``–``ci_high``); ``xid`` counts Xid events, incidents and GPUs per code, ``xid_gpu`` per host, GPU and code."""
    if by not in BY:
        raise InputError(f"--by {by!r}: one of {', '.join(BY)}")
    if by == "xid":
        return xid_counts(ds.events)
    if by == "xid_gpu":
        return xid_counts(ds.events, per_gpu=True)
    if by == "unread":
        return unread(ds.events)
    if diagnoses is None:  # a dataset's stored diagnoses (redone only where stale)
        from .mine import diagnose

        diagnoses = ds.diagnoses() if hasattr(ds, "diagnoses") else diagnose(ds)
    facts = incident_facts(ds, diagnoses)
    key = {"cause": ["root_cause"], "component": ["component"], "rule": ["rule", "root_cause"], "host": ["first_host"],
           "gpu": ["first_host", "first_gpu"], "job": ["job"]}.get(by)  # fmt: skip
    if by == "month":
        facts = facts.with_columns(month=pl.col("when").dt.strftime("%Y-%m"))
        key = ["month"]
    assert key is not None
    window_h = summary(facts)["window_days"]
    window_h = None if window_h is None else window_h * 24
    total = facts.height
    table = facts.group_by(key).agg(
        incidents=pl.len(),
        gpu_hours_lost=pl.when(pl.col("gpu_hours_lost").is_not_null().any()).then(pl.col("gpu_hours_lost").sum()),
        lead_time_median_s=pl.col("lead_time_s").median(),
        confidence_mean=pl.col("confidence").mean(),
    ).with_columns(
        share=pl.col("incidents") / total,
        mtbf_h=(pl.lit(window_h) / pl.col("incidents")) if window_h else pl.lit(None, pl.Float64),
    )  # fmt: skip
    order = ["month"] if by == "month" else ["incidents", *key]
    desc = [False] if by == "month" else [True] + [False] * len(key)
    interval: list[str] = []
    if by in ("host", "gpu"):  # the offenders: how sure is each count (exact Poisson 95% interval)
        from .offenders import poisson_interval

        bounds = {k: poisson_interval(k) for k in table["incidents"].unique().to_list()}
        table = table.with_columns(
            ci_low=pl.col("incidents").replace_strict({k: round(v[0], 2) for k, v in bounds.items()}, return_dtype=pl.Float64),
            ci_high=pl.col("incidents").replace_strict({k: round(v[1], 2) for k, v in bounds.items()}, return_dtype=pl.Float64),
        )  # fmt: skip
        interval = ["ci_low", "ci_high"]
    return table.select(*key, "incidents", *interval, "share", "mtbf_h", "gpu_hours_lost", "lead_time_median_s",
                        "confidence_mean").sort(order, descending=desc, nulls_last=True)  # fmt: skip


def xid_counts(events: pl.LazyFrame, *, per_gpu: bool = False) -> pl.DataFrame:
    """Xid events per code: events, incidents, GPUs (host and address), the catalog name; with
    ``per_gpu``, per host, GPU and code (the GPUs with most first)."""
    keys = ["host", "gpu", "xid"] if per_gpu else ["xid"]
    aggs = [pl.len().alias("events"), pl.col("incident").n_unique().alias("incidents")]
    if not per_gpu:
        aggs.append(pl.struct("host", "gpu").n_unique().alias("gpus"))
    aggs.append(pl.col("detail").str.json_path_match("$.name").drop_nulls().first().alias("name"))
    return (
        events.filter(pl.col("kind") == "gpu.xid")
        .with_columns(xid="code")
        .group_by(keys)
        .agg(aggs)
        .sort(["events", *keys], descending=[True, *([False] * len(keys))], nulls_last=True)
        .collect()
    )


def unread(events: pl.LazyFrame) -> pl.DataFrame:
    """The lines that report trouble (:data:`forensics.messages.TROUBLE`) but that no source typed (``other``, ``unparsed``) and
    no message catalog row reads, per template (the masked message): lines, incidents, the sources that held
    them and where the first is (``incident file:line``), most widespread first. What the diagnosis
    could not weigh, named: the catalogs' blind spots in this fleet (an emitter's default reading, the weak
    role-only one, does not count as read)."""
    from . import messages
    from .reading.base import template_expr

    rows = (
        events.filter(pl.col("kind").is_in(["other", "unparsed"]) & pl.col("message").str.contains(messages.TROUBLE))
        .select("incident", "source", "file", "line", "message")
        .collect()
    )
    read = messages.frame(messages.load(), rows.get_column("message")).get_column("i")
    rows = rows.with_row_index("i").filter(~pl.col("i").is_in(read.implode())).drop("i")
    first = pl.format("{} {}:{}", "incident", "file", "line")
    return (
        rows.with_columns(template=template_expr(pl.col("message").str.replace_all(r"\s+", " ").str.strip_chars()))
        .group_by("template")
        .agg(lines=pl.len(), incidents=pl.col("incident").n_unique(),
             sources=pl.col("source").unique().sort().str.join(","), where=first.first())  # fmt: skip
        .sort(["incidents", "lines", "template"], descending=[True, True, False])
        .select("template", "lines", "incidents", "sources", "where")
    )
