"""Rules compiled to Polars: predicates become expressions, each step of a chain one ``join_asof``.

The events are pre-filtered once to the rows any rule can use (:func:`prepare`), then every rule is a
few joins on small frames: no per-row Python. Time order uses ``ts``; where a side has no ``ts`` the
rule's fallback applies — the order of lines within one file (``file``), else co-occurrence in the
incident (``incident``) — and each fallback lowers the match's score (:data:`PENALTY`).
"""

from __future__ import annotations

import polars as pl

from .. import messages, versions
from . import collectives, words
from ..schema import KINDS, SEVERITIES
from .language import Follower, Library, Match, Rule

#: What a link found by each method is worth against one found in time.
PENALTY = {"time": 1.0, "file": 0.95, "incident": 0.85}
KEYS = {"gpu": ["incident", "host", "gpu"], "host": ["incident", "host"], "rank": ["incident", "rank"],
        "incident": ["incident"]}  # fmt: skip
_SEV = {s: n for n, s in enumerate(SEVERITIES)}
_ATTRS = ["incident", "host", "gpu", "rank", "file", "line", "t"]
#: The job's end, from which each rule's horizon is counted back.
END_KINDS = ("job.child_failed", "job.exit")


def cheap_expr(m: Match) -> pl.Expr:
    """The predicates of one step on the small columns (kind, code, severity): cheap on millions of rows."""
    e = pl.col("kind").is_in(list(m.expanded()))
    if m.codes:
        e = e & pl.any_horizontal([pl.col("code").is_between(lo, hi) for lo, hi in m.codes]).fill_null(False)
    if m.severities:
        e = e & pl.col("severity").is_in(list(m.severities))
    return e


def accept(frame: pl.DataFrame, cheap: pl.Expr) -> pl.DataFrame:
    """The rows of ``frame`` a predicate on kind, code and severity accepts, tested once per distinct
    (kind, code, severity) rather than once per row (a few hundred combinations for a million rows).
    The combinations are told apart by a 64-bit hash: a collision needs billions of them."""
    combo = pl.struct("kind", "code", "severity").hash(seed=7)
    keyed = frame.with_columns(_combo=combo)
    ok = keyed.select("_combo", "kind", "code", "severity").unique("_combo").filter(cheap).get_column("_combo")
    return keyed.filter(pl.col("_combo").is_in(ok.implode())).drop("_combo")


def text_expr(m: Match, *, followers: bool = True) -> pl.Expr | None:
    """The rest: ``detail`` fields (the prepared frame's ``_d_<key>`` columns), the message regex and
    the follower flag (None when there is none)."""
    parts = []
    for key, values in m.detail:
        v = pl.col(f"_d_{key}")
        hit = v.is_in(list(values))
        for value in values:  # a list field (AER bits) holds the value as one element
            hit = hit | v.str.contains(f'"{value}"', literal=True)
        parts.append(hit.fill_null(False))
    if m.message is not None:
        parts.append(pl.col("message").str.contains(m.message).fill_null(False))
    if followers and not m.followers:
        parts.append(~pl.col("follower"))
    return pl.all_horizontal(parts) if parts else None


def matching(p: pl.DataFrame, m: Match, columns: list[str], *, followers: bool = True) -> pl.DataFrame:
    """``columns`` of the rows of the prepared frame ``p`` a step accepts: the cheap predicates first,
    the text ones on what is left, and only the columns asked for are gathered."""
    text = text_expr(m, followers=followers)
    if text is None:
        return p.lazy().filter(cheap_expr(m)).select(columns).collect()
    needed = [f"_d_{key}" for key, _ in m.detail] + ["message"] * (m.message is not None)
    needed += ["follower"] * (followers and not m.followers)
    # Two collects on purpose: one lazy plan would fuse both filters and run the regexes on every row.
    rows = p.lazy().filter(cheap_expr(m)).select(*dict.fromkeys([*columns, *needed])).collect()
    return rows.filter(text).select(columns)


