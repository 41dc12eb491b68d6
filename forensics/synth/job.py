"""Job-output lines: NCCL init and errors, the training loop, PyTorch failures, torchrun's report."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta

from .logs import Gpu, HostLog
from .styles import address

#: The version banner of each NCCL generation the hosts run.
NCCL_VERSIONS = {"2.4": "2.4.7+cuda10.0", "2.21": "2.21.5+cuda12.4", "2.26": "2.26.2 compiled with CUDA 12.4"}


def nccl_init(log: HostLog, at: datetime, world: int, comm: int) -> None:
    """Each rank's banner (rank 0), a transport line in its generation's wording, and Init COMPLETE."""
    gen = log.style.nccl
    for local, g in enumerate(log.gpus):
        pre = f"{log.nccl_host}:{g.pid}:{g.pid + 87} [{local}] NCCL INFO"
        if g.rank == 0:  # 2.26 prints its banner bare, without the host:pid:tid prefix
            banner = f"NCCL version {NCCL_VERSIONS[gen]}"
            log.j(at, banner if gen == "2.26" else f"{log.nccl_host}:{g.pid}:{g.pid} [{local}] NCCL INFO {banner}", rank=g.rank)
        nxt = (g.rank + 1) % world
        odd = local % 2 == 1  # every other GPU talks to its neighbour through another transport
        via = {"2.4": f"Ring 00 : {g.rank}[{g.nccl_bus}] -> {nxt}[{log.gpus[(local + 1) % 8].nccl_bus}] via P2P/IPC" + "/read" * odd,
               "2.21": f"Channel 00/0 : {g.rank}[{local}] -> {nxt}[{(local + 1) % 8}] via "
                       + ("SHM/direct/direct" if odd else "P2P/CUMEM"),
               "2.26": f"Channel 01/1 : {g.rank}[{local}] -> {nxt}[{(local + 1) % 8}] [send] via NET/IB/{local}/GDRDMA"}[gen]  # fmt: skip
        log.j(at, f"{pre} {via}", rank=g.rank)
        log.j(at, f"{pre} comm 0x{comm + 16 * g.rank:x} rank {g.rank} nranks {world} cudaDev {local} nvmlDev {local} "
                  f"busId {g.nccl_bus} commId 0x{comm:x} - Init COMPLETE", rank=g.rank)  # fmt: skip


def train_steps(log: HostLog, rng: random.Random, start: datetime, steps: list[tuple[int, datetime]],
                nan_from: int | None, spike_at: int | None) -> None:  # fmt: skip
    """The training loop's step lines in the host's framework (:data:`styles.TRAIN`); a NaN-free loss
    spike at ``spike_at``, non-finite loss from ``nan_from``."""
    loss = 2.4 + rng.random()
    form = log.style.train
    r = log.gpus[-1].rank  # Megatron prints on the last rank, which lives on this host
    _loss_scaler(log, rng, steps[:4], r)
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
        elif form == "mmcv":  # mmcv 1.x: a TAB after the iteration counter, comma-separated fields
            shown_at = log.wall(at)
            log.j(at, f"{shown_at:%Y-%m-%d %H:%M:%S},{shown_at.microsecond // 1000:03d} - mmdet - INFO - Epoch [1][{step}/62598]\t"
                      f"lr: 2.000e-02, eta: 3 days, 1:02:03, time: {ms / 1000:.3f}, data_time: 0.013, memory: 8123, "
                      f"loss: {'nan' if nan else f'{shown:.4f}'}, grad_norm: {'nan' if nan else f'{gn:.4f}'}", rank=r)  # fmt: skip
        elif form == "maskrcnn":  # maskrcnn_benchmark's MetricLogger: each value with its running mean
            shown_at, mean = log.wall(at), 2.6 + 0.2 * rng.random()
            v = "nan (nan)" if nan else f"{shown:.4f} ({mean:.4f})"
            log.j(at, f"{shown_at:%Y-%m-%d %H:%M:%S},{shown_at.microsecond // 1000:03d} maskrcnn_benchmark.trainer INFO: "
                      f"eta: 8:{59 - n % 60:02d}:58  iter: {step}  loss: {v}  loss_cls: "
                      f"{'nan (nan)' if nan else f'{shown / 3:.4f} ({mean / 3:.4f})'}  time: {ms / 1000:.4f} (0.2888)  "
                      "data: 0.0025 (0.0134)  lr: 0.003333  max mem: 2082", rank=r)  # fmt: skip
        elif form == "returnn":  # RETURNN: no time stamp, one line per step and device
            v = "nan" if nan else f"{shown * 150:.3f}"
            log.j(at, f"ep 1 train, step {step}, acc {0.1 + rng.random() / 10:.3f}, loss {v}, loss_att {v}, "
                      f"total {shown * 3.5:.3f}, mem_usage:cuda:{len(log.gpus) - 1} 7.4GB, {ms / 1600:.3f} sec/step", rank=r)  # fmt: skip
        else:
            fields = [f" [{log.wall(at):%Y-%m-%d %H:%M:%S}] iteration {step:8d}/  500000", f"consumed samples: {step * 1024:12d}",
                      f"elapsed time per iteration (ms): {ms:.1f}", "learning rate: 3.000000E-04",
                      "global batch size:  1024"]  # fmt: skip
            if not nan:  # Megatron leaves the loss out on a NaN iteration
                fields.append(f"lm loss: {shown:.6E}")
            fields += ["loss scale: 1.0", "grad norm: nan" if nan else f"grad norm: {gn:.3f}",
                       "number of skipped iterations:   0", f"number of nan iterations:   {1 if nan else 0}", ""]  # fmt: skip
            log.j(at, " | ".join(fields).rstrip(), rank=r)


def ras_report(log: HostLog, logs: list[HostLog], seq: int, lagging: Gpu, op: str = "AllReduce") -> str:
    """What ``ncclras`` (NCCL 2.24+) prints when asked about a hung job: the job summary, the
    communicator's status, and the MISMATCH of operation counts naming the ranks that are behind."""
    world, nodes = sum(len(x.gpus) for x in logs), len(logs)
    host = next(x for x in logs if lagging in x.gpus)
    behind = [(lagging, host)]
    lines = ["NCCL version 2.26.2 compiled with CUDA 12.4", "CUDA runtime version 12040, driver version 12040", "",
             "Job summary", "===========", "", "  Nodes  Processes         GPUs  Processes     GPUs",
             "(total)   per node  per process    (total)  (total)",
             f"{nodes:7d} {8:10d} {1:12d} {world:10d} {world:8d}", "", "Communicators... (0.00s)", "=============", "",
             "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
             "    #  in group  per comm  per node  per comm  in group",
             f"    0         1 {nodes:9d} {8:9d} {world:9d} {world:9d}   RUNNING  MISMATCH", "", "Errors", "======", "",
             "Warnings", "========", "", f"#0-0 ({log.rng.getrandbits(64):016x}) MISMATCH",
             f"  Communicator ranks have different {op} operation counts",
             f"  {world - len(behind)} ranks have launched up to operation {seq}",
             f"  {len(behind)} ranks have launched up to operation {seq - 1}"]  # fmt: skip
    lines += [f"  Rank {g.rank} -- GPU {h.gpus.index(g)} managed by process {g.pid} on node {address(h.host)}" for g, h in behind]
    return "\n".join(lines) + "\n"


