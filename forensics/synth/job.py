"""Job-output lines: NCCL init and errors, the training loop, PyTorch failures, torchrun's report."""

from __future__ import annotations

import random
from datetime import datetime

from .logs import Gpu, HostLog


def nccl_init(log: HostLog, at: datetime, world: int, comm: int) -> None:
    for local, g in enumerate(log.gpus):
        if g.rank == 0:
            log.j(at, f"{log.host}:{g.pid}:{g.pid} [{local}] NCCL INFO NCCL version 2.21.5+cuda12.4")
        log.j(at, f"{log.host}:{g.pid}:{g.pid + 87} [{local}] NCCL INFO comm 0x{comm + 16 * g.rank:x} rank {g.rank} "
                  f"nranks {world} cudaDev {local} nvmlDev {local} busId {g.bus}000 commId 0x{comm:x} - Init COMPLETE")  # fmt: skip


def train_steps(log: HostLog, rng: random.Random, start: datetime, steps: list[tuple[int, datetime]],
                nan_from: int | None, spike_at: int | None) -> None:  # fmt: skip
    """Megatron iteration lines; a NaN-free loss spike at ``spike_at``, non-finite loss from ``nan_from``."""
    loss = 2.4 + rng.random()
    for step, at in steps:
        loss = max(1.2, loss - 0.001 * rng.random())
        shown = loss * (2.5 if step == spike_at else 1.0)
        gn = 0.6 + rng.random() / 2
        nan = nan_from is not None and step >= nan_from
        fields = [f" [{log.wall(at):%Y-%m-%d %H:%M:%S}] iteration {step:8d}/  500000", f"consumed samples: {step * 1024:12d}",
                  f"elapsed time per iteration (ms): {1100 + rng.random() * 80:.1f}", "learning rate: 3.000000E-04",
                  "global batch size:  1024"]  # fmt: skip
        fields.append("lm loss: nan" if nan else f"lm loss: {shown:.6E}")
        fields += ["loss scale: 1.0", "grad norm: nan" if nan else f"grad norm: {gn:.3f}",
                   "number of skipped iterations:   0", f"number of nan iterations:   {1 if nan else 0}", ""]  # fmt: skip
        log.j(at, " | ".join(fields).rstrip())


def _glog(at: datetime) -> str:
    return f"{at:%m%d %H:%M:%S}.{at.microsecond:06d}"


def watchdog_timeout(log: HostLog, g: Gpu, at: datetime, seq: int, ran_ms: int, last_done: int) -> None:
    r, shown = g.rank, log.wall(at)
    log.j(at, f"[rank{r}]:[E{_glog(shown)} ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
              f"timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=262144000, NumelOut=262144000, "
              f"Timeout(ms)=600000) ran for {ran_ms} milliseconds before timing out.",
              f"[rank{r}]:[E{_glog(shown)} ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {r}] Exception (either an "
              f"error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq + 1}, "
              f"last completed NCCL work: {last_done}.")  # fmt: skip


def traceback(log: HostLog, g: Gpu, at: datetime, error: str, frames: list[str] | None = None) -> None:
    """A Python traceback printed by one rank (``[rankN]:`` prefixed, as torchrun prints them)."""
    frames = frames or ['  File "/workspace/megatron/training.py", line 1208, in train_step',
                        "    losses_reduced = forward_backward_func(",
                        '  File "/workspace/megatron/core/pipeline_parallel/schedules.py", line 371, in forward_step',
                        "    output_tensor = model(tokens, position_ids, attention_mask, labels=labels)"]  # fmt: skip
    lines = ["Traceback (most recent call last):", *frames, error]
    log.j(at, *(f"[rank{g.rank}]: {line}" for line in lines))


def torchrun_report(log: HostLog, at: datetime, failed: list[tuple[Gpu, int]], script: str = "pretrain_gpt.py") -> None:
    """The elastic agent's ChildFailedError report for the ranks of this host that failed (first: root cause)."""
    def entry(n: int, g: Gpu, exitcode: int) -> list[str]:
        signal = {-6: "SIGABRT", -9: "SIGKILL", -7: "SIGBUS", -11: "SIGSEGV"}.get(exitcode)
        why = (f"Signal {-exitcode} ({signal}) received by PID {g.pid}" if signal
               else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")  # fmt: skip
        local = log.gpus.index(g)
        return [f"[{n}]:", f"  time      : {log.wall(at):%Y-%m-%d_%H:%M:%S}", f"  host      : {log.host}",
                f"  rank      : {g.rank} (local_rank: {local})", f"  exitcode  : {exitcode} (pid: {g.pid})",
                "  error_file: <N/A>", f"  traceback : {why}"]  # fmt: skip

    first, *others = failed
    lines = ["Traceback (most recent call last):", '  File "/usr/local/bin/torchrun", line 8, in <module>',
             "    sys.exit(main())",
             "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
             "============================================================", f"{script} FAILED",
             "------------------------------------------------------------", "Failures:"]  # fmt: skip
    if not others:
        lines.append("  <NO_OTHER_FAILURES>")
    for n, (g, code) in enumerate(others, 1):
        lines += entry(n, g, code)
    lines += ["------------------------------------------------------------", "Root Cause (first observed failure):",
              *entry(0, *first), "============================================================"]  # fmt: skip
    log.j(at, *lines)
