"""Job-output lines: NCCL init and errors, the training loop, PyTorch failures, torchrun's report."""

from __future__ import annotations

import random
from datetime import datetime

from .logs import Gpu, HostLog

#: The version banner of each NCCL generation the hosts run.
NCCL_VERSIONS = {"2.4": "2.4.7+cuda10.0", "2.21": "2.21.5+cuda12.4", "2.26": "2.26.2+cuda12.4"}


def nccl_init(log: HostLog, at: datetime, world: int, comm: int) -> None:
    """Each rank's banner (rank 0), a transport line in its generation's wording, and Init COMPLETE."""
    gen = log.style.nccl
    for local, g in enumerate(log.gpus):
        pre = f"{log.host}:{g.pid}:{g.pid + 87} [{local}] NCCL INFO"
        if g.rank == 0:
            log.j(at, f"{log.host}:{g.pid}:{g.pid} [{local}] NCCL INFO NCCL version {NCCL_VERSIONS[gen]}", rank=g.rank)
        nxt = (g.rank + 1) % world
        via = {"2.4": f"Ring 00 : {g.rank}[{g.bus}000] -> {nxt}[{log.gpus[(local + 1) % 8].bus}000] via P2P/IPC",
               "2.21": f"Channel 00/0 : {g.rank}[{local}] -> {nxt}[{(local + 1) % 8}] via P2P/CUMEM",
               "2.26": f"Channel 01/1 : {g.rank}[{local}] -> {nxt}[{(local + 1) % 8}] [send] via NET/IB/{local}/GDRDMA"}[gen]  # fmt: skip
        log.j(at, f"{pre} {via}", rank=g.rank)
        log.j(at, f"{pre} comm 0x{comm + 16 * g.rank:x} rank {g.rank} nranks {world} cudaDev {local} nvmlDev {local} "
                  f"busId {g.bus}000 commId 0x{comm:x} - Init COMPLETE", rank=g.rank)  # fmt: skip


def train_steps(log: HostLog, rng: random.Random, start: datetime, steps: list[tuple[int, datetime]],
                nan_from: int | None, spike_at: int | None) -> None:  # fmt: skip
    """The training loop's step lines in the host's framework (:data:`styles.TRAIN`); a NaN-free loss
    spike at ``spike_at``, non-finite loss from ``nan_from``."""
    loss = 2.4 + rng.random()
    form = log.style.train
    r = log.gpus[-1].rank  # Megatron prints on the last rank, which lives on this host
    for n, (step, at) in enumerate(steps):
        loss = max(1.2, loss - 0.001 * rng.random())
        shown = loss * (2.5 if step == spike_at else 1.0)
        gn = 0.6 + rng.random() / 2
        nan = nan_from is not None and step >= nan_from
        ms = 1100 + rng.random() * 80
        if form == "hf":  # Hugging Face Trainer's log dict
            v = "nan" if nan else f"{shown:.4f}"
            log.j(at, f"{{'loss': {v}, 'grad_norm': {'nan' if nan else f'{gn:.4f}'}, 'learning_rate': 3e-05, "
                      f"'epoch': {step / 50000:.2f}}}", rank=r)  # fmt: skip
        elif form == "nanogpt":
            log.j(at, f"iter {step}: loss {'nan' if nan else f'{shown:.4f}'}, time {ms:.2f}ms, mfu {38 + rng.random():.2f}%", rank=r)
        elif form == "litgpt":
            log.j(at, f"iter {step * 4} step {step}: loss {'nan' if nan else f'{shown:.4f}'}, iter time: {ms:.2f}ms", rank=r)
        elif form == "mmengine":
            log.j(at, f"{log.wall(at):%Y/%m/%d %H:%M:%S} - mmengine - INFO - Epoch(train) [1][{n + 1}/{len(steps) + 50}]  "
                      f"lr: 3.0000e-04  eta: 1:02:03  time: {ms / 1000:.4f}  data_time: 0.0100  memory: 40211  "
                      f"loss: {'nan' if nan else f'{shown:.4f}'}  grad_norm: {'nan' if nan else f'{gn:.4f}'}", rank=r)  # fmt: skip
        else:
            fields = [f" [{log.wall(at):%Y-%m-%d %H:%M:%S}] iteration {step:8d}/  500000", f"consumed samples: {step * 1024:12d}",
                      f"elapsed time per iteration (ms): {ms:.1f}", "learning rate: 3.000000E-04",
                      "global batch size:  1024"]  # fmt: skip
            if not nan:  # Megatron leaves the loss out on a NaN iteration
                fields.append(f"lm loss: {shown:.6E}")
            fields += ["loss scale: 1.0", "grad norm: nan" if nan else f"grad norm: {gn:.3f}",
                       "number of skipped iterations:   0", f"number of nan iterations:   {1 if nan else 0}", ""]  # fmt: skip
            log.j(at, " | ".join(fields).rstrip(), rank=r)


