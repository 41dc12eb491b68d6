"""A large job log (a distributed training run's stdout/stderr) for the benchmarks, deterministic for a seed.

What a big job log mostly is: 8 ranks behind torchrun's ``[rankN]:`` prefix printing Megatron iteration
lines (stamped by Python ``logging``), NCCL INFO lines (init, channels, proxies, ``comm … Init
COMPLETE``), tqdm redraws, and warnings; with a small share of the records that matter spread through it
(NCCL WARNs with IB completion errors and ``file:line -> N`` chains, watchdog timeouts, tracebacks ending
in CUDA errors, fp16 overflows, a loss turning NaN) and the lines of the job samples in
``tests/golden/{nccl,torch,trainlog}`` pasted in whole.

    python bench/gen_joblog.py OUT --mb 1024 [--seed 1]
"""

from __future__ import annotations

import random
from pathlib import Path

from gen_common import generator_main

HERE = Path(__file__).parent
SAMPLES = sorted(p for d in ("nccl", "torch", "trainlog") for p in (HERE.parent / "tests/golden" / d).glob("*.log"))
RANKS = 8


def _stamp(t: float) -> str:
    s = int(t)
    return f"2024-05-{1 + s // 86400:02d} {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d},{int(t * 1000) % 1000:03d}"


def _nccl(r: random.Random, rank: int, pid: int) -> str:
    host = f"gpu-node-{rank // 8:02d}"
    head = f"{host}:{pid}:{pid + r.randint(30, 90)} [{rank % 8}] NCCL INFO "
    if r.random() < 0.002:  # a communicator's init: once per rank and process group
        return head + (f"comm 0x{r.getrandbits(40):x} rank {rank} nranks {RANKS} cudaDev {rank % 8} nvmlDev {rank % 8} "
                       f"busId {['18', '3b', '5d', '9b', 'ab', 'bb', 'cb', 'db'][rank % 8]}000 commId 0x{r.getrandbits(60):x} - Init COMPLETE")  # fmt: skip
    return head + r.choice([
        f"Channel {r.randint(0, 31):02d}/0 : {rank} -> {(rank + 1) % RANKS} [send] via NET/IB/{r.randint(0, 7)}/GDRDMA",
        f"Channel {r.randint(0, 31):02d} : {rank}[{rank % 8}] -> {(rank + 1) % RANKS}[{(rank + 1) % 8}] via P2P/IPC/read",
        "Connected all rings, use ring PXN 0 GDR 1",
        f"NET/IB : GPU Direct RDMA Enabled for HCA {r.randint(0, 7)} '{r.choice(['mlx5_0', 'mlx5_3', 'mlx5_6'])}'",
        f"Trees [0] {(rank + 1) % RANKS}/-1/-1->{rank}->{(rank - 1) % RANKS} [1] -1/-1/-1->{rank}->{(rank + 1) % RANKS}",
        f"Allocated {r.randint(1, 64)} MB for proxy buffers",
    ])  # fmt: skip


def _iteration(r: random.Random, step: int, t: float, loss: float) -> str:
    return (
        f"[{_stamp(t)}] INFO  iteration {step:8d}/  500000 | consumed samples: {step * 1024:12d} | "
        f"elapsed time per iteration (ms): {r.uniform(900, 1100):.1f} | learning rate: {3e-4 * r.uniform(0.9, 1):.6E} | "
        f"global batch size:  1024 | lm loss: {loss:.6E} | loss scale: 65536.0 | grad norm: {r.uniform(0.1, 2):.3f} | "
        f"number of skipped iterations:   0 | number of nan iterations:   0 |"
    )


