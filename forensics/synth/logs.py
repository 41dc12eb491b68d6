"""What one host of a synthetic incident logs, and how it is printed into files.

A :class:`HostLog` collects kernel messages (seconds since boot) and job-output lines (wall time) as a
scenario unfolds, then renders them in the printed forms real archives have: raw ``dmesg``, ``kern.log``
(year-less syslog with the embedded uptime), ``journalctl -o short-iso``, a job log mixing NCCL, PyTorch
and the training loop, and an ``nvidia-smi -q`` snapshot. Message shapes follow the real samples in ``tests/golden``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from .fleet import DEVICE_ID, GPU_BUSES, NIC_BUSES, PRODUCT, Card, bdf, port_of
from .styles import DMESG_LOCALES, LOCAL_MONTHS, Style, address, launcher_prefix

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def ctime(at: datetime) -> str:
    """``Sat Jan 25 10:40:01 2025`` whatever the machine's locale (strftime's %a/%b follow it)."""
    return f"{DAYS[at.weekday()]} {MONTHS[at.month - 1]} {at.day:2d} {at:%H:%M:%S} {at.year}"


def xid_line(pci: str, code: int, pid: int | None, text: str) -> str:
    """An Xid line of the GPU at ``pci`` (``domain:bus``)."""
    who = f"pid={pid}, name=python" if pid is not None else "pid='<unknown>', name=<unknown>"
    return f"NVRM: Xid (PCI:{pci}:00): {code}, {who}, {text}"


def nvlink5(unit: str, fatal: bool, link: int, rng: random.Random) -> str:
    """The text of an NVLink5 unit Xid (144-150): unit, Fatal/Nonfatal, XC, instance, link, registers."""
    words = " ".join(f"0x{w:08x}" for w in (rng.getrandbits(28) | 0x400000, rng.choice([0, 4]), 0, 0, 0, 0))
    return f"{unit} {'Fatal' if fatal else 'Nonfatal'} XC{rng.randrange(2)} i0 Link {link:02d} ({words})"


def mmu_fault(pci: str, driver: str, rng: random.Random) -> list[str]:
    """An Xid 31 (MMU fault) as each driver generation prints it; the oldest adds an Xid 32."""
    head, pid, addr = f"NVRM: Xid (PCI:{pci}:00): 31, ", rng.randrange(2000, 3000000), f"0x{rng.getrandbits(16):04x}_{rng.getrandbits(28):07x}00"
    if driver == "old":
        return [f"{head}Ch 00000003, engmask 00000101, intr 10000000",
                f"NVRM: Xid (PCI:{pci}:00): 32, Channel ID 00000000 intr 00004000"]  # fmt: skip
    if driver == "418":
        return [f"{head}Ch 0000003a, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ {addr}. "
                "Fault is of type FAULT_PDE ACCESS_TYPE_READ"]  # fmt: skip
    if driver == "535":
        return [f"{head}pid={pid}, name=python3.10, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS "
                f"GPCCLIENT_T1_8 faulted @ {addr}. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE"]  # fmt: skip
    return [f"{head}pid={pid}, name=python, channel 0x0000000c, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC2 "
            f"GPCCLIENT_PROP_0 faulted @ {addr}. Fault is of type FAULT_PTE ACCESS_TYPE_VIRT_READ"]  # fmt: skip


#: AER bit names by generation: the old long names (kernels before 4.x) and today's short ones.
_CORRECTED = [(0, "00000001", "Physical Layer", "RxErr", "Receiver Error"), (6, "00000040", "Data Link Layer", "BadTLP", "Bad TLP"),
              (7, "00000080", "Data Link Layer", "BadDLLP", "Bad DLLP"), (12, "00001000", "Data Link Layer", "Timeout", "Replay Timer Timeout")]  # fmt: skip
_FATAL = [(14, "00004000", "CmpltTO", "Completion Timeout"), (5, "00000020", "SurpDn", "Surprise Down Error"),
          (18, "00040000", "MalfTLP", "Malformed TLP")]  # fmt: skip


def aer_record(pci: str, severity: str, rng: random.Random, form: str = "mid") -> list[str]:
    """The four to five lines of one AER event: the port's summary, then the endpoint's details, in
    the kernel generation's wording: ``old`` (``id=00e5``, long bit names), ``mid`` (``error
    received: <bdf>``) or ``new`` (``error message received from``, an ``AER:`` tag on every line,
    ``severity=Correctable``), or ``tight`` (``new`` with one space after the tag, the bit name unpadded,
    no ``(First)``)."""
    tight = form == "tight"
    form = "new" if tight else form
    dev, port = f"nvidia {bdf(pci)}", f"pcieport {port_of(pci)}"
    rid = f"{int(pci[-2:], 16) << 8:04x}"
    if severity == "corrected":
        bit, status, layer, name, long_name = rng.choice(_CORRECTED)
        mask, who = "0000e000", "Receiver ID"
        head = {"old": f"{port}: AER: Corrected error received: id={rid}",
                "mid": f"{port}: AER: Corrected error received: {bdf(pci)}",
                "new": f"{port}: AER: Correctable error message received from {bdf(pci)}"}[form]  # fmt: skip
        sev = "Correctable" if form == "new" else "Corrected"
    else:
        bit, status, name, long_name = rng.choice(_FATAL)
        layer, mask, who = "Transaction Layer", "00000000", "Requester ID"
        # a non-fatal uncorrectable error (a completion timeout the device may survive): "Uncorrected
        # (Non-Fatal)", which newer kernels word "Uncorrectable (Non-Fatal)"
        kind = "Fatal" if severity == "fatal" else "Non-Fatal"
        if kind == "Non-Fatal":
            bit, status, name, long_name = _FATAL[0]
        word = "Uncorrectable" if form == "new" and kind == "Non-Fatal" else "Uncorrected"
        head = {"old": f"{port}: AER: {word} ({kind}) error received: id={rid}",
                "mid": f"{port}: AER: {word} ({kind}) error received: {bdf(pci)}",
                "new": f"{port}: AER: {word} ({kind}) error message received from {bdf(pci)}"}[form]  # fmt: skip
        sev = f"{word} ({kind})"
    tag = f"{dev}: AER:" if form == "new" else f"{dev}:"
    where = f"id={rid}({who})" if form == "old" else f"({who})"
    shown = long_name if form == "old" else name
    if tight:
        return [head, f"{tag} PCIe Bus Error: severity={sev}, type={layer}, {where}",
                f"{tag} device [{DEVICE_ID}] error status/mask={status}/{mask}", f"{tag} [{bit:2d}] {shown}"]
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
    domain: str = "0000"  # its PCI domain
    temp: int = 38
    thermal: bool = False
    power_brake: bool = False
    dbe: int = 0
    remap_pending: bool = False
    lost: bool = False  # fallen off the bus: missing from nvidia-smi
    hung: bool = False  # its GSP does not answer: nvidia-smi reads "Unknown Error" for its sensors

    @property
    def pci(self) -> str:
        """``domain:bus``, as Xid lines print it (``PCI:0000:18:00``)."""
        return f"{self.domain}:{self.bus}"

    @property
    def nvml(self) -> str:
        """The bus id as nvidia-smi prints it: ``00000000:18:00.0``."""
        return f"0000{self.domain}:{self.bus.upper()}:00.0"

    @property
    def nccl_bus(self) -> str:
        """The bus id as NCCL prints it: NVML's id without separators (``18000``, ``118000``)."""
        return f"{int(self.domain, 16) << 20 | int(self.bus, 16) << 12:x}"


