"""systemd journal exports: ``journalctl`` text modes, ``-o json`` and ``-o export``.

Producers: ``journalctl`` (systemd 2xx): ``short`` (no year: give ``year``, or it comes from another
stamp in the file, else ``ts`` stays null with ``detail.stamp``), ``short-iso``, ``short-iso-precise``,
``short-precise``, ``short-full``, ``short-monotonic``, ``short-unix``, ``with-unit``, ``cat``; markers
``-- Boot <id> --``, ``-- Reboot --``, ``-- Logs begin at … --``, ``-- Journal begins at … --``,
``-- No entries --``; pager-cut and terminal-wrapped lines. ``-o json`` (compact or the older spaced
style; ``MESSAGE`` as a byte array when it is not UTF-8), ``-o json-pretty`` (also cut off inside its last
object), ``-o verbose`` (the cursor's ``t=``/``m=``/``b=`` and the indented ``KEY=value`` fields) and
``-o export`` (``KEY=value`` lines, binary-safe ``KEY\\n<u64 length><bytes>`` fields, entries separated by
a blank line). The ``-- Logs begin at … --`` header dates year-less ``short`` stamps (and gives their
zone when it names one offset, see ``data/zones.toml``). Pastes: lines with their time and host cut off
(``nv-fabricmanager[3228]: …``), behind ``> `` or ``grep -n``'s ``15712:``. The fabric manager's and the
DCGM host engine's own log files are read as those services' entries.

Rows: kernel-transport entries (identifier ``kernel``, or ``_TRANSPORT=kernel``) go through the kernel
families (:mod:`forensics.sources.kernel`, same grammar, same kinds); service entries through
``grammars/journal.lark``: ``svc.failed`` (unit failures, non-zero exits, restart loops; systemd 219 to
255 wordings), ``svc.fabricmanager``, ``svc.kubelet`` (kubelet, or inside k3s / rke2 / hyperkube /
kubelite; klog I-lines are not errors, F-lines critical), ``svc.container_runtime`` (also kubelet's PLEG
stuck and runtime down), ``svc.device_plugin`` (also kubelet's device-plugin failures),
``svc.persistenced``, ``svc.dcgm``, ``svc.slurm`` (slurmd/slurmctld ``error:``/``fatal:``), each with
``detail.unit``; ``gpu.sxid`` for the SXids the fabric manager reports and ``gpu.driver`` for udev's
failed NVIDIA modprobe/mknod and Xorg's ``(EE) NVIDIA`` init failures; everything else is ``other``. Every row's detail
carries ``boot`` (0, 1, … in file order: boot markers, ``_BOOT_ID`` changes, uptime going backwards)
and, where known, ``boot_id``. ``uptime_s`` comes from monotonic stamps; a step back starts a boot only
when the uptime falls below half or the kernel prints ``Linux version`` (kernel entries carry the
kernel's clock, userspace ones CLOCK_MONOTONIC: they step back a little inside one boot).

Large exports: :func:`iter_parse` reads ``-o json`` and ``-o export`` as a stream, in chunks of
:data:`CHUNK_ENTRIES` entries, carrying each chunk's last record (it may continue in the next entries)
and the boot numbering over; ``forensics parse`` writes the chunks as they come, so memory stays bounded.

Example (``-o short``, the fabric manager on a machine without NVSwitches)::

    Sep 18 03:19:01 ubuntu2404 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE

becomes ``kind=svc.failed severity=error`` with ``detail.unit = "nvidia-fabricmanager.service"``,
``detail.status = 1``.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import struct
import tomllib
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources
from typing import Any, BinaryIO

import polars as pl
import pyarrow as pa

from ..families import Families, row
from ..pci import canonical_bdf
from ..reading import envelope
from ..reading.base import SourceResult
from ..reading.fields import to_int
from ..regex import ascii_classes
from . import kernel

NAME = "journal"
FORMS = (
    "journalctl -o short (year from context), short-iso, short-iso-precise, short-precise, short-full",
    "journalctl -o short-monotonic, short-unix, with-unit, cat",
    "markers: -- Boot <id> --, -- Reboot --, -- Logs begin at … --, -- No entries --",
    "journalctl -o json (compact and spaced; MESSAGE as a byte array), json-pretty, verbose",
    "pastes: no time/host (ident[pid]: msg), '> ' quotes, grep -n prefixes",
    "fabricmanager.log and nv-hostengine.log lines (as those services' entries)",
    "journalctl -o export (binary-safe fields)",
)

_MARKER = re.compile(r"^-- (?:Boot (?P<boot>[0-9a-f]{32})|(?P<reboot>Reboot)|Logs begin at |Journal begins at |No entries)")
_SIGNALS = {"KILL", "ABRT", "SEGV", "TERM", "BUS", "ILL", "FPE", "HUP", "INT", "QUIT", "PIPE", "SYS", "TRAP"}
_LEVELS = ["critical", "critical", "critical", "error", "warning", "notice", "info", "debug"]
_UNIT = r"([\w@:.\\-]+\.(?:service|socket|mount|timer|scope|slice|target|path|device|swap))"


# ---------------------------------------------------------------------------------------- families


def _unit_of(text: str) -> str | None:
    m = re.search(r"^[^:]*: " + _UNIT + ":", text) or re.search(_UNIT, text)
    return m.group(1) if m else None


def _ident(text: str) -> str:
    return text.split(":", 1)[0].split("[", 1)[0]


def _failed(parts: dict[str, Any], text: str) -> dict[str, Any]:
    first = text.split("\n", 1)[0]
    status = re.search(r"status=(\d+)(?:/(\w+))?", first)
    result = re.search(r"Failed with result '([^']+)'", first)
    restarts = re.search(r"restart counter is at (\d+)", first)
    if restarts:
        event, severity = "restart", "warning"
    elif "Start request repeated too quickly" in first:
        event, severity = "start_limit", "error"
    elif first.split(": ", 1)[-1].startswith("Failed to start "):
        event, severity = "start_failed", "error"
    else:
        event, severity = "exited" if status else "failed", "error"
    return row(
        "svc.failed", severity, unit=_unit_of(first), event=event, text=first.split(": ", 1)[-1],
        status=to_int(status[1]) if status else None, signal=status[2] if status and status[2] in _SIGNALS else None,
        result=result[1] if result else None, restarts=to_int(restarts[1]) if restarts else None,
        description=_search(r"Failed to start (.*?)\.?$", first),
    )  # fmt: skip


def _search(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _service(kind: str) -> Any:
    def enrich(parts: dict[str, Any], text: str) -> dict[str, Any]:
        first = text.split("\n", 1)[0]
        ident = _ident(first)
        body = first.split(": ", 1)[-1]
        severity = "error"
        if re.search(r"\bWARN|^W\d{4} |level=warn", body):
            severity = "warning"
        if re.search(r"[Ff]atal|level=fatal|^F\d{4} ", body):
            severity = "critical"
        detail: dict[str, Any] = {"unit": _unit_of(first) or ident, "ident": ident, "text": body}
        for event, pattern in _SERVICE_EVENTS:
            if re.search(pattern, body):
                detail["event"] = event
                break
        if detail.get("event") == "pleg_startup":  # printed once at every kubelet start: not a fault
            severity = "notice"
        elif detail.get("event") == "signal":
            severity = "warning"
        if m := re.search(r"\[(NV_\w+)\]", body):
            detail["nv_status"] = m[1]
        if m := re.search(r"[Ee]xit code:? (-?\d+)", body):
            detail["exit_code"] = to_int(m[1])
        if m := re.search(r"NVSwitch (?:non-)?fatal error (\d+)", body):
            detail["sxid"] = to_int(m[1])
        if m := re.search(r"Received signal (\d+)", body):
            detail["signal"] = to_int(m[1])
        return row(kind, severity, detail)

    return enrich


#: What a service line says happened, for ``detail.event`` (first match wins).
_SERVICE_EVENTS = (
    ("pleg_startup", r"pleg has yet to be successful"),
    ("pleg_unhealthy", r"PLEG is not healthy"),
    ("runtime_down", r"[Cc]ontainer runtime is down|[Cc]ontainer runtime (?:is )?not ready|ContainerRuntimeDown"),
    ("runtime_timeout", r"rpc error: code = (?:DeadlineExceeded|Unavailable)"),
    ("node_not_ready", r"NodeNotReady|[Nn]ode became not ready|[Nn]ode not becoming ready"),
    ("network_not_ready", r"[Nn]etwork not ready|cni plugin not initialized"),
    ("signal", r"Received signal \d+"),
)


def _slurm(parts: dict[str, Any], text: str) -> dict[str, Any]:
    first = text.split("\n", 1)[0]
    ident = _ident(first)
    body = first.split(": ", 1)[-1]
    fatal = re.search(r"^(?:(?:slurm\w*|\[[^\]]*\]): )?(?:fatal|FATAL)\b", body)
    return row(
        "svc.slurm", "critical" if fatal else "error", unit=_unit_of(first) or ident, ident=ident, text=body,
        event="fatal" if fatal else "error", gpu_config=bool(re.search(r"gres|/dev/nvidia|\bgpu", body, re.IGNORECASE)),
    )  # fmt: skip


def _fm_sxid(parts: dict[str, Any], text: str) -> dict[str, Any]:
    """An SXid the fabric manager reports (its log or its journal entries), on the switch's PCI address."""
    first = text.split("\n", 1)[0]
    body = first.split(": ", 1)[-1]
    fatal = not re.search(r"non-fatal", body)
    switch = _search(r"pci bus id ((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])", body)
    code = _search(r"fatal error (\d+)", body)
    return row(
        "gpu.sxid", "critical" if fatal else "warning", gpu=canonical_bdf(switch) if switch else None,
        code=to_int(code) if code else None, text=body, fatal=fatal, link=to_int(_search(r"\bport (\d+)", body)),
        physical_id=to_int(_search(r"physical id (\d+)", body)), fid=to_int(_search(r"\bfid (\d+)", body)),
        unit=_ident(first),
    )  # fmt: skip