def detail_field(key: str) -> pl.Expr:
    """The text of a top-level field of ``detail`` (strings unquoted; a list as its JSON text).

    A regular expression, not a JSON parser: ~50x faster on millions of rows, and ``detail`` is written
    by this package with plain keys."""
    value = pl.col("detail").str.extract(rf'"{key}"\s*:\s*("(?:[^"\\]|\\.)*"|\[[^\]]*\]|[^,}}\s]+)', 1)
    return pl.when(value.str.starts_with('"')).then(value.str.slice(1).str.head(-1)).otherwise(value)


#: ``detail`` fields the first-failure search reads (besides those the rules name).
DETAIL_KEYS = {"last_completed": ("torch.watchdog_progress",), "root_cause": ("job.child_failed",)}
#: Kinds kept whatever the rules say: the job's end, the straggler search, the ranks of the job.
_EXTRA = ["torch.watchdog_progress", *END_KINDS, "nccl.init"]


_COLUMNS = ["incident", "host", "source", "file", "line", "ts", "kind", "severity", "gpu", "rank", "code", "message"]


def _matches(library: Library) -> list[Match]:
    matches = [s.match for r in library.rules for s in (*r.steps, *r.unless)]
    return matches + [m for f in library.followers for m in (f.match, f.after)]


def _cheap_union(matches: list[Match]) -> pl.Expr:
    """Any of the matches' cheap predicates (or a kind of :data:`_EXTRA`): kinds taken whole in one
    test, then one test per distinct (kinds, codes, severities)."""
    whole = {k for m in matches if not m.codes and not m.severities for k in m.expanded()} | set(_EXTRA)
    rest = {(m.expanded(), m.codes, m.severities) for m in matches if m.codes or m.severities}
    return pl.any_horizontal([
        pl.col("kind").is_in(sorted(whole)),
        *(cheap_expr(Match(kinds=k, codes=c, severities=sv)) for k, c, sv in sorted(rest)),
    ])  # fmt: skip


