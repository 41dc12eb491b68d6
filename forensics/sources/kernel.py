"""Kernel logs: ``dmesg`` in every printed form, kern.log/syslog/journal kernel lines, /dev/kmsg, Talos.

Producers and forms: see :mod:`forensics.reading.envelope` (``dmesg``, ``-T``, ``--time-format iso``,
``-x``, ``-r``, printk caller ids, ``--reltime``, ``/dev/kmsg``, RFC 3164/5424 syslog, journalctl
``short*``, ``talosctl dmesg``, unstamped lines; any of them behind a pdsh or clush ``host: `` prefix, the row's
host). Families (``grammars/kernel.lark``): ``gpu.xid``,
``gpu.off_bus``, ``gpu.driver``, ``gpu.sxid``, ``pcie.aer``, ``pcie.link``, ``net.link``, ``net.nic``,
``host.*`` (cpu_throttle, mce, edac, oom_kill, hung_task, soft_lockup, panic, oops, warning, segfault,
boot), ``disk.nvme``, ``disk.io_error``, ``fs.readonly``, ``fs.error``; every other record is ``other``
with a masked ``template``; a record whose family grammar rejects it is ``unparsed``.

Stages, as every source has them: split into records → prefilter → Lark parse → transform → normalize.
Before them a log is cut into chunks where a record starts (:func:`iter_parse`, one chunk held at a
time), and in each chunk only the records with a line of interest (:mod:`.interest`: a family's or a
message catalog's anchor, words of trouble, a boot marker) go through the stages; the other lines are
counted (``lines``), or kept as ``other`` rows with ``all_lines=True``.

* **records**: continuation lines (unstamped indented lines, stack and register dumps, AER detail
  lines, OOM report bodies, EDAC/MCE/mlx5 health dumps, SXid follow-ups; ``data/kernel_records.toml``)
  join the record above them, computed for all lines at once in Polars.
* **prefilter**: one regex made of the grammar's anchor terminals flags the records that may belong to a
  family; only those reach Python.
* **parse**: the record's text goes to the Lark start rules of the families whose anchors it has, in
  grammar order; the first that accepts it gives the kind. :func:`parse_records` with ``full=True``
  runs Lark on every record instead (the reference the fast path is tested against).

Example, one Xid line of a ``dmesg -T`` capture::

    [Fri Apr  5 21:29:39 2024] NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.

becomes ``kind=gpu.xid code=79 gpu=0000:a1:00.0 severity=critical`` with ``detail`` ``{"pid": null,
"process": null, "text": "GPU has fallen off the bus.", "name": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
"action": "RESTART_BM", …}``.
"""

from __future__ import annotations

import io
import json
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from lark import Token, Tree

from .. import catalog
from ..errors import ParseError
from ..families import Families, Parts, row
from ..pci import canonical_bdf, requester_id_bdf
from ..reading import envelope, interest, prefix
from ..reading.base import (SourceResult, collect, count_lines, events_table, json_row, shift_lines, short_host,
                            short_host_of, template, template_expr)
from ..reading.fields import to_int
from ..regex import ascii_classes, first_match, for_python
from ..text import PYTHON_LINES, WHITESPACE, contains, dedent, few, split_lines
from .jobsniff import job_lines

NAME = "kernel"
FORMS = (
    "dmesg [secs.usecs]",
    "dmesg -T / --ctime",
    "dmesg --time-format iso (comma decimals, offsets)",
    "dmesg -x / --decode facility:level",
    "dmesg -r <N> priorities",
    "printk caller ids [  T291]",
    "dmesg --reltime / -d deltas [  +0.000844]",
    "/dev/kmsg records",
    "RFC 3164 syslog / kern.log (with or without host, embedded uptime, localized months)",
    "RFC 5424 syslog",
    "journalctl short, short-iso, short-precise, short-monotonic (kernel lines)",
    "talosctl dmesg",
    "unstamped lines (kernel: …, bare NVRM: …)",
    "pdsh / clush collections (host: before each line)",
)


# ---------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class _RecordRules:
    any_cont: str
    context: dict[str, str]
    heads: dict[str, str]
    last: str  # context lines that end their record (``last = true``)


@cache
def _record_rules() -> _RecordRules:
    data = tomllib.loads(resources.files("forensics.data").joinpath("kernel_records.toml").read_text("utf-8"))
    context: dict[str, list[str]] = {}
    last: list[str] = []
    for block in data["context"]:
        context.setdefault(block["tag"], []).extend(block["patterns"])
        if block.get("last"):
            last.extend(block["patterns"])
    heads: dict[str, list[str]] = {}
    for block in data["head"]:
        heads.setdefault(block["tag"], []).append(block["pattern"])
    return _RecordRules(
        any_cont=_alt(data["any"]),
        context={tag: _alt(p) for tag, p in context.items()},
        heads={tag: _alt(p) for tag, p in heads.items()},
        last=_alt(last) if last else "$^",
    )


def _continuation_patterns() -> list[str]:
    """Every pattern of ``data/kernel_records.toml`` by which a line may continue a record."""
    data = tomllib.loads(resources.files("forensics.data").joinpath("kernel_records.toml").read_text("utf-8"))
    return [*data["any"], *(p for block in data["context"] for p in block["patterns"])]


def _alt(patterns: list[str]) -> str:
    return ascii_classes("|".join(f"(?:{p})" for p in patterns))


#: Up to this many lines :func:`group_records` runs in Python on patterns compiled once per process: the
#: dozen Polars plans of the column path cost a small file more than its lines do.
SMALL_LINES = 256


def group_records(env: pl.DataFrame, raw: pl.Series, *, stamp_share: float | None = None) -> pl.DataFrame:
    """Add ``rec`` (record number, from 0), ``piece`` (the line's text inside its record) and ``kflag`` (the
    kernel prefilter matches the piece) to ``env``. ``stamp_share`` is the share of the file's lines with a
    stamp (by default, of these lines'): a line without one in a stamped file was wrapped."""
    if stamp_share is None:
        stamp_share = env.get_column("stamped").mean() if env.height else 0.0
    if (few(raw, SMALL_LINES) and env.height == raw.len()
            and not (env.get_column("msg").null_count() or env.get_column("stamped").null_count())):
        return _group_small(env, raw, float(stamp_share or 0.0))
    rules = _record_rules()
    msg = pl.col("msg")
    stamped = pl.col("stamped")
    blank = raw.str.strip_chars() == ""
    marker = raw.str.contains(r"^\s*(?:\.\.\.|…)\s*$|^-- .* --\s*$")
    df = env.with_columns(blank=blank, marker=marker, raw_indented=raw.str.contains(r"^\s+\S"))
    # The envelope may have eaten one space of an unstamped line: look at the line as printed.
    indented = ~stamped & pl.col("raw_indented")
    # Inside a record an unstamped line loses the indentation that aligned it under the stamp.
    piece = pl.when(~stamped).then(msg.str.strip_chars_start()).otherwise(msg) if stamp_share < 1 else msg
    # The kernel prefilter, run once here on the piece: ``kflag`` says which records may belong to a
    # family. (A line that may be wrapped has no indentation: its piece is its message.)
    flagged = piece.str.contains(KERNEL.prefilter())
    free = msg.str.contains(rules.any_cont)
    # A line without a stamp in a stamped file was wrapped by a terminal or a pager.
    # (Unless it is a record of its own: a family line pasted without its stamp.)
    wrapped = ~stamped & pl.lit((stamp_share or 0.0) >= 0.5) & ~free & ~msg.str.contains(r"^\s") & ~flagged
    df = (
        df.lazy()
        .with_columns(
            cont0=~pl.col("blank") & ~pl.col("marker") & (indented | wrapped | free),
            kflag=flagged,
            piece=piece,
            tagged=msg.str.contains(_alt([*rules.heads.values(), *rules.context.values()])),
        )
        .pipe(collect, df.height)
    )
    # Head and context tags are rare: find them on the few lines that can have one.
    rows = df.get_column("tagged").arg_true()
    tags = df.select(pl.col("msg").gather(rows)).select(
        htag=_tag_expr(rules.heads, rows.len()),
        ctag=_tag_expr(rules.context, rows.len()),
        last=pl.col("msg").str.contains(rules.last),
    )
    df = df.with_columns(
        envelope.scatter(tags.get_column(name), rows, df.height).alias(name) for name in ("htag", "ctag", "last")
    )
    line_tag = (
        pl.when(pl.col("blank") | pl.col("marker")).then(pl.lit(""))
        .when(pl.col("htag").is_not_null()).then(pl.col("htag"))
        .when(pl.col("ctag").is_not_null() & pl.col("last")).then(pl.lit(""))  # it ends its record
        .when(pl.col("ctag").is_not_null()).then(pl.col("ctag"))
        .when(pl.col("cont0")).then(pl.lit(None, pl.String))
        .otherwise(pl.lit(""))
    )  # fmt: skip
    df = df.with_columns(open_tag=line_tag.forward_fill().shift(1))
    # Whether the open block was opened by its head, or is an orphan (an excerpt cut into a report:
    # "memory: usage …", the task table): a family's own line inside an orphan block (the OOM kill
    # line after the task table of a report pasted without its head) opens the event's record.
    family_line = pl.col("ctag").is_not_null() & pl.col("kflag")
    origin = (
        pl.when(pl.col("blank") | pl.col("marker")).then(pl.lit(""))
        .when(pl.col("htag").is_not_null() | family_line).then(pl.lit("head"))
        .when(pl.col("ctag").is_not_null() & (pl.col("open_tag") != pl.col("ctag")).fill_null(True)).then(pl.lit("orphan"))
        .when(pl.col("ctag").is_not_null() | pl.col("cont0")).then(pl.lit(None, pl.String))
        .otherwise(pl.lit(""))
    )  # fmt: skip
    df = df.with_columns(open_origin=origin.forward_fill().shift(1))
    is_cont = (
        ~pl.col("blank") & ~pl.col("marker") & pl.col("htag").is_null()
        & (pl.col("cont0") | (pl.col("ctag").is_not_null() & (pl.col("open_tag") == pl.col("ctag"))))
        & ~(family_line & (pl.col("open_origin") == "orphan"))
    ).fill_null(False)  # fmt: skip
    start = ~is_cont | (pl.int_range(pl.len()) == 0)
    return df.with_columns(rec=start.cum_sum() - 1, head=start).drop(
        "cont0", "htag", "ctag", "last", "open_tag", "open_origin", "blank", "marker", "tagged", "msg", "raw_indented"
    )


_WS = "[" + re.escape(WHITESPACE) + "]"
_BLANK_OR_MARKER = re.compile(rf"^{_WS}*(?:\.\.\.|…){_WS}*$|^-- .* --{_WS}*$")
_RAW_INDENTED = re.compile(rf"^{_WS}+[^{re.escape(WHITESPACE)}]")