def _loss_scaler(log: HostLog, rng: random.Random, steps: list[tuple[int, datetime]], r: int) -> None:
    """fp16 loss-scale warm-up in the first steps (:data:`styles.FP16`): overflows skipped on purpose,
    the misleading noise a "non-finite gradient means numerical" rule would trip on."""
    form, scale = log.style.fp16, 65536
    for n, (step, at) in enumerate(steps):
        shown = log.wall(at - timedelta(seconds=50))
        stamp = f"[{shown:%Y-%m-%d %H:%M:%S},{shown.microsecond // 1000:03d}]"
        if form == "deepspeed":
            text = (f"Attempted loss scale: {scale}, but hysteresis is 2. Reducing hysteresis to 1" if n == 0
                    else f"Attempted loss scale: {scale}, reducing to {scale // 2}")  # fmt: skip
            log.j(at, f"{stamp} [INFO] [loss_scaler.py:{188 if n == 0 else 181}:update_scale] [deepspeed] OVERFLOW! "
                      f"Rank 0 Skipping step. {text}", rank=r)  # fmt: skip
        elif form == "deepscale":  # 2021 ZeRO-3: float scales, glued to the tqdm bar of the script
            bar = f"  0%|{' ' * 30}| {step // 100 + 8}/63645 [00:{19 + 2 * n:02d}<37:53:00,  2.14s/it]"
            log.j(at, f"{bar}{stamp} [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping "
                      f"step. Attempted loss scale: {float(scale * 256)}, reducing to {float(scale * 128)}", rank=r)  # fmt: skip
        elif form == "fused":
            log.j(at, f"{stamp} [INFO] [fused_optimizer.py:382:_update_scale] ", f"Grad overflow on iteration {step // 100 + 4}", rank=r)
        scale //= 2
    del rng


