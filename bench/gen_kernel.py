"""A realistic kernel log of any size for the benchmarks, deterministic for a seed.

Noise is drawn from real kernel message shapes (container networking, audit, USB, SAS HBA, NVMe and
mlx5 probing, Lustre/LNet, perf, journald), with their numbers, addresses and ids varied so that no two
lines repeat by accident. About ``family_share`` of the lines belong to a family of the kernel grammar,
in every driver generation the samples show, multi-line records included (AER blocks, OOM reports with
call traces, Xid 119 with its RPC tables, stack dumps under WARNING and hung-task reports).

    python bench/gen_kernel.py OUT --lines 1000000 [--seed 1]
"""

from __future__ import annotations

import random
from collections.abc import Callable

from gen_common import generator_main

Gen = Callable[[random.Random], list[str]]


def _hex(r: random.Random, n: int) -> str:
    return "".join(r.choice("0123456789abcdef") for _ in range(n))


def _bdf(r: random.Random) -> str:
    return f"0000:{r.choice([0x18, 0x2a, 0x3b, 0x5d, 0x9b, 0xb3, 0xcb, 0xdb]):02x}:00.0"


def _xid_bus(r: random.Random) -> str:
    return f"PCI:0000:{r.choice([0x18, 0x2a, 0x3b, 0x5d, 0x9b, 0xb3, 0xcb, 0xdb]):02x}:00"


def _comm(r: random.Random) -> str:
    return r.choice(["python3", "pt_main_thread", "python3.10", "nvidia-smi", "torchrun", "dcgm", "GC Thread#3"])


NOISE: list[Gen] = [
    lambda r: [f"docker0: port {r.randint(1, 40)}(veth{_hex(r, 7)}) entered {r.choice(['blocking', 'disabled', 'forwarding'])} state"],
    lambda r: [f"IPv6: ADDRCONF(NETDEV_CHANGE): veth{_hex(r, 7)}: link becomes ready"],
    lambda r: [f"device veth{_hex(r, 7)} {r.choice(['entered', 'left'])} promiscuous mode"],
    lambda r: [f"audit: type=1334 audit({r.randint(1600000000, 1800000000)}.{r.randint(100, 999)}:{r.randint(1, 99999)}): prog-id={r.randint(1, 999)} op={r.choice(['LOAD', 'UNLOAD'])}"],
    lambda r: [f"kauditd_printk_skb: {r.randint(1, 200)} callbacks suppressed"],
    lambda r: [f"usb {r.randint(1, 4)}-{r.randint(1, 12)}: new high-speed USB device number {r.randint(2, 90)} using xhci_hcd"],
    lambda r: [f"mpt3sas_cm{r.randint(0, 1)}: log_info(0x{_hex(r, 8)}): originator(IOP), code(0x03), sub_code(0x{_hex(r, 4)})"],
    lambda r: [f"EXT4-fs (nvme{r.randint(0, 7)}n1p{r.randint(1, 4)}): mounted filesystem {_hex(r, 8)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 12)} r/w with ordered data mode. Quota mode: none."],
    lambda r: [f"perf: interrupt took too long ({r.randint(2500, 9000)} > {r.randint(2500, 9000)}), lowering kernel.perf_event_max_sample_rate to {r.randint(20000, 80000)}"],
    lambda r: [f"TCP: request_sock_TCP: Possible SYN flooding on port {r.randint(1024, 65535)}. Sending cookies.  Check SNMP counters."],
    lambda r: [f"systemd-journald[{r.randint(300, 2000)}]: /dev/kmsg buffer overrun, some messages lost."],
    lambda r: [f"mlx5_core {_bdf(r)}: E-Switch: Total vports {r.randint(2, 18)}, per vport: max uc(128) max mc(2048)"],
    lambda r: [f"nvme nvme{r.randint(0, 7)}: {r.choice([104, 63, 32])}/0/0 default/read/poll queues"],
    lambda r: [f"raid6: avx2x{r.choice([1, 2, 4])}   gen() {r.randint(9000, 40000)} MB/s"],
    lambda r: [f"clocksource: Long readout interval, skipping watchdog check: cs_nsec: {r.randint(10**9, 2 * 10**9)} wd_nsec: {r.randint(10**9, 2 * 10**9)}"],
    lambda r: [f"ata{r.randint(1, 16)}: SATA link down (SStatus 0 SControl 300)"],
    lambda r: [f"Lustre: scratch-OST{_hex(r, 4)}-osc-ffff{_hex(r, 12)}: Connection restored to 10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}@o2ib (at 10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}@o2ib)"],
    lambda r: [f"cgroup: fork rejected by pids controller in /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{_hex(r, 8)}_{_hex(r, 4)}.slice"],
    lambda r: [f"INFO: NMI handler (perf_event_nmi_handler) took too long to run: {r.random() * 5:.3f} msecs"],
    lambda r: [f"nvidia-nvswitch{r.randint(0, 3)}: open (major={r.randint(500, 511)})"],
    lambda r: [f"NFSD: client 10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)} testing state ID with incorrect client ID"],
    lambda r: [f"tg3 0000:0{r.randint(1, 4)}:00.{r.randint(0, 1)} eno{r.randint(1, 9)}: Link is up at 1000 Mbps, full duplex"] if r.random() < 0.02 else [f"bond0: (slave eno{r.randint(1, 9)}): link status definitely up, 25000 Mbps full duplex"],
    lambda r: [f"xfs filesystem being mounted at /var/lib/kubelet/pods/{_hex(r, 8)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 12)}/volumes supports timestamps until 2038"],
]