@cache
def _small_rules() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str],
                            tuple[tuple[str, re.Pattern[str]], ...], tuple[tuple[str, re.Pattern[str]], ...]]:  # fmt: skip
    """The patterns of :func:`group_records` in Python's syntax: prefilter, continuation, tagged, last,
    and the head and context tags in order."""
    rules = _record_rules()
    tagged = _alt([*rules.heads.values(), *rules.context.values()])
    return (re.compile(for_python(KERNEL.prefilter())), re.compile(for_python(rules.any_cont)),
            re.compile(for_python(tagged)), re.compile(for_python(rules.last)),
            tuple((k, re.compile(for_python(v))) for k, v in rules.heads.items()),
            tuple((k, re.compile(for_python(v))) for k, v in rules.context.items()))  # fmt: skip


def _group_small(env: pl.DataFrame, raw: pl.Series, stamp_share: float) -> pl.DataFrame:
    """:func:`group_records` of a few lines, in Python: the same columns, line by line (the column path's
    expressions read as the state they carry: the open block's tag and origin)."""
    prefilter, any_cont, tagged, last_rx, heads, context = _small_rules()
    ws = WHITESPACE
    kflags: list[bool] = []
    pieces: list[str] = []
    starts: list[bool] = []
    open_tag: str | None = None  # the forward-filled tag of the lines before (null until one is set)
    open_origin: str | None = None
    for n, (text, msg, stamped) in enumerate(zip(raw.to_list(), env.get_column("msg").to_list(),
                                                 env.get_column("stamped").to_list(), strict=True)):  # fmt: skip
        text = text or ""
        blank = not text.strip(ws)
        marker = _BLANK_OR_MARKER.search(text) is not None
        piece = msg.lstrip(ws) if (not stamped and stamp_share < 1) else msg
        flagged = prefilter.search(piece) is not None
        free = any_cont.search(msg) is not None
        indented = not stamped and _RAW_INDENTED.search(text) is not None
        wrapped = not stamped and stamp_share >= 0.5 and not free and not (msg[:1] and msg[:1] in ws) and not flagged
        cont0 = not blank and not marker and (indented or wrapped or free)
        htag = ctag = None
        last = False
        if tagged.search(msg):
            htag = next((k for k, rx in heads if rx.search(msg)), None)
            ctag = next((k for k, rx in context if rx.search(msg)), None)
            last = last_rx.search(msg) is not None
        family_line = ctag is not None and flagged
        is_cont = (not blank and not marker and htag is None
                   and (cont0 or (ctag is not None and open_tag == ctag))
                   and not (family_line and (open_origin is None or open_origin == "orphan")))  # fmt: skip
        kflags.append(flagged)
        pieces.append(piece)
        starts.append(not is_cont or n == 0)
        # the state the next line sees (the column path's forward fill, shifted by one)
        if blank or marker:
            tag: str | None = ""
        elif htag is not None:
            tag = htag
        elif ctag is not None:
            tag = "" if last else ctag
        else:
            tag = None if cont0 else ""
        if blank or marker:
            origin: str | None = ""
        elif htag is not None or family_line:
            origin = "head"
        elif ctag is not None and open_tag != ctag:
            origin = "orphan"
        else:
            origin = None if (ctag is not None or cont0) else ""
        open_tag = tag if tag is not None else open_tag
        open_origin = origin if origin is not None else open_origin
    recs, rec = [], -1
    for start in starts:
        rec += start
        recs.append(rec)
    # (a frame made of its columns: no plan to run)
    return pl.DataFrame([*(c for c in env.get_columns() if c.name != "msg"),
                         pl.Series("kflag", kflags, dtype=pl.Boolean), pl.Series("piece", pieces, dtype=pl.String),
                         pl.Series("rec", recs, dtype=pl.UInt32), pl.Series("head", starts, dtype=pl.Boolean)])  # fmt: skip


def _tag_expr(tags: dict[str, str], rows: int) -> pl.Expr:
    return first_match(pl.col("msg"), list(tags.items()), rows=rows)


# ---------------------------------------------------------------------------------------- grammar


class _Parts(Parts):
    """The kernel grammar's callbacks: the Xid pid and name fields come back as pairs."""

    def xid_pid(self, children: list[Token]) -> tuple[str, str]:
        return ("pid", str(children[0]))

    def xid_name(self, children: list[Token]) -> tuple[str, str]:
        return ("name", str(children[0]))


# ---------------------------------------------------------------------------------------- families
# Each enricher turns the parsed parts and the record text into the row's kind-specific fields.

_SEVERITY_BY_ACTION = {
    "IGNORE": "warning", "RESTART_APP": "error", "CHECK_APP/CUDA": "error", "WORKFLOW_XID_13": "error",
    "WORKFLOW_XID_31": "error", "WORKFLOW_XID_45": "warning", "RESET_GPU": "critical",
    "RESTART_BM": "critical", "RESTART_VM": "critical", "WORKFLOW_XID_48": "critical",
    "WORKFLOW_NVLINK_ERR": "critical", "WORKFLOW_NVLINK5_ERR": "error", "CONTACT_SUPPORT": "critical",
    "CHECK_MECHANICALS": "critical", "UPDATE_SWFW": "error", "XID_154": "warning",
}  # fmt: skip



def _search(pattern: str, text: str, group: int | str = 1) -> str | None:
    m = re.search(pattern, text)
    return m.group(group) if m else None


def _text_lines(parts: dict[str, Any]) -> list[str]:
    return [str(t) for t in parts["tokens"] if t.type == "TEXT"]


def _xid(parts: dict[str, Any], text: str) -> dict[str, Any]:
    tokens = parts["tokens"]
    bus = next(str(t) for t in tokens if t.type == "XID_BUS")
    code = to_int(next(str(t) for t in tokens if t.type == "INT"))
    fields = dict(p for p in parts["parts"] if isinstance(p, tuple))
    texts = _text_lines(parts)
    body = texts[0].strip() if texts else ""
    pid_text = fields.get("pid", "").strip("'")
    pid = to_int(pid_text) if pid_text.isdigit() else None
    name = fields.get("name")
    process = None if name in (None, "<unknown>") else name
    entry = catalog.xid(code)
    action = entry.immediate_action if entry else None
    detail: dict[str, Any] = {
        "pid": pid, "process": process, "text": body,
        "name": entry.mnemonic if entry else None,
        "description": entry.description if entry else None,
        "action": action,
        "investigatory_action": entry.investigatory_action if entry else None,
        "causes": entry.causes if entry else [],
    }  # fmt: skip
    detail.update(_xid_text_fields(code, body))
    severity = "critical" if code in (48, 79, 95, 140) else _SEVERITY_BY_ACTION.get(action or "", "error")
    if detail.get("fatal") is False:  # an NVLink5 unit line marked Nonfatal: logged, then ignored (FACTS C1d)
        severity = "warning"
    return row("gpu.xid", severity, detail, gpu=canonical_bdf(bus), pid=pid, code=code)


def _xid_text_fields(code: int, body: str) -> dict[str, Any]:
    """Fields printed inside the Xid text by the generations in FACTS.md §C1e / PROVENANCE.md."""
    out: dict[str, Any] = {}
    if ch := _search(r"\b(?:Channel ID|Channel|channel|ChID|Ch) (?:0x)?([0-9a-fA-F]+)\b", body):
        out["channel"] = to_int(ch, 16)
    if m := re.search(r"MMU Fault: ENGINE (\S+)((?: \S+)*?) faulted @ (0x[0-9a-fA-F_]+)\. Fault is of type (\S+) (\S+)", body):
        out.update(engine=m[1], client=m[2].strip() or None, fault_address=m[3].replace("_", ""),
                   fault_type=m[4], access_type=m[5])  # fmt: skip
    if m := re.search(r"\(GPC (\d+), TPC (\d+), SM (\d+)\)(?::\s*(.*))?", body):
        out.update(gpc=to_int(m[1]), tpc=to_int(m[2]), sm=to_int(m[3]))
        if m[4]:
            out["exception"] = m[4].strip()
    if err := _search(r"errorString ([^,]+)", body):
        out["error_string"] = err.strip()
    if m := re.search(r"caused by previous Xid (\d+)", body):
        out["caused_by_xid"] = to_int(m[1])
    if m := re.search(r"Timeout after (\d+)s of waiting for RPC response from GPU(\d+) GSP! Expected function (\d+) \((\w+)\)", body):
        out.update(rpc_timeout_s=to_int(m[1]), gpu_index=to_int(m[2]), rpc_function=to_int(m[3]), rpc_name=m[4])
    # NVLink5 units (FACTS C1d): the columns are padded on some drivers (`NETIR_LINK_EVT  Fatal   XC0`),
    # `Link -1` is an event of no one link, and the registers open with intrinfo and errorstatus
    if m := re.search(r"^([A-Z][A-Z0-9_]+)\s+(Fatal|Nonfatal|Non-fatal)\s+(XC\d)\s+i(\d+)\s+Link\s+(-?\d+)\s*(?:\(([^)]*)\))?", body):
        registers = (m[6] or "").split()
        out.update(unit=m[1], fatal=m[2] == "Fatal", xc=m[3], instance=to_int(m[4]), link=to_int(m[5]),
                   registers=registers, intrinfo=registers[0] if registers else None,
                   error_status=registers[1] if len(registers) > 1 else None)  # fmt: skip
    if m := re.search(r"NVLink: fatal error detected on link (\d+)\(([^)]*)\)", body):
        out.update(link=to_int(m[1]), registers=[r.strip() for r in m[2].split(",")], fatal=True)
    if m := re.search(r"physAddr (0x[0-9a-fA-F]+)", body):
        out["phys_address"] = m[1]
    if m := re.search(r"Row Remapper: New row (?:\((0x[0-9a-fA-F]+)\) )?marked for remapping", body):
        out["remap_row"] = m[1]
        out["remap_pending"] = "reset gpu to activate" in body
    if m := re.search(r"Contained: (\w+) \((0x[0-9a-fA-F]+)\)\. RST: (Yes|No), D-RST: (Yes|No)", body):
        out.update(unit=m[1], reset_required=m[3] == "Yes", drain_reset_required=m[4] == "Yes")
    if code == 13 and "ESR" in body:
        out["esr"] = re.findall(r"(0x[0-9a-f]+)=(0x[0-9a-f]+)", body)
    return out


def _off_bus(parts: dict[str, Any], text: str) -> dict[str, Any]:
    bdf = next((str(t) for t in parts["tokens"] if t.type == "OFF_BUS_GPU"), None)
    pci_id = _search(r"\(PCI ID: ([0-9a-fA-F]{4}:[0-9a-fA-F]{4})\)", text)
    return row("gpu.off_bus", "critical", gpu=canonical_bdf(bdf), code=79, text=_oneline(text), pci_id=pci_id)


