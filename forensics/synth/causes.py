"""One scenario per root cause: the precursors, the failure and its followers, as real logs show them.

Each scenario writes into the hosts' logs through a :class:`Ctx` and marks which ranks died with which
exit code; the ranks that were only waiting on the failed one time out in their NCCL watchdog ~600 s
later (the followers a diagnosis must not blame). FACTS.md §C13 gives the chains.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .fleet import DEVICE_ID, NIC_BUSES, bdf, port_of
from .job import traceback, watchdog_timeout
from .logs import Gpu, HostLog, aer_record, nvlink5, xid_line
from .styles import address


@dataclass
class Ctx:
    rng: random.Random
    logs: list[HostLog]
    fail: datetime  # when the first failure happens
    log: HostLog  # the first-failing host
    g: Gpu  # the first-failing GPU (its rank is the first-failing rank)
    seq: int  # the collective the job was in
    failed: dict[str, list[tuple[Gpu, int]]] = field(default_factory=dict)
    host_level: bool = False  # the cause is the host, not one GPU (no first GPU in the label)
    nan_from: int | None = None  # the training step from which the loss is NaN
    at_start: bool = False  # the job never trained (failed at initialisation)
    silent: set[str] = field(default_factory=set)  # hosts whose job never started: no NCCL, no torchrun

    def s(self, seconds: float) -> datetime:
        return self.fail + timedelta(seconds=seconds)

    def die(self, log: HostLog, g: Gpu, code: int) -> None:
        self.failed.setdefault(log.host, []).append((g, code))

    def others_time_out(self, *, skip: tuple[Gpu, ...] = (), lagging: Gpu | None = None) -> None:
        """Every rank still running times out in its watchdog, 600 s after the collective began."""
        for log in self.logs:
            for g in log.gpus:
                if g in skip or any(g is d for d, _ in self.failed.get(log.host, [])):
                    continue
                at = self.s(600 + self.rng.random() * 2)
                last = self.seq - 2 if g is lagging else self.seq - 1
                watchdog_timeout(log, g, at, self.seq, 600_000 + self.rng.randrange(20, 900), last)
                self.die(log, g, -6)

    def others_time_out_but(self, stopped: list[Gpu], code: int, *, lagging: Gpu | None = None) -> None:
        """As :meth:`others_time_out`, except that the ranks ``stopped`` end with ``code`` (first in their
        host's report) and print no timeout. Their timeouts are drawn all the same and dropped, so that
        the first stream's draws stay as they were before these endings were added."""
        marks = {log.host: len(log.job) for log in self.logs}
        earlier = {host: len(ends) for host, ends in self.failed.items()}
        self.others_time_out(lagging=lagging)
        gone = {g.rank for g in stopped}
        for log in self.logs:
            mark = marks[log.host]
            kept = [n for n in range(mark, len(log.job)) if log.job[n][1] not in gone]
            moved = {old: mark + new for new, old in enumerate(kept)}
            log.wrapped = {moved.get(n, n) for n in log.wrapped if n < mark or n in moved}
            log.job[mark:] = [log.job[n] for n in kept]
            if log.host not in self.failed:
                continue
            cut = earlier.get(log.host, 0)  # the ends the caller had set before: they stay first
            done, ends = self.failed[log.host][:cut], self.failed[log.host][cut:]
            ended = [(g, code) for g in stopped if any(g is d for d, _ in ends)]
            self.failed[log.host] = done + ended + [(g, c) for g, c in ends if g.rank not in gone]


def _off_bus(c: Ctx) -> None:
    form = c.rng.choice(["quoted", "plain", "no-xid"])  # the driver generations' wordings
    if c.log.late.random() < 0.2:  # drivers before Xid 79 (340.x and older): one line, printed twice
        form = "oneline"
    if form == "oneline":
        c.log.k(c.fail, *[f"NVRM: GPU at {bdf(c.g.pci)} has fallen off the bus."] * 2)
    elif form == "no-xid":  # 570.x: no Xid line, a three-line message whose continuations have no stamp
        c.log.k(c.fail, f"NVRM: The NVIDIA GPU {bdf(c.g.pci)}\nNVRM: (PCI ID: {DEVICE_ID}) installed in this system has\n"
                        "NVRM: fallen off the bus and is not responding to commands.")  # fmt: skip
    else:
        xid = xid_line(c.g.pci, 79, None, "GPU has fallen off the bus.")
        if form == "plain":
            xid = f"NVRM: Xid (PCI:{c.g.pci}:00): 79, GPU has fallen off the bus."
        c.log.k(c.fail, xid, f"NVRM: GPU {bdf(c.g.pci)}: GPU has fallen off the bus.")
    c.g.lost = True
    traceback(c.log, c.g, c.s(3), "RuntimeError: CUDA error: unspecified launch failure")
    c.die(c.log, c.g, -6)
    c.others_time_out()


def pcie_link(c: Ctx) -> None:
    bus = c.g.pci
    for n in range(c.rng.randrange(0, 6)):  # a corrected burst often comes first, not always
        c.log.k(c.s(-600 + n * 40 + c.rng.random()), *aer_record(bus, "corrected", c.rng, c.log.style.aer))
    if c.log.side.random() < 0.3:  # the link first loses a completion the device survives
        c.log.k(c.s(-20 - c.log.side.random()), *aer_record(bus, "nonfatal", c.log.side, c.log.style.aer))
    c.log.k(c.s(-1.5), *aer_record(bus, "fatal", c.rng, c.log.style.aer))
    c.log.k(c.s(-1.2), f"pcieport {port_of(bus)}: AER: device recovery failed")
    _off_bus(c)


def gpu_hardware(c: Ctx) -> None:
    kind = c.rng.choice(["off_bus", "gsp", "halt"])
    if kind == "off_bus":
        _off_bus(c)
        return
    if kind == "gsp":
        c.g.hung = c.log.side.random() < 0.5
        new = c.rng.random() < 0.5  # 535 wording, or 550+ (45 s, a sequence number)
        gpu = f"NVRM: GPU{c.g.minor}"  # newer drivers put the GPU's index before the message
        if new:
            c.log.k(c.s(-0.5), f"{gpu} _kgspIsHeartbeatTimedOut: Heartbeat timed out, curtime 0x{c.rng.getrandbits(40):x} "
                               f"lastHeartbeatTime 0x{c.rng.getrandbits(40):x} lastHeartbeatTimeDiff 0x{c.rng.getrandbits(24):x}")  # fmt: skip
        for n in range(2):
            text = (f"Timeout after 45s of waiting for RPC response from GPU{c.g.minor} GSP! Expected function 76 "
                    f"(GSP_RM_CONTROL) sequence {24174 + n} (0x20801322 0x808)." if new else
                    f"Timeout after 6s of waiting for RPC response from GPU{c.g.minor} GSP! Expected function 76 "
                    "(GSP_RM_CONTROL) (0x20800a4c 0x4).")  # fmt: skip
            banner = [f"{gpu} _kgspLogXid119: " + "*" * 33 + " GSP Timeout " + "*" * 34] if new else []
            c.log.k(c.s(n * (45 if new else 6)), *banner, xid_line(c.g.pci, 119, c.g.pid, text),
                    f"{gpu} GSP RPC buffer contains function 76 (GSP_RM_CONTROL) and data 0x0000000020801322 0x0000000000000808.",
                    f"{gpu} RPC history (CPU -> GSP):")  # fmt: skip
    else:
        c.log.k(c.fail, xid_line(c.g.pci, 62, c.g.pid, "Internal micro-controller halt (newer drivers)"))
    c.others_time_out(lagging=c.g)


def gpu_memory(c: Ctx) -> None:
    bus = c.g.pci
    c.log.k(c.fail, xid_line(bus, 48, c.g.pid, "An uncorrectable double bit error (DBE) has been detected on GPU in "
                             "the framebuffer at partition 6, subpartition 0."))  # fmt: skip
    c.log.k(c.s(0.01), xid_line(bus, 63, c.g.pid, f"Row Remapper: New row (0x{c.rng.getrandbits(36):014x}) marked for "
                                "remapping, reset gpu to activate."))  # fmt: skip
    c.log.k(c.s(0.02), xid_line(bus, 94, c.g.pid, "Contained: SM (0x1). RST: No, D-RST: No"))
    c.log.k(c.s(1.2), xid_line(bus, 45, c.g.pid, f"Ch {c.rng.randrange(8, 64):08x}"))  # a follower
    c.g.dbe, c.g.remap_pending = 1, True
    traceback(c.log, c.g, c.s(2), "RuntimeError: CUDA error: uncorrectable ECC error encountered")
    c.die(c.log, c.g, -6)
    c.others_time_out()


def nvlink(c: Ctx) -> None:
    peer = c.rng.choice([g for g in c.log.gpus if g is not c.g])
    if c.rng.random() < 0.4:  # NVLink5 (Blackwell, 570+): unit errors with sub-fields, a Nonfatal one first
        link = c.rng.randrange(18)
        c.log.k(c.s(-c.rng.randrange(60, 900)),
                f"NVRM: Xid (PCI:{c.g.pci}:00): 145, {nvlink5('RLW_SRC_TRACK', False, link, c.rng)}")
        netir = c.log.late.random() < 0.4  # the network interface's own error, on no one link: "Link -1"
        for n, g in enumerate((c.g, peer)):
            text = nvlink5("NETIR", True, -1, c.rng) if netir else nvlink5("NETIR_LINK_EVT", True, link, c.rng)
            c.log.k(c.s(n * 0.3), f"NVRM: Xid (PCI:{g.pci}:00): 149, {text}")
        c.log.k(c.s(1.1), xid_line(c.g.pci, 45, c.g.pid, f"Ch {c.rng.randrange(8, 64):08x}, caused by previous Xid 149"))
    else:
        for n, g in enumerate((c.g, peer)):
            c.log.k(c.s(n * 0.3), xid_line(g.pci, 74, g.pid, f"NVLink: fatal error detected on link {c.rng.randrange(18)}"
                                           "(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)"))  # fmt: skip
    traceback(c.log, c.g, c.s(2), "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
              "1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5")  # fmt: skip
    c.die(c.log, c.g, -6)
    c.others_time_out()


def thermal(c: Ctx) -> None:
    c.g.thermal, c.g.temp = True, 89 + c.rng.randrange(4)
    c.others_time_out(lagging=c.g)


def power(c: Ctx) -> None:
    c.host_level = True
    for g in c.log.gpus:
        g.power_brake = True
    c.others_time_out(lagging=c.g)


def network(c: Ctx) -> None:
    local = c.log.gpus.index(c.g)
    nic = NIC_BUSES[local]
    dev = f"mlx5_core 0000:{nic}:00.0"
    if c.log.late.random() < 0.3:  # the transceiver went first (a cable pulled or a module failing)
        c.log.k(c.s(-4.2), f"{dev}: Port module event: module {local}, Cable unplugged")
    c.log.k(c.s(-4), f"{dev} ibp{int(nic, 16)}s0: Link down")
    if c.log.late.random() < 0.3:  # the send queue stalled: 5.x names the interface first, 6.x the CPU
        c.log.k(c.s(-1), c.log.late.choice([
            f"NETDEV WATCHDOG: ibp{int(nic, 16)}s0 (mlx5_core): transmit queue {local} timed out",
            f"{dev} ibp{int(nic, 16)}s0: NETDEV WATCHDOG: CPU: {c.log.late.randrange(96)}: transmit queue {local} timed out "
            f"{c.log.late.randrange(5000, 9000)} ms"]))  # fmt: skip
    c.log.k(c.s(25), f"mlx5_core 0000:{nic}:00.0 ibp{int(nic, 16)}s0: Link up")
    ip, port = f"10.0.{c.rng.randrange(1, 250)}.{c.rng.randrange(1, 250)}", c.rng.randrange(32768, 61000)
    pre = f"{c.log.nccl_host}:{c.g.pid}:{c.g.pid + 90} [{local}]"
    wc = {  # the completion error in the NCCL generation's wording
        "old": "NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129",
        "peer": f"NET/IB : Got completion from peer {ip}<{port}> with error 12, opcode 0, len 0, vendor err 129 (Recv) "
                f"localGid ::ffff:10.0.0.{local + 1} remoteGid ::ffff:10.0.0.99 hca mlx5_{local}",
        "status": f"NET/IB : Got completion from peer {ip}<{port}> with status=12 opcode=0 len=0 vendor err 129 (Recv) "
                  f"localGid fd00::{local + 1} remoteGidsfd00::99",
        "ibp": f"NET/IBP : Got completion from peer {ip}<{port}> with error 12, opcode 0, len 0, vendor err 129",
    }.get(c.log.style.ib)  # fmt: skip
    if wc is None:  # aws-ofi-nccl on EFA: its own wording, its own file:line
        c.log.j(c.fail, "", f"{pre} nccl_ofi_rdma.cpp:1489 NCCL WARN NET/OFI Request 0x7f{c.rng.getrandbits(32):08x} completed "
                            "with error. RC: 21. Error: 21 (Is a directory). Completed length: 0",
                f"{pre} register_mr_buffers:465 NCCL WARN NET/OFI Unable to register memory (type = 1) for buffer "
                f"0x7f{c.rng.getrandbits(32):08x} of size 4194304", rank=c.g.rank)  # fmt: skip
    else:  # the IB plugins (NET/IBP, and the one printing status=) name their own source file
        where = "ib_plugin.c:1615" if c.log.style.ib in ("ibp", "status") else "transport/net_ib.cc:1696"
        c.log.j(c.fail, "", f"{pre} {where} NCCL WARN {wc}", rank=c.g.rank)
    c.log.j(c.fail, f"{pre} NCCL INFO transport/net.cc:1302 -> 6", f"{pre} NCCL INFO proxy.cc:878 -> 6 [Progress Thread]",
            rank=c.g.rank)  # fmt: skip
    for n, g in enumerate(c.log.gpus):  # the failed rank's local peers lose their proxy connection to it
        if g is not c.g and n % 3 == 0:
            c.log.j(c.s(1), f"{c.log.nccl_host}:{g.pid}:{g.pid + 92} [{n}] NCCL INFO [Service thread] Connection closed by "
                            f"localRank {local}", rank=g.rank)  # fmt: skip
    _peer_sees_close(c, local, port)
    c.others_time_out()


def _peer_sees_close(c: Ctx, local: int, port: int) -> None:
    """The failed rank's peer on the next host finds its socket to it closed (now and then): its
    generation's WARN with the socket's file:line, the error chain and the async thread's ``-> 3``."""
    others = [log for log in c.logs if log is not c.log]
    if not others or c.log.side.random() < 0.5:
        return
    log = others[0]
    g = log.gpus[local]
    pre = f"{log.nccl_host}:{g.pid}:{g.pid + 91} [{local}]"
    if log.style.nccl == "2.4":
        lines = [f"{pre} include/socket.h:423 NCCL WARN Net : Connection closed by remote peer {address(c.log.host)}<{port}>",
                 f"{pre} NCCL INFO include/socket.h:445 -> 2"]  # fmt: skip
    else:
        lines = [f"{pre} misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer {c.log.host}<{port}>",
                 f"{pre} NCCL INFO misc/socket.cc:749 -> 6",
                 f"{pre} proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x7f{log.side.getrandbits(40):010x}",
                 f"{pre} NCCL INFO group.cc:65 -> 3 [Async thread]"]  # fmt: skip
    log.j(c.s(1.5), "", *lines, rank=g.rank)


def numerical(c: Ctx) -> None:
    c.nan_from = -1  # set by the caller: the step a few steps before the failure
    last = c.logs[-1]  # the host whose rank logs the loss
    if last.side.random() < 0.5 and (last.style.train == "megatron" or last.style.fp16 == "deepspeed"):
        c.log = last
        _trainer_stops(c)
        return
    bus = c.g.pci
    c.log.k(c.fail, xid_line(bus, 31, c.g.pid, f"Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS "
                             f"GPCCLIENT_T1_0 faulted @ 0x7f{c.rng.getrandbits(28):07x}_00000000. Fault is of type "
                             "FAULT_PDE ACCESS_TYPE_VIRT_READ"))  # fmt: skip
    traceback(c.log, c.g, c.s(0.5), "RuntimeError: CUDA error: an illegal memory access was encountered")
    c.die(c.log, c.g, 1)
    c.others_time_out()


def _trainer_stops(c: Ctx) -> None:
    """The trainer stops itself on the non-finite numbers, no kernel faulting: a Megatron fork's grad-norm
    check raises on several ranks at once (their tracebacks interleaved), or DeepSpeed's fp16 scaler runs
    out of loss scale. The rank that logs the loss (the last host's last) is the first to fail."""
    c.g = c.log.gpus[-1]
    if c.log.style.train == "megatron":
        frames = ['  File "/workspace/Megatron-LM/pretrain_gpt.py", line 241, in <module>', "    pretrain(train_valid_test_datasets_provider,",
                  '  File "/workspace/Megatron-LM/megatron/training/training.py", line 386, in pretrain',
                  "    iteration, num_floating_point_operations_so_far = train(", '  File "/workspace/Megatron-LM/megatron/'
                  'training/training.py", line 1228, in train_step', "    update_successful, grad_norm, num_zeros_in_grad = optimizer.step()",
                  '  File "/workspace/Megatron-LM/megatron/core/distributed/param_and_grad_buffer.py", line 163, in check_for_nan_in_grad',
                  "    assert not norm_is_nan, ("]  # fmt: skip
        ranks = [g for g in c.log.gpus if g is not c.g and c.log.side.random() < 0.5]
        local = {g.rank: n for n, g in enumerate(c.log.gpus)}
        traceback(c.log, c.g, c.s(0.5), lambda g: f"AssertionError: Rank {g.rank}: found NaN in local grad norm in backwards "
                  f"pass. Device: {local[g.rank]}, node: {c.log.job_host}", frames, also=ranks)  # fmt: skip
        for g in [c.g, *ranks]:
            c.die(c.log, g, 1)
    else:  # the scaler halves the scale at every overflow, down to 1, then gives up
        for n, scale in enumerate((8, 4, 2)):
            c.log.j(c.s(-30 + 10 * n), f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, reducing "
                                       f"to {scale // 2}", rank=c.g.rank)  # fmt: skip
        traceback(c.log, c.g, c.fail, "Exception: Current loss scale already at minimum - cannot decrease scale anymore. "
                  "Exiting run.", ['  File "/workspace/train.py", line 311, in <module>', "    model_engine.step()",
                                   '  File "/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/fp16/loss_scaler.py", '
                                   'line 183, in update_scale', '    raise Exception("Current loss scale already at minimum - '
                                   'cannot decrease scale anymore. Exiting run.")'])  # fmt: skip
        c.die(c.log, c.g, 1)
    c.others_time_out()


def code_bug(c: Ctx) -> None:
    if c.rng.random() < 0.5 and c.log.style.watchdog == "old":  # old PyTorch: THCUNN's templated kernel
        c.log.j(c.fail, *(f"/opt/conda/conda-bld/pytorch_1573049310284/work/aten/src/THCUNN/SpatialClassNLLCriterion.cu:104: "
                          "void cunn_SpatialClassNLLCriterion_updateOutput_kernel(T *, T *, T *, long *, T *, int, int, int, "
                          f"int, int, long) [with T = float, AccumT = float]: block: [0,0,0], thread: [{t},0,0] Assertion "
                          "`t >= 0 && t < n_classes` failed." for t in range(920, 923)), rank=c.g.rank)  # fmt: skip
        traceback(c.log, c.g, c.s(0.1), "RuntimeError: CUDA error: device-side assert triggered")
    elif c.rng.random() < 0.5:
        if c.log.style.assert_path == "windows":  # an MSVC build: a Windows path and no kernel name
            site = (r"C:\actions-runner\_work\pytorch\pytorch\builder\windows\pytorch\aten\src\ATen\native\cuda"
                    r"\NLLLoss2d.cu:103: block: [4,0,0]")  # fmt: skip
        else:
            site = "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0]"
        # the kernel's printf buffer is flushed when the context syncs: now and then after the traceback
        late = c.log.side.random() < 0.3
        c.log.j(c.s(0.2) if late else c.fail, *(f"[rank{c.g.rank}]: {site}, thread: [{t},0,0] Assertion `t >= 0 && "
                                                 "t < n_classes` failed." for t in range(3)), rank=c.g.rank)  # fmt: skip
        traceback(c.log, c.g, c.s(0.1), "RuntimeError: CUDA error: device-side assert triggered")
    else:
        traceback(c.log, c.g, c.fail, c.rng.choice([
            "IndexError: index 32768 is out of bounds for dimension 0 with size 32000",
            "KeyError: 'input_ids'", "ValueError: Expected input batch_size (16) to match target batch_size (8).",
        ]))  # fmt: skip
    c.die(c.log, c.g, 1)
    c.others_time_out()


def gpu_oom(c: Ctx) -> None:
    local = c.log.gpus.index(c.g)
    if c.log.style.watchdog == "old":  # PyTorch 1.x-2.0: torch.cuda's class, the capacity in parentheses
        text = (f"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB (GPU {local}; 79.10 GiB "
                "total capacity; 74.12 GiB already allocated; 1.94 GiB free; 76.50 GiB reserved in total by PyTorch) If "
                "reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.")  # fmt: skip
    else:  # 2.4+: torch's class; other processes on the GPU are listed
        other = f"Process {c.rng.randrange(2000, 90000)} has 6.00 GiB memory in use. " if c.rng.random() < 0.4 else ""
        pools = "with 46.00 MiB allocated in private pools (e.g., CUDA Graphs), " if c.log.side.random() < 0.4 else ""
        text = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU {local} has a total "
                f"capacity of 79.10 GiB of which 1.94 GiB is free. {other}Including non-PyTorch memory, this process "
                f"has 77.15 GiB memory in use. Of the allocated memory 74.12 GiB is allocated by PyTorch, {pools}and "
                "1.09 GiB is reserved by PyTorch but unallocated.")  # fmt: skip
    old = c.log.late.choice(["", "", "", "cached", "reserved", "thc"])  # PyTorch before 2.0 (third stream)
    if old == "thc":  # 0.4-1.0: the THC allocator's check line, then its RuntimeError
        c.log.j(c.fail, "THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCStorage.cu line=58 error=2 : out of memory",
                rank=c.g.rank)  # fmt: skip
        text = "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/generic/THCStorage.cu:58"
    elif old:  # 1.0-1.3 counted the cache as "cached", 1.4-1.12 as "reserved in total by PyTorch"
        held = "76.50 GiB cached" if old == "cached" else "76.50 GiB reserved in total by PyTorch"
        text = (f"RuntimeError: CUDA out of memory. Tried to allocate 4.00 GiB (GPU {local}; 79.10 GiB total capacity; "
                f"74.12 GiB already allocated; 1.94 GiB free; {held})")  # fmt: skip
    if old and c.log.late.random() < 0.5:  # the error line alone: the traceback went to another file
        c.log.j(c.fail, text, rank=c.g.rank)
    else:
        traceback(c.log, c.g, c.fail, text)
    c.die(c.log, c.g, 1)
    c.others_time_out()


