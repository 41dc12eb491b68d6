"""Large telemetry series for the benchmarks (issue 34's speed target), deterministic for a seed.

What a team archives beside dmesg when it keeps series: a day of ``nvidia-smi dmon -s puc -o DT -d 1`` on
8 GPUs (the header again every screenful), a series of dcgm-exporter scrapes of 8 GPUs (``# HELP``/``#
TYPE`` then a line per GPU and field, as ``curl :9400/metrics`` prints them, one scrape after another), and
``iostat -x -t 1`` of sysstat 12 on a host with a few disks for a day. The shapes are those of the real
samples in ``tests/golden/{gpuseries,dcgm,disks}``; the values wander around the levels of a steady job
(so the derived events are few, as in a day without trouble).

    python bench/gen_telemetry.py OUT --kind dmon|dcgm|iostat --mb 64 [--seed 1]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from pathlib import Path

GPUS = 8
DMON_HEAD = ("#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk\n"
             "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz\n")  # fmt: skip
DCGM_FIELDS = (("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", 1980),
               ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", 2619),
               ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", 55),
               ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", 60),
               ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", 600),
               ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", 0),
               ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", 97),
               ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", 40),
               ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", 0),
               ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", 70000))  # fmt: skip
IOSTAT_HEAD = ("Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s   wrqm/s  %wrqm "
               "w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz     f/s f_await  aqu-sz  %util\n")  # fmt: skip
DISKS = ("nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1", "sda", "md0")


def _walk(r: random.Random, value: float, low: float, high: float, step: float) -> float:
    """The next reading of a series that wanders between ``low`` and ``high`` (a steady job's GPU)."""
    return min(high, max(low, value + r.uniform(-step, step)))


def dmon(r: random.Random) -> Iterator[str]:
    power, temp, util = [600.0] * GPUS, [60.0] * GPUS, [95.0] * GPUS
    t = 0
    while True:
        if t % 20 == 0:
            yield DMON_HEAD
        day, clock = 20250101 + t // 86400 % 28, f"{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
        rows = []
        for g in range(GPUS):
            power[g], temp[g], util[g] = _walk(r, power[g], 450, 700, 15), _walk(r, temp[g], 50, 75, 0.5), _walk(r, util[g], 80, 100, 3)
            rows.append(f" {day}   {clock}  {g:>5}{power[g]:>7.0f}{temp[g]:>7.0f}{'-':>7}{util[g]:>7.0f}{util[g] * 0.4:>7.0f}"
                        f"{0:>7}{0:>7}{0:>7}{0:>7}{2619:>7}{1980 if temp[g] < 70 else 1755:>7}\n")  # fmt: skip
        yield "".join(rows)
        t += 1


def dcgm(r: random.Random) -> Iterator[str]:
    uuids = [f"GPU-{r.getrandbits(32):08x}-{r.getrandbits(16):04x}-{r.getrandbits(16):04x}-{r.getrandbits(16):04x}-"
             f"{r.getrandbits(48):012x}" for _ in range(GPUS)]  # fmt: skip
    labels = [f'gpu="{g}",UUID="{u}",pci_bus_id="00000000:{0x18 + 0x10 * g:02X}:00.0",device="nvidia{g}",'
              f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-017"' for g, u in enumerate(uuids)]  # fmt: skip
    while True:
        out = []
        for name, kind, doc, level in DCGM_FIELDS:
            out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
            for g in range(GPUS):
                value = level if level in (0, 70000) else max(0, level + r.randrange(-level // 5 - 1, level // 5 + 1))
                out.append(f"{name}{{{labels[g]}}} {value}\n")
        yield "".join(out)


def iostat(r: random.Random) -> Iterator[str]:
    yield "Linux 5.15.0-91-generic (gpu-node-017) \t01/01/25 \t_x86_64_\t(128 CPU)\n\n"
    t = 0
    while True:
        rows = []
        for d in DISKS:
            rs, ws = r.uniform(0, 500), r.uniform(0, 200)
            rows.append(f"{d:<12}{rs:10.2f}{rs * 128:10.2f}{0:9.2f}{0:7.2f}{r.uniform(0.1, 3):8.2f}{128:9.2f}{ws:8.2f}"
                        f"{ws * 256:10.2f}{0:9.2f}{0:7.2f}{r.uniform(0.02, 5):8.2f}{256:9.2f}{0:8.2f}{0:10.2f}{0:9.2f}"
                        f"{0:7.2f}{0:8.2f}{0:9.2f}{0:8.2f}{0:8.2f}{r.uniform(0, 4):8.2f}{r.uniform(0, 100):7.2f}\n")  # fmt: skip
        yield (f"01/{1 + t // 86400 % 28:02d}/25 {t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}\n"
               "avg-cpu:  %user   %nice %system %iowait  %steal   %idle\n"
               f"          {r.uniform(5, 60):6.2f}    0.00 {r.uniform(1, 9):7.2f} {r.uniform(0, 5):7.2f}    0.00 {r.uniform(20, 90):7.2f}\n\n"
               + IOSTAT_HEAD + "".join(rows) + "\n")  # fmt: skip
        t += 1


KINDS = {"dmon": dmon, "dcgm": dcgm, "iostat": iostat}


def write(path: Path, kind: str, mb: float, seed: int = 1) -> Path:
    """Write ``mb`` MB of the ``kind`` series to ``path``."""
    r, want, size = random.Random(seed), int(mb * 1e6), 0
    with path.open("w", encoding="ascii") as f:
        for chunk in KINDS[kind](r):
            f.write(chunk)
            size += len(chunk)
            if size >= want:
                break
    return path


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--kind", choices=sorted(KINDS), required=True)
    ap.add_argument("--mb", type=float, default=64)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    write(a.out, a.kind, a.mb, a.seed)