_DRIVER_EVENTS = (
    ("driver_load", r"loading NVIDIA (?:UNIX|Linux)? ?(?:\S+ )?(?:Open )?Kernel Module", "info"),
    ("identity", r"^NVRM: (?:GPU at PCI:|GPU Board Serial Number|GPU \S+: GPU serial number|GPU UUID)", "info"),
    ("reset", r"(?i)needs to be reset|reset required|GPU reset", "error"),
    ("init_failed", r"RmInitAdapter failed|rm_init_adapter failed|RmInitAdapter: |probe routine failed|failed to allocate|not supported by|Direct firmware load", "error"),
    # "NVRM: API mismatch: the client has the version X, but / NVRM: this kernel module has the version Y."
    ("version_mismatch", r"API mismatch|this kernel module has the version|have the same version", "error"),
    ("gsp", r"GSP|_kgsp|RPC", "error"),
    ("crash_dump", r"crash dump", "error"),
    ("assert", r"Assertion failed|nvAssert", "warning"),
    ("peer_memory", r"^nvidia-peermem", "warning"),
)  # fmt: skip


def _driver(parts: dict[str, Any], text: str) -> dict[str, Any]:
    first = text.split("\n", 1)[0]
    event, severity = "other", "error"
    for name, pattern, sev in _DRIVER_EVENTS:
        if re.search(pattern, first):
            event, severity = name, sev
            break
    detail: dict[str, Any] = {"event": event, "text": _oneline(text)}
    gpu = canonical_bdf(_search(r"(?:GPU at PCI:|GPU |PCI:)((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)", first))
    if event == "driver_load":
        detail["driver_version"] = _search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", first)
        detail["open"] = "Open Kernel Module" in first
    if uuid := _search(r"\b(GPU-[0-9a-fA-F-]{36})\b", first):
        detail["uuid"] = uuid
    if serial := _search(r"(?:GPU Board Serial Number|serial number is):? ?(\d+)", first):
        detail["serial"] = serial
    if m := re.search(r"GPU(\d+) ", first):
        detail["gpu_index"] = to_int(m[1])
    if code := _search(r"RmInitAdapter failed! \((0x[0-9a-fA-F]+:0x[0-9a-fA-F]+:\d+)\)", first):
        detail["rm_status"] = code
    if event == "init_failed" and (minor := _search(r"device minor number (\d+)", first)):
        detail["minor"] = to_int(minor)
    return row("gpu.driver", severity, detail, gpu=gpu)


def _sxid(parts: dict[str, Any], text: str) -> dict[str, Any]:
    tokens = parts["tokens"]
    bdf = next(str(t) for t in tokens if t.type == "BDF")
    code = to_int(next(str(t) for t in tokens if t.type == "INT"))
    body = _text_lines(parts)[0].strip()
    fatal = bool(re.match(r"Fatal\b", body))
    link = to_int(_search(r"Link (\d+)", body))
    switch = to_int(_search(r"nvidia-nvswitch(\d+)", text))
    data = _search(r"Data \{([^}]*)\}", text)
    return row(
        "gpu.sxid", "critical" if fatal else "warning", gpu=canonical_bdf(bdf), code=code, text=body,
        fatal=fatal, link=link, nvswitch=switch, severity_level=to_int(_search(r"Severity (\d+)", text)),
        data=[d.strip() for d in data.split(",")] if data else None,
    )  # fmt: skip


def _aer_bit(name_text: str | None, bits: list[str]) -> str | None:
    """Adds the short name of one bit line (``CmpltTO (First)``) to ``bits``; the name when it is first."""
    name_text = (name_text or "").strip()
    short = catalog.aer_short_name(name_text.removesuffix("(First)").strip())
    if short not in bits:
        bits.append(short)
    return short if name_text.endswith("(First)") else None


def _aer_severity(text: str) -> str:
    if "Fatal)" in text and "Non-Fatal" not in text:
        return "fatal"
    if "Non-Fatal" in text:
        return "nonfatal"
    return "corrected"


#: CPER's section severities (cper_severity_str) → the AER severity words of the ``pcie.aer`` rows.
_CPER_SEVERITY = {"fatal": "fatal", "recoverable": "nonfatal", "corrected": "corrected", "info": "corrected"}


def _cper_pcie(text: str) -> dict[str, Any]:
    """A firmware-first PCIe error: the PCIe section of an APEI GHES record (drivers/firmware/efi/cper.c)."""
    words = re.findall(r"(?:event severity: |Error \d+, type: )(\w+)", text)
    aer_severity = _CPER_SEVERITY.get(words[-1] if words else "", "nonfatal")
    device = canonical_bdf(_search(r"device_id: ((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])", text))
    ids = re.search(r"vendor_id: 0x([0-9a-fA-F]{4}), device_id: 0x([0-9a-fA-F]{4})", text)
    uncor, cor = _search(r"aer_uncor_status: 0x([0-9a-fA-F]+)", text), _search(r"aer_cor_status: 0x([0-9a-fA-F]+)", text)
    bits: list[str] = []
    if uncor and (word := to_int(uncor, 16)):
        bits = catalog.aer_bits_from_status(word, "fatal" if aer_severity == "fatal" else "nonfatal")
    elif cor and (word := to_int(cor, 16)):
        bits = catalog.aer_bits_from_status(word, "corrected")
    sev = {"corrected": "warning", "nonfatal": "error", "fatal": "critical"}[aer_severity]
    return row(
        "pcie.aer", sev, gpu=device, aer_severity=aer_severity, layer=catalog.aer_layer(bits, aer_severity) if bits else None,
        agent=catalog.aer_agent(bits) if bits else None, bits=bits, first=None, port=None, source=device,
        vendor_device=f"{ids[1]}:{ids[2]}".lower() if ids else None, status=uncor or cor, mask=None, multiple=False,
        tlp=[m.strip() for m in re.findall(r"(TLP Header:[^\n]*)", text)] or None, firmware_first=True,
        port_type=_search(r"port_type: \d+, ([^\n]+)", text), command=_search(r"command: (0x[0-9a-fA-F]+)", text),
        pci_status=_search(r"command: 0x[0-9a-fA-F]+, status: (0x[0-9a-fA-F]+)", text), text=_oneline(text),
    )  # fmt: skip


def _aer(parts: dict[str, Any], text: str) -> dict[str, Any]:
    if any(t.type == "CPER_PCIE" for t in parts["tokens"]):
        return _cper_pcie(text)
    port = endpoint = source_id = vendor_device = layer = agent = None
    severity_word: str | None = None
    status = mask = None
    bits: list[str] = []
    first_bit = None
    tlp: list[str] = []
    multiple = False
    for line in _trees(parts["parts"]):
        tokens = _tokens(line)
        if line.data == "aer_source":
            port = canonical_bdf(_tok(tokens, "BDF"))
            anchor = _tok(tokens, "A_PCIE__AER_1") or ""
            severity_word = anchor
            multiple = "Multiple" in anchor
            for sid in _trees(line.children):
                bdf = _tok(_tokens(sid), "BDF")
                hexid = _tok(_tokens(sid), "HEXDIGITS")
                source_id = canonical_bdf(bdf) if bdf else requester_id_bdf(hexid or "", (port or "0000")[:4])
        elif line.data == "aer_cont":
            endpoint = endpoint or canonical_bdf(_tok(tokens, "BDF"))
            if _tok(tokens, "AER_BIT_1") is not None:
                first_bit = _aer_bit(_tok(tokens, "TEXT"), bits) or first_bit
        elif line.data == "aer_detail":
            endpoint = endpoint or canonical_bdf(_tok(tokens, "BDF"))
            for field in _trees(line.children):
                sub = _tokens(field)
                if field.data == "aer_severity":
                    severity_word = _tok(sub, "AER_SEVERITY") or severity_word
                    layer = (_tok(sub, "AER_TYPE") or "").strip()
                    agent = _search(r"\((\w+) ID\)", _tok(sub, "TEXT") or "")
                elif field.data == "aer_status":
                    vendor_device = _search(r"\[([0-9a-fA-F]{4}:[0-9a-fA-F]{4})\]", _tok(sub, "A_PCIE__AER_3") or "")
                    status, mask = [str(t) for t in sub if t.type == "HEXDIGITS"][:2]
                elif field.data == "aer_bit":
                    first_bit = _aer_bit(_tok(sub, "TEXT"), bits) or first_bit
                elif field.data == "aer_tlp":
                    tlp.append(((_tok(sub, "A_PCIE__AER_5") or "") + (_tok(sub, "TEXT") or "")).strip())
    aer_severity = _aer_severity(severity_word or "")
    if not bits and status and (word := to_int(status, 16)) is not None:
        bits = catalog.aer_bits_from_status(word, aer_severity)
    if not layer and bits:
        layer = catalog.aer_layer(bits, aer_severity)
    if not agent and bits:
        agent = catalog.aer_agent(bits)
    gpu = endpoint or source_id
    sev = {"corrected": "warning", "nonfatal": "error", "fatal": "critical"}[aer_severity]
    return row(
        "pcie.aer", sev, gpu=gpu, aer_severity=aer_severity, layer=layer, agent=agent, bits=bits,
        first=first_bit, port=port, source=source_id, vendor_device=vendor_device, status=status,
        mask=mask, multiple=multiple, tlp=tlp or None,
    )  # fmt: skip


def _trees(items: list[Any]) -> list[Tree]:
    return [c for c in items if isinstance(c, Tree)]


def _tokens(tree: Tree) -> list[Token]:
    return [c for c in tree.children if isinstance(c, Token)]


def _tok(tokens: list[Token], type_: str) -> str | None:
    return next((str(t) for t in tokens if t.type == type_), None)


def _device_line(text: str) -> tuple[str | None, str | None]:
    m = re.match(r"(\S+) ((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])", text)
    return (m[1], canonical_bdf(m[2])) if m else (None, None)


def _link(parts: dict[str, Any], text: str) -> dict[str, Any]:
    driver, device = _device_line(text)
    phrase = (_tok(parts["tokens"], "A_PCIE__LINK") or _hotplug_phrase(text)).strip()
    if "successful" in phrase:
        state, sev = "recovered", "notice"
    elif "Link Up" in phrase or "Card present" in phrase:
        state, sev = "up", "notice"
    elif "Power fault" in phrase:
        state, sev = "power_fault", "error"
    elif "reset" in phrase:
        state, sev = "reset", "error"
    elif phrase.startswith("DPC"):
        state, sev = "dpc", "error"
    elif "can't recover" in phrase or "failed" in phrase:
        state, sev = "recovery_failed", "error"
    else:
        state, sev = "down", "error"
    return row("pcie.link", sev, gpu=device if driver == "nvidia" else None, text=_oneline(text),
                state=state, device=device, driver=driver)  # fmt: skip


def _hotplug_phrase(text: str) -> str:
    """The slot event of a hot-plug line (``Slot(6): Link Down``, ``Card not present on Slot(6)``)."""
    first = text.split("\n", 1)[0]
    m = re.search(r"(?:[Ss]lot\([^)]*\): |Card (?:not )?present on Slot|Link (?:Up|Down) event|Surprise [Rr]emoval)[^\n]*", first)
    return m[0] if m else first