def _userspace_driver(parts: dict[str, Any], text: str) -> dict[str, Any]:
    """udev failing to load or mknod an NVIDIA device; Xorg's ``(EE) NVIDIA(GPU-n)`` lines."""
    first = text.split("\n", 1)[0]
    ident = _ident(first)
    body = first.split(": ", 1)[-1]
    gpu = None
    # Xorg prints the bus as decimal bus:device:function (PCI:82:0:0 is 0000:52:00.0).
    if m := re.search(r"\bPCI:(\d+)(?:@(\d+))?:(\d+):(\d+)\b", body):
        bdf = [to_int(m[2] or 0), to_int(m[1]), to_int(m[3]), to_int(m[4])]
        gpu = None if None in bdf else "{:04x}:{:02x}:{:02x}.{}".format(*bdf)
    event = "xorg" if "(EE)" in body else "udev"
    return row("gpu.driver", "error", gpu=gpu, event=event, unit=_unit_of(first) or ident, ident=ident,
               text=body)  # fmt: skip


def _generic(parts: dict[str, Any], text: str) -> dict[str, Any]:
    return row(parts["kind"], "error", text=text.split("\n", 1)[0])


SERVICES = Families(
    "journal",
    {
        "svc.failed": _failed,
        "svc.fabricmanager": _service("svc.fabricmanager"),
        "svc.kubelet": _service("svc.kubelet"),
        "svc.container_runtime": _service("svc.container_runtime"),
        "svc.device_plugin": _service("svc.device_plugin"),
        "svc.persistenced": _service("svc.persistenced"),
        "svc.slurm": _slurm,
        "svc.dcgm": _service("svc.dcgm"),
        "gpu.driver": _userspace_driver,
        "gpu.sxid": _fm_sxid,
    },
    generic=_generic,
)

