"""Job-output lines into records: each peeled line gets a class (``data/job_records.toml``), and a small
state machine per stream (host, rank, pid, thread) folds the lines of one record (tracebacks, chained ones
too, C++ aborts and stacks, torchrun report entries, NCCL error chains, RAS report sections, repeated
device-side asserts, hard-wrapped watchdog lines); ranks printing at the same time stay apart."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import polars as pl

from ..regex import ascii_classes, first_match
from . import envelope
from .fields import _data

#: How many lines a stream's open record may wait for its next line (other ranks print in between).
WINDOW = 8


@cache
def _classes() -> tuple[tuple[str, str], ...]:
    return tuple((c["name"], ascii_classes(c["pattern"])) for c in _data("job_records.toml")["class"])


def _line_classes(msg: pl.Expr, rows: int) -> pl.Expr:
    return first_match(msg, _classes(), rows=rows)


@dataclass
class _Open:
    state: str
    head: int
    last: int
    site: str | None = None
    after_last_error: bool = False
    taken: int = 0  # rows other records had taken when this one last took a row


@dataclass
class _Blocks:
    """The record splitter's verdict for the lines it visited: owner (head row) and block of heads."""

    owner: dict[int, int] = field(default_factory=dict)
    block: dict[int, str] = field(default_factory=dict)
    extra: dict[int, dict[str, Any]] = field(default_factory=dict)


_EXC_LINE = re.compile(r"^[^\s]")
_EXC_NAMED = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception)\b")
_FAILED = re.compile(r"^\S+ FAILED\s*$")
_RULE = re.compile(r"^=+\s*$")
_SITE = re.compile(r"^(.*?): block: \[")
#: How a watchdog timeout ends; a ``wd_head`` line without it was hard-wrapped by a terminal.
_WRAP_END = re.compile(r"timing out\.\s*$")
#: A hard-wrapped line spans at most this many rows (a watchdog line is under 600 columns).
_WRAP_ROWS = 6