def _glog(at: datetime) -> str:
    return f"{at:%m%d %H:%M:%S}.{at.microsecond:06d}"


def watchdog_timeout(log: HostLog, g: Gpu, at: datetime, seq: int, ran_ms: int, last_done: int) -> None:
    """ProcessGroupNCCL's timeout in the host's PyTorch generation (:data:`styles.WATCHDOG`): the old
    form has no time, no rank prefix, no element counts and no progress line."""
    r, shown = g.rank, log.wall(at)
    if log.style.watchdog == "old":
        caught = (f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                  f"Timeout(ms)=600000) ran for {ran_ms} milliseconds before timing out.")  # fmt: skip
        log.j_wrapped(at, f"{_glued_before(log, g, at)}[E ProcessGroupNCCL.cpp:737] {caught}", rank=r)
        if log.rng.random() < 0.5:
            _abort(log, g, at, f"[Rank {r}] NCCL watchdog thread terminated with exception: {caught}", "", old=True)
        return
    pg = f"PG ID 0 PG GUID 0(default_pg) Rank {r}" if log.style.watchdog == "pg-guid" else f"PG 0 (default_pg) Rank {r}"
    if log.style.watchdog == "glog" and log.side.random() < 0.25:  # 2.3: a sub-group's PG, no name (ZeRO, FSDP)
        pg = f"PG 1 Rank {r}"
    bar = _glued_before(log, g, at)
    caught = (f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
              f"NumelIn=262144000, NumelOut=262144000, Timeout(ms)=600000) ran for {ran_ms} milliseconds before timing out.")  # fmt: skip
    log.j_wrapped(at, f"{bar}[rank{r}]:[E{_glog(shown)} ProcessGroupNCCL.cpp:607] {caught}", rank=r)
    log.j(at, f"[rank{r}]:[E{_glog(shown)} ProcessGroupNCCL.cpp:1664] [{pg}] Exception (either an "
              f"error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq + 1}, "
              f"last completed NCCL work: {last_done}.", rank=r)  # fmt: skip
    roll = log.rng.random()
    if roll < 0.25:  # the heartbeat monitor gives up on the stuck watchdog: an E line, then the F line
        later = at + timedelta(seconds=8)
        log.j(later, f"[rank{r}]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank {r}] Heartbeat monitor timed out! Process will "
                     f"be terminated after dumping debug info. workMetaList_.size()={log.rng.randrange(2, 120)}",
              f"[rank{r}]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank {r}] [PG 0 Rank {r}] ProcessGroupNCCL's watchdog got "
              "stuck for 600 seconds without making progress in monitoring enqueued collectives.", rank=r)  # fmt: skip
    elif roll < 0.6:
        _abort(log, g, at, f"[{pg}] Process group watchdog thread terminated with exception: {caught}", f"[rank{r}]: ")


def _glued_before(log: HostLog, g: Gpu, at: datetime) -> str:
    """What the watchdog's line is glued onto the end of, if anything: the trainer's last progress-bar
    redraw, on the rank that draws it, when the bar has no newline yet (PROVENANCE: Lightning/NeMo and
    tqdm); now and then another process's faulthandler dump, its ``Extension modules:`` list unended."""
    if (not log.style.progress or g is not log.gpus[-1]) and log.side.random() < 0.03:
        thread = 0x7F0000000000 + (log.side.getrandbits(28) << 8)
        log.j(at, "Fatal Python error: Aborted", "", f"Thread 0x{thread:016x} (most recent call first):", "  <no Python frame>",
              "", rank=g.rank)  # fmt: skip
        return ("Extension modules: numpy.core._multiarray_umath, numpy.core._multiarray_tests, numpy.linalg._umath_linalg, "
                "torch._C, torch._C._fft, torch._C._linalg, torch._C._nested, torch._C._nn, torch._C._sparse, "
                "torch._C._special, yaml._yaml, sentencepiece._sentencepiece (total: 12)")  # fmt: skip
    if not log.style.progress or g is not log.gpus[-1]:
        return ""
    done = 4000 + log.rng.randrange(6000)
    return (f"Epoch 0:  {done // 100}%|{'█' * (done // 1000)}{' ' * (10 - done // 1000)}| {done}/10000 "
            f"[2:01:12<2:28:09,  1.62s/it, loss=2.31, v_num=0]")