#: How the records stage treats a journal: service lines through SERVICES, boots in every row's detail.
_RECORDS: dict[str, Any] = {"services": SERVICES, "detail_columns": ("boot", "boot_id")}


# ---------------------------------------------------------------------------------------- modes


def _mode(head: bytes) -> str:
    text = head.lstrip()[:4096]
    if text.startswith(b"{") and (b'"__REALTIME_TIMESTAMP"' in text or b'"MESSAGE"' in text):
        return "json"
    if re.match(rb"(?:__CURSOR|__REALTIME_TIMESTAMP|__MONOTONIC_TIMESTAMP|_BOOT_ID|MESSAGE)=", text):
        return "export"
    if _VERBOSE_HEAD.match(text.decode("utf-8", "replace")):
        return "verbose"
    return "text"


#: ``journalctl -o verbose``: a line per entry with its local time and cursor, then indented fields.
#: The cursor's ``t=`` (realtime) and ``m=`` (monotonic) are hexadecimal microseconds, ``b=`` the boot.
_VERBOSE_HEAD = re.compile(
    r"^[ \t]*\w+ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: \S+)? "
    r"\[s=[0-9a-f]+;i=(?P<i>[0-9a-f]+);b=(?P<b>[0-9a-f]{32});m=(?P<m>[0-9a-f]+);t=(?P<t>[0-9a-f]+);x=[0-9a-f]+\][ \t]*$",
    re.MULTILINE,
)
_VERBOSE_FIELD = re.compile(r"^[ \t]+(?P<k>[A-Z0-9_]+)=(?P<v>.*)$", re.DOTALL)


def sniff(head: str) -> float:
    """How sure we are that a file starting with ``head`` is a journal export (0..1)."""
    raw = head.encode("utf-8", "replace")
    if _mode(raw) != "text":
        return 1.0
    lines = head.splitlines()[:200]
    if not lines:
        return 0.0
    if any(_MARKER.match(line) for line in lines):
        return 1.0
    stamped = [line for line in lines if line[:1] and line[0] in "[0123456789"]
    if stamped and any(sum(1 for line in stamped if re.match(p, line)) >= 0.8 * len(stamped) for _, p, _ in _DAEMON_LOGS):
        return 0.9  # a fabric manager or DCGM host engine log file
    env = envelope.head_split(head)
    idents = env.get_column("ident").to_list()
    services = sum(1 for x in idents if x is not None and not x.startswith("kernel")) / len(idents) if idents else 0.0
    return min(0.8, 0.2 + float(services)) if services > 0.1 else 0.0