def select_rows(events: pl.LazyFrame | pl.DataFrame, library: Library, *,
                gpus: pl.LazyFrame | pl.DataFrame | None = None) -> pl.DataFrame:  # fmt: skip
    """The events some rule, follower or first-failure search can use, with the ``detail`` fields the
    rules read as columns ``_d_<key>`` instead of ``detail`` itself; and besides them (``extra`` true)
    the rows a message catalog reads (:mod:`forensics.messages`) and each incident's first
    :data:`LISTED` warnings and errors, which the diagnosis weighs and lists when no rule explains them.
    Every row carries its catalog reading (``catalog``, ``cat_cause``, ``cat_weight``, ``cat_role``;
    null without one).

    The versions the selected rows state (and the ``nvidia-smi`` dumps of ``gpus``, the same incidents'
    ``gpus`` rows) that cannot work together on a host are added as ``env.version_conflict`` rows
    (:mod:`forensics.versions`).

    A LazyFrame is filtered by kind and catalog anchors in the scan; a DataFrame (a chunk already read)
    in memory."""
    matches = _matches(library)
    same = _same_fields(library)
    keys = sorted({key for m in matches for key, _ in m.detail} | set(DETAIL_KEYS) | set(same))
    kinds = sorted(library.kinds() | set(_EXTRA))
    catalog = messages.load()
    read = pl.any_horizontal([pl.col("message").str.contains(a) for a in catalog.anchors()]).fill_null(False)
    said = pl.col("severity").is_in(["warning", "error", "critical"]) | (
        pl.col("kind").is_in(["other", "unparsed"]) & pl.col("message").str.contains(messages.TROUBLE))
    listed = said.fill_null(False) & ~pl.col("kind").is_in(_UNLISTED)
    emitted = pl.any_horizontal([d.expr() for d in catalog.defaults]) if catalog.defaults else pl.lit(False)
    coll = pl.col("message").str.contains(collectives.ANCHOR).fill_null(False)
    selected = pl.col("kind").is_in(kinds) | read | listed | emitted | words.candidates()
    # The rows that state a version are read in the same scan, for the version conflicts only; the ranks'
    # collectives (NCCL's COLL lines) for their comparison only.
    stated = pl.col("message").str.contains(versions.anchor()).fill_null(False)
    p = events.lazy().filter(selected | stated | coll).select(*_COLUMNS, "detail", _wanted=selected).collect()
    scanned = p.drop("_wanted")
    conflicts = versions.conflicts(versions.facts(scanned, gpus))
    # the ranks' collectives compared: a disagreement is a row of its own (the COLL lines are no evidence alone)
    p = pl.concat([p.filter("_wanted").drop("_wanted"), collectives.derived(scanned)])
    p = p.with_columns(follower=pl.lit(False)).with_row_index("_i")
    readings = messages.frame(catalog, p.get_column("message")).with_columns(_i=pl.col("i").cast(pl.UInt32)).drop("i")
    unwrapped = _unwrapped(events, p, readings, catalog)
    readings = pl.concat([readings.join(unwrapped.select("_i"), on="_i", how="anti"), unwrapped])
    # An emitter's error no row reads is still evidence of its layer: its catalog's default, a weak candidate.
    unread = p.join(readings.select("_i"), on="_i", how="anti")
    found = messages.default_frame(catalog, unread)
    readings = pl.concat([readings, found.with_columns(_i=unread.get_column("_i").gather(found.get_column("i"))).drop("i")])
    # A generic kind (GENERIC: an `other` line, a bare traceback, "No space left on device") takes the kind of
    # the catalog row that reads its message: NCCL's failed posix_fallocate is its shared memory, not a disk.
    # A reading that names no cause only says what an untyped line is (a bare "KeyError: …" is an exception);
    # a line its source already typed keeps its kind.
    p = p.join(readings, on="_i", how="left").with_columns(
        kind=pl.when(pl.col("kind").is_in(GENERIC) & ~pl.col("catalog").str.starts_with("code.")
                     & pl.col("cat_kind").is_in(sorted(KINDS))
                     & ((pl.col("cat_weight") > 0) | pl.col("kind").is_in(UNTYPED))).then("cat_kind").otherwise("kind")
    ).drop("cat_kind")  # fmt: skip
    ruled = accept(p.filter(pl.col("kind").is_in(kinds)), _cheap_union(matches))
    # The detail fields rules read, each extracted only from the kinds that carry it.
    for key in keys:
        carriers = sorted({k for m in matches if key in dict(m.detail) for k in m.expanded()}
                          | set(DETAIL_KEYS.get(key, ())) | set(same.get(key, ())))  # fmt: skip
        sub = ruled.filter(pl.col("kind").is_in(carriers)).select("_i", detail_field(key).alias(f"_d_{key}"))
        p = p.join(sub, on="_i", how="left", maintain_order="left")
    p = p.drop("detail")
    # Rows a predicate without text accepts are in; the text predicates run on the rows their cheap ones kept.
    ruled = p.join(ruled.select("_i"), on="_i", how="semi")
    plain = [m for m in matches if text_expr(m, followers=False) is None]
    keep = [accept(ruled, _cheap_union(plain)).get_column("_i")]
    keep += [matching(ruled, m, ["_i"], followers=False).get_column("_i") for m in matches
             if text_expr(m, followers=False) is not None]  # fmt: skip
    kept = pl.concat(keep).unique()
    read_rows = p.filter(pl.col("catalog").is_not_null()).get_column("_i")
    first = (
        p.filter(listed & ~pl.col("_i").is_in(kept.implode()))
        .sort("incident", pl.col("severity").replace_strict(_SEV, default=0, return_dtype=pl.Int8), "ts",
              descending=[False, True, False], nulls_last=True)
        .group_by("incident", maintain_order=True).head(LISTED).get_column("_i")
    )  # fmt: skip
    wanted = pl.concat([kept, read_rows, first]).unique()
    wanted = pl.concat([wanted, p.filter(words.alone(p)).get_column("_i")]).unique()
    p = p.filter(pl.col("_i").is_in(wanted.implode()))
    p = p.with_columns(extra=~pl.col("_i").is_in(kept.implode())).drop("_i", "follower")
    # Versions that cannot work together on a host (forensics.versions) are events the rules read.
    derived = conflicts.drop("detail").with_columns(source=pl.lit("versions"), gpu=pl.lit(None, pl.String),
                                                    rank=pl.lit(None, pl.Int32), code=pl.lit(None, pl.Int64),
                                                    extra=pl.lit(False))  # fmt: skip
    return pl.concat([p, derived], how="diagonal_relaxed") if derived.height else p