def host_oom(c: Ctx) -> None:
    c.host_level = True
    kernel_lines = len(c.log.kernel)
    if c.log.style.kernel == "4.4":  # no flag names, raw stack words, [<ffffffff…>] frames; "Kill process"
        words = " ".join(f"ffff88{c.rng.getrandbits(40):010x}" for _ in range(4))
        c.log.k(c.s(-0.2), "python invoked oom-killer: gfp_mask=0x24280ca, order=0, oom_score_adj=0",
                "python cpuset=/ mems_allowed=0-1",
                f"CPU: 3 PID: {c.g.pid} Comm: python Tainted: P           OE   4.4.0-210-generic #242-Ubuntu",
                f" {words}", "Call Trace:", " [<ffffffff813f7583>] dump_stack+0x63/0x90",
                " [<ffffffff8120b18e>] dump_header+0x5a/0x1c5", " [<ffffffff81192ae2>] oom_kill_process+0x202/0x3c0")  # fmt: skip
        c.log.k(c.fail, f"Out of memory: Kill process {c.g.pid} (python) score 912 or sacrifice child",
                f"Killed process {c.g.pid} (python) total-vm:1532471824kB, anon-rss:198123452kB, file-rss:81232kB")  # fmt: skip
    else:  # the invoker can be any task, its name with spaces (a JVM's "GC Thread#9" beside the job)
        who = c.rng.choice(["python", "pt_main_thread", "GC Thread#9"])
        c.log.k(c.s(-0.2), f"{who} invoked oom-killer: gfp_mask=0x140dca(GFP_HIGHUSER_MOVABLE|__GFP_COMP|__GFP_ZERO), "
                           "order=0, oom_score_adj=0")  # fmt: skip
        c.log.k(c.fail, f"Out of memory: Killed process {c.g.pid} (python) total-vm:1532471824kB, anon-rss:198123452kB, "
                        "file-rss:81232kB, shmem-rss:12288kB, UID:0 pgtables:412340kB oom_score_adj:0")  # fmt: skip
    if c.log.late.random() < 0.3:  # the killer took a DataLoader worker, and the kernel's lines were not copied
        del c.log.kernel[kernel_lines:]
        worker = c.g.pid + 1 + c.log.late.randrange(400)
        lib = "/usr/local/lib/python3.10/dist-packages/torch/utils/data"
        traceback(c.log, c.g, c.fail, f"RuntimeError: DataLoader worker (pid {worker}) is killed by signal: Killed.", [
            '  File "/workspace/train.py", line 212, in <module>', "    for batch in loader:",
            f'  File "{lib}/dataloader.py", line 1133, in _try_get_data', "    data = self._data_queue.get(timeout=timeout)",
            f'  File "{lib}/_utils/signal_handling.py", line 66, in handler', "    _error_if_any_worker_fails()"])  # fmt: skip
        c.die(c.log, c.g, 1)  # the rank exited: the agents stop the others before any watchdog fires
        c.others_time_out_but([g for log in c.logs for g in log.gpus if g is not c.g], -15)
        return
    c.die(c.log, c.g, -9)
    c.others_time_out()