def parse(
    data: bytes,
    *,
    file: str,
    incident: str = "",
    host: str | None = None,
    year: int | None = None,
    timezone: str | None = None,
    on_error: str = "keep",
    full: bool = False,
    all_lines: bool = False,
) -> SourceResult:
    """Parse a journal export (any mode) into ``events`` rows (see the module docstring). A text mode
    gives the records of interest (:mod:`.interest`), or every record with ``all_lines``."""
    mode = _mode(data[:65536])
    if mode == "text":
        return kernel.combine(list(iter_parse_text(io.BytesIO(data).read, file=file, incident=incident, host=host,
                                                   year=year, timezone=timezone, on_error=on_error, full=full,
                                                   all_lines=all_lines)))  # fmt: skip
    chunks = list(iter_parse(io.BytesIO(data), file=file, incident=incident, host=host, year=year,
                             timezone=timezone, on_error=on_error, full=full, mode=mode))  # fmt: skip
    return combine(chunks)


#: What a paste puts before every journal line: a markdown/e-mail quote, ``grep -n``'s line number
#: (``15712:`` on a matching line, ``15711-`` on a context line before a month name).
_PASTE_PREFIXES = (rb"> ?", rb"\d+:(?=\D)|\d+-(?=[^\W\d])")


def unquote(data: bytes) -> bytes:
    """``data`` without the prefix a paste put before (nearly) every line, so that the journal's own
    stamp, host and identifier open each line again.

    >>> unquote(b"> Feb 12 10:02:01 n1 kubelet[1]: x\\n> Feb 12 10:02:06 n1 kubelet[1]: y\\n")
    b'Feb 12 10:02:01 n1 kubelet[1]: x\\nFeb 12 10:02:06 n1 kubelet[1]: y\\n'
    """
    for rx in _paste_prefixes(data[:65536]):
        data = rx.sub(b"", data)
    return data


def _paste_prefixes(head: bytes) -> list[re.Pattern[bytes]]:
    """The prefixes (as patterns that remove them) a paste put before (nearly) every line of ``head``."""
    lines = [line for line in head.split(b"\n")[:200] if line.strip()]
    found = []
    for prefix in _PASTE_PREFIXES if lines else ():
        rx = re.compile(rb"^(?:" + prefix + rb")")
        if sum(1 for line in lines if rx.match(line)) >= 0.8 * len(lines):
            found.append(re.compile(rb"(?m)^(?:" + prefix + rb")"))
    return found