def _split_records(rows: list[tuple[Any, ...]]) -> _Blocks:
    """Run the block state machine over the visited lines ``(row, cls, msg, key, bare, next_cls, next_msg)``
    (``bare``: nothing was peeled off the line)."""
    out = _Blocks()
    open_: dict[Any, _Open] = {}
    report_ctx: dict[Any, dict[str, Any]] = {}

    taken = 0  # rows taken by any record so far: the rows of other streams between two of one stream's

    def start(key: Any, idx: int, state: str, block: str, **extra: Any) -> None:
        nonlocal taken
        taken += 1
        open_[key] = _Open(state, idx, idx, taken=taken)
        out.block[idx] = block
        if extra:
            out.extra[idx] = extra

    def join(o: _Open, idx: int, state: str | None = None) -> None:
        nonlocal taken
        taken += 1
        out.owner[idx] = o.head
        o.last, o.taken = idx, taken
        if state:
            o.state = state

    # A watchdog line that does not end as one does, and the rows after it with no prefix at all: taken
    # together only when one of them ends it (a line merely cut short keeps the lines after it).
    wrap: list[int] = []
    for idx, cls, msg, key, bare, next_cls, next_msg in rows:
        blank = not msg.strip()
        if wrap:
            # (a row cut before a space is indented: any indented line's classes)
            if idx == wrap[-1] + 1 and bare and cls in (None, "ras_body", "tb_body") and not blank:
                wrap.append(idx)
                if _WRAP_END.search(msg):
                    out.block[wrap[0]] = "wrap"
                    out.owner.update((row, wrap[0]) for row in wrap[1:])
                    taken += len(wrap) - 1
                    wrap = []
                elif len(wrap) == _WRAP_ROWS:
                    wrap = []
                continue
            wrap = []
        o = open_.get(key)
        # The gap a record may span counts the rows no record took: ranks whose tracebacks interleave
        # take each other's rows, so eight of them at once keep their records whole.
        if o is not None and idx - o.last - (taken - o.taken) > WINDOW:
            del open_[key]
            o = None
        if o is not None:
            s = o.state
            if s == "tb":
                if cls in ("tb_frame", "tb_body", "tb_head"):
                    join(o, idx)
                    continue
                if cls == "tb_chain":
                    join(o, idx, "tb_chain")
                    continue
                if cls is None and not blank and _EXC_LINE.match(msg):
                    join(o, idx, "tb_exc")
                    continue
            elif s == "tb_exc":
                if o.after_last_error and not blank:
                    o.after_last_error = False
                    join(o, idx)
                    continue
                if cls == "exc_cont":
                    o.after_last_error = msg.startswith("Last error:")
                    join(o, idx)
                    continue
                if cls == "tb_chain":
                    join(o, idx, "tb_chain")
                    continue
                if blank and next_cls == "tb_chain":
                    join(o, idx)
                    continue
                if cls == "rep_rule" and next_msg is not None and _FAILED.match(next_msg):
                    report_ctx[key] = {"script": next_msg.split()[0]}
                    join(o, idx, "report")
                    continue
            elif s == "tb_chain":
                if blank and next_cls in ("tb_head", "tb_frame"):
                    join(o, idx)
                    continue
                if cls in ("tb_head", "tb_frame"):
                    join(o, idx, "tb")
                    continue
            elif s in ("report", "entry"):
                if cls in ("rep_rule", "rep_line", "rep_field"):
                    if cls == "rep_line" and msg.startswith("Root Cause"):
                        report_ctx.setdefault(key, {})["root_next"] = True
                    join(o, idx)
                    continue
            elif s == "cpp":
                if cls in ("what", "cpp_frame", "cpp_raise", "exc_cont"):
                    join(o, idx)
                    continue
                # a blank line, then the nested exception's stack (a cut excerpt's ``frame #5`` is not one)
                if blank and (next_cls == "cpp_raise" or (next_cls == "cpp_frame" and next_msg.startswith("frame #0:"))):
                    join(o, idx)
                    continue
            elif s == "chain":
                if cls == "nccl_chain":
                    join(o, idx)
                    continue
            elif s == "ras":
                # table rows are indented (and may look like code lines of a traceback)
                if cls in ("ras_body", "tb_body") or (not blank and msg[:1].isspace()) or (
                    blank and next_cls in ("ras_body", "tb_body")
                ):
                    join(o, idx)
                    continue
            elif s == "assert":
                site = _SITE.match(msg)
                if cls == "assert" and site and site.group(1) == o.site:
                    join(o, idx)
                    continue
            elif s == "dangle":
                del open_[key]
                if not blank and cls is None:
                    join(o, idx)
                    continue
            elif s == "version":
                if cls == "version_cont":
                    join(o, idx)
                    continue
            open_.pop(key, None)
        # a new record
        if cls in ("tb_head", "tb_frame") or (cls == "tb_body" and next_cls == "tb_frame"):
            start(key, idx, "tb", "tb")
        elif cls == "tb_chain":
            start(key, idx, "tb_chain", "tb")
        elif cls in ("terminate", "cpp_frame", "cpp_raise"):
            start(key, idx, "cpp", "cpp")
        elif cls == "rep_line":
            ctx = report_ctx.setdefault(key, {})
            if msg.startswith("Root Cause"):
                ctx["root_next"] = True
            start(key, idx, "report", "report")
        elif cls == "rep_rule" and next_msg is not None and _FAILED.match(next_msg):
            report_ctx[key] = {"script": next_msg.split()[0]}
            start(key, idx, "report", "report")
        elif cls == "rep_entry" and next_cls == "rep_field":
            ctx = report_ctx.setdefault(key, {})
            start(key, idx, "entry", "entry", root_cause=bool(ctx.pop("root_next", False)),
                  **({"script": ctx["script"]} if "script" in ctx else {}))  # fmt: skip
        elif cls == "nccl_chain":
            start(key, idx, "chain", "chain")
        elif cls == "ras_head" and next_msg is not None and _RULE.match(next_msg) or cls == "ras_entry":
            start(key, idx, "ras", "ras")
        elif cls == "assert":
            start(key, idx, "assert", "assert")
            site = _SITE.match(msg)
            open_[key].site = site.group(1) if site else None
        elif cls == "dangle":
            start(key, idx, "dangle", "dangle")
        elif cls == "nccl_version":
            start(key, idx, "version", "single")
        elif cls is None and next_cls == "exc_cont" and _EXC_NAMED.match(msg):
            # an exception line whose traceback was cut, and its continuation (ncclRemoteError:, Last error:)
            start(key, idx, "tb_exc", "single")
        elif cls == "wd_head" and not _WRAP_END.search(msg):
            wrap = [idx]
    return out