def _net_link(parts: dict[str, Any], text: str) -> dict[str, Any]:
    first = text.split("\n", 1)[0]
    m = re.search(r"Link (?:is )?(INIT|ARMED|ACTIVE_DEFER|ACTIVE|DOWN|[Uu]p|[Dd]own)", first)
    state = (m[1].lower() if m else "unknown").replace("active_defer", "active")
    driver, device = _device_line(first)
    port = to_int(_search(r"Port: (\d+)", first))
    ifname = _search(r"(?:^|\s)(\w[\w.-]*): (?:NIC )?Link", first)
    return row("net.link", "warning" if state == "down" else "info", text=first, state=state,
                device=device or ifname, driver=driver, port=port, interface=ifname)  # fmt: skip


def _nic(parts: dict[str, Any], text: str) -> dict[str, Any]:
    first = text.split("\n", 1)[0]
    driver, device = _device_line(first)
    detail: dict[str, Any] = {"device": device or _search(r"(mlx5_\d+|ib\d+)", first), "driver": driver or first.split()[0],
                              "text": first}  # fmt: skip
    if m := re.search(r"synd (0x[0-9a-fA-F]+): ([^\n]+)", text):
        detail.update(syndrome=m[1], syndrome_text=m[2].strip())
    if fw := _search(r"fw_ver ([\d.]+)", text):
        detail["fw_ver"] = fw
    if m := re.search(r"Port module event(?:\[error\])?: module (\d+), ([^\n]+)", first):
        detail.update(module=to_int(m[1]), module_status=m[2].strip())
    if m := re.search(r"NETDEV WATCHDOG: (\S+) \(([^)]*)\): transmit queue (\d+) timed out", first):
        detail.update(device=m[1], driver=m[2], tx_queue=to_int(m[3]))
    sev = "warning" if "insufficient power" in first or "module_status" in detail else "error"
    if m := _MLX5_CMD_FAILED.search(first):
        code = to_int(m["code"], 16)
        detail.update(command=m["command"], op_mod=m["op_mod"], status=m["status"], status_code=code, cmd_syndrome=m["syndrome"])
        sev = "error" if code in _MLX5_CMD_FAULTS or m["status"] == "unknown status" else "warning"
    return row("net.nic", sev, detail)


#: mlx5's "%s(0x%x) op_mod(0x%x) [uid(%d) ]failed, status %s(0x%x), syndrome (0x%x)[, err(%d)]" (cmd.c mlx5_cmd_check
#: <= 5.17, mlx5_cmd_out_err 5.18+): a command the firmware answered with a status.
_MLX5_CMD_FAILED = re.compile(r"(?P<command>[A-Za-z][A-Za-z0-9_]*)\(0x[0-9a-fA-F]+\) op_mod\((?P<op_mod>0x[0-9a-fA-F]+)\)"
                              r"(?: uid\(\d+\))? failed, status (?P<status>[^\n]+?)\(0x(?P<code>[0-9a-fA-F]+)\), "
                              r"syndrome \((?P<syndrome>0x[0-9a-fA-F]+)\)")
#: The statuses that are the adapter's fault, not a refusal of the request: MLX5_CMD_STAT_INT_ERR (0x1, "internal
#: error") and MLX5_CMD_STAT_BAD_SYS_STATE_ERR (0x4, "bad system state"), the two cmd_status_to_err() turns into -EIO
#: for a device that works. Every other status (bad parameter 0x3, bad operation 0x2, bad resource 0x5, resource busy
#: 0x6, limits exceeded 0x8, bad resource state 0x9, bad index 0xa, no resources 0xf, bad QP state 0x10, bad packet
#: 0x30, too many outstanding CQEs 0x40, bad input/output length 0x50/0x51) is the firmware refusing what a caller
#: asked (a monitoring agent's ACCESS_REG probe, a driver/firmware version mismatch): a warning.
_MLX5_CMD_FAULTS = frozenset({0x1, 0x4})


def _cpu_throttle(parts: dict[str, Any], text: str) -> dict[str, Any]:
    m = re.search(r"CPU(\d+): (Core|Package) (temperature|power limit notification)", text)
    normal = "normal" in text
    return row("host.cpu_throttle", "info" if normal else "warning", cpu=to_int(m[1]) if m else None,
                scope=m[2].lower() if m else None, cause="power" if m and "power" in m[3] else "temperature",
                state="normal" if normal else "throttled", events=to_int(_search(r"total events = (\d+)", text)))  # fmt: skip


def _mce(parts: dict[str, Any], text: str) -> dict[str, Any]:
    return row("host.mce", "error", text=_oneline(text), cpu=to_int(_search(r"CPU (\d+): Machine Check", text)),
                bank=to_int(_search(r"Bank (\d+)", text)), status=_search(r"Bank \d+: ([0-9a-f]+)", text),
                address=_search(r"ADDR ([0-9a-fx]+)", text))  # fmt: skip


def _edac(parts: dict[str, Any], text: str) -> dict[str, Any]:
    m = re.search(r"EDAC (?:\w+ )?MC(\d+): (\d+) (CE|UE) ([^\n]*?) on ([^\s(]+)", text)
    # rasdaemon: "1 Corrected error(s): memory read error at CPU_SrcID#1_MC#1_Chan#1_DIMM#0"; a BMC:
    # "Uncorrectable ECC / other uncorrectable memory error @P2-DIMMH2(CPU2)"
    other = re.search(r"(\d+) (Corrected|Uncorrected) error\(s\): ([^\n]*?) at (\S+)", text)
    sel = re.search(r"(Uncorrectable|Correctable) ECC[^@\n]*(?:@\s*([\w-]+))?", text)
    if m is None and other is not None:
        return _edac_row(None, to_int(other[1]), "CE" if other[2] == "Corrected" else "UE", other[3], other[4], text)
    if m is None and sel is not None:
        return _edac_row(None, 1, "CE" if sel[1] == "Correctable" else "UE", "ECC", sel[2], text)
    count = to_int(m[2]) if m else None
    kind = m[3] if m else ("UE" if "ncorrect" in text else None)
    ce = count if kind == "CE" else (0 if kind == "UE" else None)
    ue = count if kind == "UE" else (0 if kind == "CE" else None)
    return row(
        "host.edac", "critical" if kind == "UE" else "warning", mc=to_int(m[1]) if m else to_int(_search(r"MC(\d+)", text)),
        ce=ce, ue=ue, error=m[4].strip() if m else None, dimm=m[5] if m else None,
        overflow="OVERFLOW" in text, address=_search(r"ADDR ([0-9a-fx]+)", text),
        channel=to_int(_search(r"channel:(\d+)", text)), slot=to_int(_search(r"slot:(\d+)", text)),
        page=_search(r"page:(0x[0-9a-f]+)", text), text=_oneline(text),
    )  # fmt: skip


def _edac_row(mc: int | None, count: int, kind: str, error: str, dimm: str | None, text: str) -> dict[str, Any]:
    return row("host.edac", "critical" if kind == "UE" else "warning", mc=mc,
               ce=count if kind == "CE" else 0, ue=count if kind == "UE" else 0, error=error.strip(), dimm=dimm,
               overflow=False, text=_oneline(text))  # fmt: skip


def _oom(parts: dict[str, Any], text: str) -> dict[str, Any]:
    invoker = _search(r"^(.+?) invoked oom-killer:", text)
    # the victim: "Killed process N" (4.x names its candidate in "Kill process M … or sacrifice child"
    # first, then kills a child of it), else the candidate
    killed = re.search(r"Killed process (\d+) \((.+?)\)", text) or re.search(r"Kill process (\d+) \((.+?)\)", text)
    task = re.search(r"oom-kill:constraint=([^,\n]+).*?(?:,oom_memcg=([^,\n]*))?(?:,task_memcg=([^,\n]*))?,task=([^,\n]+),pid=(\d+)", text)
    pid = to_int(killed[1]) if killed else (to_int(task[5]) if task else None)
    process = killed[2] if killed else (task[4] if task else None)
    memcg = (task[3] or task[2]) if task else None
    return row(
        "host.oom_kill", "error", pid=pid, process=process, invoker=invoker, memcg=memcg,
        constraint=task[1] if task else None,
        cgroup_oom=bool(re.search(r"Memory cgroup out of memory|CONSTRAINT_MEMCG|mem_cgroup_out_of_memory|mem_cgroup_oom", text)),
        gfp_mask=_search(r"gfp_mask=(0x[0-9a-f]+)", text), order=to_int(_search(r"order=(-?\d+)", text)),
        total_vm_kb=to_int(_search(r"total-vm:(\d+)kB", text)), anon_rss_kb=to_int(_search(r"anon-rss:(\d+)kB", text)),
        killed=killed is not None,
    )  # fmt: skip


def _hung(parts: dict[str, Any], text: str) -> dict[str, Any]:
    m = re.search(r"INFO: task (.+):(\d+) blocked for more than (\d+) seconds", text)
    return row("host.hung_task", "error", pid=to_int(m[2]) if m else None, process=m[1] if m else None,
                seconds=to_int(m[3]) if m else None)  # fmt: skip


def _lockup(parts: dict[str, Any], text: str) -> dict[str, Any]:
    m = re.search(r"CPU#(\d+) stuck for (\d+)s! \[(.+):(\d+)\]", text)
    kind = "rcu_stall" if "rcu" in text.split("\n", 1)[0] else ("hard" if "hard LOCKUP" in text else "soft")
    return row("host.soft_lockup", "error", pid=to_int(m[4]) if m else None, lockup=kind,
                cpu=to_int(m[1]) if m else to_int(_search(r"on CPU (\d+)", text)), seconds=to_int(m[2]) if m else None,
                process=m[3] if m else None)  # fmt: skip


def _segfault(parts: dict[str, Any], text: str) -> dict[str, Any]:
    first = text.split("\n", 1)[0]
    m = re.search(r"(?:traps: )?(.+?)\[(\d+)\]:? (?:segfault at (\S+)|(general protection fault|trap [^\n]*?)) ", first)
    return row(
        "host.segfault", "error", pid=to_int(m[2]) if m else None, process=m[1] if m else None,
        address=m[3] if m else None, fault="segfault" if m and m[3] else (m[4] if m else None),
        ip=_search(r" ip[: ]([0-9a-f]+)", first), error=to_int(_search(r" error[: ](\d+)", first)),
        library=_search(r" in ([^\[\s]+)\[", first),
    )  # fmt: skip


def _simple(kind: str, severity: str, **extract: str) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    def enrich(parts: dict[str, Any], text: str) -> dict[str, Any]:
        fields = {name: _search(rx, text) for name, rx in extract.items()}
        return row(kind, severity, fields, text=_oneline(text))

    return enrich