class _Unquoted:
    """``read(n)`` of a text journal with the paste's prefixes (:func:`unquote`, decided from its head)
    taken off every line; ``head`` holds its first 64 KiB as read."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._read = read
        self.head = read(65536)
        self._prefixes = _paste_prefixes(self.head)
        self._raw = self.head  # read, not yet unquoted (a line's start may be in the next block)
        self._out = b""
        self._eof = len(self.head) < 65536

    def read(self, n: int) -> bytes:
        while len(self._out) < n and not (self._eof and not self._raw):
            if not self._eof:
                block = self._read(max(n, 65536))
                self._eof = not block
                self._raw += block
            cut = len(self._raw) if self._eof else self._raw.rfind(b"\n") + 1
            text, self._raw = self._raw[:cut], self._raw[cut:]
            for rx in self._prefixes:
                text = rx.sub(b"", text)
            self._out += text
        out, self._out = self._out[:n], self._out[n:]
        return out


def iter_parse_text(
    read: Callable[[int], bytes],
    *,
    file: str,
    year: int | None = None,
    timezone: str | None = None,
    chunk_bytes: int | None = None,
    **options: Any,
) -> Iterator[SourceResult]:
    """Parse a journal in a text mode (``short*``, ``cat``, ``with-unit``; also syslog files that name their
    services) from ``read(n)`` in chunks cut where a record starts, as the kernel source reads its logs
    (:func:`.kernel.iter_parse`), holding one chunk at a time. The ``-- Logs begin at … --`` header of its
    head gives the year and zone not given; boot numbers continue across chunks."""
    unquoted = _Unquoted(read)
    if year is None or timezone is None:
        header_year, header_zone = header_context(unquote(unquoted.head).decode("utf-8", "replace"))
        year = year if year is not None else header_year
        timezone = timezone if timezone is not None else header_zone
    yield from kernel.iter_parse(unquoted.read, file=file, chunk_bytes=chunk_bytes, year=year, timezone=timezone,
                                 stamps=_DAEMON_STAMPS, with_envelope=_Boots(), **options, **_RECORDS)  # fmt: skip


_HEADER = re.compile(
    r"^[ \t>]*-- (?:Logs begin at|Journal begins at) \w+ (?P<y0>\d{4})-(?P<m0>\d\d)-(?P<d0>\d\d) [\d:]+(?: (?P<z0>[A-Za-z]+|[+-]\d\d(?::?\d\d)?))?"
    r"(?:, (?:end|ends) at \w+ (?P<y1>\d{4})-(?P<m1>\d\d)-\d\d [\d:]+(?: (?P<z1>[A-Za-z]+|[+-]\d\d(?::?\d\d)?))?)?\. --",
    re.MULTILINE,
)
_SHORT_STAMP = re.compile(r"^[ \t>]*(?P<mon>[^\s\d]\S*?|\d{1,2}[月월]) +(?P<day>\d{1,2}) \d\d:\d\d", re.MULTILINE)


def header_context(head: str) -> tuple[int | None, str | None]:
    """The year of the first entry and the zone that journalctl's ``-- Logs begin at … --`` header tells.

    The header's dates carry the year that ``short`` stamps lack: the entries end by the ``end at`` date
    (a first entry in a later month than that is from the year before), or, under ``-f`` where only
    ``Logs begin at`` is printed, fall after the begin date. The zone is the header's (``+08``, ``PST``:
    see ``data/zones.toml``), when it names one offset.

    >>> header_context("-- Logs begin at Sun 2019-09-29 14:14:25 PST, end at Fri 2019-10-04 02:06:33 PST. --\\nOct 04 02:01:04 h k: x")
    (2019, 'Etc/GMT+8')
    """
    m = _HEADER.search(head)
    if m is None:
        return None, None
    first = _SHORT_STAMP.search(head, m.end())
    month = envelope.month_numbers().get(first["mon"].lower().rstrip(".")) if first else None
    if m["y1"]:  # at most four digits each (the pattern's): int() cannot fail
        year = int(m["y1"]) - (1 if month is not None and month > int(m["m1"]) else 0)
    else:
        begin = (int(m["m0"]), int(m["d0"]))
        after = month is None or (month, int(first["day"])) >= begin  # type: ignore[index]
        year = int(m["y0"]) + (0 if after else 1)
    return year, _zone(m["z1"] or m["z0"])


def _zone(name: str | None) -> str | None:
    if not name:
        return None
    if m := re.fullmatch(r"([+-])(\d\d)(?::?00)?", name):
        hours = int(m[2])  # two digits
        return "UTC" if hours == 0 else f"Etc/GMT{'-' if m[1] == '+' else '+'}{hours}"
    return _zones().get(name.upper())


@cache
def _zones() -> dict[str, str]:
    table = tomllib.loads(resources.files("forensics.data").joinpath("zones.toml").read_text("utf-8"))
    return dict(table["zones"])


#: The largest binary field an export may hold; a larger length means a corrupt stream.
_MAX_FIELD = 64 * 1024 * 1024

#: Entries per chunk when a JSON or export journal is parsed as a stream.
CHUNK_ENTRIES = 100_000


def iter_parse(
    stream: BinaryIO,
    *,
    file: str,
    incident: str = "",
    host: str | None = None,
    year: int | None = None,
    timezone: str | None = None,
    on_error: str = "keep",
    full: bool = False,
    chunk_entries: int = CHUNK_ENTRIES,
    mode: str | None = None,
) -> Iterator[SourceResult]:
    """Parse a ``-o json`` or ``-o export`` journal from ``stream`` in chunks of entries, so that memory
    stays bounded whatever the file's size. Each result holds the rows of whole records; the counts of
    the last one (``lines``) are the file's. Boot numbers continue across chunks.
    """
    if mode is None:  # (a stream that cannot be peeked at, io.BytesIO, is read through a buffer that can)
        if not hasattr(stream, "peek"):
            stream = io.BufferedReader(stream, 1 << 16)  # type: ignore[arg-type]
        mode = _mode(stream.peek(65536)[:65536])  # type: ignore[attr-defined]
    counts = _Counts()
    readers = {"json": _iter_json_entries, "verbose": _iter_verbose_entries}
    entries = readers.get(mode, _iter_export_entries)(stream, counts)
    boots: dict[str, int] = {}
    last_boot = 0
    pending: list[dict[str, Any]] = []
    done = False
    while not done:
        batch = pending + list(itertools.islice(entries, chunk_entries))
        done = len(batch) == len(pending)
        if not batch:
            break
        env = _entries_frame(batch, boots=boots, default_boot=last_boot)
        grouped = kernel.group_records(env, env.get_column("msg")).with_row_index("i").with_columns(i=pl.col("line"))
        if not done:
            # The last record may go on in the next entries (a kernel block split over entries): keep it back.
            last_rec = grouped.get_column("rec").max()
            keep = grouped.get_column("rec") == last_rec
            first_kept = int(keep.arg_true()[0])
            pending = batch[first_kept:]
            if first_kept == 0:  # the batch is one unfinished record: read on before emitting
                continue
            grouped = grouped.filter(~keep)
            last_boot = int(env.get_column("boot")[first_kept - 1])
        else:
            pending = []
        result = kernel.parse_records(
            grouped, file=file, incident=incident, host=host, year=year, timezone=timezone, on_error=on_error,
            full=full, lines=counts.lines, bad_utf8=counts.bad_utf8, **_RECORDS,
        )  # fmt: skip
        if counts.broken:
            note = f"{counts.broken} entr{'y' if counts.broken == 1 else 'ies'} could not be decoded and were kept as text"
            result.error = f"{result.error}; {note}" if result.error else note
        yield result


def combine(chunks: list[SourceResult]) -> SourceResult:
    """One result from the chunks of one file."""
    if not chunks:
        return SourceResult(kernel.events_table([]), lines=0, records=0, unparsed=0, error=None)
    last = chunks[-1]
    errors = [c.error for c in chunks if c.error]
    return SourceResult(
        pa.concat_tables([c.events for c in chunks]), lines=last.lines, records=sum(c.records for c in chunks),
        unparsed=sum(c.unparsed for c in chunks), error=errors[-1] if errors else None,
        invalid_utf8_lines=last.invalid_utf8_lines,
    )  # fmt: skip


class _Boots:
    """Number the boots of a text journal read in chunks (the ``with_envelope`` of
    :func:`.kernel.parse_text`, called once per chunk in file order): a ``-- Boot --``/``-- Reboot --``
    marker, or the uptime going backwards. The boots counted, the last uptime and boot id carry over."""

    def __init__(self) -> None:
        self.starts = 0  # boots started in the chunks before
        self.offset: int | None = None  # the boots started before the first entry
        self.uptime: float | None = None
        self.boot_id: str | None = None

    def __call__(self, env: pl.DataFrame, lines: pl.Series) -> pl.DataFrame:
        marker = lines.str.extract(r"^-- Boot ([0-9a-f]{32}) --", 1)
        is_boot = lines.str.contains(r"^-- (?:Boot [0-9a-f]{32}|Reboot) --")
        # Kernel entries carry the kernel's clock and userspace ones CLOCK_MONOTONIC: after a suspend, or
        # around journald's "Missed N kernel messages", the stamps step back a little inside one boot. A
        # new boot starts the clock again: the uptime falls to less than half, or the kernel says hello.
        carried = pl.Series([self.uptime], dtype=pl.Float64)
        uptime = pl.concat([carried, env.get_column("uptime_s").cast(pl.Float64)]).forward_fill()
        before, uptime = uptime.shift(1).slice(1), uptime.slice(1)
        hello = lines.str.contains(r"kernel: Linux version \d")
        back = ((uptime < before) & ((uptime < before * 0.5) | hello)).fill_null(False)
        starts = (is_boot | back).cast(pl.Int32).cum_sum() + self.starts
        # A marker before the first entry opens boot 0, not boot 1.
        if self.offset is None:
            first_entry = (~is_boot & (lines.str.strip_chars() != "")).arg_true()
            self.offset = int(starts[int(first_entry[0])]) if first_entry.len() else None
        offset = self.offset if self.offset is not None else int(starts.max() or 0)
        ids = pl.concat([pl.Series([self.boot_id], dtype=pl.String), marker]).forward_fill().slice(1)
        if starts.len():
            self.starts, self.uptime, self.boot_id = int(starts[-1]), uptime[-1], ids[-1]
        return _boots_columns(env, starts - offset, ids.replace("00000000000000000000000000000000", None), lines)


def _boots_columns(env: pl.DataFrame, boot: pl.Series, boot_id: pl.Series, lines: pl.Series) -> pl.DataFrame:
    """The envelope with its boots, journalctl's own lines and the services of lines cut short."""
    # journalctl's own lines (-- Logs begin at … --, -- No entries --) are the journal's, not the kernel's.
    notes = lines.str.contains(r"^[ \t>]*-- (?:Logs begin at |Journal begins at |No entries)")
    ident = pl.when(notes).then(pl.lit("journalctl")).otherwise(env.get_column("ident"))
    # A line whose time and host were cut off still names its service: "nv-fabricmanager[3228]: …".
    bare = env.get_column("msg").str.extract_groups(ascii_classes(envelope.BARE_IDENT))
    named = env.get_column("ident").is_null() & bare.struct.field("i").is_not_null()
    env = env.with_columns(
        boot=boot.clip(0), boot_id=boot_id,
        host=pl.when(env.get_column("host").str.contains(r"^(?:\.\.\.|…)$")).then(None).otherwise(env.get_column("host")),
        ident=pl.when(named).then(bare.struct.field("i").str.replace(r"^.*/", "")).otherwise(ident),
        ipid=pl.when(named).then(bare.struct.field("p").cast(pl.Int64, strict=False)).otherwise(env.get_column("ipid")),
        msg=pl.when(named).then(bare.struct.field("m")).otherwise(env.get_column("msg")),
    )  # fmt: skip
    return _daemon_logs(env)