#: A message a logger or a terminal wrapped over several lines is read whole: an untyped or warning row no
#: catalog reads, or reads only weakly, is read again joined with up to this many records after it in its file.
WRAPPED = 2
#: A reading this weak (weight × role factor) may be a wrapped message's first line: a generic row ("CUDA error:
#: %s" whose text is no code's string, cut where the terminal wrapped it) reads it as little more than a line.
WEAK = 0.25


def _unwrapped(events: pl.LazyFrame | pl.DataFrame, p: pl.DataFrame, readings: pl.DataFrame,
               catalog: messages.Catalog) -> pl.DataFrame:  # fmt: skip
    """Readings (as :func:`messages.frame` gives them, keyed ``_i``) of the untyped or warning rows of ``p``
    that read as nothing (or weakly) alone but as something (stronger) joined with the records after them,
    when the records after them alone do not read so: the reading is the wrapped message's, not a
    neighbour's. They replace the rows' own readings."""
    weak = readings.filter(pl.col("cat_weight") < WEAK).select("_i", _before="cat_weight")
    unread = p.join(readings.select("_i"), on="_i", how="anti").with_columns(_before=pl.lit(None, pl.Float64))
    unread = pl.concat([unread, p.join(weak, on="_i", how="inner")]).filter(
        pl.col("kind").is_in(GENERIC) | pl.col("severity").is_in(["warning", "error", "critical"]))
    empty = readings.clear()
    if unread.is_empty():
        return empty
    keys = ["incident", "file"]
    after = [pl.col("message").shift(-k).over(keys).alias(f"_m{k}") for k in range(1, WRAPPED + 1)]
    nxt = (events.lazy().join(unread.select(keys).unique().lazy(), on=keys, how="semi")
           .select(*keys, "line", "message").sort(*keys, "line").with_columns(after).drop("message")
           .unique([*keys, "line"], keep="first").collect())  # fmt: skip
    rows = unread.select("_i", "_before", *keys, "line", "message").join(nxt, on=[*keys, "line"], how="left")
    tail = pl.concat_str([f"_m{k}" for k in range(1, WRAPPED + 1)], separator=" ", ignore_nulls=True)
    whole = pl.concat_str([pl.col("message"), tail], separator=" ", ignore_nulls=True)
    rows = rows.with_columns(whole=whole, tail=tail)
    whole = messages.frame(catalog, rows.get_column("whole"))
    alone = messages.frame(catalog, rows.get_column("tail")).select("i", _alone="catalog", _alone_cause="cat_cause")
    before = rows.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("i"), "_before")
    own = whole.join(alone, on="i", how="left").join(before, on="i", how="left").filter(
        (pl.col("_alone").is_null() | (pl.col("_alone") != pl.col("catalog"))
         | (pl.col("_alone_cause") != pl.col("cat_cause")))
        & (pl.col("_before").is_null() | (pl.col("cat_weight") > pl.col("_before"))))  # fmt: skip
    if own.is_empty():
        return empty
    ids = rows.get_column("_i").gather(own.get_column("i"))
    return own.drop("i", "_alone", "_alone_cause", "_before").with_columns(_i=ids.cast(pl.UInt32)).select(empty.columns)