def _rare(r: random.Random, rank: int, pid: int, step: int) -> list[str]:
    host = f"gpu-node-{rank // 8:02d}"
    head = f"{host}:{pid}:{pid + 7} [{rank % 8}] "
    kind = r.randrange(5)
    if kind == 0:
        return [head + f"transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.{r.randint(0, 9)}.{r.randint(1, 250)}<{r.randint(30000, 60000)}> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
                head + "NCCL INFO transport/net.cc:1298 -> 6",
                head + "NCCL INFO proxy.cc:694 -> 6",
                head + "NCCL INFO proxy.cc:874 -> 6 [Progress Thread]"]  # fmt: skip
    if kind == 1:
        return [f"[rank{rank}]:[E{r.randint(1, 12)}{r.randint(10, 28)} 10:{r.randint(10, 59)}:{r.randint(10, 59)}.{r.randint(0, 999999):06d} "
                f"{pid} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={step}, "
                f"OpType=ALLREDUCE, NumelIn={r.randint(1, 10**8)}, NumelOut={r.randint(1, 10**8)}, Timeout(ms)=600000) ran for 600{r.randint(10, 99)} milliseconds before timing out."]  # fmt: skip
    if kind == 2:
        return [f"[rank{rank}]: Traceback (most recent call last):",
                f'[rank{rank}]:   File "/workspace/Megatron-LM/pretrain_gpt.py", line {r.randint(100, 300)}, in <module>',
                f"[rank{rank}]:     pretrain(train_valid_test_datasets_provider, model_provider,",
                f'[rank{rank}]:   File "/workspace/Megatron-LM/megatron/training/training.py", line {r.randint(100, 1500)}, in train_step',
                f"[rank{rank}]:     losses_reduced = forward_backward_func(",
                f"[rank{rank}]: RuntimeError: CUDA error: an illegal memory access was encountered",
                f"[rank{rank}]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
                f"[rank{rank}]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1"]  # fmt: skip
    if kind == 3:
        return [f"[rank{rank}]: [{_stamp(step)}] [INFO] [fused_optimizer.py:{r.randint(300, 400)}:_update_scale] "
                f"Grad overflow on iteration {step}",
                f"[rank{rank}]: [{_stamp(step)}] [INFO] [fused_optimizer.py:{r.randint(300, 400)}:_update_scale] "
                f"Reducing dynamic loss scale from {2 ** r.randint(10, 16)} to {2 ** r.randint(5, 9)}"]  # fmt: skip
    return [f"[rank{rank}]: [{_stamp(step)}] WARNING  torch.distributed.elastic.multiprocessing.api: Sending process {pid} closing signal SIGTERM"]


def write(out: Path, megabytes: int, *, seed: int = 1) -> None:
    r = random.Random(seed)
    samples = [p.read_text("utf-8", "replace") for p in SAMPLES]
    target = megabytes * 1024 * 1024
    pids = [10_000 + 97 * k for k in range(RANKS)]
    written, step, t = 0, 0, 0.0
    with out.open("w", encoding="utf-8") as f:
        while written < target:
            lines: list[str] = []
            for _ in range(2_000):
                rank = r.randrange(RANKS)
                u = r.random()
                if u < 0.45:
                    step += 1
                    t += r.uniform(0.9, 1.1)
                    loss = float("nan") if step % 250_000 == 0 else 2.0 + 8.0 / (1 + step / 1000) + r.uniform(-0.05, 0.05)
                    lines.append(f"[rank{rank}]: " + _iteration(r, step, t, loss))
                elif u < 0.85:
                    lines.append(f"[rank{rank}]: " + _nccl(r, rank, pids[rank]))
                elif u < 0.95:
                    done = r.randint(0, 100)
                    lines.append(f"{done:3d}%|{'█' * (done // 10):<10}| {done}/100 [00:{done:02d}<00:{100 - done:02d},  1.0{r.randint(0, 9)}it/s]\r"
                                 f"{min(done + 1, 100):3d}%|{'█' * (min(done + 1, 100) // 10):<10}| {min(done + 1, 100)}/100 [00:{done:02d}<00:{99 - done:02d},  1.0{r.randint(0, 9)}it/s]")  # fmt: skip
                elif u < 0.997:
                    lines.append(f"[rank{rank}]: [{_stamp(t)}] WARNING  megatron.core.utils: "
                                 f"dataloader worker {r.randint(0, 15)} took {r.uniform(1, 9):.2f}s to fetch batch {step}")  # fmt: skip
                elif u < 0.9995:
                    lines.extend(_rare(r, rank, pids[rank], step))
                else:
                    lines.extend(r.choice(samples).splitlines())
            block = "\n".join(lines) + "\n"
            f.write(block)
            written += len(block.encode("utf-8"))


def main() -> None:
    generator_main(__doc__, "mb", 1024, lambda out, n, seed: write(out, n, seed=seed))


if __name__ == "__main__":
    main()