FAMILY: list[tuple[float, Gen]] = [
    (6, lambda r: [f"NVRM: Xid ({_xid_bus(r)}): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC {r.randint(0, 9)}, TPC {r.randint(0, 9)}, SM {r.randint(0, 1)}): Out Of Range Address"]),
    (2, lambda r: [f"NVRM: Xid ({_xid_bus(r)}): 43, pid={r.randint(1000, 4000000)}, name={_comm(r)}, Ch 000000{r.randint(0, 99):02d}"]),
    (1, lambda r: [f"NVRM: Xid ({_xid_bus(r)}): 31, pid={r.randint(1000, 4000000)}, name={_comm(r)}, Ch 0000000{r.randint(0, 9)}, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_{r.randint(0, 9)} faulted @ 0x7f{_hex(r, 2)}_{_hex(r, 8)}. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE"]),
    (1, lambda r: [f"NVRM: Xid ({_xid_bus(r)}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", f"NVRM: GPU {_bdf(r)}: GPU has fallen off the bus."]),
    (1, lambda r: [f"NVRM: Xid ({_xid_bus(r)}): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x{_hex(r, 10)} partition {r.randint(0, 7)}, subpartition {r.randint(0, 1)}.",
                   f"NVRM: Xid ({_xid_bus(r)}): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x{_hex(r, 16)}) marked for remapping, reset gpu to activate."]),
    (1, lambda r: [f"NVRM: Xid ({_xid_bus(r)}): 145, pid='<unknown>', name=<unknown>, RLW_RXPIPE Nonfatal XC0 i0 Link {r.randint(0, 17):02d} (0x{_hex(r, 8)} 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"]),
    (1, lambda r: [f"NVRM: Xid ({_xid_bus(r)}): 119, pid={r.randint(1000, 4000000)}, name={_comm(r)}, Timeout after 6s of waiting for RPC response from GPU{r.randint(0, 7)} GSP! Expected function 76 (GSP_RM_CONTROL) (0x{_hex(r, 8)} 0x{_hex(r, 2)}).",
                   f"NVRM: GPU{r.randint(0, 7)} RPC history (CPU -> GSP):",
                   "NVRM:     entry function                   data0              data1              ts_start           ts_end             duration actively_polling",
                   *[f"NVRM:     -{i}    76   GSP_RM_CONTROL        0x{_hex(r, 16)} 0x{_hex(r, 16)} 0x{_hex(r, 16)} 0x{_hex(r, 16)}    {r.randint(100, 900)}us" for i in range(4)]]),
    (4, lambda r: ["nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing"]),
    (1, lambda r: [f"nvidia-nvswitch{r.randint(0, 3)}: SXid (PCI:0000:{r.randint(5, 9):02x}:00.0): 20034, Fatal, Link {r.randint(0, 63)} LTSSM Fault Up",
                   f"nvidia-nvswitch{r.randint(0, 3)}: SXid (PCI:0000:{r.randint(5, 9):02x}:00.0): 20034, Severity 1 Engine instance {r.randint(0, 63)} Sub-engine instance 00"]),
    (4, lambda r: (lambda port: [f"pcieport {port}: AER: Corrected error received: {port}",
                                 f"pcieport {port}: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
                                 f"pcieport {port}:   device [8086:{_hex(r, 4)}] error status/mask=00000001/00002000",
                                 f"pcieport {port}:    [ 0] RxErr                  (First)"])(f"0000:{r.randint(0, 0xd7):02x}:0{r.randint(0, 3)}.0")),
    (1, lambda r: (lambda port: [f"pcieport {port}: AER: Multiple Uncorrected (Fatal) error received: {port}",
                                 f"pcieport {port}: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
                                 f"pcieport {port}:   device [8086:{_hex(r, 4)}] error status/mask=00004020/00000000",
                                 f"pcieport {port}:    [ 5] SDES                  ",
                                 f"pcieport {port}:    [14] CmpltTO                (First)",
                                 f"nvidia {_bdf(r)}: AER: can't recover (no error_detected callback)",
                                 f"pcieport {port}: AER: device recovery failed"])(f"0000:{r.randint(0, 0xd7):02x}:03.0")),
    (1, lambda r: (lambda comm, pid: [f"{comm} invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
                                      f"CPU: {r.randint(0, 127)} PID: {pid} Comm: {comm} Not tainted 5.15.0-112-generic #122-Ubuntu",
                                      "Hardware name: Dell Inc. PowerEdge XE9680/0KK0RG, BIOS 2.3.5 09/10/2024",
                                      "Call Trace:", " <TASK>", " dump_stack_lvl+0x4a/0x63", " dump_header+0x4f/0x1eb",
                                      " oom_kill_process.cold+0xb/0x10", " out_of_memory+0x1cf/0x4d0", " </TASK>",
                                      f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/kubepods/pod{_hex(r, 8)},task_memcg=/kubepods/pod{_hex(r, 8)}/{_hex(r, 12)},task={comm},pid={pid},uid=0",
                                      f"Memory cgroup out of memory: Killed process {pid} ({comm}) total-vm:{r.randint(10**7, 10**8)}kB, anon-rss:{r.randint(10**7, 10**8)}kB, file-rss:{r.randint(10**4, 10**6)}kB, shmem-rss:0kB, UID:0 pgtables:{r.randint(10**4, 10**5)}kB oom_score_adj:0"])(_comm(r), r.randint(1000, 4000000))),
    (1, lambda r: [f"EDAC MC{r.randint(0, 3)}: 1 CE memory read error on CPU_SrcID#{r.randint(0, 1)}_MC#0_Chan#{r.randint(0, 7)}_DIMM#0 (channel:{r.randint(0, 7)} slot:0 page:0x{_hex(r, 6)} offset:0x0 grain:32 syndrome:0x0 - area:DRAM err_code:0001:0090 socket:0 imc:0 rank:0 bg:1 ba:2 row:{_hex(r, 5)} col:{_hex(r, 3)})"]),
    (1, lambda r: ["mce: [Hardware Error]: Machine check events logged"]),
    (1, lambda r: [f"mce: CPU{r.randint(0, 127)}: Core temperature above threshold, cpu clock throttled (total events = {r.randint(1, 9999)})"]),
    (1, lambda r: [f"nvme nvme{r.randint(0, 7)}: I/O {r.randint(0, 1023)} QID {r.randint(0, 64)} timeout, reset controller"]),
    (1, lambda r: [f"mlx5_core {_bdf(r)}: mlx5_cmd_out_err:838:(pid {r.randint(1, 99999)}): QUERY_VPORT_COUNTER(0x770) op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x{_hex(r, 6)}), err(-22)"]),
    (2, lambda r: [f"mlx5_core {_bdf(r)} mlx5_{r.randint(0, 9)}: Port: 1 Link {r.choice(['DOWN', 'ACTIVE', 'INIT'])}"]),
    (1, lambda r: [f"{_comm(r)}[{r.randint(1000, 4000000)}]: segfault at 0 ip 00007f{_hex(r, 10)} sp 00007ff{_hex(r, 9)} error 4 in libnccl.so.2[7f{_hex(r, 10)}+{_hex(r, 7)}]"]),
    (1, lambda r: [f"INFO: task {_comm(r)}:{r.randint(1000, 4000000)} blocked for more than 120 seconds.", "      Not tainted 5.15.0-112-generic #122-Ubuntu",
                   '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.', "Call Trace:", " <TASK>", " __schedule+0x2ec/0x6a0", " schedule+0x4e/0xc0", " </TASK>"]),
    (1, lambda r: [f"watchdog: BUG: soft lockup - CPU#{r.randint(0, 127)} stuck for {r.randint(22, 60)}s! [{_comm(r)}:{r.randint(1000, 4000000)}]"]),
    (1, lambda r: [f"WARNING: CPU: {r.randint(0, 127)} PID: {r.randint(1, 99999)} at drivers/gpu/drm/drm_gem.c:{r.randint(100, 999)} drm_gem_object_release+0x{_hex(r, 2)}/0x{_hex(r, 2)}",
                   "Modules linked in: nvidia_uvm(POE) nvidia_drm(POE) nvidia_modeset(POE) nvidia(POE) mlx5_ib ib_uverbs mlx5_core",
                   "Call Trace:", " <TASK>", " ? show_regs+0x6d/0x80", " ? __warn+0x89/0x160", " </TASK>"]),
    (1, lambda r: [f"NVRM: GPU at {_xid_bus(r)}: GPU-{_hex(r, 8)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 12)}"]),
]


def generate(lines: int, *, seed: int = 1, family_share: float = 0.01) -> bytes:
    """``lines`` lines of a plain ``dmesg`` log (``[ secs.usecs] msg``)."""
    r = random.Random(seed)
    weights = [w for w, _ in FAMILY]
    gens = [g for _, g in FAMILY]
    out: list[str] = []
    t = 5.0
    while len(out) < lines:
        if r.random() < family_share / 2.5:  # family records average ~2.5 lines
            record = r.choices(gens, weights)[0](r)
        else:
            record = r.choice(NOISE)(r)
        t += r.expovariate(20.0)
        stamp = f"[{t:12.6f}] "
        out.extend(stamp + line for line in record)
    return ("\n".join(out[:lines]) + "\n").encode()


def main() -> None:
    generator_main(__doc__, "lines", 1_000_000, lambda out, n, seed: out.write_bytes(generate(n, seed=seed)))


if __name__ == "__main__":
    main()