#: Kinds a catalog's reading replaces: what a source calls a line it knows only as `other`, a bare traceback
#: or a filesystem error (a rule tuned to an exception or a CUDA error keeps its kind).
GENERIC = ["other", "unparsed", "py.traceback", "fs.error"]
#: The generic kinds that say nothing of what a line is.
UNTYPED = ["other", "unparsed"]
#: Warnings and errors kept per incident besides what the rules and catalogs read: what ``diagnose``
#: lists for an incident nothing explains.
LISTED = 20
#: Kinds never listed that way: a trainer's step lines and the job's end are no evidence of a cause.
_UNLISTED = ["train.step", "job.exit", "job.child_failed", "job.report", "host.boot"]


def finish(rows: pl.DataFrame, library: Library) -> pl.DataFrame:
    """Selected rows numbered, with ``t`` (µs), ``sev`` and ``follower`` (a sympathetic event)."""
    p = rows.with_row_index("row").with_columns(
        t=pl.col("ts").dt.epoch("us"),
        sev=pl.col("severity").replace_strict(_SEV, default=0, return_dtype=pl.Int8),
        follower=pl.lit(False),
    )
    return mark_followers(p, library.followers)


def prepare(events: pl.LazyFrame, library: Library) -> pl.DataFrame:
    """The rows of ``events`` the rules can use (:func:`select_rows`), ready for them (:func:`finish`)."""
    return finish(select_rows(events, library), library)


#: A follower's cause must lie this close before the job's end (the rules' default horizon): an Xid
#: from two days before does not make the job's untimed timeouts its followers.
FOLLOWER_HORIZON_US = 2 * 3_600_000_000
#: Files that keep how an earlier boot ended (pstore's ERST/EFI/ramoops records, as the kernel and
#: systemd-pstore store them): their untimed rows happened before this boot, so before the job.
PREVIOUS_BOOT_FILES = r"(?:^|/)pstore/|(?:^|/)dmesg-(?:erst|efi|efi_pstore|ramoops)-\d+(?:\.txt)?$"


def mark_followers(p: pl.DataFrame, followers: tuple[Follower, ...]) -> pl.DataFrame:
    rows: list[pl.Series] = []
    ends = incident_ends(p)
    recent = (pl.col("t").is_null() & ~pl.col("file").str.contains(PREVIOUS_BOOT_FILES)) | pl.col("end").is_null() \
        | (pl.col("t") >= pl.col("end") - FOLLOWER_HORIZON_US)  # fmt: skip
    for f in followers:
        later = matching(p, f.match, ["row", *_ATTRS], followers=False)
        before = matching(p, f.after, ["row", *_ATTRS], followers=False)
        before = before.join(ends, on="incident", how="left").filter(recent).drop("end")
        if later.height and before.height:
            hit = link(later.rename({"row": "cid"}), before, f.join, f.within_us, "after", "incident", backward=True)
            rows.append(hit.get_column("cid"))
    if not rows:
        return p
    hits = pl.concat(rows).unique()
    return p.with_columns(follower=pl.col("row").is_in(hits.implode()))


