"""Which heads and lines are a job's output (NCCL's, PyTorch's, a trainer's): the sniffing the three
job-output sources (:mod:`.nccl`, :mod:`.torch`, :mod:`.trainlog`) share, the stacks source's test that a
dump is not a job log's, and the kernel and journal sources' test for a job's lines pasted among theirs.

It reads the families of :mod:`.torch` and :mod:`.trainlog` and the shared machinery only: the job log's
reader (:mod:`.joblog`) and the sources that read job lines inside theirs import it, never the reverse.

>>> scores = sniff_scores("[rank0]: Traceback (most recent call last):")
>>> scores["torch"], scores["nccl"]
(1.0, 0.0)
"""

from __future__ import annotations

import re
from functools import cache, lru_cache

import polars as pl

from ..reading import envelope, prefix
from ..reading.metrics import _style_expr
from ..regex import ascii_classes
from ..text import contains
from .torch import TORCH
from .trainlog import TRAIN

_SNIFF = {
    # (a WARN behind what no prefix took: a bare "file.cc:N NCCL WARN", 2.3's "file.h:N WARN", a paste's label)
    "nccl": r"^NCCL (?:INFO|WARN|TRACE|CALL) |^(?:NCCL INFO )?NCCL version \d|^#\s+Rank\s+\d+ |^Job summary\s*$"
            r"|\bNCCL WARN |^[\w./-]+\.(?:cc|cu|h|c|cpp|hpp):\d+ (?:\(\w+\) )?WARN |(?:Test )?NCCL failure \S+:\d+ '"
            r"|^(?:WARN|INFO): Function: \w+ Line: \d+: NET/OFI ",
    "torch": r"ProcessGroupNCCL|^Traceback \(most recent call last\)|^\s+File \"|torch\.|CUDA error|^frame #\d+: "
             r"|ChildFailedError|exitcode\s*: -?\d|Root Cause \(first observed failure\)|<NO_OTHER_FAILURES>"
             r"|Assertion .* failed|^terminate called|Watchdog caught|Heartbeat monitor",
}
_SNIFF = {source: ascii_classes(pattern) for source, pattern in _SNIFF.items()}


@cache
def _torch_sniff() -> str:
    """PyTorch's own lines, and an error line of the ``cuda.error`` family: a file of one such line (a
    paste of the last line of a job's output) is the job's output, not a kernel log."""
    return _SNIFF["torch"] + "|" + TORCH.grammar.anchor_regex("cuda.error")


#: The launchers' rank prefixes (torchrun's ``[rank3]:``, mpirun's ``[1,3]<stderr>:``): the kernel never prints them.
_RANKED = r"\[rank\d+\]:|\[\d+,\d+\]<std(?:out|err)>:"


@cache
def _loose() -> str:
    """What a job family's line holds somewhere in it: the sniffing patterns without their line anchors,
    and the rank prefixes. A cheap first test on every line of a big log, before any is peeled."""
    parts = (_SNIFF["nccl"], _SNIFF["torch"], _RANKED)
    return "|".join(re.sub(r"(^|\|)\^", r"\1", p) for p in parts)


def job_lines(lines: pl.Series, *, not_job: str) -> pl.Series:
    """Whether each of ``lines`` is a job family's, as sniffing reads a line (NCCL's, PyTorch's own, one
    behind a launcher's rank prefix) and that no envelope stamps, whose message ``not_job`` (the kernel
    families' prefilter, given by the kernel source) does not match and that names no program as a
    journal line does: the records of a job's output pasted into a kernel log or a journal export. (A
    bare CUDA error string is not enough here: daemons print them too.)

    >>> job_lines(pl.Series(["[  12.3] usb 1-1: new device", "[rank0]: RuntimeError: boom",
    ...                      "node1:12:34 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"]), not_job="NVRM").to_list()
    [False, True, True]
    """
    out = pl.Series(values=[False] * lines.len(), dtype=pl.Boolean)
    quick = contains(lines, _loose(), null=False)
    if not quick.any():
        return out
    at = quick.arg_true()
    some = lines.gather(at)
    env = envelope.split(some)
    peeled = prefix.peeled(some)
    msg = pl.col("msg")
    said = peeled.select(
        (pl.col("rank").is_not_null() | (pl.col("logger") == "nccl") | msg.str.contains(_SNIFF["nccl"])
         | msg.str.contains(_SNIFF["torch"])).fill_null(False)
    ).to_series()  # fmt: skip
    # (a line that names its program, "nv-fabricmanager[3228]: …", is the journal's, cut off its stamp)
    other_said = env.select(pl.col("stamped") | pl.col("msg").str.contains(not_job)
                            | pl.col("msg").str.contains(ascii_classes(envelope.BARE_IDENT))).to_series()
    return out.scatter(at.filter(said & ~other_said.fill_null(False)), True)


def sniff_scores(head: str) -> dict[str, float]:
    """How much of ``head`` each job-output source would read (0..1): lines of NCCL, of PyTorch, of the
    trainer (step lines and trainer messages), after launcher and logger prefixes.

    The three job-output sources sniff the same head one after the other: it is scored once (a cache
    of the last few heads; an unbounded one kept every file's head alive in a worker)."""
    return dict(_scores(head))


@lru_cache(maxsize=4)
def _scores(head: str) -> tuple[tuple[str, float], ...]:
    lines = head.splitlines()[:400]
    if not lines:
        return (("nccl", 0.0), ("torch", 0.0), ("trainlog", 0.0))
    df = prefix.peeled(pl.Series(lines, dtype=pl.String))
    msg = pl.col("msg")
    trainer = msg.str.contains(TRAIN.prefilter()) | _style_expr(msg, df.height).is_not_null()
    shares = df.select(
        nccl=(msg.str.contains(_SNIFF["nccl"]) | (pl.col("logger") == "nccl")).mean(),
        torch=msg.str.contains(_torch_sniff()).mean(),
        trainlog=trainer.mean(),
    ).row(0, named=True)
    return tuple((name, min(1.0, 3.0 * float(share or 0.0))) for name, share in shares.items())


__all__ = ["job_lines", "sniff_scores"]