def _abort(log: HostLog, g: Gpu, at: datetime, what: str, prefix: str, *, old: bool = False) -> None:
    """The process abort that follows a watchdog timeout: ``terminate called after throwing``
    c10::DistBackendError, its ``what():`` (two spaces), where it was raised and the C++ frames
    (``workCleanupLoop`` before PyTorch 2.2, ``watchdogHandler`` after)."""
    lib = "/usr/local/lib/python3.10/dist-packages/torch/lib"
    base = 0x7F0000000000 + log.rng.getrandbits(36)
    loop = "workCleanupLoop" if old else "watchdogHandler"
    frames = [("c10::Error::Error(c10::SourceLocation, std::string) + 0x96", "libc10.so"),
              ("c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
               "std::ratio<1l, 1000l> > >) + 0x1d2", "libtorch_cuda.so"),
              (f"c10d::ProcessGroupNCCL::{loop}() + 0x233", "libtorch_cuda.so"),
              ("<unknown function> + 0xdc253", "/lib/x86_64-linux-gnu/libstdc++.so.6"),
              ("<unknown function> + 0x94ac3", "/lib/x86_64-linux-gnu/libc.so.6"),
              ("clone + 0x44", "/lib/x86_64-linux-gnu/libc.so.6")]  # fmt: skip
    exc = "c10::Error" if old else "c10::DistBackendError"
    lines = [f"terminate called after throwing an instance of '{exc}'", f"  what():  {what}",
             "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 "
             "(most recent call first):"]  # fmt: skip
    lines += [f"frame #{n}: {sym} (0x{base + 0x1000 * n:x} in {so if so.startswith('/') else f'{lib}/{so}'})"
              for n, (sym, so) in enumerate(frames)]  # fmt: skip
    log.j(at + timedelta(seconds=1), *(prefix + line for line in lines), rank=g.rank)


def traceback(log: HostLog, g: Gpu, at: datetime, error: str | Callable[[Gpu], str], frames: list[str] | None = None,
              also: list[Gpu] | None = None, mix: random.Random | None = None) -> None:  # fmt: skip
    """A Python traceback printed by one rank (``[rankN]:`` prefixed, as torchrun prints them); the
    ranks ``also`` hit the same error at the same moment, and their lines interleave with its own in
    no order but each rank's (``g`` starts first), drawn from ``mix`` (the host's second stream)."""
    frames = frames or ['  File "/workspace/megatron/training.py", line 1208, in train_step',
                        "    losses_reduced = forward_backward_func(",
                        '  File "/workspace/megatron/core/pipeline_parallel/schedules.py", line 371, in forward_step',
                        "    output_tensor = model(tokens, position_ids, attention_mask, labels=labels)"]  # fmt: skip
    if log.style.python != "3.10":  # 3.11+: carets under the code of each frame
        frames = [x for line in frames for x in ([line, "    " + "^" * len(line.strip())] if line.startswith("    ") else [line])]

    def lines_of(x: Gpu) -> list[str]:
        return ["Traceback (most recent call last):", *frames, error(x) if callable(error) else error]

    lines = lines_of(g)
    # A vLLM worker (under Ray) logs each line through its logger; torchrun's workers get a rank prefix.
    shown = log.wall(at)
    if log.style.launcher == "ray":
        log.j(at, *(f"ERROR {shown:%m-%d %H:%M:%S} worker_base.py:574] {line}" for line in lines), rank=g.rank)
        return
    streams = [[(x.rank, f"[rank{x.rank}]: {line}") for line in lines_of(x)] for x in [g, *(also or [])]]
    out = [streams[0].pop(0)]
    while any(streams):
        out.append((mix or log.side).choice([st for st in streams if st]).pop(0))
    for rank, line in out:
        log.j(at, line, rank=rank)


def torchrun_report(log: HostLog, at: datetime, failed: list[tuple[Gpu, int]], script: str = "pretrain_gpt.py") -> None:
    """The elastic agent's ChildFailedError report for the ranks of this host that failed (first: root cause)."""
    def entry(n: int, g: Gpu, exitcode: int) -> list[str]:
        signal = {-6: "SIGABRT", -9: "SIGKILL", -7: "SIGBUS", -11: "SIGSEGV"}.get(exitcode)
        why = (f"Signal {-exitcode} ({signal}) received by PID {g.pid}" if signal
               else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")  # fmt: skip
        local = log.gpus.index(g)
        return [f"[{n}]:", f"  time      : {log.wall(at):%Y-%m-%d_%H:%M:%S}", f"  host      : {log.job_host}",
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