def link(left: pl.DataFrame, right: pl.DataFrame, join: str, within: int | None, order: str, fallback: str, *,
         backward: bool = False, same: list[str] | None = None) -> pl.DataFrame:  # fmt: skip
    """For each ``left`` row (``cid`` and the attributes of its current step), the ``right`` row that
    follows it (precedes it when ``backward``) on the same key (and the same ``same`` columns): ``cid``,
    ``row``, ``how``."""
    keys = [*KEYS[join], *(same or [])]
    left = left.drop_nulls(keys)
    right = right.drop_nulls(keys)
    empty = pl.DataFrame(schema={"cid": left.schema["cid"], "row": pl.UInt32, "how": pl.String})
    if left.height == 0 or right.height == 0:
        return empty
    r = right.select("row", *keys, r_file="file", r_line="line", r_t="t")
    if order == "any":  # anywhere on the key: the nearest in time, else the first
        found = []
        timed_l, timed_r = left.filter(pl.col("t").is_not_null()), r.filter(pl.col("r_t").is_not_null())
        if timed_l.height and timed_r.height:
            j = timed_l.sort("t").join_asof(timed_r.sort("r_t"), left_on="t", right_on="r_t", by=keys,
                                            strategy="nearest", check_sortedness=False)  # fmt: skip
            found.append(j.filter(pl.col("row").is_not_null()).select("cid", "row", how=pl.lit("time")))
        first = r.sort("r_t", "row", nulls_last=True).group_by(keys, maintain_order=True).first()
        found.append(left.join(first, on=keys).select("cid", "row", how=pl.lit("time")))
        return pl.concat([f.cast({"row": pl.UInt32}) for f in found]).unique("cid", keep="first", maintain_order=True)
    strategy = "backward" if backward else "forward"
    found = []
    timed_l, timed_r = left.filter(pl.col("t").is_not_null()), r.filter(pl.col("r_t").is_not_null())
    if timed_l.height and timed_r.height:
        j = timed_l.sort("t").join_asof(timed_r.sort("r_t"), left_on="t", right_on="r_t", by=keys,
                                        strategy=strategy, tolerance=within, check_sortedness=False)  # fmt: skip
        found.append(j.filter(pl.col("row").is_not_null()).select("cid", "row", how=pl.lit("time")))
    if fallback != "none":
        # Pairs where one side has no time: the one with none against all, the timed against the untimed.
        for sub_l, sub_r in ((left.filter(pl.col("t").is_null()), r),
                             (timed_l, r.filter(pl.col("r_t").is_null()))):  # fmt: skip
            if sub_l.height == 0 or sub_r.height == 0:
                continue
            j = _file_order(sub_l, sub_r, keys, strategy)
            found.append(j)
            if fallback == "incident":  # only across files: within one file its order decides
                first = sub_r.sort("r_t", "row", nulls_last=True).group_by([*keys, "r_file"], maintain_order=True).first()
                pairs = sub_l.join(first, on=keys).filter(pl.col("file") != pl.col("r_file"))
                found.append(pairs.select("cid", "row", how=pl.lit("incident")))
    if not found:
        return empty
    rank = pl.col("how").replace_strict({"time": 0, "file": 1, "incident": 2}, return_dtype=pl.Int8)
    out = pl.concat([f.cast({"row": pl.UInt32}) for f in found]).sort(rank, "row")
    return out.unique("cid", keep="first", maintain_order=True)


def _file_order(left: pl.DataFrame, right: pl.DataFrame, keys: list[str], strategy: str) -> pl.DataFrame:
    """The next (or previous) matching line of the same file."""
    r = right.rename({"r_file": "file"})
    j = left.sort("line").join_asof(r.sort("r_line"), left_on="line", right_on="r_line", by=[*keys, "file"],
                                    strategy=strategy, allow_exact_matches=False, check_sortedness=False)  # fmt: skip
    return j.filter(pl.col("row").is_not_null()).select("cid", "row", how=pl.lit("file"))


def incident_ends(p: pl.DataFrame) -> pl.DataFrame:
    """Per incident, when the job ended: its last torchrun failure, else its last error, else its last event."""
    p = p.filter(~pl.col("extra")) if "extra" in p.columns else p
    return p.group_by("incident").agg(
        end=pl.coalesce(
            pl.col("t").filter(pl.col("kind").is_in(END_KINDS)).max(),
            pl.col("t").filter(pl.col("sev") >= _SEV["error"]).max(),
            pl.col("t").max(),
        )
    )


def _same_fields(library: Library) -> dict[str, set[str]]:
    """The detail fields steps compare with the step before (``same``), and the kinds of both steps."""
    out: dict[str, set[str]] = {}
    for rule in library.rules:
        for before, step in zip(rule.steps, rule.steps[1:]):
            for key in step.same:
                out.setdefault(key, set()).update(before.match.expanded(), step.match.expanded())
    return out


