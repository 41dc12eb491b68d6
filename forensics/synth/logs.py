"""What one host of a synthetic incident logs, and how it is printed into files.

A :class:`HostLog` collects kernel messages (seconds since boot) and job-output lines (wall time) as a
scenario unfolds, then renders them in the printed forms real archives have: raw ``dmesg``, ``kern.log``
(year-less syslog with the embedded uptime), ``journalctl -o short-iso``, a job log mixing NCCL, PyTorch
and the training loop, and an ``nvidia-smi -q`` snapshot. Message shapes follow ``../shared/samples``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from .fleet import DEVICE_ID, GPU_BUSES, NIC_BUSES, PRODUCT, Card, bdf, port_of

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def ctime(at: datetime) -> str:
    """``Sat Jan 25 10:40:01 2025`` whatever the machine's locale (strftime's %a/%b follow it)."""
    return f"{DAYS[at.weekday()]} {MONTHS[at.month - 1]} {at.day:2d} {at:%H:%M:%S} {at.year}"


def xid_line(bus: str, code: int, pid: int | None, text: str) -> str:
    who = f"pid={pid}, name=python" if pid is not None else "pid='<unknown>', name=<unknown>"
    return f"NVRM: Xid (PCI:0000:{bus}:00): {code}, {who}, {text}"


def aer_record(bus: str, severity: str, rng: random.Random) -> list[str]:
    """The four to five lines of one AER event: the port's summary, then the endpoint's details."""
    dev = f"nvidia {bdf(bus)}"
    if severity == "corrected":
        bit, status, layer = rng.choice([(0, "00000001", "Physical Layer"), (6, "00000040", "Data Link Layer"),
                                         (7, "00000080", "Data Link Layer"), (12, "00001000", "Data Link Layer")])  # fmt: skip
        name = {0: "RxErr", 6: "BadTLP", 7: "BadDLLP", 12: "Timeout"}[bit]
        return [f"pcieport {port_of(bus)}: AER: Corrected error received: {bdf(bus)}",
                f"{dev}: PCIe Bus Error: severity=Corrected, type={layer}, (Receiver ID)",
                f"{dev}:   device [{DEVICE_ID}] error status/mask={status}/0000e000",
                f"{dev}:    [{bit:2d}] {name:<22} (First)"]  # fmt: skip
    bit, status, name = rng.choice([(14, "00004000", "CmpltTO"), (5, "00000020", "SurpDn"), (18, "00040000", "MalfTLP")])
    return [f"pcieport {port_of(bus)}: AER: Uncorrected (Fatal) error received: {bdf(bus)}",
            f"{dev}: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
            f"{dev}:   device [{DEVICE_ID}] error status/mask={status}/00000000",
            f"{dev}:    [{bit:2d}] {name:<22} (First)"]  # fmt: skip


@dataclass(eq=False)  # one GPU is one object: compared by identity
class Gpu:
    """One GPU of the job as this host sees it."""

    bus: str
    card: Card
    minor: int
    rank: int
    pid: int
    temp: int = 38
    thermal: bool = False
    power_brake: bool = False
    dbe: int = 0
    remap_pending: bool = False
    lost: bool = False  # fallen off the bus: missing from nvidia-smi


@dataclass
class HostLog:
    host: str
    boot: datetime
    gpus: list[Gpu]
    rng: random.Random
    skew_s: float = 0.0  # this host's clock error: every wall-clock stamp it prints is off by it
    tz: str = "UTC"  # the zone its wall clock prints in
    kernel: list[tuple[float, str]] = field(default_factory=list)
    job: list[tuple[datetime, str]] = field(default_factory=list)
    services: list[tuple[datetime, str]] = field(default_factory=list)

    # -- building -------------------------------------------------------------------------------

    def wall(self, at: datetime) -> datetime:
        """What this host's clock showed at the true time ``at`` (its skew, in its zone)."""
        return (at + timedelta(seconds=self.skew_s)).astimezone(ZoneInfo(self.tz))

    def uptime(self, at: datetime) -> float:
        return (at - self.boot).total_seconds()

    def k(self, at: datetime, *messages: str) -> None:
        """Kernel messages at wall time ``at`` (a multi-line record shares one stamp)."""
        up = self.uptime(at)
        self.kernel.extend((up, m) for m in messages)

    def j(self, at: datetime, *lines: str) -> None:
        self.job.extend((at, line) for line in lines)

    def gpu(self, bus: str) -> Gpu:
        return next(g for g in self.gpus if g.bus == bus)

    def boot_messages(self, kernel_version: str) -> None:
        self.kernel.append((0.0, f"Linux version {kernel_version} (buildd@lcy02-amd64-080) (x86_64-linux-gnu-gcc-11 "
                                 "(Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) "
                                 f"#{self.rng.randrange(60, 140)}-Ubuntu SMP"))  # fmt: skip
        self.kernel.append((0.0, "Command line: BOOT_IMAGE=/boot/vmlinuz ro pci=realloc iommu=pt"))
        t = 21.0 + self.rng.random()
        self.kernel.append((t, "nvidia: loading out-of-tree module taints kernel."))
        self.kernel.append((t + 0.02, "nvidia-nvlink: Nvlink Core is being initialized, major device number 508"))
        for g in self.gpus:
            t += 0.4 + self.rng.random() / 10
            self.kernel.append((t, f"NVRM: GPU at PCI:0000:{g.bus}:00: {g.card.uuid}"))
            self.kernel.append((t, f"NVRM: GPU Board Serial Number: {g.card.serial}"))
        self.kernel.append((t + 0.5, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024"))
        for i, nic in enumerate(NIC_BUSES[: 2 + self.rng.randrange(3)]):
            self.kernel.append((30.0 + i, f"mlx5_core 0000:{nic}:00.0: Port module event: module {i}, Cable plugged"))
            self.kernel.append((31.0 + i, f"mlx5_core 0000:{nic}:00.0 ibp{int(nic, 16)}s0: Link up"))

    def noise(self, start: datetime, end: datetime, *, misleading: bool) -> None:
        """Background: services, the odd USB or link event and, on a share of healthy hosts, what
        looks alarming and is not (correctable AER bursts, an Xid 13 from an earlier job)."""
        span = max(1.0, (end - start).total_seconds())
        for _ in range(self.rng.randrange(4, 12)):
            at = start + timedelta(seconds=self.rng.random() * span)
            self.services.append((at, self.rng.choice([
                f"systemd[1]: Started Session {self.rng.randrange(100, 9000)} of User root.",
                f"kubelet[{self.rng.randrange(1000, 4000)}]: I0101 00:00:00.000000    1679 reflector.go:256] watch of *v1.Pod ended",
                f"sshd[{self.rng.randrange(10000, 60000)}]: Accepted publickey for ubuntu from 10.0.{self.rng.randrange(250)}.{self.rng.randrange(250)} port 51234 ssh2",
                "nvidia-persistenced[2201]: device 0000:18:00.0 - persistence mode enabled.",
                "systemd[1]: Starting Daily apt upgrade and clean activities...",
            ])))  # fmt: skip
        for _ in range(self.rng.randrange(0, 4)):
            at = start + timedelta(seconds=self.rng.random() * span)
            self.k(at, self.rng.choice([
                "usb 1-1: new high-speed USB device number 3 using xhci_hcd",
                f"IPv6: ADDRCONF(NETDEV_CHANGE): veth{self.rng.getrandbits(24):06x}: link becomes ready",
                "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro. Quota mode: none.",
            ]))  # fmt: skip
        if misleading and self.rng.random() < 0.5:
            bus = self.rng.choice(self.gpus).bus
            at = start + timedelta(seconds=self.rng.random() * span)
            for n in range(self.rng.randrange(2, 6)):
                self.k(at + timedelta(seconds=n * 0.2), *aer_record(bus, "corrected", self.rng))
        if misleading and self.rng.random() < 0.25:
            g = self.rng.choice(self.gpus)
            at = start - timedelta(hours=self.rng.randrange(2, 48))
            if self.uptime(at) > 60:
                self.k(at, xid_line(g.bus, 13, self.rng.randrange(3000, 9000), "Graphics SM Warp Exception on "
                                    "(GPC 1, TPC 2, SM 0): Out Of Range Address"))  # fmt: skip

    # -- printing -------------------------------------------------------------------------------

    def dmesg(self) -> str:
        return "".join(f"[{up:12.6f}] {m}\n" for up, m in sorted(self.kernel, key=lambda x: x[0]))

    def kern_log(self) -> str:
        lines = []
        for up, m in sorted(self.kernel, key=lambda x: x[0]):
            at = self.wall(self.boot + timedelta(seconds=up))
            lines.append(f"{MONTHS[at.month - 1]} {at.day:2d} {at:%H:%M:%S} {self.host} kernel: [{up:12.6f}] {m}\n")
        return "".join(lines)

    def journal(self) -> str:
        rows = [(self.boot + timedelta(seconds=up), f"kernel: {m}") for up, m in self.kernel] + self.services
        return "".join(f"{self.wall(at):%Y-%m-%dT%H:%M:%S%z} {self.host} {m}\n" for at, m in sorted(rows, key=lambda x: x[0]))

    def job_log(self) -> str:
        return "".join(f"{line}\n" for _, line in sorted(self.job, key=lambda x: x[0]))

    def nvidia_smi(self, at: datetime) -> str:
        present = [g for g in self.gpus if not g.lost]
        at = self.wall(at)
        out = ["==============NVSMI LOG==============", "", f"Timestamp                                 : {ctime(at)}",
               "Driver Version                            : 550.90.07", "CUDA Version                              : 12.4", "",
               f"Attached GPUs                             : {len(present)}"]  # fmt: skip
        for g in present:
            def kv(name: str, value: object, indent: int = 4) -> str:
                return f"{' ' * indent}{name:<{42 - indent}}: {value}"

            out += [
                f"GPU 00000000:{g.bus.upper()}:00.0",
                kv("Product Name", PRODUCT), kv("Serial Number", g.card.serial), kv("GPU UUID", g.card.uuid),
                kv("Minor Number", g.minor), "    PCI", kv("Bus Id", f"00000000:{g.bus.upper()}:00.0", 8),
                kv("Replays Since Reset", self.rng.choice([1, 2, 5]) if self.rng.random() < 0.03 else 0, 8),
                "    Clocks Event Reasons", kv("Idle", "Not Active", 8), kv("SW Power Cap", "Not Active", 8),
                kv("HW Slowdown", "Active" if g.thermal or g.power_brake else "Not Active", 8),
                kv("HW Thermal Slowdown", "Active" if g.thermal else "Not Active", 12),
                kv("HW Power Brake Slowdown", "Active" if g.power_brake else "Not Active", 12),
                kv("SW Thermal Slowdown", "Not Active", 8),
                "    ECC Errors", "        Volatile", kv("DRAM Correctable", 0, 12), kv("DRAM Uncorrectable", g.dbe, 12),
                "        Aggregate", kv("DRAM Correctable", 0, 12), kv("DRAM Uncorrectable", g.dbe, 12),
                "    Remapped Rows", kv("Correctable Error", 0, 8), kv("Uncorrectable Error", 1 if g.remap_pending else 0, 8),
                kv("Pending", "Yes" if g.remap_pending else "No", 8), kv("Remapping Failure Occurred", "No", 8),
                "    Temperature", kv("GPU Current Temp", f"{g.temp} C", 8), kv("GPU Shutdown Temp", "92 C", 8),
                kv("GPU Slowdown Temp", "89 C", 8),
                "    GPU Power Readings", kv("Power Draw", f"{self.rng.randrange(90, 700)}.{self.rng.randrange(100):02d} W", 8),
                kv("Current Power Limit", "700.00 W", 8), "",
            ]  # fmt: skip
        return "\n".join(out) + "\n"


__all__ = ["GPU_BUSES", "Gpu", "HostLog", "aer_record", "xid_line"]