def _nvme(parts: dict[str, Any], text: str) -> dict[str, Any]:
    first = text.split("\n", 1)[0]
    return row("disk.nvme", "error", device=_search(r"(nvme\d+(?:n\d+)?)", first), text=first,
                qid=to_int(_search(r"QID (\d+)", first)), status=to_int(_search(r"status:? (-?\d+)", first)),
                removed="Removing" in first or " to 0" in first)  # fmt: skip


def _generic(parts: dict[str, Any], text: str) -> dict[str, Any]:
    return row(parts["kind"], "error", text=_oneline(text))


def _oneline(text: str) -> str:
    return text.split("\n", 1)[0].strip()


_ENRICH: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
    "gpu.xid": _xid,
    "gpu.off_bus": _off_bus,
    "gpu.driver": _driver,
    "gpu.sxid": _sxid,
    "pcie.aer": _aer,
    "pcie.link": _link,
    "net.link": _net_link,
    "net.nic": _nic,
    "host.cpu_throttle": _cpu_throttle,
    "host.mce": _mce,
    "host.edac": _edac,
    "host.oom_kill": _oom,
    "host.hung_task": _hung,
    "host.soft_lockup": _lockup,
    "host.panic": _simple("host.panic", "critical", reason=r"Kernel panic - not syncing: ([^\n]*)"),
    "host.oops": _simple("host.oops", "critical", reason=r"((?:BUG|Oops|general protection fault|kernel BUG)[^\n]*)"),
    "host.warning": _simple("host.warning", "warning", where=r" at (\S+)", function=r" at \S+ (\S+)"),
    "host.segfault": _segfault,
    "host.boot": _simple("host.boot", "info", kernel=r"Linux version (\S+)", boot_id=r"^-- Boot ([0-9a-f]{32}) --"),
    "disk.nvme": _nvme,
    "disk.io_error": _simple("disk.io_error", "error", device=r"dev ([\w/.-]+)", sector=r"sector (\d+)", op=r"op (0x[0-9a-f]+:\(\w+\))"),
    "fs.readonly": _simple("fs.readonly", "critical", device=r"\((?:device )?([^)]+)\)"),
    "fs.error": _simple("fs.error", "error", device=r"\((?:device )?([^)]+)\)", fs=r"^(EXT[234]|XFS|BTRFS|JBD2)"),
}

KERNEL = Families(NAME, _ENRICH, generic=_generic, transformer=_Parts)


