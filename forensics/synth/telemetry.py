"""The telemetry an engineer copies off the failing host, for the causes where the field guides say it shows
the cause (issue 34): a ``nvidia-smi dmon`` capture (thermal: the temperature rising, then the clocks
falling; power: the GPUs' power collapsing), the BMC's event log (power: a PSU failure), ``iostat -x``
(storage: await in the seconds at 100% utilization) and a ``--query-gpu`` loop of the PCIe link (pcie_link:
the width falling from x16 to x8).

Each file is written as the tools print it (forms read by the gpuseries, sel, disks and nvsmi sources;
their goldens are the real samples): dmon's ``-o DT`` columns (``#Date Time gpu pwr gtemp mtemp sm mem
enc dec jpg ofa mclk pclk``, driver 5xx), ``ipmitool sel elist`` (``id | MM/DD/YYYY | HH:MM:SS | sensor |
event | Asserted``), sysstat 12's ``iostat -x -t`` (a ``MM/DD/YY HH:MM:SS`` line, then the 12.x head), a
``--format=csv`` loop with units in the header. Times are the host's wall clock (its zone and skew).

The draws come from a stream of their own (seeded by the host), so a seed's other files are as before.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta

from .logs import Gpu, HostLog

#: How long before the failure the captures start, and how often they read.
SPAN = timedelta(minutes=30)
DMON_EVERY = timedelta(seconds=10)
IOSTAT_EVERY = timedelta(seconds=10)
QUERY_EVERY = timedelta(seconds=15)


def files(log: HostLog, cause: str, g: Gpu, fail: datetime, end: datetime) -> dict[str, bytes]:
    """The telemetry files of ``log``'s host for ``cause`` (none for a cause that shows no telemetry)."""
    write = _WRITERS.get(cause)
    if write is None:
        return {}
    rng = random.Random(f"{log.host}/{log.boot.isoformat()}/telemetry")
    return {f"{log.host}/{name}": text.encode() for name, text in write(log, g, fail, end, rng).items()}


def _thermal(log: HostLog, g: Gpu, fail: datetime, end: datetime, rng: random.Random) -> dict[str, str]:
    peak = g.temp  # what nvidia-smi -q shows after: 89-92 °C
    climb = timedelta(minutes=rng.randrange(6, 10))

    def reading(x: Gpu, at: datetime) -> tuple[int, int, int, int]:
        """(power W, temperature °C, SM util %, SM clock MHz) of ``x`` at ``at``."""
        base = 52 + x.minor % 4 + rng.randrange(3)
        if x is not g or at < fail - climb:
            return rng.randrange(560, 640), base, rng.randrange(95, 101), 1980
        share = min(1.0, (at - (fail - climb)) / climb)
        temp = round(base + (peak - base) * share)
        clock = 1980 if temp < 85 else 1980 - (temp - 84) * rng.randrange(90, 130)  # held down past 85 °C
        return rng.randrange(430, 520), temp, rng.randrange(95, 101), clock

    return {"nvidia-smi-dmon.log": _dmon(log, fail, end, reading)}


def _power(log: HostLog, g: Gpu, fail: datetime, end: datetime, rng: random.Random) -> dict[str, str]:
    lost = fail - timedelta(seconds=rng.randrange(40, 90))  # the PSU failed; the brake held the GPUs down
    psu = rng.choice(["PS1", "PS2"])

    def reading(x: Gpu, at: datetime) -> tuple[int, int, int, int]:
        if at < lost:
            return rng.randrange(560, 660), 60 + rng.randrange(6), rng.randrange(95, 101), 1980
        return rng.randrange(55, 80), 50 + rng.randrange(5), rng.randrange(0, 30), 345

    sel = [(fail - SPAN - timedelta(hours=rng.randrange(30, 900)), "Event Logging Disabled SEL", "Log area reset/cleared", True),
           (lost, f"Power Supply {psu} Status", "Power Supply AC lost", True),
           (lost + timedelta(seconds=1), f"Power Supply {psu} Status", "Failure detected", True),
           (lost + timedelta(seconds=2), "Power Unit Pwr Unit Redund", "Redundancy Lost", True)]  # fmt: skip
    lines = [f"{n + 1:4x} | {log.wall(at):%m/%d/%Y} | {log.wall(at):%H:%M:%S} | {sensor} | {event} | "
             f"{'Asserted' if on else 'Deasserted'}" for n, (at, sensor, event, on) in enumerate(sel)]  # fmt: skip
    return {"nvidia-smi-dmon.log": _dmon(log, fail, end, reading), "ipmitool-sel-elist.txt": "\n".join(lines) + "\n"}