#: The NVIDIA daemons' own log files, read as their journal entries: (identifier, line, stamp kind).
#: /var/log/fabricmanager.log: ``[Feb 27 2025 15:10:02] [ERROR] [tid 12727] detected NVSwitch …``;
#: /var/log/nv-hostengine.log (DCGM 2.x/3.x): ``2022-03-03 01:22:10.481 ERROR [11:11] Cannot initialize …``.
_DAEMON_LOGS = (
    ("nv-fabricmanager", r"^\[(?P<mon>[^\W\d]{3}) +(?P<day>\d{1,2}) (?P<year>\d{4}) (?P<hms>\d\d:\d\d:\d\d)\] "
                         r"\[(?P<lvl>[A-Z]+)\] \[tid \d+\] (?P<m>.*)$", "ctime"),
    ("nv-hostengine", r"^(?P<year>\d{4})-(?P<mon>\d\d)-(?P<day>\d\d) (?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?) "
                      r"(?P<lvl>ERROR|WARNING|WARN|INFO|DEBUG|FATAL|CRITICAL) \[\d+:\d+\] (?P<m>.*)$", "iso"),
)  # fmt: skip
#: A line of one of those logs (what opens it is a stamp the envelope does not read).
_DAEMON_STAMPS = ascii_classes("|".join(f"(?:{re.sub(r'[(][?]P<[a-z]+>', '(?:', p)})" for _, p, _ in _DAEMON_LOGS))
_DAEMON_LEVELS = {"FATAL": "critical", "CRITICAL": "critical", "ERROR": "error", "WARNING": "warning", "WARN": "warning",
                  "INFO": "info", "DEBUG": "debug"}  # fmt: skip


