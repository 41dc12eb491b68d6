"""PyTorch and torchrun output: tracebacks, CUDA errors, ProcessGroupNCCL watchdogs, elastic reports.

Families (``grammars/traceback.lark``): ``py.exception`` (one record per traceback, chained
"During handling…"/"direct cause" exceptions and Python 3.11+ caret lines included; rank-prefixed lines
of interleaved ranks kept apart), classified by its exception (``data/job_errors.toml``) into
``cuda.illegal_address``, ``cuda.device_assert`` (with the kernel's assertion text and site, printed
before or after the traceback), ``cuda.launch_failure``, ``cuda.ecc``, ``cuda.oom`` (tried/total/free
bytes, other processes), ``cuda.error``, ``torch.nccl_error`` (DistBackendError, ncclSystemError …),
``train.grad_nonfinite`` (Megatron's "found NaN in local grad norm"); ``py.traceback`` for frames whose
exception line is not there; ``cpp.abort`` (``terminate called after throwing …`` with its ``what()``,
classified the same way) and ``cpp.stack`` (``frame #N`` stacks); ``torch.watchdog_timeout`` (every
generation of FACTS.md §C8: ``seq``, ``op``, ``numel_in``/``numel_out``, ``timeout_ms``, ``ran_ms``,
``pg``), ``torch.watchdog_progress`` ("last enqueued / last completed NCCL work"),
``torch.heartbeat_timeout``, ``torch.nccl_error``; ``cuda.device_assert`` lines (one record per site,
``threads`` counted); ``job.exit`` (elastic ``failed (exitcode: N) local_rank: L (pid: P)``),
``job.child_failed`` (one per entry of the ChildFailedError report: rank, local rank, host, time, exit
code, signal, ``root_cause``) and ``job.report`` (the report's head).

Example::

    [rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.

becomes ``kind=torch.watchdog_timeout rank=0 severity=error`` with ``detail`` ``{"seq": 7753, "op":
"_REDUCE_SCATTER_BASE", "timeout_ms": 600000, "ran_ms": 600061, "where": "ProcessGroupNCCL.cpp:607", …}``.
"""

from __future__ import annotations

from typing import Any

from . import joblog
from .base import SourceResult

NAME = "torch"
FORMS = (
    "Python tracebacks (chained, 3.11+ carets, [rank0]: prefixed, vLLM ERROR MM-DD hh:mm:ss file:line] prefixed)",
    "ProcessGroupNCCL [E file:line], [rank0]:[E1206 18:44:12.7 file:line] (glog, no year), [PG … Rank r] tags",
    "C++ terminate called after throwing … what(): …, frame #N stacks, Exception raised from …",
    "CUDA device-side assert lines (ATen, Windows paths, THCUNN template signatures)",
    "torch.distributed.elastic failed (exitcode: N) lines (logging or glog style) and ChildFailedError reports",
)


def sniff(head: str) -> float:
    """How sure we are that a file starting with ``head`` is PyTorch/torchrun output (0..1)."""
    return joblog.sniff_scores(head)["torch"]


def parse(data: bytes, **options: Any) -> SourceResult:
    """Parse job output into ``events`` (and ``metrics``) rows; see :mod:`.joblog`."""
    return joblog.parse(data, source=NAME, **options)