def host_memory(c: Ctx) -> None:
    c.host_level = True
    page = c.rng.getrandbits(22)
    c.log.k(c.s(-0.1), "mce: [Hardware Error]: Machine check events logged")
    form = c.log.style.edac
    if form == "sbridge":  # sb_edac: the MCE block, then the count line; corrected errors came first
        block = ["EDAC sbridge MC1: HANDLING MCE MEMORY ERROR", "EDAC sbridge MC1: CPU 0: Machine Check Event: 0 Bank 7: "
                 f"{c.rng.choice(['cc00418000010091', '8c00004000010090'])}", "EDAC sbridge MC1: TSC 0 ",
                 f"EDAC sbridge MC1: ADDR {page:x}940 ", "EDAC sbridge MC1: MISC 140686686 ",
                 f"EDAC sbridge MC1: PROCESSOR 0:406f1 TIME {int(c.fail.timestamp())} SOCKET 0 APIC 0"]  # fmt: skip
        c.log.k(c.s(-c.rng.randrange(300, 3000)), *block,
                f"EDAC MC1: 262 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x{page:x} "
                "offset:0x940 grain:32 syndrome:0x0 -  OVERFLOW area:DRAM err_code:0001:0091 socket:0 ha:0 channel_mask:2 rank:0)")  # fmt: skip
        c.log.k(c.fail, *block, f"EDAC MC1: 1 UE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 "
                f"page:0x{page:x} offset:0x940 grain:32 syndrome:0x0 -  area:DRAM err_code:0001:0091 socket:0 ha:0 "
                "channel_mask:2 rank:0)")  # fmt: skip
    elif form == "old":  # the oldest EDAC core wording: "N UE error on CPU#0Channel#2_DIMM#0"
        c.log.k(c.fail, f"EDAC MC0: 1 UE error on CPU#0Channel#2_DIMM#0 (channel:2 slot:0 page:0x{page:x} offset:0x0 "
                        "grain:8 syndrome:0x0)")  # fmt: skip
    else:
        c.log.k(c.fail, f"EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#0_Chan#2_DIMM#0 (channel:2 slot:0 "
                        f"page:0x{page:x} offset:0x400 grain:32 - err_code:0x00a0:0x0091 socket:1 imc:0 rank:0)")  # fmt: skip
    c.log.k(c.s(0.01), f"Memory failure: 0x{page:x}: Sending SIGBUS to python:{c.g.pid} due to hardware memory corruption")
    c.die(c.log, c.g, -7)
    c.others_time_out()