def _storage(log: HostLog, g: Gpu, fail: datetime, end: datetime, rng: random.Random) -> dict[str, str]:
    stuck = fail - timedelta(seconds=rng.randrange(60, 180))  # the disk stops answering well before the error
    shown = log.wall(fail - SPAN)
    out = [f"Linux 5.15.0-91-generic ({log.host}) \t{shown:%m/%d/%y} \t_x86_64_\t(128 CPU)", ""]
    at = fail - SPAN
    while at <= end:
        out += [f"{log.wall(at):%m/%d/%y %H:%M:%S}",
                "avg-cpu:  %user   %nice %system %iowait  %steal   %idle",
                f"          {rng.uniform(20, 40):6.2f}    0.00 {rng.uniform(3, 8):7.2f} {rng.uniform(0, 60 if at >= stuck else 2):7.2f}"
                f"    0.00 {rng.uniform(20, 50):7.2f}", "",
                "Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s   wrqm/s  %wrqm "
                "w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz     f/s f_await  aqu-sz  %util"]  # fmt: skip
        for dev, busy in (("nvme0n1", False), ("nvme1n1", at >= stuck)):
            r, w = (rng.uniform(0, 3), rng.uniform(1, 8)) if busy else (rng.uniform(50, 400), rng.uniform(10, 120))
            r_await, w_await = (rng.uniform(400, 2500), rng.uniform(800, 4000)) if busy else (rng.uniform(0.1, 0.4), rng.uniform(0.02, 0.3))
            util = 100.0 if busy else rng.uniform(2, 30)
            out.append(f"{dev:<12}{r:10.2f}{r * 128:10.2f}{0:9.2f}{0:7.2f}{r_await:8.2f}{128:9.2f}{w:8.2f}{w * 256:10.2f}"
                       f"{0:9.2f}{0:7.2f}{w_await:8.2f}{256:9.2f}{0:8.2f}{0:10.2f}{0:9.2f}{0:7.2f}{0:8.2f}{0:9.2f}"
                       f"{0:8.2f}{0:8.2f}{(r * r_await + w * w_await) / 1000:8.2f}{util:7.2f}")  # fmt: skip
        out.append("")
        at += IOSTAT_EVERY
    return {"iostat-x.log": "\n".join(out) + "\n"}


def _pcie_link(log: HostLog, g: Gpu, fail: datetime, end: datetime, rng: random.Random) -> dict[str, str]:
    narrowed = fail - timedelta(seconds=rng.randrange(120, 600))  # retrained to x8 after the corrected burst
    out = ["timestamp, index, pci.bus_id, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, "
           "pcie.link.width.max, utilization.gpu [%]"]  # fmt: skip
    at = fail - SPAN
    while at <= end:
        shown = log.wall(at)
        for x in log.gpus:
            if x is g and at >= fail:  # fallen off the bus: it answers no more
                continue
            width = 8 if x is g and at >= narrowed else 16
            out.append(f"{shown:%Y/%m/%d %H:%M:%S}.{shown.microsecond // 1000:03d}, {x.minor}, {x.nvml}, 4, 4, {width}, 16, "
                       f"{rng.randrange(90, 101) if at < fail else 0} %")  # fmt: skip
        at += QUERY_EVERY
    return {"nvidia-smi-pcie.csv": "\n".join(out) + "\n"}


def _dmon(log: HostLog, fail: datetime, end: datetime, reading: Callable[[Gpu, datetime], tuple[int, int, int, int]]) -> str:
    """``nvidia-smi dmon -s puc -o DT -d 10`` from :data:`SPAN` before the failure to ``end``: every GPU each
    reading, the header again every screenful (a GPU that fell off the bus is missing after the failure)."""
    head = ["#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk",
            "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz"]  # fmt: skip
    out, at, n = [], fail - SPAN, 0
    while at <= end:
        if n % 20 == 0:
            out += head
        shown = log.wall(at)
        for x in log.gpus:
            if x.lost and at >= fail:
                continue
            power, temp, util, clock = reading(x, at)
            cells = [power, temp, "-", util, util * 2 // 5, 0, 0, 0, 0, 2619, clock]
            out.append(f" {shown:%Y%m%d}   {shown:%H:%M:%S}  {x.minor:>5}" + "".join(f"{c:>7}" for c in cells))
        at, n = at + DMON_EVERY, n + 1
    return "\n".join(out) + "\n"


_WRITERS: dict[str, Callable[[HostLog, Gpu, datetime, datetime, random.Random], dict[str, str]]] = {
    "thermal": _thermal, "power": _power, "storage": _storage, "pcie_link": _pcie_link}  # fmt: skip