def _glog(at: datetime) -> str:
    return f"{at:%m%d %H:%M:%S}.{at.microsecond:06d}"


def watchdog_timeout(log: HostLog, g: Gpu, at: datetime, seq: int, ran_ms: int, last_done: int) -> None:
    """ProcessGroupNCCL's timeout in the host's PyTorch generation (:data:`styles.WATCHDOG`): the old
    form has no time, no rank prefix, no element counts and no progress line."""
    r, shown = g.rank, log.wall(at)
    if log.style.watchdog == "old":
        log.j(at, f"[E ProcessGroupNCCL.cpp:737] [Rank {r}] Watchdog caught collective operation timeout: "
                  f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, Timeout(ms)=600000) ran for {ran_ms} milliseconds "
                  "before timing out.", rank=r)  # fmt: skip
        return
    pg = f"PG ID 0 PG GUID 0(default_pg) Rank {r}" if log.style.watchdog == "pg-guid" else f"PG 0 (default_pg) Rank {r}"
    log.j(at, f"[rank{r}]:[E{_glog(shown)} ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
              f"timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=262144000, NumelOut=262144000, "
              f"Timeout(ms)=600000) ran for {ran_ms} milliseconds before timing out.",
              f"[rank{r}]:[E{_glog(shown)} ProcessGroupNCCL.cpp:1664] [{pg}] Exception (either an "
              f"error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq + 1}, "
              f"last completed NCCL work: {last_done}.", rank=r)  # fmt: skip


def traceback(log: HostLog, g: Gpu, at: datetime, error: str, frames: list[str] | None = None) -> None:
    """A Python traceback printed by one rank (``[rankN]:`` prefixed, as torchrun prints them)."""
    frames = frames or ['  File "/workspace/megatron/training.py", line 1208, in train_step',
                        "    losses_reduced = forward_backward_func(",
                        '  File "/workspace/megatron/core/pipeline_parallel/schedules.py", line 371, in forward_step',
                        "    output_tensor = model(tokens, position_ids, attention_mask, labels=labels)"]  # fmt: skip
    lines = ["Traceback (most recent call last):", *frames, error]
    log.j(at, *(f"[rank{g.rank}]: {line}" for line in lines), rank=g.rank)


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
    # Workers the agent itself stopped (SIGTERM, after the first failure) are not failures of the report.
    others = [(g, code) for g, code in others if code != -15]
    for g, code in [first, *others]:  # the agent's line per failed worker, in the agent's logging format
        local, shown = log.gpus.index(g), log.wall(at)
        what = f"failed (exitcode: {code}) local_rank: {local} (pid: {g.pid}) of binary: /usr/bin/python3"
        log.j(at, f"E{_glog(shown)} {140000000000000 + g.pid} torch/distributed/elastic/multiprocessing/api.py:833] {what}"
              if log.style.agent == "glog" else f"ERROR:torch.distributed.elastic.multiprocessing.api:{what}")  # fmt: skip
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