def storage(c: Ctx) -> None:
    c.host_level = True
    c.log.k(c.s(-30), f"nvme nvme1: I/O {c.rng.randrange(1000)} QID {c.rng.randrange(1, 64)} timeout, reset controller")
    c.log.k(c.s(-2), "EXT4-fs error (device nvme1n1): ext4_journal_check_start:83: comm python: Detected aborted journal")
    c.log.k(c.s(-1.9), "EXT4-fs (nvme1n1): Remounting filesystem read-only")
    traceback(c.log, c.g, c.fail, "OSError: [Errno 30] Read-only file system: '/checkpoints/iter_0012000/mp_rank_00/"
              "model_optim_rng.pt'")  # fmt: skip
    c.die(c.log, c.g, 1)
    c.others_time_out()


def driver(c: Ctx) -> None:
    c.at_start = True
    # (third stream) the user-space driver upgraded under a loaded kernel module (NVRM's API mismatch,
    # NVML's version mismatch), or the fabric manager not running on an NVSwitch system (error 802)
    form = c.log.late.choice(["rminit", "rminit", "api", "nvml", "802"])
    if form == "rminit":
        c.log.k(c.s(-5), f"NVRM: GPU {bdf(c.g.pci)}: RmInitAdapter failed! (0x25:0x65:1457)",
                f"NVRM: GPU {bdf(c.g.pci)}: rm_init_adapter failed, device minor number {c.g.minor}")  # fmt: skip
        traceback(c.log, c.g, c.fail, "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.")
    elif form == "api":  # one multi-line message per client; 575+ names the client and its pid
        c.host_level = True
        client = f"the client 'python' (pid {c.g.pid})\nNVRM: has" if c.log.late.random() < 0.5 else "the client has"
        c.log.k(c.s(-0.5), f"NVRM: API mismatch: {client} the version 550.127.05, but this kernel module has\n"
                           "NVRM: the version 550.90.07.  Please make sure that this\nNVRM: kernel module and all NVIDIA "
                           "driver components\nNVRM: have the same version.")  # fmt: skip
        traceback(c.log, c.g, c.fail, "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.")
    elif form == "nvml":  # the job's preflight nvidia-smi
        c.host_level = True
        c.log.j(c.fail, "Failed to initialize NVML: Driver/library version mismatch", rank=c.g.rank)
    else:
        c.host_level = True
        error = "RuntimeError: CUDA error: system not yet initialized"
        if c.log.late.random() < 0.5:
            c.log.j(c.fail, error, rank=c.g.rank)
        else:
            traceback(c.log, c.g, c.fail, error)
    c.die(c.log, c.g, 1)
    c.others_time_out()


