"""Per incident: the root cause, how sure, the rule that fired, the first failure and the evidence.

Every rule's matches compete (:mod:`forensics.mine.engine`); per incident the best-scoring match
wins, ties going to the earlier failure and then to the order of the library. The confidence is the
winner's score, lowered by how close the best match of another cause comes::

    confidence = score₁ × (1 − score₂ / 2)

An incident no rule, catalog row or cause's words (:mod:`.words`) explains is ``unknown`` (confidence 0.3 when
a rank died, 0.1 when nothing did).

The **first failure** is the earliest hardware event (GPU, PCIe, NIC, host, disk) of the winning chain,
else its earliest error; for a hang, the
straggler — the rank whose watchdog reports the lowest last completed work, else the one rank missing
from the timeouts, else torchrun's "Root Cause (first observed failure)"; for ``unknown``, torchrun's
root cause, else the first rank that exited.

**Caveats**: a diagnosis of damaged input says so. When a file of the incident could not be read whole
(``files.error``: a truncated archive or stream, an unreadable member, a cap) the confidence is
multiplied by :data:`UNREADABLE` (0.7); when records were left unparsed, by :data:`UNPARSED` (0.9);
each reason is a line of ``caveats``. The root cause is never changed by them.

The labels in ``incident.toml`` are never read here: ``forensics eval`` compares against them.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

import polars as pl

from ..schema import SEVERITIES
from . import signals, words
from .engine import finish, incident_ends, matching, prepare, run_library, select_rows
from .language import Library, load_library

#: The columns of a diagnosis, one row per incident.
COLUMNS = ("incident", "root_cause", "confidence", "rule", "first_host", "first_rank", "first_gpu", "first_ts",
           "evidence", "alternatives", "caveats")  # fmt: skip


#: Incidents of a dataset diagnosed at once: memory stays bounded by the chunk, not the dataset.
CHUNK = 500
#: Chunks of indexed incidents are this many times larger: their rows are a quarter of their events.
INDEXED_CHUNK = 2
#: Chunks diagnosed at once (threads).
WORKERS = 2


def diagnose(source: Any, *, incident: str | None = None, incidents: list[str] | None = None,
             library: Library | None = None, chunk: int = CHUNK, workers: int = WORKERS) -> pl.DataFrame:  # fmt: skip
    """Diagnose every incident of ``source`` (an open dataset, or an events LazyFrame/DataFrame), or
    only ``incident``, or only those of ``incidents``.

    Returns one row per incident with :data:`COLUMNS`; ``evidence`` is a list of structs (file, line,
    ts, host, kind, code, role, message, copies: the ``file:line`` of the same line seen in other files,
    such as a kernel line in both dmesg and the journal), ``alternatives`` a list of (root_cause, score,
    rule), ``caveats`` a list of strings (see the module's doc). A
    dataset is read from its signals index (:mod:`.signals`) ``chunk`` × :data:`INDEXED_CHUNK`
    incidents at a time, and the incidents the index does not hold from their events files ``chunk``
    at a time; ``workers`` chunks at once. A LazyFrame is read at once.
    """
    library = library or load_library()
    found = _diagnose_all(source, incident=incident, incidents=incidents, library=library, chunk=chunk, workers=workers)
    return with_caveats(found, caveats(source, found.get_column("incident").to_list()))


def _diagnose_all(source: Any, *, incident: str | None, incidents: list[str] | None, library: Library,
                  chunk: int, workers: int) -> pl.DataFrame:  # fmt: skip
    if hasattr(source, "parts"):
        files = source.parts("events")
        if incidents is not None:
            ids = sorted(set(incidents) & set(files))
        else:
            ids = sorted(files) if incident is None else [incident] * (incident in files)
        if not ids:
            return _diagnose(prepare(pl.LazyFrame(schema=source.events.collect_schema()), library), [], library)
        index, stale = signals.load(source, library, ids)
        columns = [c for c in source.events.collect_schema().names() if c not in ("uptime_s", "pid")]
        gpus = source.parts("gpus")  # the nvidia-smi dumps' versions (forensics.versions)

        def from_events(g: list[str]) -> pl.DataFrame:
            # A chunk of incidents read whole and filtered in memory (with one file per incident, a
            # filter pushed into the scan costs more than it saves): memory is bounded by the chunk.
            return select_rows(pl.scan_parquet([files[i] for i in g]).select(columns).collect(), library,
                               gpus=pl.scan_parquet([gpus[i] for i in g]))  # fmt: skip

        jobs: list[tuple[list[str], Callable[[], pl.DataFrame]]] = [
            (g, partial(from_events, g)) for g in _chunks(stale, chunk)
        ]
        if index is not None:  # the signals index holds the selected rows of the others
            covered = sorted(set(ids) - set(stale))
            jobs += [(g, partial(index.rows, g)) for g in _chunks(covered, chunk * INDEXED_CHUNK)]

        def one(job: tuple[list[str], Callable[[], pl.DataFrame]]) -> pl.DataFrame:
            g, rows = job
            # Through Arrow: a copy, so the result's strings stop pointing into the whole chunk's buffers.
            return pl.from_arrow(_diagnose(finish(rows(), library), g, library).to_arrow())  # type: ignore[return-value]

        if workers <= 1 or len(jobs) == 1:
            return pl.concat([one(j) for j in jobs]).sort("incident")
        # Polars releases the GIL: chunks in threads keep the cores busy between its short operations.
        with ThreadPoolExecutor(workers) as pool:
            return pl.concat(list(pool.map(one, jobs))).sort("incident")
    events = _events(source)
    ids = events.select("incident").unique().collect().get_column("incident").sort().to_list()
    if incident is not None or incidents is not None:
        wanted = set(incidents if incidents is not None else [incident])
        events = events.filter(pl.col("incident").is_in(sorted(wanted)))
        ids = [i for i in ids if i in wanted]
    return _diagnose(prepare(events, library), ids, library)


def _chunks(ids: list[str], size: int) -> list[list[str]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def _diagnose(p: pl.DataFrame, ids: list[str], library: Library) -> pl.DataFrame:
    order = {r.name: n for n, r in enumerate(library.rules)}
    matches = pl.concat([_yielded(run_library(p, library), p, library), _catalog_matches(p)])
    # What nothing else explains is read by the words of each cause, the weakest reading (forensics.mine.words).
    matches = pl.concat([matches, words.matches(p, matches)], how="vertical_relaxed").with_columns(
        _order=pl.col("rule").replace_strict(order, default=len(order), return_dtype=pl.Int32)
    )
    ranked = matches.sort(["incident", "score", "t_fail", "_order"], descending=[False, True, False, False],
                          nulls_last=True)  # fmt: skip
    per_cause = ranked.unique(["incident", "cause"], keep="first", maintain_order=True)
    best = per_cause.unique("incident", keep="first", maintain_order=True)
    alternatives = (
        per_cause.join(best.select("incident", "rule"), on=["incident", "rule"], how="anti")
        .group_by("incident", maintain_order=True)
        .agg(alternatives=pl.struct(root_cause="cause", score=pl.col("score").round(3), rule="rule"),
             runner_up=pl.col("score").max())  # fmt: skip
    )
    best = best.join(alternatives, on="incident", how="left").with_columns(
        confidence=(pl.col("score") * (1 - pl.col("runner_up").fill_null(0) / 2)).round(3)
    )
    chains = _evidence(p, best, library)
    first = _first_failure(p, best)
    out = (
        pl.DataFrame({"incident": ids}, schema={"incident": pl.String})
        .join(best.select("incident", "cause", "confidence", "rule", "alternatives"), on="incident", how="left")
        .join(first, on="incident", how="left")
        .join(chains, on="incident", how="left")
    )
    died = p.filter(pl.col("kind").is_in(["job.child_failed", "job.exit"])).select("incident").unique()
    unknown_conf = pl.when(pl.col("incident").is_in(died.get_column("incident").implode())).then(0.3).otherwise(0.1)
    out = out.with_columns(
        root_cause=pl.col("cause").fill_null("unknown"),
        confidence=pl.coalesce("confidence", unknown_conf),
        evidence=pl.col("evidence").fill_null(pl.lit([], dtype=chains.schema["evidence"])),
        alternatives=pl.col("alternatives").fill_null(pl.lit([], dtype=alternatives.schema["alternatives"])),
    )
    out = _unknown_first_failure(p, out)
    out = _list_found(p, out)
    out = _merge_copies(out)
    return out.with_columns(caveats=pl.lit([], dtype=pl.List(pl.String))).select(COLUMNS).sort("incident")


#: The order in which the copies of one line keep their role: the failure's copy is the one shown.
_ROLE_ORDER = {"failure": 0, "precursor": 1, "related": 2, "found": 3, "follower": 4}


def _merge_copies(out: pl.DataFrame) -> pl.DataFrame:
    """One evidence row per line: the same message of the same host, kind and code in the same second
    in other files (a kernel line in dmesg and in the journal) is shown once, its other places in
    ``copies`` (``file:line``); the copy kept is the one with the strongest role, then the first. A line
    repeated in one file is a repeat, not a copy: the n-th of a file pairs with the n-th of another."""
    fields = out.schema["evidence"].inner.fields  # type: ignore[attr-defined]
    names = [f.name for f in fields]
    rows = out.select("incident", "evidence").explode("evidence").drop_nulls("evidence")
    if rows.height == 0:
        return out
    rows = rows.with_row_index("_i").unnest("evidence").with_columns(
        _where=pl.format("{}:{}", "file", "line"),
        _role=pl.col("role").replace_strict(_ROLE_ORDER, default=9, return_dtype=pl.Int8),
        _second=pl.col("ts").dt.truncate("1s"),
    )
    key = ["incident", "host", "kind", "code", "message", "_second"]
    rows = rows.with_columns(_nth=pl.int_range(pl.len()).over([*key, "file"], order_by="_i"))
    key.append("_nth")
    merged = (
        rows.sort("_role", "_i").group_by(key, maintain_order=True)
        .agg(*(pl.col(n).first() for n in names if n not in key and n != "copies"), pl.col("_i").first(),
             copies=pl.col("_where").slice(1))  # fmt: skip
        .sort("_i")
        .group_by("incident", maintain_order=True)
        .agg(_ev=pl.struct(*names))
    )
    out = out.join(merged, on="incident", how="left").with_columns(
        evidence=pl.coalesce(pl.col("_ev").cast(out.schema["evidence"]), "evidence")
    )
    return out.drop("_ev")


#: Confidence factors of a diagnosis of damaged input (see the module's doc).
UNREADABLE, UNPARSED = 0.7, 0.9
#: Files named per caveat; the others are counted.
_NAMED = 3


def caveats(source: Any, ids: list[str]) -> pl.DataFrame:
    """Per incident of ``ids`` whose input was damaged: ``caveats`` (list of strings) and ``factor`` (the
    confidence multiplier). Read from the ``files`` table of a dataset (``files.error``, ``unparsed``);
    an events frame has no files table, so only its ``unparsed`` rows count."""
    schema = {"incident": pl.String, "caveats": pl.List(pl.String), "factor": pl.Float64}
    if not ids:
        return pl.DataFrame(schema=schema)
    if hasattr(source, "files"):
        files = source.files.filter(pl.col("incident").is_in(ids)).select("incident", "file", "error", "unparsed").collect()
    else:
        files = (
            _events(source).filter(pl.col("incident").is_in(ids) & (pl.col("kind") == "unparsed"))
            .group_by("incident", "file").agg(unparsed=pl.len()).with_columns(error=pl.lit(None, pl.String)).collect()
        )  # fmt: skip
    out = []
    for (inc,), g in files.group_by("incident"):
        notes, factor = [], 1.0
        bad = g.filter(pl.col("error").is_not_null()).sort("file")
        if bad.height:
            named = "; ".join(f"{r['file']}: {r['error']}" for r in bad.head(_NAMED).iter_rows(named=True))
            more = f"; and {bad.height - _NAMED} more" if bad.height > _NAMED else ""
            notes.append(f"{bad.height} file(s) not read whole ({named}{more})")
            factor *= UNREADABLE
        unparsed = g.filter(pl.col("unparsed") > 0)
        if unparsed.height:
            notes.append(f"{int(unparsed['unparsed'].sum())} record(s) in {unparsed.height} file(s) not parsed "
                         "(kept as unparsed rows)")  # fmt: skip
            factor *= UNPARSED
        if notes:
            out.append({"incident": inc, "caveats": notes, "factor": factor})
    return pl.DataFrame(out, schema=schema)


def with_caveats(diagnoses: pl.DataFrame, found: pl.DataFrame) -> pl.DataFrame:
    """``diagnoses`` with the caveats of ``found`` (from :func:`caveats`) and their confidence lowered."""
    if found.height == 0:
        return diagnoses
    out = diagnoses.join(found, on="incident", how="left")
    return out.with_columns(
        confidence=(pl.col("confidence") * pl.col("factor").fill_null(1.0)).round(3),
        caveats=pl.coalesce("caveats_right", "caveats"),
    ).select(COLUMNS)


#: A catalog reading alone is worth this share of its weight against a rule's chain of events.
CATALOG = 0.85
#: Readings older than this before the job's end are history, not the cause (the rules' default horizon).
CATALOG_HORIZON_US = 2 * 3_600_000_000


def _yielded(matches: pl.DataFrame, p: pl.DataFrame, library: Library) -> pl.DataFrame:
    """``matches`` without those of the generic rules (``yields = true``) whose failure event a catalog row reads
    as another cause: a Python exception that carries a CUDA, NCCL or errno code, or a library's own message,
    is that code's failure, not the program's (an emitter's default reading, the weak role-only one, does not
    count); or whose message holds a phrase that names another cause (:func:`.words.phrases`)."""
    generic = [r.name for r in library.rules if r.yields]
    if not generic or matches.height == 0:
        return matches
    read = p.filter(pl.col("cat_cause").is_not_null() & (pl.col("cat_weight") > 0)
                    & ~pl.col("catalog").str.ends_with(".default")).select(failure="row", _read="cat_cause")  # fmt: skip
    # A phrase of another cause in the exception's own message names it too ("Training has diverged").
    named = words.phrases(p.join(matches.select(row="failure"), on="row", how="semi"))
    read = pl.concat([read, named.select(failure=pl.col("row").cast(read.schema["failure"]), _read="cause")])
    read = read.unique("failure", keep="first", maintain_order=True)
    out = matches.join(read, on="failure", how="left")
    other = pl.col("rule").is_in(generic) & pl.col("_read").is_not_null() & (pl.col("_read") != pl.col("cause"))
    return out.filter(~other).drop("_read")


def _catalog_matches(p: pl.DataFrame) -> pl.DataFrame:
    """Each row a message catalog reads as pointing at a cause, as a one-step match scored by its
    weight (× :data:`CATALOG`): every error the catalogs know gets its cause candidate, and a rule's
    chain outweighs a lone reading of the same strength. Followers are not blamed."""
    rows = p.filter(pl.col("cat_cause").is_not_null() & (pl.col("cat_weight") > 0) & ~pl.col("follower"))
    rows = rows.join(incident_ends(p), on="incident", how="left").filter(
        (pl.col("t") >= pl.col("end") - CATALOG_HORIZON_US).fill_null(True)
    )
    return rows.select(
        "incident", rule=pl.lit("catalog:") + pl.col("catalog"), cause="cat_cause",
        score=(pl.col("cat_weight") * CATALOG).round(4), rows=pl.concat_list(pl.col("row")),
        hows=pl.concat_list(pl.lit("time")), failure="row", t_fail="t",
    )  # fmt: skip


#: Rows listed as the evidence of an incident nothing explains.
FOUND = 10


def _list_found(p: pl.DataFrame, out: pl.DataFrame) -> pl.DataFrame:
    """For an incident no rule or catalog explains, the warnings and errors it holds (role ``found``),
    the catalog's readings first, then the most severe, then the earliest: what a user reads next."""
    unknown = out.filter(pl.col("root_cause") == "unknown").select("incident")
    if unknown.height == 0:
        return out
    rows = p.join(unknown, on="incident").filter(
        pl.col("extra") | (pl.col("sev") >= _SEV_WARNING) | pl.col("catalog").is_not_null()
    )
    rows = rows.sort(["incident", "cat_weight", "sev", "t", "file", "line"],
                     descending=[False, True, True, False, False, False], nulls_last=True)  # fmt: skip
    found = rows.group_by("incident", maintain_order=True).head(FOUND).group_by("incident", maintain_order=True).agg(
        _found=pl.struct(*_EVIDENCE[:-1], role=pl.lit("found"), message="message",
                         copies=pl.lit([], dtype=pl.List(pl.String)))
    )  # fmt: skip
    out = out.join(found, on="incident", how="left")
    return out.with_columns(
        evidence=pl.when(pl.col("_found").is_not_null() & (pl.col("evidence").list.len() == 0))
        .then(pl.col("_found").cast(out.schema["evidence"])).otherwise("evidence")
    ).drop("_found")


def _events(source: Any) -> pl.LazyFrame:
    if isinstance(source, pl.LazyFrame):
        return source
    if isinstance(source, pl.DataFrame):
        return source.lazy()
    return source.events


#: Kinds of hardware events: the first failure is the earliest of them in the chain, else its earliest error.
_HARDWARE = r"^(?:gpu|pcie|net|host|disk|fs)\."
_EVIDENCE = ["file", "line", "ts", "host", "kind", "code", "message"]
_SEV_WARNING = SEVERITIES.index("warning")
_SEV_ERROR = SEVERITIES.index("error")
#: Hardware errors this close to the failure (before or after) are evidence whatever rule fired.
NEAR_US = 120_000_000


#: At most this many rows besides the chain: more events of the chain's kinds, then followers.
RELATED, FOLLOWERS = 8, 5


def _evidence(p: pl.DataFrame, best: pl.DataFrame, library: Library) -> pl.DataFrame:
    """The chain's rows (role ``precursor`` or ``failure``), then more rows its steps match on its hosts
    (``related``: a burst of AERs, the same Xid in kern.log and dmesg) and the first followers
    (``follower``: what the failure dragged after it), in time order."""
    chain = best.select("incident", "rule", "rows", "failure").explode("rows").rename({"rows": "row"})
    chain = chain.with_columns(
        role=pl.when(pl.col("row") == pl.col("failure")).then(pl.lit("failure")).otherwise(pl.lit("precursor"))
    )
    hosts = chain.join(p.select("row", "host"), on="row").select("incident", "host").unique()
    rules = {r.name: r for r in library.rules}
    related = [p.clear().select("incident", "row")]
    for name, won in chain.select("incident", "rule").unique().group_by("rule"):
        rule = rules.get(str(name[0]))
        if rule is None:  # a catalog's reading: one row, no steps to find more of
            continue
        related += [matching(p, replace(s.match, followers=True), ["incident", "row"]).join(won, on="incident", how="semi")
                    for s in rule.steps]  # fmt: skip
    # Besides more events of the chain's steps, the hardware errors of its hosts close to the failure (a
    # fatal AER, "device recovery failed" a second before the GPU fell off the bus) whatever their kind.
    t_fail = best.select("incident", "t_fail")
    near = p.join(t_fail, on="incident").filter(
        pl.col("kind").str.contains(_HARDWARE) & (pl.col("sev") >= _SEV_ERROR) & ~pl.col("follower")
        & ((pl.col("t") - pl.col("t_fail")).abs() <= NEAR_US)
    ).select("incident", "row")  # fmt: skip
    more = pl.concat([*related, near]).unique().join(p.select("row", "host"), on="row").join(hosts, on=["incident", "host"])
    more = more.join(chain.select("row"), on="row", how="anti").join(p.select("row", "t", "sev"), on="row")
    # One of each kind and code first (its most severe, closest to the failure), then the rest by severity
    # and closeness: a burst of corrected AERs does not crowd out the fatal one a second before the failure.
    more = more.join(p.select("row", "kind", "code"), on="row").join(t_fail, on="incident").with_columns(
        _far=(pl.col("t") - pl.col("t_fail")).abs()
    )
    more = more.sort(["incident", "sev", "_far", "row"], descending=[False, True, False, False], nulls_last=True)
    more = more.with_columns(_repeat=pl.int_range(pl.len()).over("incident", "kind", "code"))
    more = more.sort(["incident", "_repeat", "sev", "_far", "row"], descending=[False, False, True, False, False],
                     nulls_last=True).group_by("incident", maintain_order=True).head(RELATED)  # fmt: skip
    followers = p.join(best.select("incident"), on="incident").filter(pl.col("follower")).select("incident", "row")
    followers = followers.join(chain.select("row"), on="row", how="anti").group_by("incident", maintain_order=True).head(FOLLOWERS)
    rows = pl.concat([
        chain.select("incident", "row", "role"),
        more.select("incident", "row", role=pl.lit("related")),
        followers.select("incident", "row", role=pl.lit("follower")),
    ]).unique("row", keep="first", maintain_order=True)  # fmt: skip
    rows = rows.join(p.select("row", "t", *_EVIDENCE), on="row").sort("incident", "t", "file", "line", nulls_last=True)
    return rows.group_by("incident", maintain_order=True).agg(
        evidence=pl.struct(*_EVIDENCE[:-1], "role", "message", copies=pl.lit([], dtype=pl.List(pl.String)))
    )


def _first_failure(p: pl.DataFrame, best: pl.DataFrame) -> pl.DataFrame:
    rows = best.select("incident", "cause", "rows", "failure").explode("rows").rename({"rows": "row"})
    rows = rows.join(p.select("row", "host", "gpu", "rank", "ts", "sev", "file", "line", "kind"), on="row")
    rows = rows.with_columns(hardware=pl.col("kind").str.contains(_HARDWARE), error=pl.col("sev") >= 4)
    first = (
        rows.sort(["incident", "hardware", "error", "ts", "file", "line"],
                  descending=[False, True, True, False, False, False], nulls_last=True)  # fmt: skip
        .unique("incident", keep="first", maintain_order=True)
        .select("incident", "cause", first_host="host", first_rank="rank", first_gpu="gpu", first_ts="ts")
    )
    first = _gpu_behind_port(p, first)
    hangs = first.filter(pl.col("cause") == "hang")
    if hangs.height:
        first = pl.concat([first.filter(pl.col("cause") != "hang"), _straggler(p, hangs)], how="vertical_relaxed")
    return first.drop("cause")


def _gpu_behind_port(p: pl.DataFrame, first: pl.DataFrame) -> pl.DataFrame:
    """An AER record raised by a root port names the port, not the GPU behind it: the first failure
    then takes the host's one GPU that the NVIDIA driver or a GPU event names (``nvidia 0000:03:00.0:
    AER: can't recover``), when there is exactly one; a GPU address stays as it is."""
    gpu_rows = pl.col("kind").str.contains(r"^(?:gpu|cuda|nccl|torch|job)\.") | pl.col("message").str.starts_with("nvidia ")
    known = p.filter(gpu_rows & ~pl.col("extra")).select("incident", host="host", gpu="gpu").drop_nulls().unique()
    is_gpu = first.join(known, left_on=["incident", "first_host", "first_gpu"], right_on=["incident", "host", "gpu"],
                        how="semi")  # fmt: skip
    behind = (
        known.filter(pl.col("gpu").n_unique().over("incident", "host") == 1)
        .unique(["incident", "host"]).rename({"host": "first_host", "gpu": "_gpu"})
    )  # fmt: skip
    port = first.join(is_gpu.select("incident"), on="incident", how="anti").filter(pl.col("first_gpu").is_not_null())
    fixed = port.join(behind, on=["incident", "first_host"], how="inner").with_columns(first_gpu="_gpu").drop("_gpu")
    return pl.concat([first.join(fixed.select("incident"), on="incident", how="anti"), fixed.select(first.columns)])


def _straggler(p: pl.DataFrame, hangs: pl.DataFrame) -> pl.DataFrame:
    """The hung rank: lowest last completed work, else the one missing from the timeouts, else torchrun's root cause."""
    ids = hangs.select("incident")
    progress = p.join(ids, on="incident").filter(pl.col("kind") == "torch.watchdog_progress").with_columns(
        done=pl.col("_d_last_completed").cast(pl.Int64, strict=False)
    )
    lowest = progress.filter(pl.col("done") == pl.col("done").min().over("incident"))
    by_progress = (
        lowest.filter(pl.col("rank").n_unique().over("incident") == 1)
        .sort("ts", nulls_last=True).unique("incident", keep="first")
    )  # fmt: skip
    timed_out = p.join(ids, on="incident").filter(pl.col("kind").is_in(["torch.watchdog_timeout", "torch.heartbeat_timeout"]))
    known = p.join(ids, on="incident").filter(pl.col("rank").is_not_null() & (pl.col("kind") == "nccl.init"))
    missing = known.join(timed_out.select("incident", "rank").unique(), on=["incident", "rank"], how="anti")
    by_missing = missing.filter(pl.col("rank").n_unique().over("incident") == 1).unique("incident", keep="first")
    root = _torchrun_root(p.join(ids, on="incident"))
    picks = [f.select("incident", first_host="host", first_rank="rank", first_gpu="gpu", first_ts="ts")
             for f in (by_progress, by_missing, root)]  # fmt: skip
    chosen = pl.concat(picks).unique("incident", keep="first", maintain_order=True)
    rest = hangs.join(chosen.select("incident"), on="incident", how="anti")
    out = pl.concat([chosen, rest.drop("cause")], how="vertical_relaxed").with_columns(cause=pl.lit("hang"))
    return out.select(hangs.columns)


def _torchrun_root(p: pl.DataFrame) -> pl.DataFrame:
    """torchrun's "Root Cause (first observed failure)" row, else the first rank that exited with an error."""
    failed = p.filter(pl.col("kind") == "job.child_failed").with_columns(
        root=pl.col("_d_root_cause") == "true",
        sigterm=pl.col("code") == -15,
    )
    return failed.sort(["incident", "root", "sigterm", "ts", "file", "line"],
                       descending=[False, True, False, False, False, False], nulls_last=True).unique(
        "incident", keep="first", maintain_order=True)  # fmt: skip


def _unknown_first_failure(p: pl.DataFrame, out: pl.DataFrame) -> pl.DataFrame:
    unknown = out.filter(pl.col("cause").is_null()).select("incident")
    if unknown.height == 0:
        return out
    root = _torchrun_root(p.join(unknown, on="incident")).select(
        "incident", _h="host", _r="rank", _g="gpu", _t="ts"
    )
    out = out.join(root, on="incident", how="left").with_columns(
        first_host=pl.coalesce("first_host", "_h"), first_rank=pl.coalesce("first_rank", "_r"),
        first_gpu=pl.coalesce("first_gpu", "_g"), first_ts=pl.coalesce("first_ts", "_t"),
    )  # fmt: skip
    return out.drop("_h", "_r", "_g", "_t")