def run_rule(p: pl.DataFrame, rule: Rule, ends: pl.DataFrame) -> pl.DataFrame:
    """The matches of one rule: ``incident``, ``rule``, ``cause``, ``score``, ``rows`` (one per step),
    ``hows`` (how each step was linked), ``failure`` (its row) and ``t_fail``."""
    attrs = [*_ATTRS, *dict.fromkeys(f"_d_{key}" for s in rule.steps for key in s.same)]
    frames = [matching(p, s.match, ["row", *attrs]) for s in rule.steps]
    chain = frames[0].with_columns(cid=pl.col("row"), rows=pl.concat_list("row"), hows=pl.concat_list(pl.lit("time")))
    for step, frame in zip(rule.steps[1:], frames[1:], strict=True):
        if chain.height == 0:
            break
        same = [f"_d_{key}" for key in step.same]
        links = link(chain.select("cid", *attrs), frame, step.join, step.within_us, step.order, rule.fallback, same=same)
        nxt = frame.rename({"row": "_next"})
        chain = (
            chain.drop(*attrs, "row").join(links, on="cid")
            .join(nxt, left_on="row", right_on="_next")
            .with_columns(rows=pl.concat_list("rows", "row"), hows=pl.concat_list("hows", "how"))
            .drop("how")
        )  # fmt: skip
        # One chain per row reached (its earliest start): chains stay as few as the rows.
        chain = chain.sort(pl.col("rows").list.first()).unique("row", keep="first", maintain_order=True)
        chain = chain.with_columns(cid=pl.col("row"))
    if chain.height == 0:
        return _no_matches()
    f = rule.failure
    chain = chain.with_columns(failure=pl.col("rows").list.get(f)).join(
        p.select(pl.col("row").alias("failure"), f_host="host", f_gpu="gpu", f_rank="rank", t_fail="t"), on="failure"
    )
    chain = chain.join(ends, on="incident", how="left")
    if rule.horizon_us is not None:
        near = (pl.col("t_fail") >= pl.col("end") - rule.horizon_us) & (pl.col("t_fail") <= pl.col("end") + 3_600_000_000)
        chain = chain.filter(near.fill_null(True))
    for u in rule.unless:
        if chain.height == 0:
            break
        chain = chain.join(_blocked(chain, matching(p, u.match, _ATTRS), u.join, u.within_us), on="cid", how="anti")
    if chain.height == 0:
        return _no_matches()
    penalty = pl.col("hows").list.eval(pl.element().replace_strict(PENALTY, return_dtype=pl.Float64)).list.eval(
        pl.element().log()).list.sum().exp()  # fmt: skip
    return chain.select(
        "incident", rule=pl.lit(rule.name), cause=pl.lit(rule.cause), score=pl.lit(rule.weight) * penalty,
        rows="rows", hows="hows", failure="failure", t_fail="t_fail",
    )  # fmt: skip


def _blocked(chain: pl.DataFrame, found: pl.DataFrame, join: str, within: int | None) -> pl.DataFrame:
    """The chains whose failure has a ``found`` row on the same key (within the window, either side)."""
    keys = KEYS[join]
    c = chain.select("cid", incident="incident", host="f_host", gpu="f_gpu", rank="f_rank", t="t_fail").drop_nulls(keys)
    f = found.select(*keys, u_t="t").drop_nulls(keys)
    if within is None:
        return c.join(f.select(keys).unique(), on=keys).select("cid").unique()
    near = pl.col("u_t").is_null() | pl.col("t").is_null() | ((pl.col("u_t") - pl.col("t")).abs() <= within)
    return c.join(f, on=keys).filter(near).select("cid").unique()


def _no_matches() -> pl.DataFrame:
    return pl.DataFrame(schema={"incident": pl.String, "rule": pl.String, "cause": pl.String, "score": pl.Float64,
                                "rows": pl.List(pl.UInt32), "hows": pl.List(pl.String), "failure": pl.UInt32,
                                "t_fail": pl.Int64})  # fmt: skip


def run_library(p: pl.DataFrame, library: Library) -> pl.DataFrame:
    """Every match of every rule."""
    ends = incident_ends(p)
    return pl.concat([run_rule(p, r, ends) for r in library.rules])