def parse_record(text: str, *, full: bool = False, candidates: list[str] | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """One kernel record: see :meth:`forensics.families.Families.parse_record`."""
    return KERNEL.parse_record(text, full=full, candidates=candidates)


# ---------------------------------------------------------------------------------------- parse


def sniff(head: str) -> float:
    """How sure we are that a file whose first bytes are ``head`` is a kernel log (0..1)."""
    env = envelope.head_split(head)
    if env.is_empty():
        return 0.0
    stamped = env.get_column("stamped").mean() or 0.0
    idents = env.get_column("ident").to_list()
    kernelish = sum(1 for x in idents if x is None or x.startswith("kernel")) / len(idents)
    flagged = contains(env.get_column("msg"), KERNEL.prefilter()).mean() or 0.0
    return min(1.0, 0.5 * float(stamped) * float(kernelish) + 2.0 * float(flagged))


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
    """Parse kernel-log bytes into ``events`` rows (see the module docstring): the records of interest
    (:mod:`.interest`), or every record with ``all_lines`` (the others as ``other`` rows)."""
    return combine(list(iter_parse(io.BytesIO(data).read, file=file, incident=incident, host=host, year=year,
                                   timezone=timezone, on_error=on_error, full=full, all_lines=all_lines)))  # fmt: skip


#: Bytes per chunk of a kernel log read as a stream (cut where a record starts, see :func:`iter_chunks`).
#: The frames of a chunk take a few times its bytes; the records of interest are a small part of it.
#: Ingest of the 271 MB generated log's file (``incident._streamed``), one run each under load: 16 MiB
#: 6.5 s CPU and a 332 MB peak, 8 MiB 6.7 s and 257 MB, 4 MiB 7.1 s and 213 MB; the ~1 GB log at 8 MiB:
#: 297 MB (386 MB at 16 MiB), the rows of interest kept being what grows.
CHUNK_BYTES = 8 << 20
#: Bytes of the first chunk; each next one is twice the last, up to CHUNK_BYTES.
FIRST_CHUNK_BYTES = 1 << 20
#: How many times CHUNK_BYTES a chunk may grow while looking for a line that starts a record.
MAX_GROWTH = 4
#: Lines read for the share of stamped lines of a file (see :func:`group_records`).
SHARE_LINES = 2000


def iter_parse(
    read: Callable[[int], bytes],
    *,
    file: str,
    chunk_bytes: int | None = None,
    stamps: str | None = None,
    incident: str = "",
    host: str | None = None,
    year: int | None = None,
    timezone: str | None = None,
    on_error: str = "keep",
    **options: Any,
) -> Iterator[SourceResult]:
    """Parse a kernel log from ``read(n)`` in chunks cut where a record starts, holding one chunk at a time.

    Each result holds the rows of whole records and that chunk's ``records`` and ``unparsed``; its
    ``lines`` and ``invalid_utf8_lines`` count the file so far (the last result's are the file's). The
    share of stamped lines and a year read from a stamp carry from chunk to chunk. Options: those of
    :func:`parse_text`; ``stamps``: the stamps of lines the envelope does not read (see :class:`_Shape`).
    """
    lines = bad = 0
    month = None
    for chunk, shape in iter_chunks(read, chunk_bytes or CHUNK_BYTES, stamps):
        result = parse_text(chunk, file=file, incident=incident, host=host, year=year, timezone=timezone,
                            on_error=on_error, stamp_share=shape.share, indented=shape.indented, deltas=shape.deltas,
                            collected=shape.collected, line_offset=lines, month_before=month, **options)  # fmt: skip
        lines += count_lines(chunk)
        bad += result.invalid_utf8_lines
        result.lines, result.invalid_utf8_lines, result.host = lines, bad, shape.host
        # the year (and month) of the chunk's last year-less stamp dates the next chunk's
        year = result.year if result.year is not None else year
        month = result.month if result.month is not None else month
        yield result
    if not lines:
        yield SourceResult(events_table([]), lines=0, records=0, unparsed=0, error=None)


def combine(chunks: list[SourceResult]) -> SourceResult:
    """One result from the chunks of :func:`iter_parse`."""
    last = chunks[-1]
    errors = [c.error for c in chunks if c.error]
    events = chunks[0].events if len(chunks) == 1 else pa.concat_tables([c.events for c in chunks])
    return SourceResult(events, lines=last.lines, records=sum(c.records for c in chunks),
                        unparsed=sum(c.unparsed for c in chunks), error=errors[0] if errors else None,
                        invalid_utf8_lines=last.invalid_utf8_lines, host=last.host)  # fmt: skip


def _most_named(hosts: pl.Series) -> str | None:
    """The host most lines name (the first in sort order on a tie), or None."""
    if hosts.len() > PYTHON_LINES:
        hosts = hosts.drop_nulls()
        return hosts.mode().sort().first() if hosts.len() else None  # type: ignore[return-value]
    counts = Counter(h for h in hosts.to_list() if h is not None)
    most = max(counts.values(), default=0)
    return min((h for h, n in counts.items() if n == most), default=None)


@dataclass(frozen=True)
class _Shape:
    """What a file's head says of all its lines: the share with a stamp, and the test for a line on which
    a record surely starts (nothing before it can make it a continuation)."""

    share: float
    indented: bool | None = None  # a paste indented as a whole (None: decide for each piece)
    host: str | None = None  # the host its lines name most (the lines of no interest are no rows to say it)
    deltas: bool = False  # a dmesg -H log: its rows are dated by the deltas of every line (all are read)
    stamps: str | None = None  # stamps the envelope does not read that a source's lines open with (regex)
    collected: bool = False  # its lines carry a collector's host prefix (pdsh, clush: ``node7: [ 12.3] …``)

    @staticmethod
    def of(head: bytes, stamps: str | None = None) -> _Shape:
        at = 0
        for _ in range(SHARE_LINES):  # the first SHARE_LINES lines
            at = head.find(b"\n", at) + 1
            if not at:
                at = len(head)
                break
        raw = split_lines(head[:at])[0]
        lines = dedent(raw, least=1)
        env = envelope.split(lines)
        collected = _collected(lines, env)
        if collected:
            lines, hosts = strip_collector(lines)
            env = _with_hosts(envelope.split(lines), hosts)
        stamped = env.get_column("stamped") | (contains(env.get_column("msg"), stamps) if stamps else False)
        share = float(stamped.mean() or 0.0) if env.height else 0.0
        host = _most_named(env.get_column("host"))
        deltas = bool(contains(lines.head(DELTA_HEAD), DELTA_LINE).any())
        return _Shape(share, indented=not lines.equals(raw), host=host, deltas=deltas, stamps=stamps,  # type: ignore[arg-type]
                      collected=collected)

    def starts(self, line: str) -> bool:
        """Whether a record surely starts on ``line`` (:func:`group_records`): a blank line or a marker,
        or a line that cannot continue one (not indented or, in a stamped file, stamped; its message,
        read after the stamp, after its indentation and after a syslog head, opening with no continuation
        or context pattern). Unsure lines say False: the records of interest are then read with more
        lines around them, never fewer."""
        if self.collected:
            line = _COLLECTOR_PY.sub("", line, count=1)
        if not line.strip() or _MARKER_LINE.match(line):
            return True
        m = _ENVELOPE_PY.match(line)
        stamped = m is not None and any(m.group(g) for g in envelope.STAMP_GROUPS)
        if not stamped and self.stamps is not None:
            stamped = _python_re(self.stamps).match(line[m.end():] if m is not None else line) is not None
        if not stamped and (line[:1].isspace() or self.share >= 0.5):
            return False
        rest = line[m.end():] if m is not None else line
        if _CONTINUES.match(rest) or _CONTINUES.match(rest.lstrip()):
            return False
        head = _SYSLOG_HEAD_PY.match(rest)  # (the message after a syslog line's ``host ident[pid]:``)
        return head is None or _CONTINUES.match(rest[head.end():]) is None


#: The host a collector (pdsh, clush) put before a node's line: ``b1360: [14280.445220] mlx5_core …``.
COLLECTOR = ascii_classes(rf"^(?P<collector>{prefix.PDSH_HOST}): ")
_COLLECTOR_PY = re.compile(for_python(COLLECTOR))


def strip_collector(lines: pl.Series) -> tuple[pl.Series, pl.Series]:
    """``lines`` without a collector's host prefix, and the host each named (null where none).

    >>> lines, hosts = strip_collector(pl.Series(["b1360: [14280.445220] mlx5_core 0000:61:00.0: x", "[ 1.0] y"]))
    >>> lines.to_list(), hosts.to_list()
    (['[14280.445220] mlx5_core 0000:61:00.0: x', '[ 1.0] y'], ['b1360', None])
    """
    hosts = lines.str.extract(COLLECTOR, 1).alias("host")
    cut = lines.str.slice(hosts.str.len_chars().fill_null(-2) + 2)
    return cut.alias(lines.name), hosts


def _collected(lines: pl.Series, env: pl.DataFrame) -> bool:
    """Whether the lines come from a collector that put each node's name before them (pdsh, clush): a share of
    the lines (:data:`.prefix.PDSH_SHARE`) carry a host prefix that the envelope did not read (Talos' address
    is its own form) and, after it, mostly the stamp of a log line."""
    if few(lines, SMALL_LINES) and not any(_COLLECTOR_PY.match(x) for x in lines.to_list() if x):
        return False  # (no line names a host: the usual answer, without a plan for a few lines)
    rest, hosts = strip_collector(lines)
    carried = hosts.is_not_null() & ~env.get_column("stamped").fill_null(False)
    n = int(carried.sum())
    nonempty = int((lines.str.strip_chars() != "").sum())
    if not n or n < prefix.PDSH_SHARE * nonempty:
        return False
    return bool((envelope.split(rest.filter(carried)).get_column("stamped").mean() or 0.0) >= 0.5)


def _with_hosts(env: pl.DataFrame, hosts: pl.Series | None) -> pl.DataFrame:
    """``env`` with the collector's host where its own envelope names none."""
    if hosts is None:
        return env
    return env.with_columns(host=pl.coalesce(pl.col("host"), pl.lit(hosts)))


_MARKER_LINE = re.compile(r"^\s*(?:\.\.\.|…)\s*$|^-- .* --\s*$")
_ENVELOPE_PY = re.compile(for_python(envelope.ENVELOPE))
_SYSLOG_HEAD_PY = re.compile(for_python(envelope.SYSLOG_HEAD))
_CONTINUES = re.compile(for_python(ascii_classes("|".join(f"(?:{p})" for p in _continuation_patterns()))))


@cache
def _python_re(pattern: str) -> re.Pattern[str]:
    return re.compile(for_python(pattern))


def iter_chunks(read: Callable[[int], bytes], size: int, stamps: str | None = None) -> Iterator[tuple[bytes, _Shape]]:
    """Chunks of whole lines from ``read(n)``, each ending before a line on which a record surely starts
    (:meth:`_Shape.starts`, the shape read from the first block), with that shape; a chunk with no such
    line grows, up to ``MAX_GROWTH`` times ``size``, and is then cut at a line end. ``stamps``: see
    :class:`_Shape`."""
    pending = b""
    shape: _Shape | None = None
    want = min(size, FIRST_CHUNK_BYTES)  # (small first: the first rows come at once, the rest in big chunks)
    while True:
        block = read(want)
        if not block:
            break
        buf = pending + block
        shape = shape or _Shape.of(buf, stamps)
        asked, want = want, min(size, want * 2)
        end = buf.rfind(b"\n") + 1
        if len(block) < asked:  # the end of the input: what is left is one chunk
            pending = buf
            break
        cut = _last_start(buf, end, shape) if end else None
        if cut is None and (not end or len(buf) < MAX_GROWTH * size):
            pending = buf
            continue
        cut = cut or end
        yield buf[:cut], shape
        pending = buf[cut:]
    if pending:
        yield pending, shape or _Shape.of(pending, stamps)


def _last_start(buf: bytes, end: int, shape: _Shape) -> int | None:
    """The offset of the last line of ``buf[:end]`` (not its first) on which a record surely starts."""
    at = end
    for _ in range(10_000):
        start = buf.rfind(b"\n", 0, at - 1) + 1
        if start == 0:
            return None
        if shape.starts(buf[start:at].decode("utf-8", "replace").rstrip("\r\n")):
            return start
        at = start
    return None


def parse_text(
    data: bytes,
    *,
    with_envelope: Callable[[pl.DataFrame, pl.Series], pl.DataFrame] | None = None,
    services: Families | None = None,
    detail_columns: tuple[str, ...] = (),
    all_lines: bool = False,
    full: bool = False,
    stamp_share: float | None = None,
    deltas: bool | None = None,
    indented: bool | None = None,
    collected: bool | None = None,
    line_offset: int = 0,
    month_before: int | None = None,
    **options: Any,
) -> SourceResult:
    """Line-oriented logs: lines → envelopes → records → events, for every source that prints kernel-
    style lines. Only the records with a line of interest (:mod:`.interest`) are read, unless
    ``all_lines`` (or ``full``, the Lark-only reference) is given. ``with_envelope`` may add columns to the
    envelope frame (the journal's boot numbers); ``services`` and ``detail_columns`` are passed to
    :func:`parse_records`. ``stamp_share`` is the file's (:func:`group_records`), ``indented`` whether
    it is a paste indented as a whole (:func:`forensics.text.dedent`), ``line_offset`` the lines
    before ``data`` in it and ``month_before`` the month of the last year-less stamp before it (dated in
    ``year``), when ``data`` is a chunk of a file. The result's ``year`` and ``month`` are those of
    its last year-less stamp. ``deltas``: the file is a ``dmesg -H`` log
    (its head holds ``[  +0.000127]`` lines), read whole since every line's delta dates the rows after it.
    ``collected``: its lines carry a collector's host prefix (pdsh, clush), taken off as each line's host.
    """
    lines, bad_utf8 = split_lines(data)
    raw = lines
    if indented is not False:  # (a file read in chunks is dedented as its first chunk is)
        lines = dedent(lines, least=1)
    if collected is None:
        collected = _Shape.of(data).collected
    hosts = None
    if collected:
        lines, hosts = strip_collector(lines)
    n_lines = len(lines)
    share = stamp_share if stamp_share is not None else _Shape.of(data).share
    jobs = job_records(lines, stamped=share >= 0.5) if n_lines else None
    raw_lines = lines
    if jobs is not None:  # a job's output pasted in: its lines are the job families', blank to the kernel's
        lines = lines.clone().scatter(jobs.arg_true(), "")
    rows = env = None
    every = lines
    if all_lines or full or services is not None:
        # (a journal's service lines are found by their identifier, and its boots numbered, on every line)
        env = _with_hosts(envelope.split(lines), hosts)
        if with_envelope is not None:
            env = with_envelope(env, lines)
    if deltas is None:
        deltas = _Shape.of(data).deltas if not (all_lines or full) else False
    if not (all_lines or full) and deltas:
        all_lines = True  # dmesg -H: a row's time is its header's plus the deltas of every line before it
        if env is None:
            env = _with_hosts(envelope.split(lines), hosts)
            if with_envelope is not None:
                env = with_envelope(env, lines)
    if not (all_lines or full):
        hits = interest.of_interest(lines, data if lines is raw else None, (KERNEL.prefilter(),))
        if services is not None and env is not None:
            service = pl.col("ident").is_not_null() & ~pl.col("ident").str.starts_with("kernel")
            said = pl.concat_str(pl.col("ident"), pl.lit(": "), pl.col("msg")).str.contains(services.prefilter())
            hits = hits | env.select((service & said).fill_null(False)).to_series()
        # the share of the file's lines with a stamp, not of those read (its first SHARE_LINES lines')
        shape = _Shape(share)
        stamp_share = shape.share
        rows, hit_rows = _around(lines, hits, shape)
        lines = lines.gather(rows)
        env = env[rows] if env is not None else _with_hosts(envelope.split(lines), hosts.gather(rows) if hosts is not None else None)
    del raw
    assert env is not None
    grouped = group_records(env, lines, stamp_share=stamp_share)
    del lines, env  # the records hold the text from here on; a big log should not be kept twice
    if rows is None:
        grouped = grouped.with_row_index("i").with_columns(i=pl.col("i") + line_offset)
    else:
        grouped = _only_hit_records(grouped.with_columns(i=rows + line_offset, hit=hit_rows))
    year = options.pop("year", None)
    if year is None:
        heads = grouped.filter(pl.col("head")) if grouped.height > SMALL_LINES else grouped
        if grouped.height <= SMALL_LINES:  # (the heads' stamps read in Python: no plan for a few rows)
            at = grouped.get_column("head").to_list()
            kinds = [k for k, h in zip(grouped.get_column("stamp_kind").to_list(), at, strict=True) if h]
            stamps = [k for k, h in zip(grouped.get_column("stamp").to_list(), at, strict=True) if h]
            year = _year_in(stamps, kinds)
            yearless = any(k in ("syslog", "human") for k in kinds)
        else:
            year = _year_from_stamps(heads)
            yearless = bool(heads.get_column("stamp_kind").is_in(["syslog", "human"]).any())
        if yearless or (year is None and jobs is not None):
            # a year-less stamp read (the kernel's, or a job's glog stamp `E0321 02:07:08`) takes its year from
            # the stamps of every line, of interest or not
            if few(every, SMALL_LINES):
                dated = pl.Series([x for x in every.to_list() if x is not None and _PRINTED_YEAR.search(x)], dtype=pl.String)
            else:
                dated = every.filter(every.str.contains(_PRINTED_YEAR.pattern))
            found = _year_from_stamps(envelope.split(dated)) if dated.len() else None
            year = found if year is None or found is None else min(year, found)
        del heads
    del every
    result = parse_records(grouped, lines=n_lines, bad_utf8=bad_utf8, services=services, year=year, full=full,
                           detail_columns=detail_columns, month_before=month_before, **options)  # fmt: skip
    if jobs is not None:
        result = _with_job_records(result, raw_lines, jobs, line_offset=line_offset, year=year, all_lines=all_lines, **options)
    return result


#: A line that prints a year (ISO date, or a ctime stamp's ``… 12:34:56 2024]``): ASCII digits in both syntaxes.
_PRINTED_YEAR = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}\]")


#: How many unstamped lines after a job's line in a stamped log may still be its record's (a traceback's
#: body and its exception line carry no launcher prefix when the job ran without one).
JOB_FOLLOW = 64


def job_records(lines: pl.Series, *, stamped: bool) -> pl.Series | None:
    """The lines of a line-oriented log that a job family reads (:func:`.jobsniff.job_lines`), and in a
    stamped log the unstamped lines that follow them up to the next stamped, blank or kernel line (the
    rest of a traceback); None when there are none. A file is read by every family whose records it holds."""
    mask = job_lines(lines, not_job=KERNEL.prefilter())
    if not mask.any():
        return None
    if not stamped:
        return mask
    n = lines.len()
    starts = mask.arg_true().to_list()
    after = sorted({j for i in starts for j in range(i + 1, min(n, i + 1 + JOB_FOLLOW))} - set(starts))
    if after:
        some = lines.gather(after)
        env = envelope.split(some)
        free = env.select(~(pl.col("stamped") | pl.col("msg").str.contains(KERNEL.prefilter()))
                          & (pl.col("msg").str.strip_chars() != "")).to_series().fill_null(False)  # fmt: skip
        foreign = {j for j, ok in zip(after, free.to_list()) if ok}
        follow = []
        for i in starts:
            j = i + 1
            while j in foreign:
                follow.append(j)
                j += 1
        if follow:
            mask = mask.scatter(sorted(set(follow)), True)
    return mask


