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
from .styles import LOCAL_MONTHS, Style, launcher_prefix

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def ctime(at: datetime) -> str:
    """``Sat Jan 25 10:40:01 2025`` whatever the machine's locale (strftime's %a/%b follow it)."""
    return f"{DAYS[at.weekday()]} {MONTHS[at.month - 1]} {at.day:2d} {at:%H:%M:%S} {at.year}"


def xid_line(bus: str, code: int, pid: int | None, text: str) -> str:
    who = f"pid={pid}, name=python" if pid is not None else "pid='<unknown>', name=<unknown>"
    return f"NVRM: Xid (PCI:0000:{bus}:00): {code}, {who}, {text}"


#: AER bit names by generation: the old long names (kernels before 4.x) and today's short ones.
_CORRECTED = [(0, "00000001", "Physical Layer", "RxErr", "Receiver Error"), (6, "00000040", "Data Link Layer", "BadTLP", "Bad TLP"),
              (7, "00000080", "Data Link Layer", "BadDLLP", "Bad DLLP"), (12, "00001000", "Data Link Layer", "Timeout", "Replay Timer Timeout")]  # fmt: skip
_FATAL = [(14, "00004000", "CmpltTO", "Completion Timeout"), (5, "00000020", "SurpDn", "Surprise Down Error"),
          (18, "00040000", "MalfTLP", "Malformed TLP")]  # fmt: skip