def _daemon_logs(env: pl.DataFrame) -> pl.DataFrame:
    """Lines of a daemon's own log file (no identifier of their own) read as that service's entries:
    their stamp carries the year, their level is the entry's."""
    for ident, pattern, kind in _DAEMON_LOGS:
        found = env.get_column("msg").str.extract_groups(ascii_classes(pattern))
        hit = env.get_column("ident").is_null() & found.struct.field("m").is_not_null()
        if not hit.any():
            continue
        f = found.struct.field
        stamp = (
            pl.concat_str(f("mon"), pl.lit(" "), f("day"), pl.lit(" "), f("hms"), pl.lit(" "), f("year")) if kind == "ctime"
            else pl.concat_str(f("year"), pl.lit("-"), f("mon"), pl.lit("-"), f("day"), pl.lit("T"), f("hms"))
        )  # fmt: skip
        env = env.with_columns(
            ident=pl.when(hit).then(pl.lit(ident)).otherwise(env.get_column("ident")),
            stamp=pl.when(hit).then(stamp).otherwise(env.get_column("stamp")),
            stamp_kind=pl.when(hit).then(pl.lit(kind)).otherwise(env.get_column("stamp_kind")),
            stamped=hit | env.get_column("stamped"),
            level=pl.when(hit).then(f("lvl").replace_strict(_DAEMON_LEVELS, default=None)).otherwise(env.get_column("level")),
            msg=pl.when(hit).then(f("m")).otherwise(env.get_column("msg")),
        )  # fmt: skip
    return env


def _decode_message(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):  # journald writes non-UTF-8 messages as arrays of byte values
        try:
            return bytes(v & 0xFF for v in value if isinstance(v, int)).decode("utf-8", "backslashreplace")
        except (TypeError, ValueError):
            return json.dumps(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


class _Counts:
    """What an entry reader saw: lines, entries it could not decode, lines that were not UTF-8."""

    def __init__(self) -> None:
        self.lines = 0
        self.broken = 0
        self.bad_utf8 = 0


def _iter_json_entries(stream: BinaryIO, counts: _Counts) -> Iterator[dict[str, Any]]:
    """Entries of ``journalctl -o json``, one per line, or of ``-o json-pretty`` (an object over many
    lines, closed by a ``}`` alone on its line), read as the stream goes. A cut-off pretty object keeps
    the fields it has."""
    pretty: list[str] = []
    start = 0
    for n, raw in enumerate(stream):
        counts.lines = n + 1
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "backslashreplace")
            counts.bad_utf8 += 1
        text = text.rstrip("\r\n")
        if pretty:
            pretty.append(text)
            if text.strip() in ("}", "},"):
                yield _json_entry("\n".join(pretty).rstrip().rstrip(","), start, counts)
                pretty = []
            continue
        if not text.strip():
            continue
        if text.strip() == "{":
            pretty, start = [text], n
            continue
        yield _json_entry(text, n, counts)
    if pretty:  # a paste cut inside its last object
        counts.broken += 1
        fields: dict[str, Any] = {}
        for line in pretty[1:]:
            if m := re.match(r'^\s*"(\w+)"\s*:\s*(.*?),?\s*$', line):
                try:
                    fields[m[1]] = json.loads(m[2])
                except ValueError:
                    fields[m[1]] = m[2].strip('"')
        fields["_LINE"] = start
        yield fields


def _json_entry(text: str, line: int, counts: _Counts) -> dict[str, Any]:
    try:
        fields = json.loads(text)
        if not isinstance(fields, dict):
            raise ValueError("not an object")
    except ValueError:
        counts.broken += 1
        fields = {"MESSAGE": text, "_BROKEN": True}
    fields["_LINE"] = line
    return fields