def _with_job_records(result: SourceResult, lines: pl.Series, jobs: pl.Series, *, line_offset: int,
                      **options: Any) -> SourceResult:  # fmt: skip
    """``result`` (a kernel reading of ``lines`` with the ``jobs`` lines blanked) with the job families'
    reading of those lines: each run of them read as job output on its own (a record the job families fold
    over lines, NCCL's ``-> 2`` chain, does not run over the kernel's lines between two runs), its rows
    numbered in the whole file, the blanked lines cut out of the kernel's rows."""
    from . import joblog  # (the two read each other's lines: joblog imports this module at its top)

    at = jobs.arg_true().to_list()
    runs: list[list[int]] = []
    for i in at:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    keys = ("file", "incident", "host", "year", "timezone", "on_error", "all_lines")
    given = {k: options[k] for k in keys if k in options}
    events, metrics, error = [], [], None
    for run in runs:
        text = "\n".join(lines.gather(run).to_list()).encode() + b"\n"
        read = joblog.parse(text, source="torch", **given)
        shift = run[0] + line_offset
        events.append(shift_lines(read.events, shift))
        if read.metrics is not None and read.metrics.num_rows:
            metrics.append(shift_lines(read.metrics, shift))
        error = error or read.error
    job_events = pa.concat_tables(events)
    kept = _cut_at(result.events, {i + 1 + line_offset for i in at})
    records = result.records + kept.num_rows - result.events.num_rows + job_events.num_rows
    unparsed = result.unparsed + (pc.sum(pc.equal(job_events.column("kind"), "unparsed")).as_py() or 0)
    return SourceResult(pa.concat_tables([kept, job_events]).sort_by("line"), lines=result.lines, records=records,
                        unparsed=unparsed, error=result.error or error, invalid_utf8_lines=result.invalid_utf8_lines,
                        metrics=pa.concat_tables(metrics) if metrics else result.metrics, year=result.year,
                        month=result.month, host=result.host)  # fmt: skip


def _cut_at(events: pa.Table, blanked: set[int]) -> pa.Table:
    """The kernel's rows with the ``blanked`` lines (a job's) cut out of them: a blank line starts a record
    and the lines after it may continue it, so a row may hold some. Each row is cut at them: its first
    piece keeps the row, a later piece is an ``other`` row; a row of blanked lines only goes."""
    lines, messages = events.column("line").to_pylist(), events.column("message").to_pylist()
    touched = [k for k, (start, text) in enumerate(zip(lines, messages, strict=True))
               if any(start + j in blanked for j in range(text.count("\n") + 1))]  # fmt: skip
    if not touched:
        return events
    pieces: list[dict[str, Any]] = []
    for k in touched:
        row = events.slice(k, 1).to_pylist()[0]
        runs: list[tuple[int, list[str]]] = []
        for j, text in enumerate(row["message"].split("\n")):
            if row["line"] + j in blanked:
                runs.append((-1, []))
            elif runs and runs[-1][0] >= 0:
                runs[-1][1].append(text)
            else:
                runs.append((row["line"] + j, [text]))
        for n, (start, texts) in enumerate(r for r in runs if r[0] >= 0):
            piece = {**row, "line": start, "message": "\n".join(texts)}
            if n:
                piece.update(kind="other", severity="info", code=None, detail="{}")
            pieces.append(piece)
    rest = events.filter(pc.invert(pc.is_in(pa.array(range(events.num_rows)), value_set=pa.array(touched))))
    return pa.concat_tables([rest, pa.Table.from_pylist(pieces, schema=events.schema)])


#: A ``dmesg -H`` line: its stamp is the seconds since the line before (``[  +0.000127]``).
DELTA_LINE = r"^\s*\[\s*\+\s*\d+\.\d+\]"
#: How many first lines of a file say whether it is a ``dmesg -H`` log (a chunk's first block holds them).
DELTA_HEAD = 32


def _around(lines: pl.Series, hits: pl.Series, shape: _Shape) -> tuple[pl.Series, pl.Series]:
    """The rows of the lines of interest with the lines of their records (from the line a record surely
    starts on before each, to the next such line), and which of those rows are of interest."""
    n = len(lines)
    keep: list[int] = []
    done = 0  # rows before this one are placed
    starts: dict[int, bool] = {}
    blocks: dict[int, list[str]] = {}  # the lines near the hits, read from the column 256 at a time

    def starts_at(j: int) -> bool:
        if j not in starts:
            b = j >> 8
            if b not in blocks:
                blocks[b] = lines.slice(b << 8, 256).to_list()
            starts[j] = shape.starts(blocks[b][j & 255])
        return starts[j]

    # (a few lines' hits found in Python: arg_true is a plan)
    at = [k for k, hit in enumerate(hits.to_list()) if hit] if n <= SMALL_LINES else hits.arg_true().to_list()
    for k in at:
        if k < done:
            continue
        j = k
        while j > done and not starts_at(j):
            j -= 1
        e = k + 1
        while e < n and not starts_at(e):
            e += 1
        keep.extend(range(j, e))
        done = e
    rows = pl.Series("i", keep, dtype=pl.UInt32)
    return rows.cast(pl.Int64), hits.gather(rows).alias("hit")


def _only_hit_records(df: pl.DataFrame) -> pl.DataFrame:
    """The records that hold a line of interest, numbered again from 0."""
    if df.height <= SMALL_LINES:
        recs, hits, heads = (df.get_column(c).to_list() for c in ("rec", "hit", "head"))
        wanted = {r for r, h in zip(recs, hits, strict=True) if h}
        keep = [r in wanted for r in recs]
        renumbered, n = [], -1
        for k, head in zip(keep, heads, strict=True):
            if k:
                n += head
                renumbered.append(n)
        kept = df.filter(pl.Series(keep, dtype=pl.Boolean))
        kept.drop_in_place("hit")
        return kept.replace_column(kept.get_column_index("rec"), pl.Series("rec", renumbered, dtype=df.schema["rec"]))
    return (
        df.filter(pl.col("hit").any().over("rec"))
        .with_columns(rec=pl.col("head").cum_sum() - 1)
        .drop("hit")
    )


def unescape_syslog(message: pl.Series) -> pl.Series:
    """rsyslog's escapes of a message's control characters undone (``$EscapeControlCharactersOnReceive``,
    on by default, prints them as ``#`` and three octal digits): ``#012`` is the line break of a message
    logged as several lines, ``#011`` a tab. The message reads as the program wrote it, a record of lines.

    >>> unescape_syslog(pl.Series(["NVRM: API mismatch: the client has the version 535.54.03, but#012NVRM: this", "a#011b #0123"])).to_list()
    ['NVRM: API mismatch: the client has the version 535.54.03, but\\nNVRM: this', 'a\\tb \\n3']
    """
    if not message.str.contains("#01[12]", literal=False).any():
        return message
    return message.str.replace_all("#012", "\n", literal=True).str.replace_all("#011", "\t", literal=True)


def parse_records(
    df: pl.DataFrame,
    *,
    file: str,
    incident: str,
    host: str | None,
    year: int | None,
    timezone: str | None,
    on_error: str,
    full: bool,
    lines: int,
    bad_utf8: int = 0,
    services: Families | None = None,
    detail_columns: tuple[str, ...] = (),
    month_before: int | None = None,
) -> SourceResult:
    """Records of an envelope-split, grouped frame → events.

    Kernel lines (no syslog identifier, or ``kernel``) go through the kernel families; other lines
    through ``services`` (read as ``ident: message``) when given, else they are ``other`` rows of
    source ``journal``. ``detail_columns`` of ``df`` are copied into every row's detail. ``month_before``:
    see :func:`parse_text`.
    """
    if df.height == 0:  # (no record, or none of interest: the lines are counted all the same)
        return SourceResult(events_table([]), lines=lines, records=0, unparsed=0, error=None,
                            invalid_utf8_lines=bad_utf8, year=year, month=month_before)
    small = few(df.get_column("piece"), SMALL_LINES) and not df.get_column("piece").null_count()
    heads = _heads_small(df, full=full, services=services, detail_columns=detail_columns) if small else None
    if heads is None:
        heads = _heads(df, full=full, services=services, detail_columns=detail_columns)
    if year is None:
        year = _year_from_stamps(heads)
    end_year, end_month = year, month_before
    if year is not None and heads.get_column("stamp_kind").is_in(["syslog", "human"]).any():
        months = envelope.yearless_months(heads.get_column("stamp"))
        end_year, end_month = envelope.year_after(months, year=year, month_before=month_before)
    # (uptime-only logs, plain dmesg, have no wall-clock time to read)
    heads = envelope.with_utc(heads, "stamp", pl.col("stamp_kind"), year=year, timezone=timezone,
                              month_before=month_before).with_columns(  # fmt: skip
        ts=envelope.after_headers(pl.col("ts"), pl.col("delta_s")),
        ts_from=pl.when(pl.col("ts").is_not_null()).then(pl.col("ts_from").forward_fill()),
    ).pipe(collect, heads.height)  # fmt: skip
    names = ("rec", "i", "is_kernel", "message", "ts_from", "caller", "delta_s", "ts", "stamp", *detail_columns)
    if small:  # (the flagged heads' values read in Python: no plan for a few rows)
        flags, idents = heads.get_column("flag").to_list(), heads.get_column("ident").to_list()
        rows = [(*v[:3], v[3] if v[2] else f"{ident}: {v[3]}", *v[4:])
                for v, flag, ident in zip(zip(*(heads.get_column(c).to_list() for c in names)), flags, idents)
                if flag]  # fmt: skip
    else:
        rows = heads.filter(pl.col("flag")).with_columns(
            message=pl.when(pl.col("is_kernel")).then(pl.col("message"))
            .otherwise(pl.concat_str(pl.col("ident"), pl.lit(": "), pl.col("message")))
        ).select(*names).rows()  # fmt: skip
    found: list[dict[str, Any]] = []
    errors = 0
    first_error: str | None = None
    memo: dict[tuple[bool, str], tuple[dict[str, Any] | None, str | None]] = {}
    for values in rows:
        rec, i, is_kernel, text, ts_from, caller, delta_s, ts_value, stamp, *extra = values
        families = KERNEL if is_kernel else services
        assert families is not None
        # Logs repeat records word for word (driver spam): parse each distinct text once (the families
        # whose anchors its first line has are found in Python, beside the grammar's parse of it).
        if (is_kernel, text) not in memo:
            memo[(is_kernel, text)] = families.parse_record(text, full=full)
        fields, error = memo[(is_kernel, text)]
        if fields is not None:
            fields = {**fields, "detail": dict(fields["detail"])}
        if fields is None and error is None:
            continue
        if fields is None:
            errors += 1
            if on_error == "raise":
                raise ParseError(file, i + 1, error or "")
            first_error = first_error or f"line {i + 1}: {error}"
            fields = {"kind": "unparsed", "severity": "warning", "gpu": None, "pid": None, "code": None,
                      "detail": {"error": error}}  # fmt: skip
        detail = fields["detail"]
        # Envelope facts a family row keeps: how its time was read, printk caller id, delta stamp.
        for key, value in (("ts_from", ts_from), ("caller", caller), ("delta_s", delta_s), *zip(detail_columns, extra, strict=True)):
            if value is not None:
                detail[key] = value
        if ts_value is None and stamp is not None:
            detail["stamp"] = stamp
        fields["rec"] = rec
        found.append(fields)
    table = _assemble(heads, found, file=file, incident=incident, host=host, detail_columns=detail_columns)
    note = None
    if errors and on_error == "warn":
        note = f"{errors} unparsed record(s); first at {first_error}"
    return SourceResult(table, lines=lines, records=heads.height, unparsed=errors, error=note,
                        invalid_utf8_lines=bad_utf8, year=end_year, month=end_month)  # fmt: skip