def group_records(df: pl.DataFrame) -> pl.DataFrame:
    """Add ``rec`` (the row of the record's first line), ``block`` and ``extra`` (JSON) to peeled lines
    (with ``line_style``, when given: the trainer style of a step line, see :mod:`.metrics`)."""
    msg = pl.col("msg")
    dangle = (msg.str.strip_chars() == "") & (pl.col("prefix") != "")
    df = df.with_columns(cls=pl.when(dangle).then(pl.lit("dangle")).otherwise(_line_classes(msg, df.height)))
    if "line_style" in df.columns:
        # A trainer's step line is no row of a table (an indented Megatron or tqdm line looks like one of a
        # RAS report's): left unclassed, the many step lines of a training log are not visited one by one.
        table_row = (pl.col("cls") == "ras_body") & pl.col("line_style").is_not_null()
        df = df.with_columns(cls=pl.when(table_row).then(pl.lit(None, pl.String)).otherwise("cls"))
    classed = pl.col("cls").is_not_null()
    near = classed.cast(pl.Int8).rolling_max(window_size=WINDOW + 1, min_samples=1)
    blank = msg.str.strip_chars() == ""
    # the class and text of the next non-blank line (blank lines between chained exceptions, RAS sections)
    following = pl.when(~blank).then(pl.col("cls").fill_null("")).shift(-1).backward_fill()
    next_cls = pl.when(following != "").then(following)
    nxt = df.with_row_index("row").with_columns(
        visit=(near > 0) | (near.shift(-1) > 0).fill_null(False), next_cls=next_cls,
        next_msg=msg.shift(-1),
        key=pl.concat_str(pl.col("host").fill_null(""), pl.col("rank").cast(pl.String).fill_null(""),
                          pl.col("local_rank").cast(pl.String).fill_null(""), pl.col("pid").cast(pl.String).fill_null(""),
                          pl.col("tid").cast(pl.String).fill_null(""), separator="|"),
    )  # fmt: skip
    visited = nxt.filter(pl.col("visit")).select("row", "cls", "msg", "key", bare=pl.col("prefix") == "", next_cls="next_cls",
                                                 next_msg="next_msg")  # fmt: skip
    blocks = _split_records(visited.iter_rows()) if visited.height else _Blocks()
    n = df.height
    rec = pl.int_range(0, n, dtype=pl.Int64, eager=True)
    if blocks.owner:
        rec = rec.scatter(list(blocks.owner), list(blocks.owner.values()))
    block = envelope.scatter(pl.Series("block", list(blocks.block.values()), dtype=pl.String),
                             pl.Series(list(blocks.block), dtype=pl.Int64), n)  # fmt: skip
    extra = envelope.scatter(pl.Series("extra", [json.dumps(v) for v in blocks.extra.values()], dtype=pl.String),
                             pl.Series(list(blocks.extra), dtype=pl.Int64), n)  # fmt: skip
    return df.with_columns(rec=rec, block=block.fill_null("single"), extra=extra).drop("cls")