def aer_record(bus: str, severity: str, rng: random.Random, form: str = "mid") -> list[str]:
    """The four to five lines of one AER event: the port's summary, then the endpoint's details, in
    the kernel generation's wording: ``old`` (``id=00e5``, long bit names), ``mid`` (``error
    received: <bdf>``) or ``new`` (``error message received from``, an ``AER:`` tag on every line,
    ``severity=Correctable``)."""
    dev, port = f"nvidia {bdf(bus)}", f"pcieport {port_of(bus)}"
    rid = f"{int(bus, 16) << 8:04x}"
    if severity == "corrected":
        bit, status, layer, name, long_name = rng.choice(_CORRECTED)
        mask, who = "0000e000", "Receiver ID"
        head = {"old": f"{port}: AER: Corrected error received: id={rid}",
                "mid": f"{port}: AER: Corrected error received: {bdf(bus)}",
                "new": f"{port}: AER: Correctable error message received from {bdf(bus)}"}[form]  # fmt: skip
        sev = "Correctable" if form == "new" else "Corrected"
    else:
        bit, status, name, long_name = rng.choice(_FATAL)
        layer, mask, who = "Transaction Layer", "00000000", "Requester ID"
        head = {"old": f"{port}: AER: Uncorrected (Fatal) error received: id={rid}",
                "mid": f"{port}: AER: Uncorrected (Fatal) error received: {bdf(bus)}",
                "new": f"{port}: AER: Uncorrected (Fatal) error message received from {bdf(bus)}"}[form]  # fmt: skip
        sev = "Uncorrected (Fatal)"
    tag = f"{dev}: AER:" if form == "new" else f"{dev}:"
    where = f"id={rid}({who})" if form == "old" else f"({who})"
    shown = long_name if form == "old" else name
    return [head, f"{tag} PCIe Bus Error: severity={sev}, type={layer}, {where}",
            f"{tag}   device [{DEVICE_ID}] error status/mask={status}/{mask}",
            f"{tag}    [{bit:2d}] {shown:<22} (First)"]  # fmt: skip


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
    style: Style = field(default_factory=Style)  # how it prints
    kernel: list[tuple[float, str]] = field(default_factory=list)
    job: list[tuple[datetime, int | None, str]] = field(default_factory=list)
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

    def j(self, at: datetime, *lines: str, rank: int | None = None) -> None:
        """Job-output lines at ``at``, printed by ``rank`` (None: the launcher or agent)."""
        self.job.extend((at, rank, line) for line in lines)

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
                self.k(at + timedelta(seconds=n * 0.2), *aer_record(bus, "corrected", self.rng, self.style.aer))
        if misleading and self.rng.random() < 0.25:
            g = self.rng.choice(self.gpus)
            at = start - timedelta(hours=self.rng.randrange(2, 48))
            if self.uptime(at) > 60:
                self.k(at, xid_line(g.bus, 13, self.rng.randrange(3000, 9000), "Graphics SM Warp Exception on "
                                    "(GPC 1, TPC 2, SM 0): Out Of Range Address"))  # fmt: skip

    # -- printing -------------------------------------------------------------------------------

    def _kernel_sorted(self, *, split: bool = False) -> list[tuple[float, str]]:
        """The kernel messages in time order; ``split``: a continued message as one line each (syslog
        and the journal store every line as a record of its own)."""
        rows = sorted(self.kernel, key=lambda x: x[0])
        return [(up, line) for up, m in rows for line in m.split("\n")] if split else rows

    def dmesg(self) -> str:
        """The kernel ring buffer as ``dmesg`` prints it, in this host's form (:data:`styles.DMESG`)."""
        form, out, last = self.style.dmesg, [], 0.0
        for up, m in self._kernel_sorted():
            at = self.wall(self.boot + timedelta(seconds=up))
            if form == "ctime":  # dmesg -T: the day space-padded
                out.append(f"[{DAYS[at.weekday()]} {MONTHS[at.month - 1]} {at.day:2d} {at:%H:%M:%S} {at.year}] {m}\n")
            elif form == "reltime":  # the delta to the line before: no absolute time at all
                out.append(f"[{'+' + format(up - last, '.6f'):>12}] {m}\n")
            elif form in ("iso-x", "iso"):  # --time-format iso: comma before the microseconds
                stamp = f"{at:%Y-%m-%dT%H:%M:%S},{at.microsecond:06d}{at:%z}"
                stamp = stamp[:-2] + ":" + stamp[-2:]
                level = "err" if ("Xid" in m or "error" in m.lower() or "failed" in m) else "info"
                out.append((f"kern  :{level:<6}: " if form == "iso-x" else "") + f"{stamp} {m}\n")
            elif form == "caller":  # CONFIG_PRINTK_CALLER
                out.append(f"[{up:12.6f}][{'T' + str(1 + int(up * 7) % 900):>6}] {m}\n")
            elif form == "talos":  # talosctl dmesg: node address, facility, level, RFC 3339 with nanoseconds
                ns = f"{at.microsecond:06d}{int(up * 1e9) % 1000:03d}".rstrip("0") or "0"
                level = "warning" if "Xid" in m or "error" in m.lower() else "info"
                out.append(f"10.20.{sum(map(ord, self.host)) % 250}.{len(self.host)}: kern: {level}: "
                           f"[{at.astimezone(ZoneInfo('UTC')):%Y-%m-%dT%H:%M:%S}.{ns}Z]: {m}\n")  # fmt: skip
            else:
                out.append(f"[{up:12.6f}] {m}\n")
            if "\n" in m:  # a continued message: its lines carry no stamp, indented under the text
                head, _, rest = out[-1][:-1].partition("\n")
                indent = " " * (len(head) - len(m.split("\n", 1)[0]))
                out[-1] = head + "".join(f"\n{indent}{line}" for line in rest.split("\n")) + "\n"
            last = up
        return "".join(out)

    def kern_log(self) -> str:
        """kern.log: year-less syslog stamps with the kernel's uptime inside; some hosts' rsyslog
        templates leave out the host name, or pad before ``kernel:``."""
        lines = []
        for up, m in self._kernel_sorted(split=True):
            at = self.wall(self.boot + timedelta(seconds=up))
            who = {"host": f" {self.host} ", "nohost": " ", "doublespace": "  "}[self.style.syslog]
            lines.append(f"{MONTHS[at.month - 1]} {at.day:2d} {at:%H:%M:%S}{who}kernel: [{up:12.6f}] {m}\n")
        return "".join(lines)

    def journal(self) -> str:
        """``journalctl`` text in this host's mode (:data:`styles.JOURNAL`), with its boot marker."""
        rows = [(self.boot + timedelta(seconds=up), f"kernel: {m}") for up, m in self._kernel_sorted(split=True)] + self.services
        form = self.style.journal
        boot_id = f"{self.rng.getrandbits(128):032x}"
        out = [f"-- Boot {boot_id} --\n"] if form in ("short", "short-monotonic", "short-precise") else []
        if form == "short-iso" and self.rng.random() < 0.5:
            first = self.wall(min(at for at, _ in rows)) if rows else self.wall(self.boot)
            out.append(f"-- Logs begin at {DAYS[first.weekday()]} {first:%Y-%m-%d %H:%M:%S} {first.tzname()}, "
                       f"end at {DAYS[first.weekday()]} {first:%Y-%m-%d %H:%M:%S} {first.tzname()}. --\n")  # fmt: skip
        for at, m in sorted(rows, key=lambda x: x[0]):
            shown = self.wall(at)
            if form == "short-iso":
                out.append(f"{shown:%Y-%m-%dT%H:%M:%S%z} {self.host} {m}\n")
            elif form == "short-precise":
                out.append(f"{MONTHS[shown.month - 1]} {shown.day:02d} {shown:%H:%M:%S}.{shown.microsecond:06d} {self.host} {m}\n")
            elif form == "short-monotonic":
                out.append(f"[{(at - self.boot).total_seconds():12.6f}] {self.host} {m}\n")
            elif form == "short-localized":  # LANG of the shell that ran journalctl; no host name
                out.append(f"{LOCAL_MONTHS[self.style.locale][shown.month - 1]} {shown.day:02d} {shown:%H:%M:%S} {m}\n")
            else:
                out.append(f"{MONTHS[shown.month - 1]} {shown.day:02d} {shown:%H:%M:%S} {self.host} {m}\n")
        return "".join(out)

    def job_log(self) -> str:
        """The job's output on this host: each line behind its launcher's prefix."""
        return "".join(f"{launcher_prefix(self.style, self.host, rank)}{line}\n"
                       for _, rank, line in sorted(self.job, key=lambda x: x[0]))  # fmt: skip

    def nvidia_smi(self, at: datetime) -> str:
        present = [g for g in self.gpus if not g.lost]
        at = self.wall(at)
        column = self.style.smi_column  # where the colon sits: 32 (304.x), 36 (325-418), 42 (450+)

        def kv(name: str, value: object, indent: int = 4) -> str:  # a name longer than the column keeps a space
            return f"{' ' * indent}{name:<{max(column - indent, len(name) + 1)}}: {value}"

        out = ["==============NVSMI LOG==============", "", kv("Timestamp", ctime(at), 0),
               kv("Driver Version", "550.90.07", 0), kv("CUDA Version", "12.4", 0), "",
               kv("Attached GPUs", len(present), 0)]  # fmt: skip
        for g in present:

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