def _iter_verbose_entries(stream: BinaryIO, counts: _Counts) -> Iterator[dict[str, Any]]:
    """Entries of ``journalctl -o verbose``: the cursor line, then ``    KEY=value`` lines; a line of
    neither kind goes on the value before it (a message printed over several lines)."""
    fields: dict[str, Any] = {}
    key = None
    for n, raw in enumerate(stream):
        counts.lines = n + 1
        text = raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
        if (head := _VERBOSE_HEAD.match(text)) is not None:
            if fields:
                yield fields
            fields = {"_LINE": n, "_BOOT_ID": head["b"], "__REALTIME_TIMESTAMP": to_int(head["t"], 16),
                      "__MONOTONIC_TIMESTAMP": to_int(head["m"], 16)}  # fmt: skip
            key = None
        elif (field := _VERBOSE_FIELD.match(text)) is not None and fields:
            key = field["k"]
            fields[key] = field["v"]
        elif fields and key is not None:
            fields[key] = f"{fields[key]}\n{text}"
        elif text.strip():  # text before the first entry
            counts.broken += 1
            yield {"_LINE": n, "MESSAGE": text, "_BROKEN": True}
    if fields:
        yield fields


def _iter_export_entries(stream: BinaryIO, counts: _Counts) -> Iterator[dict[str, Any]]:
    """Entries of ``journalctl -o export``; a binary field is ``KEY\\n`` + u64 LE length + bytes + ``\\n``."""
    fields: dict[str, Any] = {}
    line_no = start_line = 0
    while True:
        line = stream.readline()
        if not line:
            break
        body = line.rstrip(b"\n")
        if not body:
            if fields:
                fields["_LINE"] = start_line
                yield fields
            fields = {}
            line_no += 1
            start_line = line_no
            continue
        eq = body.find(b"=")
        if eq > 0:
            fields[body[:eq].decode("ascii", "replace")] = body[eq + 1 :].decode("utf-8", "backslashreplace")
            line_no += 1
            continue
        # A binary field: the key alone on its line, then the length and the bytes.
        size = stream.read(8)
        if len(size) < 8:
            counts.broken += 1
            fields.setdefault("MESSAGE", (body + size).decode("utf-8", "backslashreplace"))
            break
        (length,) = struct.unpack("<Q", size)
        if length > _MAX_FIELD:  # journald caps fields far below this: the stream is corrupt from here
            counts.broken += 1
            fields.setdefault("MESSAGE", stream.read(_MAX_FIELD).decode("utf-8", "backslashreplace"))
            break
        value = stream.read(length)
        if len(value) < length:
            counts.broken += 1
        stream.read(1)  # the newline after the value
        fields[body.decode("ascii", "replace")] = value.decode("utf-8", "backslashreplace")
        line_no += 1 + value.count(b"\n") + 1
    if fields:
        fields["_LINE"] = start_line
        yield fields
    counts.lines = line_no


def _entries_frame(entries: list[dict[str, Any]], *, boots: dict[str, int], default_boot: int = 0) -> pl.DataFrame:
    """Journal entries (JSON or export fields) as the envelope columns the records stage reads.

    ``boots`` numbers the boot ids in order of appearance and is kept across chunks.
    """
    rows: list[dict[str, Any]] = []
    for e in entries:
        boot_id = e.get("_BOOT_ID")
        if isinstance(boot_id, str) and boot_id.strip("0"):
            boots.setdefault(boot_id, len(boots))
        kernel_entry = e.get("_TRANSPORT") == "kernel" or e.get("SYSLOG_IDENTIFIER") == "kernel"
        ident = "kernel" if kernel_entry else (e.get("SYSLOG_IDENTIFIER") or e.get("_COMM") or e.get("_SYSTEMD_UNIT"))
        priority = to_int(e.get("PRIORITY"))
        realtime = to_int(e.get("__REALTIME_TIMESTAMP"))
        monotonic = to_int(e.get("__MONOTONIC_TIMESTAMP"))
        rows.append({
            "line": e["_LINE"], "host": e.get("_HOSTNAME"), "ident": ident,
            "ipid": to_int(e.get("SYSLOG_PID") or e.get("_PID")),
            "level": _LEVELS[priority] if priority is not None and 0 <= priority < 8 else None,
            "uptime_s": monotonic / 1e6 if monotonic is not None else None,
            "stamp": f"{realtime / 1e6:.6f}" if realtime is not None else None,
            "boot_id": boot_id if isinstance(boot_id, str) and boot_id.strip("0") else None,
            "msg": _decode_message(e.get("MESSAGE")),
        })  # fmt: skip
    df = pl.DataFrame(
        rows,
        schema={"line": pl.Int64, "host": pl.String, "ident": pl.String, "ipid": pl.Int64, "level": pl.String,
                "uptime_s": pl.Float64, "stamp": pl.String, "boot_id": pl.String, "msg": pl.String},  # fmt: skip
    )
    boot = pl.col("boot_id").replace_strict(boots, default=None, return_dtype=pl.Int64).forward_fill().fill_null(default_boot)
    return df.with_columns(
        form=pl.lit("json"), delta_s=pl.lit(None, pl.Float64), caller=pl.lit(None, pl.String),
        stamp_kind=pl.when(pl.col("stamp").is_not_null()).then(pl.lit("unix")), stamped=pl.lit(True),
        kernel_prefix=pl.lit(False), boot=boot,
    )  # fmt: skip

