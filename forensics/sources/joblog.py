"""Job output: the stdout/stderr of a training job, where NCCL, PyTorch/torchrun and the trainer interleave.

The three job-output sources (:mod:`~forensics.sources.nccl`, :mod:`~forensics.sources.torch`,
:mod:`~forensics.sources.trainlog`) read a file the same way, because a job log holds all three at once
(and kernel lines pasted in); the ``source`` column of a row names the family that read it. This module
runs the stages:

1. **lines** (:mod:`.prefix`): carriage-return redraws and text glued after a progress bar become lines
   of their own; ANSI codes go; launcher and logger prefixes are peeled, giving host, rank, pid, level
   and time.
2. **records** (:mod:`.records`): line classes (``data/job_records.toml``) and a small state machine per
   stream (host, rank, pid, thread) fold tracebacks (chained ones too), C++ aborts and stacks, torchrun
   report entries, NCCL error chains, RAS report sections and repeated device-side asserts; ranks
   printing at the same time stay apart. Kernel lines go to the kernel source's pipeline, the lines of a
   gdb, py-spy or faulthandler dump pasted in (:data:`.stacks.JOB_HEAD` and the indented lines under them) to the stacks
   source.
3. **families**: the record's first line is searched for the anchors of ``grammars/nccl.lark``,
   ``traceback.lark`` and ``trainlog.lark``; Lark parses the flagged records, enrichers make the rows
   (each source's own, in :mod:`.nccl`, :mod:`.torch` and :mod:`.trainlog`).
4. **metrics** (:mod:`.metrics`): step lines of the trainers in ``data/train_metrics.toml`` are read in
   Polars into the ``metrics`` table; a loss or gradient turning NaN/inf is an event (at its onset, not on
   every step), and step lines stopping long before the log ends or fails is a ``train.stall``.

The file is read in chunks cut where no record can span (:mod:`.chunks`), so memory follows the chunk,
not the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache, lru_cache
from types import ModuleType
from typing import Any

import polars as pl
import pyarrow as pa

from ..errors import ParseError
from ..families import Families, row
from ..reading import envelope, interest, prefix
from ..reading.base import SourceResult, events_table, short_host, template_expr
from ..reading.chunks import CHUNK_BYTES, MAX_GROWTH, iter_chunks
from ..reading.metrics import _style_expr, read_metrics
from ..reading.records import WINDOW, group_records
from ..regex import ascii_classes
from ..schema import METRICS
from ..text import dedent, split_lines
from . import kernel, nccl, stacks, torch, trainlog
from .jobsniff import sniff_scores
from .nccl import NCCL
from .torch import TORCH, classify_error
from .trainlog import TRAIN

#: Step lines wait for this many to be folded into their streams' state (see :func:`_fold_steps`).
FOLD_STEPS = 100_000
#: A step interval this many times the run's median, and at least STALL_MIN_S, is a stall.
STALL_FACTOR = 10.0
STALL_MIN_S = 60.0

_GRAMMAR_SOURCE = {"nccl": "nccl", "traceback": "torch", "trainlog": "trainlog"}

#: Families that only a record of the matching block can be (see :func:`.records._split_records`).
_BLOCK_FAMILIES = {
    "py.exception": {"tb"}, "job.report": {"report", "tb"}, "job.child_failed": {"entry"},
    "cpp.abort": {"cpp"}, "cpp.stack": {"cpp"}, "nccl.ras": {"ras"},
}  # fmt: skip

_KERNEL_STAMP = ascii_classes(
    # (dmesg -T in any locale: "[wo jul 28 05:19:43 2021]", as the kernel envelope reads it)
    r"^\[ *\+?\d+\.\d+\](?:\[ *[TC]\d+\])? ?|^\[\S+ +\S+ +\d{1,2} \d\d:\d\d:\d\d \d{4}\] "
    r"|^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?:\S+ )?kernel: |^kernel: |^kern *:\w+ *: "
)
#: ``dmesg --time-format iso``: microseconds after a comma and an offset, which Python logging never prints.
_DMESG_ISO = ascii_classes(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d ")


# ---------------------------------------------------------------------------------------- families

FAMILIES = (NCCL, TORCH, TRAIN)


def parse_record(text: str, *, block: str = "single", full: bool = False) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """One job-output record → (fields, error, source). ``block`` is the record splitter's verdict
    (``tb``, ``cpp``, ``report``, ``entry``, ``chain``, ``ras``, ``assert``, ``single``…).

    >>> fields, error, source = parse_record("[Rank 1] Watchdog caught collective operation timeout: "
    ...     "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.")
    >>> source, fields["kind"], fields["rank"], fields["detail"]["timeout_ms"]
    ('torch', 'torch.watchdog_timeout', 1, 1800000)
    """
    error = None
    tried: list[tuple[Families, list[str]]] = []
    for families in FAMILIES:
        candidates = [k for k in families.candidates(text) if block in _BLOCK_FAMILIES.get(k, (block,))]
        if not candidates and not full:
            continue
        fields, err = families.parse_record(text, full=full, candidates=candidates, from_anchor=False)
        if fields is not None:
            return fields, None, _GRAMMAR_SOURCE[families.name]
        error = error or err
        tried.append((families, candidates))
    # No grammar read the record from its first byte: read it from an anchor that follows text no
    # prefix took (a collector's stamp, a paste's own label), every grammar's whole parse tried first.
    for families, candidates in tried if error else ():
        if found := families.from_anchor(text, candidates):
            return found[0], None, _GRAMMAR_SOURCE[families.name]
    return None, error, None


# ---------------------------------------------------------------------------------------- assemble


def _dated(carry: _Carry, year: int | None) -> pl.Expr:
    """The year-less stamps (glog's ``E0101 06:07:45``) with a year: ``year`` when the caller knows it,
    else the year of the nearest printed stamp before the line (the next one after it when there is
    none before), across New Year: a month more than six before the printed one's is the next year's
    (``E0101`` after ``[2024-12-31 …]`` is 2025), more than six after it the year before's. Without
    any printed stamp, the year of the chunk's first (:attr:`_Carry.year`), else none (dated from the
    incident's context at ingest)."""
    printed = pl.col("stamp")
    p_year = printed.str.slice(0, 4).cast(pl.Int32, strict=False)
    p_month = printed.str.slice(5, 2).cast(pl.Int32, strict=False)
    month = pl.col("yearless_stamp").str.slice(0, 2).cast(pl.Int32, strict=False)
    before_y = p_year.forward_fill().fill_null(pl.lit(carry.last_year, pl.Int32))
    before_m = p_month.forward_fill().fill_null(pl.lit(carry.last_month, pl.Int32))
    after_y, after_m = p_year.backward_fill(), p_month.backward_fill()
    guessed = (
        pl.when(pl.lit(year, pl.Int32).is_not_null()).then(pl.lit(year, pl.Int32))
        .when(before_y.is_not_null()).then(before_y + (month < before_m - 6).cast(pl.Int32))
        .when(after_y.is_not_null()).then(after_y - (month > after_m + 6).cast(pl.Int32))
        .otherwise(pl.lit(carry.year, pl.Int32))
    )  # fmt: skip
    return pl.concat_str(guessed.cast(pl.String), pl.lit("-"), pl.col("yearless_stamp"))


@dataclass
class _Carry:
    """What a chunk leaves to the next: the year, the rank map, non-finite states, step times."""

    year: int | None = None
    #: The year and month of the last printed stamp seen: a chunk's first year-less stamps are dated by it.
    last_year: int | None = None
    last_month: int | None = None
    lines: int = 0
    rows: int = 0
    comm: dict[tuple[str, int, int], tuple[int | None, str | None]] = field(default_factory=dict)
    bad: dict[tuple[str, int | None, str], tuple[bool, int | None]] = field(default_factory=dict)
    #: Per step stream (host, rank, style): its last LOSS_WINDOW finite losses, and whether its last two were high.
    losses: dict[tuple[str, int | None, str], tuple[list[float], list[bool]]] = field(default_factory=dict)
    #: Step lines (``i``, ``host``, ``rank``, ``ts``, ``step``) not yet folded into ``streams`` and ``gaps``.
    steps: list[pl.DataFrame] = field(default_factory=list)
    #: Per step stream (host, rank): its last step line (``i``, ``ts``, ``step``) and ``n`` step lines.
    streams: pl.DataFrame | None = None
    #: Per step stream: how many of its intervals (``gap``, µs, positive) had each length.
    gaps: pl.DataFrame | None = None
    last_ts: Any = None
    errors: list[pl.DataFrame] = field(default_factory=list)
    records: int = 0
    unparsed: int = 0
    first_error: str | None = None
    bad_utf8: int = 0


def _chunk(data: bytes, carry: _Carry, *, file: str, incident: str, host: str | None, source: str,
           year: int | None, timezone: str | None, on_error: str, full: bool, all_lines: bool) -> tuple[pa.Table, pa.Table]:  # fmt: skip
    lines, bad_utf8 = split_lines(data)
    lines = dedent(lines)
    carry.bad_utf8 += bad_utf8
    offset_lines, offset_rows = carry.lines, carry.rows
    carry.lines += lines.len()
    if not lines.len():
        return events_table([]), METRICS.empty_table()
    df = prefix.peeled(lines).with_columns(pl.col("i").cast(pl.Int64) + offset_lines)
    carry.rows += df.height
    if year is None and carry.year is None:
        carry.year = df.select(pl.col("stamp").str.slice(0, 4).cast(pl.Int32, strict=False).min()).item()
    file_year = year if year is not None else carry.year  # for the kernel lines pasted into the output
    df = df.with_columns(stamp=pl.coalesce("stamp", _dated(carry, year)))
    last = df.select(pl.col("stamp").drop_nulls().last()).item()
    if last is not None and re.match(r"\d{4}-\d\d", last):
        carry.last_year, carry.last_month = int(last[:4]), int(last[5:7])
    # Kernel lines pasted into the job's output go to the kernel pipeline.
    kernelish = (
        (
            ((pl.col("wrapped").str.contains(_KERNEL_STAMP) | pl.col("msg").str.contains(r"^\s*(?:NVRM|kernel): "))
             & pl.col("logger").is_null())
            | pl.col("wrapped").str.contains(_DMESG_ISO)
        )
        & ~pl.col("job_flag")
    )  # fmt: skip
    # indented unstamped lines under a kernel line are its continuation
    indented = pl.col("msg").str.contains(r"^\s+\S")
    df = df.with_columns(job_flag=_flagged(pl.col("msg"))).with_columns(kernelish=kernelish).with_columns(
        kernelish=pl.col("kernelish") | (indented & pl.col("kernelish").first().over((~indented).cum_sum()))
    )
    kernel_rows = df.filter("kernelish")
    # A stack dump pasted into the output (gdb, py-spy) goes to the stacks source, its indented lines with it.
    stackish = pl.col("msg").str.contains(stacks.JOB_HEAD) & ~pl.col("job_flag") & ~pl.col("kernelish")
    df = df.with_columns(stackish=stackish).with_columns(
        stackish=pl.col("stackish") | (indented & pl.col("stackish").first().over((~indented).cum_sum()))
    )
    stack_rows = df.filter("stackish")
    # (a step line's trainer style, read before the records: a step line is a record of its own)
    job = df.filter(~pl.col("kernelish") & ~pl.col("stackish")).drop("kernelish", "stackish")
    df = group_records(job.with_columns(line_style=_style_expr(pl.col("msg"), job.height)))
    events, metrics = _job_events(df, carry, file=file, incident=incident, host=host, source=source,
                                  timezone=timezone, on_error=on_error, full=full, offset_rows=offset_rows,
                                  all_lines=all_lines)  # fmt: skip
    if stack_rows.height:
        events = pa.concat_tables([events, _stack_events(stack_rows, carry, file=file, incident=incident, host=host)])
    if kernel_rows.height:
        events = pa.concat_tables([events, _kernel_events(kernel_rows, carry, file=file, incident=incident, host=host,
                                                          year=file_year, timezone=timezone, on_error=on_error, full=full,
                                                          all_lines=all_lines)])  # fmt: skip
    return events, metrics


def _kernel_events(rows: pl.DataFrame, carry: _Carry, **options: Any) -> pa.Table:
    text = "\n".join(rows.get_column("wrapped").to_list()).encode("utf-8", "surrogatepass")
    result = kernel.parse(text, **options)
    carry.records += result.records
    carry.unparsed += result.unparsed
    lines = rows.get_column("i")
    out = pl.from_arrow(result.events)
    assert isinstance(out, pl.DataFrame)
    out = out.with_columns(line=lines.gather(pl.Series(out.get_column("line") - 1)) + 1)
    return events_table(out)


def _stack_events(rows: pl.DataFrame, carry: _Carry, *, file: str, incident: str, host: str | None) -> pa.Table:
    """The rows of a stack dump pasted into the output, on the job's lines, ranks and hosts."""
    text = "\n".join(rows.get_column("msg").to_list()).encode("utf-8", "surrogatepass")
    result = stacks.parse(text, file=file, incident=incident, host=host)
    carry.records += result.records
    out = pl.from_arrow(result.events)
    assert isinstance(out, pl.DataFrame)
    at = pl.Series(out.get_column("line") - 1)
    out = out.with_columns(
        line=rows.get_column("i").gather(at) + 1, rank=rows.get_column("rank").gather(at),
        host=pl.coalesce(short_host(pl.lit(rows.get_column("host").gather(at))), pl.col("host")),
    )
    return events_table(out)


def _job_events(df: pl.DataFrame, carry: _Carry, *, file: str, incident: str, host: str | None, source: str,
                timezone: str | None, on_error: str, full: bool, offset_rows: int,
                all_lines: bool) -> tuple[pa.Table, pa.Table]:  # fmt: skip
    head = pl.col("rec") == pl.int_range(pl.len())
    df = df.with_columns(is_head=head)
    multi = df.filter(~pl.col("is_head")).get_column("rec").unique()
    heads = df.filter("is_head")
    if multi.len():
        pieces = df.filter(pl.col("rec").is_in(multi.implode()))
        joined_text = pieces.group_by("rec", maintain_order=True).agg(
            message=pl.col("msg").str.join("\n"), n_lines=pl.len()
        )
        heads = heads.join(joined_text, on="rec", how="left").with_columns(
            message=pl.coalesce("message", "msg"), n_lines=pl.col("n_lines").fill_null(1)
        )
    else:
        heads = heads.with_columns(message=pl.col("msg"), n_lines=pl.lit(1, pl.UInt32))
    ts, ts_from = envelope.to_utc_in(heads, "stamp", pl.lit("iso"), year=None, timezone=timezone)
    # A logger prefix alone on its line says its message on the next one (DeepSpeed fused_optimizer):
    # the families read the record from its first line with text.
    # A terminal's rows of one hard-wrapped line are read as that line (the message keeps the rows): a
    # row padded with spaces broke between words, any other row mid-token.
    rejoined = pl.col("message").str.replace_all(r"[ \t]+\n", " ").str.replace_all("\n", "", literal=True)
    heads = heads.with_columns(
        text=pl.when(pl.col("block") == "wrap").then(rejoined).otherwise(pl.col("message").str.strip_chars_start("\n"))
    )
    heads = heads.with_columns(ts=ts, ts_from=ts_from).with_columns(
        # (a hard-wrapped line's anchor may lie on its second row)
        flag=pl.lit(True) if full else _first_line_flag(heads) | (pl.col("block") == "wrap"),
        style=pl.when(pl.col("block") == "single").then(pl.col("line_style")),
    ).with_columns(flag=pl.col("flag") & pl.col("style").is_null())
    carry.records += heads.height
    found = _parse_flagged(heads.filter("flag"), carry, file=file, on_error=on_error, full=full)
    # step lines → metrics, and non-finite onsets
    steps = heads.filter(pl.col("style").is_not_null()).select("rec", "style", "msg", "i", "host", "rank", "ts")
    numbered, metrics = read_metrics(steps.select("rec", "style", "msg", "i"))
    step_kind = _step_kinds(steps, numbered, metrics, carry)
    last = heads.get_column("ts").drop_nulls()
    if last.len():
        carry.last_ts = last.max() if carry.last_ts is None else max(carry.last_ts, last.max())
    if not all_lines:
        heads, step_kind = _of_interest(df, heads, found, step_kind)
    out = _rows(heads, found, step_kind, file=file, incident=incident, host=host, source=source)
    out = _fill_ranks(out, carry)
    out = _link_asserts(out)
    metric_rows = metrics.join(steps.select("rec", "i", "host", "rank", "ts"), on="rec").select(
        incident=pl.lit(incident), host=short_host(pl.coalesce("host", pl.lit(host, pl.String))), rank="rank",
        file=pl.lit(file), line=pl.col("i") + 1, ts="ts", step="step", name="name", value="value",
    ).sort("line", maintain_order=True)
    timed = steps.join(numbered, on="rec", how="left").select("i", "host", "rank", "ts", "step").drop_nulls("ts")
    if timed.height:
        carry.steps.append(timed)
        if sum(f.height for f in carry.steps) >= FOLD_STEPS:
            _fold_steps(carry)
    carry.errors.append(out.filter(pl.col("severity").is_in(["error", "critical"]) & pl.col("ts").is_not_null())
                        .select("line", "ts"))  # fmt: skip
    return events_table(out), metric_rows.to_arrow().cast(METRICS)


#: A logger's level that makes its line a record of interest.
_LOUD = ("warning", "error", "critical")


def _of_interest(df: pl.DataFrame, heads: pl.DataFrame, found: dict[int, dict[str, Any]],
                 step_kind: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:  # fmt: skip
    """The records of interest of a chunk (``heads``, one row per record) and the step kinds that are
    events: the records a family read, the step lines that are more than a step (an onset, an overflow,
    a spike; every step line's values are in ``metrics``), and of the others those a logger printed at
    warning level or above or with a line of interest (:func:`.interest.of_interest`: an anchor of a
    family or a message catalog, a word of trouble). The rest are counted (``files.records``), not rows."""
    step_kind = step_kind.filter(pl.col("kind") != "train.step")
    told = pl.Series("rec", list(found), dtype=pl.Int64)
    rest = heads.filter(~pl.col("rec").is_in(told.implode()) & pl.col("style").is_null())
    loud = rest.filter(pl.col("level").is_in(_LOUD)).get_column("rec")
    quiet = rest.filter(~pl.col("level").is_in(_LOUD).fill_null(False)).get_column("rec")
    lines = df.filter(pl.col("rec").is_in(quiet.implode())).select("rec", "msg")
    text = "\n".join(lines.get_column("msg").to_list()).encode("utf-8", "surrogateescape") + b"\n"
    hits = interest.of_interest(lines.get_column("msg"), text, tuple(f.prefilter() for f in FAMILIES))
    keep = pl.concat([told, step_kind.get_column("rec"), loud, lines.filter(hits).get_column("rec")])
    return heads.filter(pl.col("rec").is_in(keep.implode())), step_kind


def _flagged(line: pl.Expr) -> pl.Expr:
    """Whether a line has an anchor of any job family (one search per family: the engine finds each
    family's literals faster than those of one alternation of all)."""
    return pl.any_horizontal(line.str.contains(f.prefilter()) for f in FAMILIES)


def _first_line_flag(heads: pl.DataFrame) -> pl.Series:
    """``job_flag`` of each record's first line with text: its head line, or for a prefix-only head
    line (empty message) the line after it."""
    flag = heads.get_column("job_flag")
    empty = heads.select(pl.arg_where(pl.col("msg") == "")).to_series()
    if not empty.len():
        return flag
    first = heads[empty].select(_flagged(pl.col("text").str.split("\n").list.first())).to_series()
    return flag.scatter(empty, first)


def _parse_flagged(flagged: pl.DataFrame, carry: _Carry, *, file: str, on_error: str, full: bool) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    memo: dict[tuple[str, str], tuple[dict[str, Any] | None, str | None, str | None]] = {}
    for rec, i, text, block, extra in flagged.select("rec", "i", "text", "block", "extra").iter_rows():
        if (text, block) not in memo:
            memo[(text, block)] = parse_record(text, block=block, full=full)
        fields, error, fam_source = memo[(text, block)]
        if fields is None and error is None:
            continue
        if fields is None:
            carry.unparsed += 1
            if on_error == "raise":
                raise ParseError(file, i + 1, error or "")
            carry.first_error = carry.first_error or f"line {i + 1}: {error}"
            fields, fam_source = row("unparsed", "warning", error=error), None
        fields = {**fields, "detail": dict(fields["detail"]), "source": fam_source}
        if extra:
            fields["detail"].update(json.loads(extra))
        found[rec] = fields
    return found


_LOSS = r"(?:^|_)loss$|^loss(?:_|$)"
_GRAD = r"grad(?:ient)?_norm"


def _step_kinds(steps: pl.DataFrame, numbered: pl.DataFrame, metrics: pl.DataFrame, carry: _Carry) -> pl.DataFrame:
    """``rec``, ``kind``, ``code`` and ``detail`` (a struct) of every step line: ``train.step``, or the onset
    of a non-finite loss (``train.loss_nonfinite``) or gradient (``train.grad_nonfinite``) in its stream
    (host, rank, trainer style), the stream's state carried over from the chunk before."""
    if not steps.height:  # no step line: the empty result of these input types, made once
        return _no_step_kinds(*(tuple(f.schema.items()) for f in (steps, numbered, metrics)))
    return _read_step_kinds(steps, numbered, metrics, carry)


@lru_cache(maxsize=8)
def _no_step_kinds(*schemas: tuple[tuple[str, pl.DataType], ...]) -> pl.DataFrame:
    steps, numbered, metrics = (pl.DataFrame(schema=dict(s)) for s in schemas)
    return _read_step_kinds(steps, numbered, metrics, _Carry())


def _read_step_kinds(steps: pl.DataFrame, numbered: pl.DataFrame, metrics: pl.DataFrame, carry: _Carry) -> pl.DataFrame:
    nonfinite = pl.col("value").is_nan() | pl.col("value").is_infinite()
    nan_count = (pl.col("name") == "nan_iterations") & (pl.col("value") > 0)
    is_loss = pl.col("name").str.contains(_LOSS) & (pl.col("name") != "loss_scale")
    is_grad = pl.col("name").str.contains(_GRAD)
    # the line's own loss decides when it prints one (TRL's finite 'loss' beside a NaN 'nll_loss' is a
    # gradient's onset, not a loss's); the other losses when it does not
    main = pl.col("name") == "loss"
    metrics = metrics.with_columns(
        bad_loss=(pl.when(main.any().over("rec")).then(main).otherwise(is_loss) & nonfinite) | nan_count,
        bad_grad=is_grad & nonfinite,
    )
    bad_loss, bad_grad = pl.col("bad_loss"), pl.col("bad_grad")
    skipped = pl.col("value").filter(pl.col("name") == "skipped_iterations").first()
    scale = pl.col("value").filter(pl.col("name") == "loss_scale").first()
    per_line = metrics.group_by("rec").agg(
        loss_bad=bad_loss.any(),
        grad_bad=bad_grad.any(),
        loss_name=pl.col("name").filter(bad_loss).first(),
        loss_value=pl.col("value").filter(bad_loss).first(),
        grad_name=pl.col("name").filter(bad_grad).first(),
        grad_value=pl.col("value").filter(bad_grad).first(),
        has_loss=is_loss.any(),
        loss_v=pl.coalesce(pl.col("value").filter(main & ~nonfinite).first(),
                           pl.col("value").filter(is_loss & ~nonfinite).first()),
        loss_name_v=pl.coalesce(pl.col("name").filter(main & ~nonfinite).first(),
                                pl.col("name").filter(is_loss & ~nonfinite).first()),
        skipped=skipped,
        scale=scale,
    )  # fmt: skip
    # Megatron prints no "lm loss" for an interval whose loss was NaN (the mean is not > 0) and for one whose
    # iterations the fp16 scaler all skipped: a missing loss with no skipped iteration is a NaN loss
    # (Megatron-DeepSpeed does not count it among the nan iterations), skipped iterations are overflows.
    megatron = pl.col("style") == "megatron"
    missing = megatron & ~pl.col("has_loss").fill_null(False) & (pl.col("skipped").fill_null(0) == 0)
    overflow = pl.col("skipped").fill_null(0) > 0
    stream = ["s_host", "rank", "style"]
    before = pl.DataFrame(
        [(h, r, st, b, g) for (h, r, st), (b, g) in carry.bad.items()],
        schema={"s_host": pl.String, "rank": pl.Int32, "style": pl.String, "c_bad": pl.Boolean, "c_good": pl.Int64},
        orient="row",
    )  # fmt: skip
    no_step = -1  # a good line without a step number still ends the run of good steps
    lines = (
        steps.select("rec", pl.col("host").fill_null("").alias("s_host"), pl.col("rank").cast(pl.Int32, strict=False), "style")
        .join(numbered, on="rec", how="left").join(per_line, on="rec", how="left")
        .join(before, on=stream, how="left", nulls_equal=True).sort("rec")
        .with_columns(loss_bad=pl.col("loss_bad").fill_null(False) | missing, grad_bad=pl.col("grad_bad").fill_null(False))
        .with_columns(bad=pl.col("loss_bad") | pl.col("grad_bad"))
        .with_columns(good=pl.when(~pl.col("bad")).then(pl.col("step").fill_null(no_step)).forward_fill().over(stream))
        .with_columns(
            was_bad=pl.coalesce(pl.col("bad").shift(1).over(stream), "c_bad", pl.lit(False)),
            last_good=pl.coalesce(pl.col("good").shift(1).over(stream), "c_good"),
            after_good=pl.coalesce("good", "c_good"),
        )
    )  # fmt: skip
    for h, r, st, b, g in lines.group_by(stream, maintain_order=True).agg(
        pl.col("bad").last(), pl.col("after_good").last()
    ).iter_rows():  # fmt: skip
        carry.bad[(h, r, st)] = (b, g)
    lines = lines.join(_loss_spikes(lines, stream, carry), on="rec", how="left")
    spike = pl.col("spike").fill_null(False) & ~pl.col("bad")
    onset = pl.col("bad") & ~pl.col("was_bad")
    # a loss seen non-finite names the onset; one only missing (Megatron) yields to a gradient seen so
    loss_first = pl.col("loss_bad") & (pl.col("loss_name").is_not_null() | ~pl.col("grad_bad"))
    kind = (
        pl.when(onset & loss_first).then(pl.lit("train.loss_nonfinite"))
        .when(onset).then(pl.lit("train.grad_nonfinite"))
        .when(overflow).then(pl.lit("train.overflow"))
        .when(spike).then(pl.lit("train.loss_spike")).otherwise(pl.lit("train.step"))
    )  # fmt: skip
    value = pl.when(loss_first).then(pl.col("loss_value")).otherwise(pl.col("grad_value"))
    value_text = (
        pl.when(loss_first & pl.col("loss_name").is_null()).then(pl.lit("missing"))
        .when(value.is_nan()).then(pl.lit("nan")).when(value == float("inf")).then(pl.lit("inf"))
        .when(value == float("-inf")).then(pl.lit("-inf")).otherwise(value.cast(pl.String))
    )  # fmt: skip
    name = pl.when(loss_first).then(pl.coalesce("loss_name", pl.lit("loss"))).otherwise(pl.col("grad_name"))
    both = pl.col("loss_bad") & pl.col("grad_bad")
    return lines.select(
        "rec", kind=kind, code=pl.when(onset | overflow | spike).then(pl.col("step")),
        detail=pl.struct(
            style="style", step="step",
            metric=pl.when(onset).then(name).when(overflow).then(pl.lit("skipped_iterations"))
            .when(spike).then(pl.col("loss_name_v")),
            value=pl.when(onset).then(value_text).when(overflow).then(pl.col("skipped").cast(pl.Int64, strict=False).cast(pl.String))
            .when(spike).then(pl.col("loss_v").cast(pl.String)),
            # a spike's level before it: the median of the stream's LOSS_WINDOW finite losses before it
            median=pl.when(spike & ~onset & ~overflow).then(pl.col("median").round(6).cast(pl.String)),
            # the loss scale the interval ended at: overflows that keep one scale never let a step through
            scale=pl.when(overflow & ~onset).then(pl.col("scale")),
            last_finite_step=pl.when(onset).then(pl.col("last_good").replace(no_step, None)),
            also=pl.when(onset & both).then(
                pl.when(loss_first).then(pl.lit("train.grad_nonfinite")).otherwise(pl.lit("train.loss_nonfinite"))
            ),
        ),
    )


#: A loss at least SPIKE times the median of its stream's last LOSS_WINDOW finite losses (once at least
#: LOSS_HISTORY are known), and the next one high too, is a spike: a run diverging before it turns NaN (one
#: high loss that comes back down is a bad batch, and is not one).
SPIKE, LOSS_WINDOW, LOSS_HISTORY = 1.5, 20, 10


def _loss_spikes(lines: pl.DataFrame, stream: list[str], carry: _Carry) -> pl.DataFrame:
    """``rec``, ``median`` and ``spike`` of the step lines with a finite loss: the second of the first two
    losses in a row at least :data:`SPIKE` × the median of the stream's finite losses before the first
    (the stream's losses and its last two verdicts carried over chunks)."""
    have = lines.filter(pl.col("loss_v").is_not_null() & (pl.col("loss_v") > 0)).select(*stream, "rec", "loss_v")
    history = [(h, r, st, -n - 1, v) for (h, r, st), (vs, _) in carry.losses.items() for n, v in enumerate(reversed(vs))]
    rows = pl.concat([pl.DataFrame(history, schema=have.schema, orient="row"), have]).sort("rec")
    rows = rows.with_columns(
        median=pl.col("loss_v").shift(1).rolling_median(LOSS_WINDOW, min_samples=LOSS_HISTORY).over(stream)
    ).with_columns(high=(pl.col("loss_v") >= SPIKE * pl.col("median")).fill_null(False))
    # the verdicts of the carried losses are the ones they had: a high run is judged against the level before it
    carried = pl.DataFrame([(h, r, st, -k - 1, flag) for (h, r, st), (_, flags) in carry.losses.items()
                            for k, flag in enumerate(reversed(flags))],
                           schema={**{c: have.schema[c] for c in stream}, "rec": pl.Int64, "_h": pl.Boolean},
                           orient="row")  # fmt: skip
    rows = rows.join(carried, on=[*stream, "rec"], how="left").with_columns(high=pl.coalesce("_h", "high")).drop("_h")
    rows = rows.with_columns(prev=pl.col("high").shift(1).over(stream).fill_null(False),
                             prev2=pl.col("high").shift(2).over(stream).fill_null(False))  # fmt: skip
    for (h, r, st), part in rows.group_by(stream, maintain_order=True):
        flags = part.get_column("high").to_list()
        carry.losses[(h, r, st)] = (part.get_column("loss_v").to_list()[-LOSS_WINDOW:], flags[-2:])  # type: ignore[index]
    return rows.filter(pl.col("rec") >= 0).select(
        "rec", median=pl.col("median").shift(1).over(stream), spike=pl.col("high") & pl.col("prev") & ~pl.col("prev2")
    )  # fmt: skip


def _rows(heads: pl.DataFrame, found: dict[int, dict[str, Any]], step_kind: pl.DataFrame, *, file: str,
          incident: str, host: str | None, source: str) -> pl.DataFrame:  # fmt: skip
    recs = list(found)
    f = [found[r] for r in recs]
    fam = pl.DataFrame({
        "rec": pl.Series(recs, dtype=pl.Int64),
        "f_kind": pl.Series([x["kind"] for x in f], dtype=pl.String),
        "f_severity": pl.Series([x["severity"] for x in f], dtype=pl.String),
        "f_gpu": pl.Series([x.get("gpu") for x in f], dtype=pl.String),
        "f_pid": pl.Series([x.get("pid") for x in f], dtype=pl.Int64),
        "f_code": pl.Series([x.get("code") for x in f], dtype=pl.Int64),
        "f_rank": pl.Series([x.get("rank") for x in f], dtype=pl.Int32),
        "f_host": pl.Series([x.get("host") for x in f], dtype=pl.String),
        "f_stamp": pl.Series([x.get("stamp") for x in f], dtype=pl.String),
        "f_source": pl.Series([x.get("source") for x in f], dtype=pl.String),
        "f_detail": pl.Series([x["detail"] for x in f], dtype=pl.Object),
    })  # fmt: skip
    steps = step_kind.select("rec", s_kind="kind", s_code="code", s_detail="detail")
    df = heads.join(fam, on="rec", how="left").join(steps, on="rec", how="left")
    # A family that printed its own time (a torchrun report entry) is dated by it.
    f_ts, f_from = envelope.to_utc_in(df, "f_stamp", pl.lit("iso"), year=None, timezone=None)
    df = df.with_columns(ts=pl.coalesce("ts", f_ts), ts_from=pl.coalesce("ts_from", pl.when(pl.col("f_stamp").is_not_null()).then(f_from)))
    envelope_detail = ("ts_from", "where", "local_rank", "cuda_dev", "tid")
    stamp = pl.when(pl.col("ts").is_null()).then(pl.coalesce("stamp", "yearless_stamp"))
    # family rows (few): their detail dicts, then the envelope's fields they lack
    fam_rows = df.select(pl.arg_where(pl.col("f_kind").is_not_null())).to_series()
    details: list[str] = []
    for fam_detail, *env in df[fam_rows].select("f_detail", *envelope_detail, stamp.alias("_stamp")).iter_rows():
        detail = dict(fam_detail)
        for key, value in zip((*envelope_detail, "stamp"), env, strict=True):
            if value is not None and key not in detail:
                detail[key] = value
        details.append(json.dumps({k: v for k, v in detail.items() if v is not None}, ensure_ascii=False, default=str))
    fam_text = pl.Series([None] * df.height, dtype=pl.String).scatter(fam_rows, pl.Series(details, dtype=pl.String))
    # step lines (many): the style's fields and the envelope's, encoded in Polars
    step_fields = [pl.col("s_detail").struct.field(name) for name in ("style", "step", "metric", "value", "scale", "last_finite_step", "also", "median")]
    step_detail = _json_without_nulls(pl.struct(*step_fields, *envelope_detail, stamp.alias("stamp")))
    by_logger = (
        pl.when(pl.col("logger") == "nccl").then(pl.lit("nccl"))
        .when((pl.col("logger") == "glog") & pl.col("where").str.contains(r"ProcessGroup|torch|c10")).then(pl.lit("torch"))
    )  # fmt: skip
    other_detail = _json_without_nulls(pl.struct(
        template=template_expr(pl.col("message")), ts_from=pl.col("ts_from"), stamp=stamp, where=pl.col("where"),
    ))  # fmt: skip
    # each kind of row encodes its own detail (the template's masks run on the "other" rows only)
    df = df.with_columns(f_detail_text=fam_text)
    family, step = pl.col("f_detail_text").is_not_null(), pl.col("s_kind").is_not_null()
    details = pl.concat([
        df.filter(family).select("rec", detail="f_detail_text"),
        df.filter(~family & step).select("rec", detail=step_detail),
        df.filter(~family & ~step).select("rec", detail=other_detail),
    ])  # fmt: skip
    return df.join(details, on="rec", how="left", maintain_order="left").select(
        incident=pl.lit(incident, pl.String),
        host=short_host(pl.coalesce("f_host", "host", pl.lit(host, pl.String))),
        source=pl.coalesce(
            "f_source", pl.when(pl.col("s_kind").is_not_null()).then(pl.lit("trainlog")), by_logger, pl.lit(source)
        ),
        file=pl.lit(file, pl.String),
        line=(pl.col("i") + 1).cast(pl.Int64),
        ts=pl.col("ts"),
        uptime_s=pl.lit(None, pl.Float64),
        kind=pl.coalesce("f_kind", "s_kind", pl.lit("other")),
        severity=pl.coalesce("f_severity", pl.when(pl.col("s_kind") == "train.loss_spike").then(pl.lit("warning")),
                             pl.when(pl.col("s_kind").is_not_null() & (pl.col("s_kind") != "train.step")).then(pl.lit("error")),
                             pl.when(pl.col("s_kind").is_not_null()).then(pl.lit("debug")), "level", pl.lit("info")),
        gpu=pl.col("f_gpu"),
        rank=pl.coalesce("f_rank", "rank"),
        pid=pl.coalesce("f_pid", "pid"),
        code=pl.coalesce("f_code", "s_code"),
        message=pl.col("message"),
        detail=pl.col("detail"),
        cuda_dev=pl.col("cuda_dev"),
        seq=pl.col("rec"),
    )  # fmt: skip


def _json_without_nulls(fields: pl.Expr) -> pl.Expr:
    """A struct as a JSON object without its null fields (as ``json.dumps`` of the non-null items)."""
    return fields.struct.json_encode().str.replace_all(r',?"[0-9A-Za-z_]+":null', "").str.replace(r"^\{,", "{")


def _fill_ranks(out: pl.DataFrame, carry: _Carry) -> pl.DataFrame:
    """NCCL lines name no rank: take it (and the GPU) from the communicator init of the same process and
    device, the one with the most ranks (the world, not a sub-communicator)."""
    inits = out.filter((pl.col("kind") == "nccl.init") & pl.col("rank").is_not_null() & pl.col("pid").is_not_null())
    for host, pid, dev, rank, gpu, detail in inits.select("host", "pid", "cuda_dev", "rank", "gpu", "detail").iter_rows():
        info = json.loads(detail)
        dev = dev if dev is not None else info.get("cuda_dev")
        if dev is None:
            continue
        nranks = info.get("nranks") or 0
        key = (host or "", int(pid), int(dev))
        if key not in carry.comm or nranks >= carry.comm[key][2]:  # type: ignore[misc]
            carry.comm[key] = (rank, gpu, nranks)  # type: ignore[assignment]
    if not carry.comm:
        return out.drop("cuda_dev")
    table = pl.DataFrame(
        [(h, p, d, r, g) for (h, p, d), (r, g, *_) in carry.comm.items()],
        schema={"m_host": pl.String, "pid": pl.Int64, "cuda_dev": pl.Int32, "m_rank": pl.Int32, "m_gpu": pl.String},
        orient="row",
    )
    nccl = pl.col("source") == "nccl"
    return (
        out.with_columns(m_host_key=pl.col("host").fill_null(""))
        .join(table, left_on=["m_host_key", "pid", "cuda_dev"], right_on=["m_host", "pid", "cuda_dev"], how="left")
        .with_columns(rank=pl.when(nccl).then(pl.coalesce("rank", "m_rank")).otherwise("rank"),
                      gpu=pl.when(nccl).then(pl.coalesce("gpu", "m_gpu")).otherwise("gpu"))
        .drop("m_host_key", "m_rank", "m_gpu", "cuda_dev")
    )  # fmt: skip


def _link_asserts(out: pl.DataFrame) -> pl.DataFrame:
    """A device-side assert error (a traceback, a what()) gets the kernel's assertion text and site from
    the nearest assert line of the same host and rank, printed before or after it."""
    kinds = out.get_column("kind")
    if not (kinds == "cuda.device_assert").any():
        return out
    rows = out.with_row_index("row").filter(pl.col("kind") == "cuda.device_assert")
    sites = [(r, h, k, json.loads(d)) for r, h, k, d in rows.select("row", "host", "rank", "detail").iter_rows()]
    asserts = [s for s in sites if "assert" in s[3]]
    if not asserts:
        return out
    details = out.get_column("detail").to_list()
    for r, h, k, d in sites:
        if "assert" in d:
            continue
        near = min(asserts, key=lambda a: (a[1] != h, a[2] is not None and k is not None and a[2] != k, abs(a[0] - r)))
        d.update({key: near[3][key] for key in ("assert", "where", "kernel") if key in near[3]})
        d["assert_line"] = int(out.get_column("line")[near[0]])
        details[r] = json.dumps(d, ensure_ascii=False)
    return out.with_columns(detail=pl.Series(details, dtype=pl.String))


_STREAM = ["host", "rank"]


def _fold_steps(carry: _Carry) -> None:
    """Fold the waiting step lines into each stream's carried state: its last step line, its count, and
    the counts of its intervals by length. A long log carries as much as it has streams and distinct
    intervals (printed stamps have a second's or a millisecond's resolution), not as it has step lines."""
    if not carry.steps:
        return
    new = pl.concat(carry.steps).sort("i", maintain_order=True)
    carry.steps = []
    if carry.streams is None:
        before = new.with_columns(prev_ts=pl.lit(None, new.schema["ts"]))
    else:
        before = new.join(carry.streams.select(*_STREAM, prev_ts="ts"), on=_STREAM, how="left", nulls_equal=True,
                          maintain_order="left")  # fmt: skip
    # the interval before each step line: from the stream's step line before it, in this fold or the last
    gap = (pl.col("ts") - pl.coalesce(pl.col("ts").shift(1).over(_STREAM), "prev_ts")).dt.total_microseconds()
    gaps = before.select(*_STREAM, gap=gap).filter(pl.col("gap") > 0).group_by(*_STREAM, "gap").agg(n=pl.len().cast(pl.Int64))
    last = (pl.col("i").last(), pl.col("ts").last(), pl.col("step").last())
    streams = new.group_by(_STREAM, maintain_order=True).agg(*last, n=pl.len().cast(pl.Int64))
    if carry.streams is not None and carry.gaps is not None:
        streams = pl.concat([carry.streams, streams]).group_by(_STREAM, maintain_order=True).agg(*last, pl.col("n").sum())
        gaps = pl.concat([carry.gaps, gaps]).group_by(*_STREAM, "gap").agg(pl.col("n").sum())
    carry.streams, carry.gaps = streams, gaps


def _median_gaps(gaps: pl.DataFrame) -> dict[tuple[str | None, int | None], float]:
    """Each stream's median interval in seconds, from the counts of its intervals by length: the median
    Polars takes of the intervals themselves (the middle one, or of the middle two)."""
    # the intervals of one length hold the ranks below .. below + n - 1 (from 0) of the stream's, sorted
    below, total = pl.col("n").cum_sum().over(_STREAM) - pl.col("n"), pl.col("n").sum().over(_STREAM)
    ranked = gaps.sort("gap").with_columns(below=below, total=total)
    lo, hi = (pl.col("total") - 1) // 2, pl.col("total") // 2
    # each stream's one or two lengths that hold a middle rank, in order (both middles may share one)
    middle: dict[tuple[str | None, int | None], list[float]] = {}
    holding = ranked.filter((pl.col("below") <= hi) & (pl.col("below") + pl.col("n") > lo))
    for host, rank, length in holding.select(*_STREAM, "gap").iter_rows():
        middle.setdefault((host, rank), []).append(length / 1e6)
    return {key: float(pl.Series(values, dtype=pl.Float64).median() or 0.0) for key, values in middle.items()}


def _stalls(carry: _Carry, *, file: str, incident: str, host: str | None) -> pa.Table:
    """``train.stall`` rows (derived): step lines stopped for far longer than the run's usual interval
    before the log ended or an error was printed."""
    _fold_steps(carry)
    if carry.streams is None or carry.gaps is None:
        return events_table([])
    errors = pl.concat(carry.errors) if carry.errors else pl.DataFrame(schema={"line": pl.Int64, "ts": carry.streams.schema["ts"]})
    usuals = _median_gaps(carry.gaps)
    found: list[dict[str, Any]] = []
    for stream_host, stream_rank, *values in carry.streams.iter_rows():
        last = dict(zip(("i", "ts", "step", "n"), values, strict=True))
        if last["n"] < 3:
            continue
        usual = usuals.get((stream_host, stream_rank), 0.0)
        after = errors.filter(pl.col("line") > last["i"] + 1).sort("line").head(1)
        end_ts, until = (after.get_column("ts")[0], f"error at line {after.get_column('line')[0]}") if after.height else (carry.last_ts, "end of log")
        if end_ts is None or usual <= 0:
            continue
        gap = (end_ts - last["ts"]).total_seconds()
        if gap < max(STALL_FACTOR * usual, STALL_MIN_S):
            continue
        found.append({
            "incident": incident, "host": stream_host or host, "source": "trainlog", "file": file, "line": last["i"] + 1,
            "ts": last["ts"], "uptime_s": None, "kind": "train.stall", "severity": "warning", "gpu": None,
            "rank": stream_rank, "pid": None, "code": last["step"],
            "message": f"no step line for {gap:.0f} s after step {last['step']} (usual interval {usual:.3g} s) until {until}",
            "detail": json.dumps({"derived": True, "gap_s": round(gap, 3), "usual_interval_s": round(usual, 6),
                                  "last_step": last["step"], "until": until}),
        })  # fmt: skip
    return events_table(found)



def iter_parse(read: Any, *, file: str, incident: str = "", host: str | None = None, source: str = "trainlog",
               year: int | None = None, timezone: str | None = None, on_error: str = "keep",
               full: bool = False, chunk_bytes: int = CHUNK_BYTES, all_lines: bool = False) -> Iterator[SourceResult]:  # fmt: skip
    """Parse a job log read by ``read(n)``, yielding one result per chunk; the last carries the file's
    counts and any ``train.stall`` rows. The records of interest are rows (:func:`_of_interest`);
    ``all_lines`` keeps every record, the others as ``other`` rows and each step line as a ``train.step``."""
    carry = _Carry()
    options = dict(file=file, incident=incident, host=host, source=source, year=year, timezone=timezone,
                   on_error=on_error, full=full, all_lines=all_lines)  # fmt: skip
    for data in iter_chunks(read, chunk_bytes):
        events, metrics = _chunk(data, carry, **options)  # type: ignore[arg-type]
        yield SourceResult(_ordered(events), lines=0, records=0, unparsed=0, error=None, metrics=metrics)
    note = None
    if carry.unparsed and on_error == "warn":
        note = f"{carry.unparsed} unparsed record(s); first at {carry.first_error}"
    yield SourceResult(_stalls(carry, file=file, incident=incident, host=host), lines=carry.lines,
                       records=carry.records, unparsed=carry.unparsed, error=note,
                       invalid_utf8_lines=carry.bad_utf8, metrics=METRICS.empty_table())  # fmt: skip


def _ordered(events: pa.Table) -> pa.Table:
    return events.sort_by([("line", "ascending")]) if events.num_rows else events


def parse(data: bytes, *, source: str = "trainlog", **options: Any) -> SourceResult:
    """Parse a whole job log (in chunks, see :func:`iter_parse`) into one result."""
    view = memoryview(data)
    position = 0

    def read(n: int) -> bytes:
        nonlocal position
        piece = bytes(view[position: position + n])
        position += len(piece)
        return piece

    parts = list(iter_parse(read, source=source, **options))
    last = parts[-1]
    events = pa.concat_tables([p.events for p in parts])
    metrics = pa.concat_tables([p.metrics for p in parts if p.metrics is not None])
    return SourceResult(_ordered(events), lines=last.lines, records=last.records, unparsed=last.unparsed,
                        error=last.error, invalid_utf8_lines=last.invalid_utf8_lines, metrics=metrics)  # fmt: skip


# ---------------------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class JobSource:
    """A job-output source as the registry sees it: the name, forms and documentation of its module
    (:mod:`.nccl`, :mod:`.torch`, :mod:`.trainlog`: the knowledge) with this module's reading.

    >>> SOURCES["nccl"].NAME, SOURCES["nccl"].sniff("node1:12:34 [0] NCCL INFO NCCL version 2.18.1+cuda12.1")
    ('nccl', 1.0)
    """

    module: ModuleType

    @property
    def NAME(self) -> str:  # noqa: N802 - the attribute every source module has
        return str(self.module.NAME)

    @property
    def FORMS(self) -> tuple[str, ...]:  # noqa: N802
        return tuple(self.module.FORMS)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return self.module.__doc__

    def sniff(self, head: str) -> float:
        """How much of ``head`` this source would read (0..1), scored with the other job sources'."""
        return sniff_scores(head)[self.NAME]

    def parse(self, data: bytes, **options: Any) -> SourceResult:
        """Parse job output into ``events`` (and ``metrics``) rows; see :func:`parse`."""
        return parse(data, source=self.NAME, **options)


#: The three job-output sources, registered in :data:`forensics.sources.SOURCES`.
SOURCES: dict[str, JobSource] = {m.NAME: JobSource(m) for m in (nccl, torch, trainlog)}

__all__ = ["FAMILIES", "FOLD_STEPS", "SOURCES", "STALL_FACTOR", "STALL_MIN_S", "JobSource", "iter_parse", "parse",
           "parse_record"]