@dataclass
class HostLog:
    host: str
    boot: datetime
    gpus: list[Gpu]
    rng: random.Random
    skew_s: float = 0.0  # this host's clock error: every wall-clock stamp it prints is off by it
    tz: str = "UTC"  # the zone its wall clock prints in
    style: Style = field(default_factory=Style)  # how it prints
    side: random.Random = field(default_factory=lambda: random.Random(0))  # draws of the forms added later
    late: random.Random = field(default_factory=lambda: random.Random(1))  # draws of the forms of December 2026
    kernel: list[tuple[float, str]] = field(default_factory=list)
    job: list[tuple[datetime, int | None, str]] = field(default_factory=list)
    services: list[tuple[datetime, str]] = field(default_factory=list)
    wrapped: set[int] = field(default_factory=set)  # job lines the copy's terminal hard-wrapped

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

    @property
    def job_host(self) -> str:
        """The host name the job's processes see: the host's, or its container's own."""
        return self.style.container or self.host

    @property
    def nccl_host(self) -> str:
        """The host name NCCL prints before each line: the job's, or a redacted copy's marker
        (:data:`styles.NCCL_HOST`)."""
        return self.style.nccl_host or self.job_host

    def j_wrapped(self, at: datetime, line: str, *, rank: int | None = None) -> None:
        """A job-output line that the host's terminal hard-wraps in the copy (:data:`styles.JOB_WRAP`)."""
        if self.style.job_wrap:
            self.wrapped.add(len(self.job))
        self.j(at, line, rank=rank)

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
            self.kernel.append((t, f"NVRM: GPU at PCI:{g.pci}:00: {g.card.uuid}"))
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
            shown = self.wall(at)
            self.services.append((at, self.rng.choice([
                f"systemd[1]: Started Session {self.rng.randrange(100, 9000)} of User root.",
                f"kubelet[{self.rng.randrange(1000, 4000)}]: I0101 00:00:00.000000    1679 reflector.go:256] watch of *v1.Pod ended",
                f"sshd[{self.rng.randrange(10000, 60000)}]: Accepted publickey for ubuntu from 10.0.{self.rng.randrange(250)}.{self.rng.randrange(250)} port 51234 ssh2",
                f"nvidia-persistenced[2201]: device {bdf(self.gpus[0].pci)} - persistence mode enabled.",
                "systemd[1]: Starting Daily apt upgrade and clean activities...",
                # Long lines a terminal wraps, and messages that carry a clock of their own.
                f"kubelet[{self.rng.randrange(1000, 4000)}]: E0101 00:00:00.000000    1679 pod_workers.go:1298] \"Error syncing "
                "pod, skipping\" err=\"failed to \\\"StartContainer\\\" for \\\"dcgm-exporter\\\" with CrashLoopBackOff: "
                "\\\"back-off 5m0s restarting failed container=dcgm-exporter pod=dcgm-exporter-7x2kq_gpu-operator"
                f"({self.rng.getrandbits(32):08x}-6a1f-4c2e-9d3b-0c1d2e3f4a5b)\\\"\" pod=\"gpu-operator/dcgm-exporter-7x2kq\"",
                f"nv-fabricmanager[{self.rng.randrange(3000, 40000)}]: [{MONTHS[shown.month - 1]} {shown.day:02d} {shown.year} "
                f"{shown:%H:%M:%S}] [INFO] [tid {self.rng.randrange(3000, 40000)}] Successfully configured all the available "
                "NVSwitches to route GPU NVLink traffic.",
                f"driverdog[{self.rng.randrange(1000, 3000)}]: {shown:%H:%M:%S} [INFO] Loaded kernel module nvidia",
            ])))  # fmt: skip
        for _ in range(self.rng.randrange(0, 4)):
            at = start + timedelta(seconds=self.rng.random() * span)
            self.k(at, self.rng.choice([
                "usb 1-1: new high-speed USB device number 3 using xhci_hcd",
                f"IPv6: ADDRCONF(NETDEV_CHANGE): veth{self.rng.getrandbits(24):06x}: link becomes ready",
                "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro. Quota mode: none.",
            ]))  # fmt: skip
        if misleading and self.rng.random() < 0.5:
            pci = self.rng.choice(self.gpus).pci
            at = start + timedelta(seconds=self.rng.random() * span)
            for n in range(self.rng.randrange(2, 6)):
                self.k(at + timedelta(seconds=n * 0.2), *aer_record(pci, "corrected", self.rng, self.style.aer))
        if misleading and self.rng.random() < 0.25:
            g = self.rng.choice(self.gpus)
            at = start - timedelta(hours=self.rng.randrange(2, 48))
            if self.uptime(at) > 60:
                self.k(at, xid_line(g.pci, 13, self.rng.randrange(3000, 9000), "Graphics SM Warp Exception on "
                                    "(GPC 1, TPC 2, SM 0): Out Of Range Address"))  # fmt: skip

        if misleading and self.rng.random() < 0.1:  # NVLink5 errors the driver marks Nonfatal: logged, ignored
            g = self.rng.choice(self.gpus)
            at = start + timedelta(seconds=self.rng.random() * span)
            self.k(at, f"NVRM: Xid (PCI:{g.pci}:00): 145, {nvlink5('RLW_RXPIPE', False, self.rng.randrange(18), self.rng)}")
        if misleading and self.rng.random() < 0.2:  # an earlier job's MMU fault, in this driver's wording
            g = self.rng.choice(self.gpus)
            at = start - timedelta(hours=self.rng.randrange(3, 60))
            if self.uptime(at) > 60:
                self.k(at, *mmu_fault(g.pci, self.style.driver, self.rng))

    # -- printing -------------------------------------------------------------------------------

    def pstore(self, rng: random.Random) -> str:
        """A pstore (ERST) record of an earlier boot's end: an operator crashed the hung node with
        sysrq to get a dump. Its lines carry the ``<N>`` priority before the uptime stamp."""
        up = rng.randrange(3600, 20 * 86400) + rng.random()
        lines = [(6, "sysrq: Trigger a crash"), (0, "Kernel panic - not syncing: sysrq triggered crash"),
                 (4, f"CPU: {rng.randrange(96)} PID: {rng.randrange(2000, 90000)} Comm: bash Kdump: loaded Tainted: P"
                     "           OE     5.15.0-119-generic #129-Ubuntu"),
                 (4, "Hardware name: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS 2.1 04/01/2024"), (4, "Call Trace:"),
                 (4, " <TASK>"), (4, " dump_stack_lvl+0x48/0x70"), (4, " panic+0x118/0x2f0"),
                 (4, " sysrq_handle_crash+0x1a/0x20"), (4, " __handle_sysrq.cold+0x4c/0x11f"),
                 (4, " write_sysrq_trigger+0x28/0x40"), (4, " </TASK>")]  # fmt: skip
        return "Panic#1 Part1\n" + "".join(f"<{p}>[{up + n * 0.00003:12.6f}] {m}\n" for n, (p, m) in enumerate(lines))


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
            if form == "ctime":  # dmesg -T: the day space-padded, names in the shell's locale
                days, months = DMESG_LOCALES.get(self.style.dmesg_locale, (DAYS, MONTHS))
                out.append(f"[{days[at.weekday()]} {months[at.month - 1]} {at.day:2d} {at:%H:%M:%S} {at.year}] {m}\n")
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
                out.append(f"{address(self.host)}: kern: {level}: "
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
        templates leave out the host name, or pad before ``kernel:``; where a daemon relays the kernel's
        ring (klogd), the tag carries its pid: ``kernel[854]:``."""
        lines = []
        tag = f"kernel[{self.side.randrange(300, 2000)}]:" if self.side.random() < 0.1 else "kernel:"
        for up, m in self._kernel_sorted(split=True):
            at = self.wall(self.boot + timedelta(seconds=up))
            who = {"host": f" {self.host} ", "nohost": " ", "doublespace": "  "}[self.style.syslog]
            lines.append(f"{MONTHS[at.month - 1]} {at.day:2d} {at:%H:%M:%S}{who}{tag} [{up:12.6f}] {m}\n")
        return "".join(lines)

    def nvrm_grep(self) -> str:
        """What an engineer pasted into the ticket: the NVRM lines of kern.log with the stamps cut off
        (``cut -d' ' -f5-``: ``kernel: NVRM: …``) or the tag too (bare ``NVRM: …``); indented as the
        ticket's markdown kept it, and on some the Xids' PCI ids crossed out (``Xid (PCI:...)``)."""
        bare = self.side.random() < 0.5
        lines = [m for _, m in self._kernel_sorted(split=True) if m.startswith("NVRM: ")]
        if self.style.redacted_pci:
            lines = [re.sub(r"^NVRM: Xid \(PCI:[0-9a-f:]+\)", "NVRM: Xid (PCI:...)", m) for m in lines]
        return "".join(f"{self.style.paste_indent}{'' if bare else 'kernel: '}{m}\n" for m in lines)

    def journal(self) -> str:
        """``journalctl`` text in this host's mode (:data:`styles.JOURNAL`), with its boot markers:
        ``-- Boot <id> --`` before each boot (now and then the all-zero id of systemd 251/252), or
        the older ``-- Reboot --`` between boots, after a few lines of the boot before."""
        rows = [(self.boot + timedelta(seconds=up), f"kernel: {m}") for up, m in self._kernel_sorted(split=True)] + self.services
        form = self.style.journal
        bogus = self.rng.random() < 0.2
        boot_id, prev_id = ("0" * 32, "0" * 32) if bogus else (f"{self.rng.getrandbits(128):032x}", f"{self.rng.getrandbits(128):032x}")
        markers = self.rng.choice(["boot", "boot", "reboot"]) if form in ("short", "short-monotonic", "short-precise") else None
        before = self.rng.random() < 0.4 or markers == "reboot"
        out = []
        if form == "short-iso" and self.rng.random() < 0.5:
            first = self.wall(min(at for at, _ in rows)) if rows else self.wall(self.boot)
            out.append(f"-- Logs begin at {DAYS[first.weekday()]} {first:%Y-%m-%d %H:%M:%S} {first.tzname()}, "
                       f"end at {DAYS[first.weekday()]} {first:%Y-%m-%d %H:%M:%S} {first.tzname()}. --\n")  # fmt: skip
        if markers is not None and before:  # the end of the boot before: a clean shutdown
            if markers == "boot":
                out.append(f"-- Boot {prev_id} --\n")
            up = self.rng.randrange(3600, 30 * 86400)
            for n, m in enumerate(("systemd[1]: Stopping User Manager for UID 1000...",
                                   "systemd-shutdown[1]: Syncing filesystems and block devices.",
                                   "kernel: reboot: Restarting system")):  # fmt: skip
                at = self.boot - timedelta(seconds=90 - n)
                out.append(self._journal_line(form, at, m, up + n))
            if markers == "reboot":
                out.append("-- Reboot --\n")
        if markers == "boot":
            out.append(f"-- Boot {boot_id} --\n")
        wrappable = [False] * len(out)
        for at, m in sorted(rows, key=lambda x: x[0]):
            out.append(self._journal_line(form, at, m, (at - self.boot).total_seconds()))
            wrappable.append(not m.startswith("kernel: "))
        return self._through_terminal(out, wrappable)

    def _through_terminal(self, lines: list[str], wrappable: list[bool]) -> str:
        """The journal text as it was copied (:data:`styles.TERMINAL`): through a pager that cut every
        line at the terminal's width, mid-word; or off a terminal that hard-wrapped long lines, the rest
        on lines with no prefix (as the real paste shows for the services' long lines)."""
        width = self.rng.choice([180, 200, 211])
        if self.style.terminal == "pager":
            return "".join(line if len(line) <= width + 1 else line[:width] + "\n" for line in lines)
        if self.style.terminal == "wrap":
            out = []
            for line, wrap in zip(lines, wrappable, strict=True):
                if wrap and len(line) > width + 1:
                    body = line[:-1]
                    out.append("".join(body[i:i + width] + "\n" for i in range(0, len(body), width)))
                else:
                    out.append(line)
            return "".join(out)
        return "".join(lines)

    def _journal_line(self, form: str, at: datetime, m: str, up: float) -> str:
        shown = self.wall(at)
        # Early in a boot the journal records the name the host had before it was set.
        host = "localhost" if self.style.late_hostname and 0 <= up < 12 else self.host
        if form == "short-iso":
            return f"{shown:%Y-%m-%dT%H:%M:%S%z} {host} {m}\n"
        if form == "short-precise":
            return f"{MONTHS[shown.month - 1]} {shown.day:02d} {shown:%H:%M:%S}.{shown.microsecond:06d} {host} {m}\n"
        if form == "short-monotonic":
            return f"[{up:12.6f}] {host} {m}\n"
        if form == "short-localized":  # LANG of the shell that ran journalctl; no host name
            return f"{LOCAL_MONTHS[self.style.locale][shown.month - 1]} {shown.day:02d} {shown:%H:%M:%S} {m}\n"
        return f"{MONTHS[shown.month - 1]} {shown.day:02d} {shown:%H:%M:%S} {host} {m}\n"

    def journal_export(self) -> bytes:
        """``journalctl -o json`` (compact, or the spaced style of older systemd) or ``-o export``:
        one entry per record with its cursor, both clocks, boot id, transport and priority. One
        message is not UTF-8, as a device's label can be: JSON gives it as an array of byte values,
        export as a binary-safe field (name, newline, 64-bit little-endian length, bytes)."""
        form = self.style.journal
        boot_id, machine = f"{self.rng.getrandbits(128):032x}", f"{self.rng.getrandbits(128):032x}"
        rows: list[tuple[datetime, str, int | None, bytes]] = [
            (self.boot + timedelta(seconds=up), "kernel", None, m.encode()) for up, m in self._kernel_sorted(split=True)
        ]
        for at, m in self.services:
            ident, _, rest = m.partition(": ")
            name, _, pid = ident.partition("[")
            rows.append((at, name, int(pid.rstrip("]")) if pid else None, rest.encode()))
        rows.sort(key=lambda r: r[0])
        if rows:
            middle = rows[len(rows) // 2][0]
            rows.insert(len(rows) // 2, (middle, "systemd-udevd", 812,
                                         b"sdb: Process '/usr/bin/vol_id --label \xe9t\xe9' failed with exit code 2."))  # fmt: skip
        seq, out = self.rng.randrange(1, 1 << 20), []
        for n, (at, ident, pid, message) in enumerate(rows):
            realtime = int(self.wall(at).timestamp() * 1_000_000)
            mono = int((at - self.boot).total_seconds() * 1_000_000)
            error = b"Xid" in message or b"error" in message.lower() or b"failed" in message
            fields: dict[str, str | bytes] = {
                "__CURSOR": f"s={machine};i={seq + n:x};b={boot_id};m={mono:x};t={realtime:x};x={self.rng.getrandbits(64):016x}",
                "__REALTIME_TIMESTAMP": str(realtime), "__MONOTONIC_TIMESTAMP": str(mono), "_BOOT_ID": boot_id,
                "_TRANSPORT": "kernel" if ident == "kernel" else "syslog", "PRIORITY": "3" if error else "6",
                "SYSLOG_FACILITY": "0" if ident == "kernel" else "3", "SYSLOG_IDENTIFIER": ident,
                **({"_PID": str(pid)} if pid is not None else {}), "_HOSTNAME": self.host, "MESSAGE": message,
            }  # fmt: skip
            out.append(_journal_entry(fields, form))
        return b"".join(out)

    def job_log(self) -> str:
        """The job's output on this host: each line behind its launcher's prefix (and, copied out of a
        log viewer, behind the viewer's line number)."""
        pids = {g.rank: g.pid for g in self.gpus}
        out = []
        for n, (_, rank, line) in sorted(enumerate(self.job), key=lambda x: x[1][0]):
            text = f"{launcher_prefix(self.style, self.host, rank, pids.get(rank) if rank is not None else None)}{line}"
            # (a prefix so long that the message starts on the terminal's second row is left whole)
            whole = n not in self.wrapped or "Watchdog caught" not in text[:TERMINAL_COLUMNS] or self.style.line_numbers
            out.append(text if whole else "\n".join(hard_wrap(text, self.style.job_wrap)))
        if self.style.line_numbers:
            out = [f"[{self.style.line_numbers + i}] {text}" for i, text in enumerate(out)]
        return "".join(f"{text}\n" for text in out)

    def unreachable(self) -> str | None:
        """What ``nvidia-smi`` prints instead of a dump when a GPU it enumerates does not answer (half
        the time after a GPU fell off the bus; otherwise it leaves the GPU out)."""
        lost = [g for g in self.gpus if g.lost]
        if lost and self.rng.random() < 0.5:
            return f"Unable to determine the device handle for GPU{lost[0].domain}:{lost[0].bus.upper()}:00.0: Unknown Error\n"
        return None

    def nvidia_smi(self, at: datetime) -> str:
        present = [g for g in self.gpus if not g.lost]
        at = self.wall(at)
        column = self.style.smi_column  # where the colon sits: 32 (304.x), 36 (325-418), 42 (450+)
        new = self.style.smi_driver == "575" and column == 42
        # The older layouts are pre-Ampere drivers': "Clocks Throttle Reasons", retired pages instead of
        # remapped rows (and 304.x's four-digit PCI domain in the GPU's heading).
        driver = {32: "304.137", 36: "418.87.01"}.get(column, "575.57.08" if new else "550.90.07")
        reasons = "Clocks Event Reasons" if column == 42 else "Clocks Throttle Reasons"

        def kv(name: str, value: object, indent: int = 4) -> str:  # a name longer than the column keeps a space
            return f"{' ' * indent}{name:<{max(column - indent, len(name) + 1)}}: {value}"

        out = ["==============NVSMI LOG==============", "", kv("Timestamp", ctime(at), 0), kv("Driver Version", driver, 0),
               *([kv("CUDA Version", "12.9" if new else "12.4", 0)] if column == 42 else []), "",
               kv("Attached GPUs", len(present), 0)]  # fmt: skip
        # 450+ on Hopper: MIG mode, the inforom's BBX flush, GPU C2C mode (575), the SRAM half of the
        # ECC counts with its sources, the NVSwitch fabric (PROVENANCE: sections by generation)
        hopper_head = ["    MIG Mode", kv("Current", "Disabled", 8), kv("Pending", "Disabled", 8),
                       *([kv("GPU C2C Mode", "N/A")] if new else []), "    Inforom BBX Object Flush",
                       kv("Latest Timestamp", f"{at:%Y/%m/%d %H:%M:%S}.{at.microsecond // 1000:03d}", 8),
                       kv("Latest Duration", "88355 us", 8)] if column == 42 else []  # fmt: skip
        sram = [kv(f"SRAM {n}", 0, 12) for n in ("Correctable", "Uncorrectable Parity", "Uncorrectable SEC-DED")] if column == 42 else []
        sram_sources = ([kv("SRAM Threshold Exceeded", "No", 12), "        Aggregate Uncorrectable SRAM Sources",
                         *(kv(f"SRAM {n}", 0, 12) for n in ("L2", "SM", "Microcontroller", "PCIE", "Other"))]
                        if column == 42 else [])  # fmt: skip
        for g in present:
            if column == 42:
                memory = ["    Remapped Rows", kv("Correctable Error", 0, 8), kv("Uncorrectable Error", 1 if g.remap_pending else 0, 8),
                          kv("Pending", "Yes" if g.remap_pending else "No", 8), kv("Remapping Failure Occurred", "No", 8)]  # fmt: skip
            else:  # a bad page waits for retirement; 450+ drivers say "Remapped Rows : N/A" on these GPUs
                memory = ["    Retired Pages", kv("Single Bit ECC", 0, 8), kv("Double Bit ECC", 1 if g.remap_pending else 0, 8),
                          kv("Pending Page Blacklist", "Yes" if g.remap_pending else "No", 8),
                          *([kv("Remapped Rows", "N/A")] if column == 36 else [])]  # fmt: skip
            out += [
                f"GPU {g.nvml[4:] if column == 32 else g.nvml}",
                kv("Product Name", PRODUCT), kv("Serial Number", g.card.serial), kv("GPU UUID", g.card.uuid),
                kv("Minor Number", g.minor), *hopper_head, kv("Fan Speed", "N/A"), "    PCI", kv("Bus Id", g.nvml, 8),
                kv("Replays Since Reset", self.rng.choice([1, 2, 5]) if self.rng.random() < 0.03 else 0, 8),
                f"    {reasons}", kv("Idle", "Not Active", 8), kv("SW Power Cap", "Not Active", 8),
                kv("HW Slowdown", "Active" if g.thermal or g.power_brake else "Not Active", 8),
                kv("HW Thermal Slowdown", "Active" if g.thermal else "Not Active", 12),
                kv("HW Power Brake Slowdown", "Active" if g.power_brake else "Not Active", 12),
                kv("SW Thermal Slowdown", "Not Active", 8),
                "    ECC Errors", "        Volatile", *sram, kv("DRAM Correctable", 0, 12), kv("DRAM Uncorrectable", g.dbe, 12),
                "        Aggregate", *sram, kv("DRAM Correctable", 0, 12), kv("DRAM Uncorrectable", g.dbe, 12),
                *sram_sources, *memory, "    Temperature", kv("GPU Current Temp", _or_unknown(f"{g.temp} C", g.hung), 8), kv("GPU Shutdown Temp", "92 C", 8),
                kv("GPU Slowdown Temp", "89 C", 8),
                "    GPU Power Readings", kv("Power Draw", _or_unknown(f"{self.rng.randrange(90, 700)}.{self.rng.randrange(100):02d} W", g.hung), 8),
                kv("Current Power Limit", "700.00 W", 8),
                # 575 answers the old reset query with an error string, and says it in the new fields.
                "    GPU Reset Status", kv("Reset Required", "Requested functionality has been deprecated" if new else "No", 8),
                kv("Drain and Reset Recommended", "Requested functionality has been deprecated" if new else "No", 8),
                *(["    GPU Recovery Action", kv("Action", "None", 8)] if new else []),
                *(["    Fabric", kv("State", "Completed", 8), kv("Status", "Success", 8)] if column == 42 else []), "",
            ]  # fmt: skip
        return "\n".join(out) + "\n"

    def nvidia_smi_xml(self, at: datetime) -> str:
        """``nvidia-smi -q -x``: DTD v12 with its DOCTYPE (``xml-v12``), v11 (515: a declaration
        without encoding, ``clocks_throttle_reasons``), v13 (595), a bare declaration with no encoding
        (``xml-bare``), or no DOCTYPE (``xml-nodoctype``); tabs or four spaces. The pre-Ampere layouts:
        v9 (390.x) and v10 (430.x) with retired pages and the per-structure ECC counts, v11 with retired
        pages beside a scalar ``<remapped_rows>N/A</remapped_rows>``. Now and then the UUIDs are
        redacted (``GPU-xxxxx11f-…``), as users paste them."""
        present = [g for g in self.gpus if not g.lost]
        form, ind = self.style.smi_form, "\t" if self.rng.random() < 0.5 else "    "
        redact = self.side.random() < 0.1
        if ind == "    " and self.side.random() < 0.3:  # some versions indent by eight spaces
            ind = " " * 8

        def el(depth: int, tag: str, value: object = None, children: list[str] | None = None) -> list[str]:
            pad = ind * depth
            if children is None:
                return [f"{pad}<{tag}>{value}</{tag}>"]
            return [f"{pad}<{tag}>", *children, f"{pad}</{tag}>"]

        def active(on: bool) -> str:
            return "Active" if on else "Not Active"

        dtd = {"xml-v9": 9, "xml-v10": 10, "xml-v11": 11, "xml-v12": 12, "xml-v13": 13}.get(form)
        old = dtd is not None and dtd <= 11  # a pre-Ampere GPU's layout
        bare = form in ("xml-bare", "xml-v9", "xml-v10", "xml-v11", "xml-v13")
        head = ['<?xml version="1.0" ?>'] if bare else ['<?xml version="1.0" encoding="UTF-8"?>']
        if dtd:
            head.append(f'<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v{dtd}.dtd">')
        driver, cuda = {9: ("390.157", None), 10: ("430.64", "10.1"), 11: ("515.105.01", "11.7"),
                        13: ("595.84", "13.1")}.get(dtd or 12, ("550.90.07", "12.4"))  # fmt: skip
        body = [*el(1, "timestamp", ctime(self.wall(at))), *el(1, "driver_version", driver),
                *(el(1, "cuda_version", cuda) if cuda else []), *el(1, "attached_gpus", len(present))]  # fmt: skip
        why = "clocks_throttle_reason" if old else "clocks_event_reason"  # renamed in 530
        for g in present:
            bus = g.nvml
            reasons = [*el(3, f"{why}_gpu_idle", "Not Active"), *el(3, f"{why}_sw_power_cap", "Not Active"),
                       *el(3, f"{why}_hw_slowdown", active(g.thermal or g.power_brake)),
                       *el(3, f"{why}_hw_thermal_slowdown", active(g.thermal)),
                       *el(3, f"{why}_hw_power_brake_slowdown", active(g.power_brake)),
                       *el(3, f"{why}_sw_thermal_slowdown", "Not Active")]  # fmt: skip
            ecc = [*el(3, "dram_correctable", 0), *el(3, "dram_uncorrectable", g.dbe)]
            if dtd in (9, 10):  # per structure, with a total
                ecc = [*el(3, "single_bit", children=[f"{ind}{x}" for x in [*el(3, "device_memory", 0), *el(3, "total", 0)]]),
                       *el(3, "double_bit", children=[f"{ind}{x}" for x in [*el(3, "device_memory", g.dbe),
                                                                             *el(3, "total", g.dbe)]])]  # fmt: skip
            if old:
                pages = [*el(3, "multiple_single_bit_retirement", children=[*el(4, "retired_count", 0), *el(4, "retired_pagelist", "")]),
                         *el(3, "double_bit_retirement", children=[*el(4, "retired_count", 1 if g.remap_pending else 0),
                                                                   *el(4, "retired_pagelist", "")]),
                         *el(3, "pending_retirement", "Yes" if g.remap_pending else "No")]  # fmt: skip
                memory = [*el(2, "retired_pages", children=pages), *(el(2, "remapped_rows", "N/A") if dtd == 11 else [])]
            else:
                memory = el(2, "remapped_rows", children=[*el(3, "remapped_row_corr", 0),
                                                          *el(3, "remapped_row_unc", 1 if g.remap_pending else 0),
                                                          *el(3, "remapped_row_pending", "Yes" if g.remap_pending else "No"),
                                                          *el(3, "remapped_row_failure", "No")])  # fmt: skip
            uuid = g.card.uuid
            if redact:  # as pasted into a ticket: the middle of each group crossed out
                uuid = "GPU-" + "-".join(p[:len(p) // 2] + "x" * (len(p) - len(p) // 2) for p in uuid[4:].split("-"))
            gpu = [
                *el(2, "product_name", PRODUCT), *el(2, "serial", g.card.serial), *el(2, "uuid", uuid),
                *el(2, "minor_number", g.minor),
                *(el(2, "mig_mode", children=[*el(3, "current_mig", "Disabled"), *el(3, "pending_mig", "Disabled")])
                  if not old else []),
                *el(2, "pci", children=[*el(3, "pci_bus", g.bus.upper()), *el(3, "pci_bus_id", bus),
                                        *el(3, "replay_counter", 0), *el(3, "replay_rollover_counter", 0)]),
                *el(2, f"{why}s", children=reasons),
                *el(2, "ecc_errors", children=[*el(3, "volatile", children=[f"{ind}{x}" for x in ecc]),
                                               *el(3, "aggregate", children=[f"{ind}{x}" for x in ecc])]),
                *memory,
                *el(2, "temperature", children=[*el(3, "gpu_temp", f"{g.temp} C"), *el(3, "gpu_temp_max_threshold", "92 C"),
                                                *el(3, "gpu_temp_slow_threshold", "89 C")]),
                *el(2, "gpu_power_readings", children=[
                    *el(3, "power_draw", f"{self.rng.randrange(90, 700)}.{self.rng.randrange(100):02d} W"),
                    *el(3, "current_power_limit", "700.00 W")]),
            ]  # fmt: skip
            body += [f'{ind}<gpu id="{bus}">', *gpu, f"{ind}</gpu>"]
        return "\n".join([*head, "<nvidia_smi_log>", *body, "</nvidia_smi_log>"]) + "\n"

    def nvidia_smi_csv(self, start: datetime, end: datetime) -> str:
        """A ``nvidia-smi --query-gpu=timestamp,index,pci.bus_id,serial,temperature.gpu,power.draw,
        utilization.gpu,ecc.errors.uncorrected.volatile.total --format=csv -l 60`` loop: the header
        (with units) once, then every GPU each minute, units repeated in the values, ``[N/A]`` where a
        GPU cannot say; a GPU that fell off the bus stops answering, and ECC counts show only after
        the failure."""
        out = ["timestamp, index, pci.bus_id, serial, temperature.gpu, power.draw [W], utilization.gpu [%], "
               "ecc.errors.uncorrected.volatile.total"]  # fmt: skip
        at, samples = max(start, end - timedelta(minutes=30)), 0
        while at <= end and samples < 40:
            shown = self.wall(at)
            after = at >= end - timedelta(minutes=10)  # the failure came 12-22 minutes before the end
            for g in self.gpus:
                if g.lost and at >= end - timedelta(minutes=23):
                    continue
                power = "[N/A]" if self.rng.random() < 0.02 else f"{self.rng.randrange(90, 700)}.{self.rng.randrange(100):02d} W"
                temp = g.temp if g.thermal else min(g.temp, 45 + self.rng.randrange(8))
                out.append(f"{shown:%Y/%m/%d %H:%M:%S}.{shown.microsecond // 1000:03d}, {g.minor}, "
                           f"{g.nvml}, {g.card.serial}, {temp}, {power}, "
                           f"{self.rng.randrange(85, 100)} %, {g.dbe if after else 0}")  # fmt: skip
            at, samples = at + timedelta(seconds=60), samples + 1
        return "\n".join(out) + "\n"


def _or_unknown(value: str, hung: bool) -> str:
    """What ``nvidia-smi`` reads from a sensor of a GPU whose firmware does not answer."""
    return "Unknown Error" if hung else value


#: The terminal's width in the copies of job output that hard-wrap (PROVENANCE: 116 columns).
TERMINAL_COLUMNS = 116


def hard_wrap(text: str, how: str, width: int = TERMINAL_COLUMNS) -> list[str]:
    """``text`` as a terminal of ``width`` columns shows it, copied: ``words`` breaks between words and
    pads each row with spaces to the width; ``chars`` cuts every width columns, mid-token (``OpTy`` /
    ``pe=BROADCAST``)."""
    if how == "chars":
        return [text[i : i + width] for i in range(0, len(text), width)]
    rows, row = [], ""
    for word in text.split(" "):  # as ``fold -s``: a row keeps the space it broke at
        if row and len(row) + len(word) > width:
            rows.append(row.ljust(width))
            row = ""
        row += f"{word} "
    return [*rows, row[:-1]]


def _journal_entry(fields: dict[str, str | bytes], form: str) -> bytes:
    """One journal entry in ``json`` (compact), ``json-spaced`` (older systemd) or ``export`` form."""
    import json
    import struct

    if form == "export":
        out = b""
        for key, value in fields.items():
            raw = value if isinstance(value, bytes) else value.encode()
            try:
                raw.decode("utf-8")
                out += key.encode() + b"=" + raw + b"\n"
            except UnicodeDecodeError:
                out += key.encode() + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
        return out + b"\n"
    values: dict[str, object] = {}
    for key, value in fields.items():
        if isinstance(value, bytes):
            try:
                values[key] = value.decode("utf-8")
            except UnicodeDecodeError:
                values[key] = list(value)
        else:
            values[key] = value
    if form == "json-spaced":
        return ("{ " + ", ".join(f"{json.dumps(k)} : {json.dumps(v, ensure_ascii=False)}" for k, v in values.items())
                + " }\n").encode()  # fmt: skip
    return (json.dumps(values, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


__all__ = ["GPU_BUSES", "Gpu", "HostLog", "aer_record", "mmu_fault", "nvlink5", "xid_line"]