def _heads(df: pl.DataFrame, *, full: bool, services: Families | None, detail_columns: tuple[str, ...]) -> pl.DataFrame:
    """The records of ``df`` (grouped lines), one row each: the envelope of the first line, ``message``
    (the record's pieces joined), ``is_kernel`` and ``flag`` (a family may read it)."""
    kernel_line = pl.col("ident").is_null() | pl.col("ident").str.starts_with("kernel")
    service_text = pl.concat_str(pl.col("ident"), pl.lit(": "), pl.col("piece"))
    if full:
        kernel_flag, service_flag = kernel_line, ~kernel_line
    else:
        kernel_flag = kernel_line & pl.col("kflag")
        service_flag = ~kernel_line & service_text.str.contains(services.prefilter()) if services else pl.lit(False)
    heads = (
        df.lazy()
        .filter(pl.col("head"))
        .select(
            "rec", "i", "host", "ident", "ipid", "level", "uptime_s", "delta_s", "stamp", "stamp_kind", "caller",
            "piece", *detail_columns, is_kernel=kernel_line, flag=kernel_flag | (service_flag if services else False),
        )
        .pipe(collect, df.height)
    )  # fmt: skip
    # Records are numbered 0..n-1 in order, so a record's number is its row among the heads.
    multi = df.filter(~pl.col("head")).get_column("rec").unique()
    if multi.len():
        joined = (
            df.filter(pl.col("rec").is_in(multi.implode()))
            .group_by("rec", maintain_order=True)
            .agg(joined=pl.col("piece").str.join("\n"))
        )
        message = heads.get_column("piece").clone().scatter(joined.get_column("rec"), joined.get_column("joined"))
    else:
        message = heads.get_column("piece")
    return heads.with_columns(message=unescape_syslog(message).alias("message")).drop("piece")


def _heads_small(df: pl.DataFrame, *, full: bool, services: Families | None,
                 detail_columns: tuple[str, ...]) -> pl.DataFrame:  # fmt: skip
    """:func:`_heads` of a few lines, in Python on patterns compiled once per process."""
    idents, pieces, kflags, starts = (df.get_column(c).to_list() for c in ("ident", "piece", "kflag", "head"))
    said = _python_re(services.prefilter()) if services is not None and not full else None
    is_kernel, flag, message = [], [], []
    for ident, piece, kflag, start in zip(idents, pieces, kflags, starts, strict=True):
        if not start:  # a record's next line: its piece joins the record's message
            message[-1] += "\n" + piece
            continue
        kernel_line = ident is None or ident.startswith("kernel")
        is_kernel.append(kernel_line)
        message.append(piece)
        if full:
            flag.append(kernel_line or services is not None)
        elif kernel_line:
            flag.append(bool(kflag))
        else:
            flag.append(said is not None and said.search(f"{ident}: {piece}") is not None)
    if any("#012" in m or "#011" in m for m in message):  # (rsyslog's escapes: see unescape_syslog)
        message = [m.replace("#012", "\n").replace("#011", "\t") for m in message]
    mask = pl.Series(starts, dtype=pl.Boolean)
    columns = [df.get_column(c).filter(mask) for c in ("rec", "i", "host", "ident", "ipid", "level", "uptime_s",
                                                        "delta_s", "stamp", "stamp_kind", "caller", *detail_columns)]
    return pl.DataFrame([*columns, pl.Series("is_kernel", is_kernel, dtype=pl.Boolean),
                         pl.Series("flag", flag, dtype=pl.Boolean), pl.Series("message", message, dtype=pl.String)])


def _year_from_stamps(heads: pl.DataFrame) -> int | None:
    """The year printed by any stamp of the file (ISO or ctime), to date its year-less stamps."""
    if heads.height <= SMALL_LINES:
        return _year_in(heads.get_column("stamp").to_list(), heads.get_column("stamp_kind").to_list())
    years = heads.filter(pl.col("stamp_kind").is_in(["iso", "ctime"])).select(
        pl.col("stamp").str.extract(r"(\d{4})(?:-| *$)", 1).cast(pl.Int32, strict=False).min()
    )
    value = years.item() if years.height else None
    return int(value) if value is not None else None


_YEAR_PRINTED = re.compile(r"(\d{4})(?:-| *$)")


def _year_in(stamps: list[str | None], kinds: list[str | None]) -> int | None:
    """:func:`_year_from_stamps` of a few stamps, in Python (Rust's ``\\d`` is Unicode's too: a year in
    other digits is read, and cast to no number, as the column path does)."""
    years = []
    for stamp, kind in zip(stamps, kinds, strict=True):
        if kind in ("iso", "ctime") and stamp is not None and (m := _YEAR_PRINTED.search(stamp)):
            if m.group(1).isascii():
                years.append(int(m.group(1)))
    return min(years) if years else None


def _assemble(heads: pl.DataFrame, found: list[dict[str, Any]], *, file: str, incident: str,
              host: str | None, detail_columns: tuple[str, ...] = ()) -> pa.Table:  # fmt: skip
    if heads.height <= SMALL_LINES and (table := _assemble_small(heads, found, file=file, incident=incident, host=host,
                                                                 detail_columns=detail_columns)) is not None:  # fmt: skip
        return table
    n = heads.height
    rows = pl.Series([f["rec"] for f in found], dtype=heads.schema["rec"])

    def column(key: str, dtype: pl.DataType, values: list[Any] | None = None) -> pl.Series:
        data = pl.Series(key, values if values is not None else [f[key] for f in found], dtype=dtype)
        return envelope.scatter(data, rows, n)

    details = [json.dumps(f["detail"], ensure_ascii=False, default=str) for f in found]
    facts = (  # (one plan with the select below)
        column("kind", pl.String()).alias("f_kind"),
        column("severity", pl.String()).alias("f_severity"),
        column("gpu", pl.String()).alias("f_gpu"),
        column("pid", pl.Int64()).alias("f_pid"),
        column("code", pl.Int64()).alias("f_code"),
        column("detail", pl.String(), details).alias("f_detail"),
    )
    template = template_expr(pl.col("message"))
    extra = {c: pl.col(c) for c in detail_columns}
    other_detail = (
        pl.when(pl.col("ts").is_null() & pl.col("stamp").is_not_null())
        .then(pl.struct(template=template, stamp=pl.col("stamp"), **extra).struct.json_encode())
        .when(pl.col("ts").is_null() & pl.col("delta_s").is_not_null())  # dated by its header under ingest
        .then(pl.struct(template=template, delta_s=pl.col("delta_s"), **extra).struct.json_encode())
        .otherwise(pl.struct(template=template, ts_from=pl.col("ts_from"), **extra).struct.json_encode())
    )
    host_col = pl.coalesce(pl.col("host"), pl.lit(host, pl.String))
    out = heads.lazy().with_columns(*facts).select(
        incident=pl.lit(incident, pl.String),
        host=short_host(host_col),
        source=pl.when(pl.col("is_kernel")).then(pl.lit("kernel")).otherwise(pl.lit("journal")),
        file=pl.lit(file, pl.String),
        line=(pl.col("i") + 1).cast(pl.Int64),
        ts=pl.col("ts"),
        uptime_s=pl.col("uptime_s"),
        kind=pl.coalesce("f_kind", pl.lit("other")),
        severity=pl.coalesce("f_severity", "level", pl.lit("info")),
        gpu=pl.col("f_gpu"),
        rank=pl.lit(None, pl.Int32),
        pid=pl.coalesce("f_pid", pl.when(~pl.col("is_kernel")).then(pl.col("ipid"))),
        code=pl.col("f_code"),
        message=pl.col("message"),
        detail=pl.coalesce("f_detail", other_detail),
    ).pipe(collect, heads.height)  # fmt: skip
    return events_table(out)


def _assemble_small(heads: pl.DataFrame, found: list[dict[str, Any]], *, file: str, incident: str,
                    host: str | None, detail_columns: tuple[str, ...]) -> pa.Table | None:  # fmt: skip
    """:func:`_assemble` of a few records, in Python (a query's plan costs a small file more than its rows),
    or None when a value would be printed otherwise in a detail (a float: ``delta_s``)."""
    names = ("i", "host", "ts", "uptime_s", "level", "is_kernel", "ipid", "message", "stamp", "delta_s", "ts_from",
             *detail_columns)
    columns = [heads.get_column(c).to_list() for c in names]
    if any(v is not None for v in columns[9]) or any(isinstance(v, float) for c in columns[11:] for v in c):
        return None
    by_rec = {f["rec"]: f for f in found}
    rows = []
    for rec, (i, h, ts, uptime_s, level, is_kernel, ipid, message, stamp, _delta, ts_from, *extra) in zip(
        heads.get_column("rec").to_list(), zip(*columns, strict=True), strict=True
    ):
        f = by_rec.get(rec)
        if f is not None:
            detail = json.dumps(f["detail"], ensure_ascii=False, default=str)
        else:
            told = {"stamp": stamp} if ts is None and stamp is not None else {"ts_from": ts_from}
            detail = json_row({"template": template(message), **told, **dict(zip(detail_columns, extra, strict=True))})
        rows.append({
            "incident": incident, "host": short_host_of(h if h is not None else host),
            "source": "kernel" if is_kernel else "journal", "file": file, "line": i + 1, "ts": ts, "uptime_s": uptime_s,
            "kind": f["kind"] if f else "other",
            "severity": f["severity"] if f and f["severity"] is not None else level if level is not None else "info",
            "gpu": f["gpu"] if f else None, "rank": None,
            "pid": f["pid"] if f and f["pid"] is not None else (None if is_kernel else ipid),
            "code": f["code"] if f else None, "message": message, "detail": detail,
        })  # fmt: skip
    return events_table(rows)