def container_runtime(c: Ctx) -> None:
    c.at_start = True
    c.host_level = True
    # the container sees no GPU: often every rank of the host says so at once, lines interleaved
    together = [g for g in c.log.gpus if g is not c.g and c.log.side.random() < 0.5]
    # (third stream) what else the host shows: nothing, NVML failing inside the container after a
    # daemon-reload, Docker not finding the NVIDIA runtime at all, or old PyTorch's THCudaCheck line
    form = c.log.late.choice(["", "", "nvml", "docker", "thc"])
    if form == "docker":  # the container never started: no rank ran on this host
        c.log.j(c.fail, 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
                "ERRO[0000] error waiting for container: context canceled")  # fmt: skip
        c.silent.add(c.log.host)
        for g in [c.g, *together]:
            c.die(c.log, g, 1)
        c.others_time_out_but(c.log.gpus, 1)  # (its ranks' ends are kept for the draws: nothing prints them)
        return
    error = "RuntimeError: CUDA error: no CUDA-capable device is detected"
    if form == "nvml":
        c.log.j(c.s(-2), "Failed to initialize NVML: Unknown Error")
    elif form == "thc":
        c.log.j(c.fail, "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=74 error=38 : no CUDA-capable "
                        "device is detected", rank=c.g.rank)  # fmt: skip
        error = "RuntimeError: cuda runtime error (38) : no CUDA-capable device is detected at /pytorch/aten/src/THC/THCGeneral.cpp:74"
    traceback(c.log, c.g, c.fail, error, also=together)
    for g in [c.g, *together]:
        c.die(c.log, g, 1)
    c.others_time_out()


def hang(c: Ctx) -> None:
    if c.log.late.random() < 0.3:  # TORCH_DISTRIBUTED_DEBUG=DETAIL finds the ranks disagreeing on a collective
        shapes = {g.rank: 41 if g is c.g else 40 for g in c.log.gpus}
        also = [g for g in c.log.gpus if g is not c.g and c.log.late.random() < 0.3]
        traceback(c.log, c.g, c.fail, lambda g: f"RuntimeError: Detected mismatch between collectives on ranks. Rank {g.rank} "
                  f"is running inconsistent collective: CollectiveFingerPrint(OpType=ALLGATHER, TensorShape=[{shapes[g.rank]}, "
                  "256, 8], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout="
                  "Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)))",
                  also=also, mix=c.log.late)  # fmt: skip
        c.others_time_out_but([c.g, *also], 1, lagging=c.g)
        return
    c.others_time_out(lagging=c.g)


def unknown(c: Ctx) -> None:
    c.die(c.log, c.g, 1)
    for log in c.logs:  # the agent tears the others down (SIGTERM): no timeouts, no evidence
        for g in log.gpus:
            if g is not c.g:
                c.die(log, g, -15)


SCENARIOS: dict[str, Callable[[Ctx], None]] = {
    "pcie_link": pcie_link, "gpu_hardware": gpu_hardware, "gpu_memory": gpu_memory, "nvlink": nvlink,
    "thermal": thermal, "power": power, "network": network, "numerical": numerical, "code_bug": code_bug,
    "gpu_oom": gpu_oom, "host_oom": host_oom, "host_memory": host_memory, "storage": storage, "driver": driver,
    "container_runtime": container_runtime, "hang": hang, "unknown": unknown,
}  # fmt: skip

#: How often each cause is drawn by default (shaped like published interruption tables: GPUs and
#: their memory first, then network, software, host).
WEIGHTS: dict[str, float] = {
    "pcie_link": 6, "gpu_hardware": 14, "gpu_memory": 17, "nvlink": 5, "thermal": 2, "power": 2, "network": 10,
    "numerical": 6, "code_bug": 9, "gpu_oom": 5, "host_oom": 4, "host_memory": 4, "storage": 3, "driver": 3,
    "container_runtime": 2, "hang": 5, "unknown": 3,
}  # fmt: skip
