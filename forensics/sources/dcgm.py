"""DCGM: dcgm-exporter scrapes (Prometheus text), ``dcgmi diag`` (table and ``-j`` JSON), ``dcgmi health -c``.

Producers: dcgm-exporter 2.x–4.x (``DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-…",pci_bus_id="00000000:3B:00.0",
device="nvidia0",modelName="…",Hostname="…"} 45``; the DCGM 4.x field names such as
``DCGM_FI_DEV_GPU_TEMP_CELSIUS``; MIG labels ``GPU_I_PROFILE``/``GPU_I_ID``; Xid series with ``err_code`` and
``err_msg`` labels or an ``xid`` label; an optional trailing timestamp in ms), ``dcgmi diag -r N`` 3.x tables
(``| PCIe | Fail - All |`` then ``| Warning | GPU 0 Error … |`` wrapped over rows) and 4.x tables (``| memory |
Fail |`` then ``| | GPU0: Fail |`` and ``| Warning: GPU0 | … |``), the ``-j`` JSON of either, and the
``dcgmi health -c`` report. The scrape is a plain table of numbers (one series per line: a line pattern and
a label pattern read it); the diag and health reports are boxes of ``| left | right |`` cells whose rows
say what they are by their left cell.

Samples (scrapes): the field, whatever its name, is joined by its DCGM field id to a metric
(``forensics/data/dcgm_fields.csv``: ``temperature_c``, ``memory_temperature_c``, ``power_w``,
``power_limit_w``, ``sm_clock_mhz``, ``mem_clock_mhz``, ``sm_util_pct``, ``mem_util_pct``,
``pcie_replays``, ``throttle_reasons``, ``ecc_sbe``, ``ecc_dbe``, ``xid_last`` …); ``device`` is the
``gpu`` label (``0``; ``0/3`` for MIG instance 3), ``gpu`` the canonical ``pci_bus_id`` when the scrape has
it. DCGM's blank values (``DCGM_INT64_BLANK`` 0x7ffffffffffffff0 and above, printed
``9.223372036854776e+18``; ``DCGM_FP64_BLANK`` 140737488355328.0 and the next three; ``DCGM_INT32_BLANK``
0x7ffffff0 and above for gauges) are no reading: no sample.

Events: ``gpu.xid`` for an Xid series with a non-zero value (code from the value or the ``xid``/``err_code``
label, ``text`` from ``err_msg``), ``gpu.remap_failure``/``gpu.remap_pending`` and ``gpu.ecc_uncorrectable``
(volatile DBE) for non-zero counts; ``gpu.diag_fail`` for each failed ``dcgmi diag`` test on each GPU it
names (``test``, ``gpu_index``, ``message``, ``section``); ``gpu.health`` for each GPU subsystem ``dcgmi
health`` reports not ``Healthy`` (``system``, ``status``, ``message``).

Example::

    DCGM_FI_DEV_XID_ERRORS{gpu="0",pci_bus_id="00000000:3B:00.0",err_code="79",err_msg="GPU has fallen off the bus"} 79

gives a sample ``xid_last 79`` for device ``0`` / gpu ``0000:3b:00.0`` and a ``gpu.xid`` event code 79.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import polars as pl

from .. import catalog
from ..pci import canonical_bdf
from ..reading.base import SourceResult
from ..reading.fields import to_int
from ..text import split_lines
from . import telemetry
from .telemetry import Finding, Reading, number, other, result

NAME = "dcgm"
FORMS = (
    "dcgm-exporter /metrics text (2.x-4.x; legacy and DCGM 4 field names joined by field id; MIG; Xid labels)",
    "dcgmi diag -r N table (3.x 'Fail - All' and 4.x per-GPU rows) and dcgmi diag -j JSON",
    "dcgmi health -c report",
)

_SERIES = re.compile(r"^\s*(DCGM_\w+)(?:\{(.*)\})?\s+(\S+)(?:\s+(\d{10,16}))?\s*$")
_LABEL = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_ROW = re.compile(r"^\s*\|(.*)\|\s*$")
_SECTION = re.compile(r"^\s*[|+]-{3,}\s+([A-Za-z][\w ]*?)\s+-+\+")
_GPU_VERDICT = re.compile(r"^GPU\s?(\d+):\s*(Pass|Fail|Warn(?:ing)?|Skip)\b", re.IGNORECASE)
_MESSAGE_HEAD = re.compile(r"^(Warning|Error|Info)(?::\s*GPU\s?(\d+))?$", re.IGNORECASE)
_FAIL = re.compile(r"^Fail(?:\s*-\s*(All|GPUs?:?\s*([\d,\s]+)))?", re.IGNORECASE)
_HEALTH_GPU = re.compile(r"^GPU(?: ID)?:?\s*(\d+)$", re.IGNORECASE)
_HEALTH_SYSTEM = re.compile(r"^(.+?) system:\s*(\w+)(?:\s*-\s*(.*))?$")
_INT64_BLANK = float(0x7FFFFFFFFFFFFFF0)
_FP64_BLANK = 140737488355328.0
_INT32_BLANK = 0x7FFFFFF0
_XID_IDS = ("230",)


@cache
def _fields() -> dict[str, tuple[str, str, str | None]]:
    """Every exporter name → (field id, metric, unit)."""
    return {name: (r["id"], r["metric"], r["unit"] or None) for r in catalog._rows("dcgm_fields.csv")
            for name in r["names"].split("|")}  # fmt: skip


def sniff(head: str) -> float:
    """How sure we are that ``head`` is a dcgm-exporter scrape or a ``dcgmi`` report."""
    if re.search(r"(?m)^\s*(?:# (?:HELP|TYPE) )?DCGM_(?:FI|EXP)_\w+(?:\{[^}\n]*\})?\s+\S+", head):
        return 0.95
    if re.search(r"(?m)^\s*\|\s*Diagnostic\s+\|\s*Result\s+\|", head) or "Successfully ran diagnostic" in head:
        return 0.95
    if re.search(r"(?m)^\s*\|\s*Health Monitor Report\s", head):
        return 0.95
    if re.search(r'"DCGM GPU Diagnostic"|"test_categories"\s*:', head):
        return 0.9
    return 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse a scrape or a ``dcgmi`` report into ``samples`` and ``events``."""
    series, bad_utf8 = split_lines(data)
    lines = series.to_list()
    readings: list[Reading] = []
    findings: list[Finding] = []
    unparsed = records = 0
    error = None
    if data.lstrip()[:1] == b"{":
        findings, records, error = _diag_json("\n".join(lines))
        if error is None:
            return result([], findings, lines=len(lines), records=records, unparsed=0, source=NAME, file=file,
                          incident=incident, host=host, invalid_utf8_lines=bad_utf8, text=lines)  # fmt: skip
        findings = []
    diag: _Diag | None = None
    health: _Health | None = None
    frame, scraped, slow = _scrape(series)
    in_frame = set(frame.get_column("line").to_list())
    records += len(scraped - slow)  # read whole by _scrape; `slow` lines (an event, no number) line by line too
    quiet = set(pl.DataFrame({"raw": series}).with_row_index("line", offset=1)
                .filter(pl.col("raw").str.contains(r"^\s*(?:#\s|$)")).get_column("line").to_list())  # fmt: skip
    for n in sorted(set(range(1, len(lines) + 1)) - scraped - quiet | slow):
        line = lines[n - 1]
        body = re.sub(r"^\s*`|`\s*$", "", line)
        if m := _SERIES.match(body):
            records += 1
            r, f, bad = _series(n, m)
            readings += [x for x in r if n not in in_frame]
            findings += f
            unparsed += bad
            if bad:
                findings.append(Finding(n, "unparsed", "warning", line, detail={"error": "no number after the series"}))
            continue
        if re.search(r"\|\s*Diagnostic\s+\|\s*Result\s+\|", body):
            diag, records = _Diag(), records + 1
            continue
        if re.search(r"\|\s*Health Monitor Report\s", body):
            health, records = _Health(), records + 1
            continue
        if diag is not None and (_SECTION.match(body) or _ROW.match(body)):
            diag.read(n, body)
            continue
        if health is not None and _ROW.match(body):
            health.read(n, body)
            continue
        if body.strip() and not body.lstrip().startswith("# ") and not re.fullmatch(r"\s*[+=|-]+\s*", body):
            findings.append(other(n, line))
    findings += diag.findings() if diag else []
    findings += health.findings() if health else []
    return result(readings, findings, lines=len(lines), records=records, unparsed=unparsed, source=NAME, file=file,
                  incident=incident, host=host, error=error, invalid_utf8_lines=bad_utf8, text=lines,
                  frame=frame)  # fmt: skip


def iter_parse(read: Callable[[int], bytes], *, file: str, incident: str = "", host: str | None = None,
               year: int | None = None, timezone: str | None = None, on_error: str = "keep",
               chunk_bytes: int = telemetry.SERIES_CHUNK_BYTES) -> Iterator[SourceResult]:  # fmt: skip
    """:func:`parse` from ``read(n)`` in chunks, one held at a time (:func:`.telemetry.iter_series`): a series
    of scrapes is cut before a series line (each stands alone), never inside a ``dcgmi`` table."""

    def chunk(data: bytes) -> SourceResult:
        return parse(data, file=file, incident=incident, host=host, year=year, timezone=timezone, on_error=on_error)

    yield from telemetry.iter_series(read, chunk, source=NAME, file=file, incident=incident, host=host,
                                     derive_from=None, size=chunk_bytes, boundary=_SERIES_START)  # fmt: skip


_SERIES_START = re.compile(rb"(?m)^(?=[ \t]*(?:# HELP |DCGM_))")


# ---------------------------------------------------------------------------------------- scrapes


_GAUGE_IDS = ("100", "101", "140", "150", "155", "158", "159", "160", "164", "190", "191", "203", "204")
_EVENT_IDS = ("230", "311", "395", "396")
_SERIES_PL = r"^\s*`?\s*(?P<name>DCGM_\w+)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<stamp>\d{10,16}))?\s*`?\s*$"


def _label(labels: pl.Expr, name: str) -> pl.Expr:
    return labels.str.extract(rf'(?:^|,)\s*{name}\s*=\s*"((?:[^"\\]|\\.)*)"', 1)


def _scrape(lines: pl.Series) -> tuple[pl.DataFrame, set[int], set[int]]:
    """Every exposition line at once: the samples (line, ts, gpu, device, metric, value, unit), the lines read,
    and those to read one by one as well (a value that is no number, or one an event is made of)."""
    fields = pl.DataFrame([(name, fid, metric, unit) for name, (fid, metric, unit) in _fields().items()],
                          schema=["name", "fid", "metric", "unit"], orient="row")  # fmt: skip
    parts = (
        pl.DataFrame({"raw": lines}).with_row_index("line", offset=1)
        .filter(pl.col("raw").str.contains(r"^\s*`?\s*DCGM_\w"))
        .with_columns(g=pl.col("raw").str.extract_groups(_SERIES_PL)).unnest("g")
        .filter(pl.col("name").is_not_null())
        .join(fields, on="name", how="left")
        .with_columns(number=pl.col("value").str.replace_all(",", "").cast(pl.Float64, strict=False),
                      gpu_index=_label(pl.col("labels"), "gpu"), mig=_label(pl.col("labels"), "GPU_I_ID"),
                      pci=_label(pl.col("labels"), "pci_bus_id"), xid=_label(pl.col("labels"), "xid"))
    )  # fmt: skip
    number = pl.col("number")
    blank = (number >= _INT64_BLANK) | number.is_between(_FP64_BLANK, _FP64_BLANK + 3) | (
        pl.col("fid").is_in(_GAUGE_IDS) & number.is_between(_INT32_BLANK, 0x7FFFFFFF))
    slow = parts.filter(
        number.is_null() & ~pl.col("value").str.to_lowercase().is_in(["nan", "+inf", "-inf"])
        | (number > 0) & ~blank & (pl.col("fid").is_in(_EVENT_IDS) | pl.col("name").str.contains("XID") & pl.col("xid").is_not_null())
    ).get_column("line")  # fmt: skip
    pcis = parts.get_column("pci").drop_nulls().unique().to_list()
    stamp = pl.col("stamp").cast(pl.Int64, strict=False)
    frame = parts.select(
        "line",
        ts=pl.when(stamp > 10**11).then(stamp * 1000).otherwise(stamp * 1_000_000).cast(pl.Datetime("us", "UTC")),
        gpu=pl.col("pci").replace_strict({p: canonical_bdf(p) for p in pcis}, default=None, return_dtype=pl.String),
        device=pl.when(pl.col("mig").is_not_null()).then(pl.col("gpu_index") + "/" + pl.col("mig")).otherwise("gpu_index"),
        metric="metric", value=pl.when(blank | number.is_nan()).then(None).otherwise(number), unit="unit",
    ).filter(pl.col("metric").is_not_null())  # fmt: skip
    return frame, set(parts.get_column("line").to_list()), set(slow.to_list())


def _blank(value: float, field_id: str | None) -> bool:
    """DCGM's blank, not-found, not-supported and not-permissioned values (dcgm_structs.h)."""
    if value >= _INT64_BLANK or _FP64_BLANK <= value <= _FP64_BLANK + 3:
        return True
    return field_id in _GAUGE_IDS and _INT32_BLANK <= value <= 0x7FFFFFFF


def _series(n: int, m: re.Match[str]) -> tuple[list[Reading], list[Finding], int]:
    """The sample and the event of one exposition line."""
    name, labels = m[1], dict(_LABEL.findall(m[2] or ""))
    value = number(m[3]) if m[3].lower() not in ("nan", "+inf", "-inf") else None
    if value is None and m[3].lower() != "nan":
        return [], [], 1
    field_id, metric, unit = _fields().get(name, (None, None, None))
    if value is not None and _blank(value, field_id):
        value = None
    ts = None
    if m[4]:
        from datetime import UTC, datetime

        stamp = to_int(m[4])
        try:  # a garbled stamp leaves the reading undated
            ts = None if stamp is None else datetime.fromtimestamp(stamp / (1000 if stamp > 10**11 else 1), tz=UTC)
        except (OverflowError, OSError, ValueError):
            ts = None
    device = labels.get("gpu")
    if device is not None and labels.get("GPU_I_ID"):
        device = f"{device}/{labels['GPU_I_ID']}"
    gpu = canonical_bdf(labels.get("pci_bus_id"))
    readings = [Reading(n, metric, value, unit, device=device, gpu=gpu, ts=ts)] if metric and value is not None else []
    base = {"series": name, "gpu_index": labels.get("gpu"), "uuid": labels.get("UUID"), "model": labels.get("modelName"),
            "hostname": labels.get("Hostname"), "mig_instance": labels.get("GPU_I_ID")}  # fmt: skip
    where = f"GPU {labels.get('gpu', '?')}"
    findings: list[Finding] = []
    xid = labels.get("xid") or labels.get("err_code")
    if value and (field_id in _XID_IDS or ("XID" in name and "xid" in labels)):
        code = to_int(xid) if xid and xid.isdigit() else to_int(value)
        text = labels.get("err_msg")
        findings.append(Finding(n, "gpu.xid", "error", f"{where}: Xid {code}" + (f", {text}" if text else ""), gpu=gpu,
                                code=code, ts=ts, detail={**base, "text": text, "value": value}, samples=[n]))  # fmt: skip
    elif value and field_id == "395":
        findings.append(Finding(n, "gpu.remap_failure", "critical", f"{where}: row remapping failure", gpu=gpu, ts=ts,
                                detail=base, samples=[n]))  # fmt: skip
    elif value and field_id == "396":
        findings.append(Finding(n, "gpu.remap_pending", "error", f"{where}: row remapping pending", gpu=gpu, ts=ts,
                                detail=base, samples=[n]))  # fmt: skip
    elif value and field_id == "311":
        findings.append(Finding(n, "gpu.ecc_uncorrectable", "critical", f"{where}: {value:g} volatile DBE", gpu=gpu,
                                code=to_int(value), ts=ts, detail={**base, "volatile": value}, samples=[n]))  # fmt: skip
    return readings, findings, 0


# ---------------------------------------------------------------------------------------- dcgmi diag


def _cells(line: str) -> tuple[str, str, str] | None:
    """A row's left cell, its right cell, and the right cell's chunk of a wrapped message: dcgmi cuts a message
    into chunks of the column's width (48 less its margins: one space before, two after) wherever the cut
    falls, mid-word included, so the chunks put end to end give the message back."""
    m = _ROW.match(line)
    if not m:
        return None
    parts = m[1].split("|")
    if len(parts) < 2:
        return None
    raw = "|".join(parts[1:])
    return parts[0].strip(), raw.strip(), raw[1:len(raw) - 2] if len(raw) > 3 else raw.strip()


class _Diag:
    """The rows of one ``dcgmi diag`` table, read in order."""

    def __init__(self) -> None:
        self.section: str | None = None
        self.tests: list[dict[str, Any]] = []  # {line, name, result, section, gpus: {idx: (line, verdict)}, messages}
        self.message: dict[str, Any] | None = None

    def read(self, n: int, line: str) -> None:
        if m := _SECTION.match(line):
            self.section, self.message = m[1].strip(), None
            return
        cells = _cells(line)
        if cells is None:
            return
        left, right, wrapped = cells
        if m := _MESSAGE_HEAD.match(left):
            if self.tests:
                self.message = {"line": n, "kind": m[1].lower(), "gpu": m[2], "text": wrapped}
                self.tests[-1]["messages"].append(self.message)
        elif not left and (m := _GPU_VERDICT.match(right)) and self.tests:
            self.tests[-1]["gpus"][m[1]] = (n, m[2].capitalize())
            self.message = None
        elif not left and self.message is not None:
            self.message["text"] += wrapped
        elif left and self.section not in (None, "Metadata"):
            self.tests.append({"line": n, "name": left, "result": right, "section": self.section, "gpus": {}, "messages": []})
            self.message = None

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        for t in self.tests:
            failed = {i: line for i, (line, v) in t["gpus"].items() if v == "Fail"}
            if m := _FAIL.match(t["result"]):
                if m[2]:
                    failed.update({i: t["line"] for i in re.findall(r"\d+", m[2]) if i not in failed})
                elif not failed:
                    named = {g for msg in t["messages"] for g in [msg["gpu"], *re.findall(r"\bGPU\s?(\d+)\b", msg["text"])] if g}
                    failed = {i: t["line"] for i in sorted(named, key=int)} or {None: t["line"]}
            for index, line in sorted(failed.items(), key=lambda kv: -1 if kv[0] is None else (to_int(kv[0]) or 0)):
                texts = [msg["text"].strip() for msg in t["messages"] if msg["gpu"] in (None, index)
                         and (msg["gpu"] == index or index is None or re.search(rf"\bGPU\s?{index}\b", msg["text"])
                              or not re.search(r"\bGPU\s?\d+\b", msg["text"]))]  # fmt: skip
                who = f"GPU {index}" if index is not None else "all GPUs"
                out.append(Finding(line, "gpu.diag_fail", "error", f"dcgmi diag: {t['name']} failed on {who}"
                                   + (f": {texts[0]}" if texts else ""),
                                   detail={"test": t["name"], "section": t["section"], "result": t["result"],
                                           "gpu_index": None if index is None else to_int(index),
                                           "message": " / ".join(texts) or None}))  # fmt: skip
        return out


def _diag_json(text: str) -> tuple[list[Finding], int, str | None]:
    """``dcgmi diag -j``: every test result whose status is a failure, per GPU."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return [], 0, f"not JSON: {exc}"
    out: list[Finding] = []
    tests = 0

    def walk(node: Any, section: str | None) -> None:
        nonlocal tests
        if isinstance(node, dict):
            section = node.get("category", section)
            if "name" in node and isinstance(node.get("results"), list):
                tests += 1
                for r in node["results"]:
                    if not isinstance(r, dict) or str(r.get("status", "")).lower() != "fail":
                        continue
                    ids = r.get("gpu_id", r.get("entity_id", r.get("gpu_ids")))
                    messages = [w.get("warning") or w.get("message") or w.get("msg") for w in
                                (r.get("warnings") or r.get("errors") or []) if isinstance(w, dict)]  # fmt: skip
                    text_ = " / ".join(m for m in messages if m) or None
                    line = _line_of(text, json.dumps(messages[0])[1:-1] if messages and messages[0] else None)
                    for index in re.findall(r"\d+", str(ids)) if ids is not None else [None]:
                        who = f"GPU {index}" if index is not None else "all GPUs"
                        out.append(Finding(line, "gpu.diag_fail", "error", f"dcgmi diag: {node['name']} failed on {who}"
                                           + (f": {text_}" if text_ else ""),
                                           detail={"test": node["name"], "section": section, "result": "Fail",
                                                   "gpu_index": None if index is None else to_int(index),
                                                   "message": text_}))  # fmt: skip
            for value in node.values():
                walk(value, section)
        elif isinstance(node, list):
            for value in node:
                walk(value, section)

    walk(doc, None)
    return out, tests, None if tests else "JSON without dcgmi diag test results"


def _line_of(text: str, needle: str | None) -> int:
    """The line of ``text`` where ``needle`` first appears (1 when it does not)."""
    at = text.find(needle) if needle else -1
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


# ---------------------------------------------------------------------------------------- dcgmi health


class _Health:
    """The rows of one ``dcgmi health -c`` report."""

    def __init__(self) -> None:
        self.gpu: str | None = None
        self.items: list[dict[str, Any]] = []

    def read(self, n: int, line: str) -> None:
        cells = _cells(line)
        if cells is None:
            return
        left, right, _ = cells
        if m := _HEALTH_GPU.match(left):
            self.gpu = m[1]
        elif not left and (m := _HEALTH_SYSTEM.match(right)) and self.gpu is not None:
            self.items.append({"line": n, "gpu": self.gpu, "system": m[1], "status": m[2], "message": m[3] or ""})
        elif not left and self.items and self.items[-1]["gpu"] == self.gpu:
            self.items[-1]["message"] = f"{self.items[-1]['message']} {right}".strip()

    def findings(self) -> list[Finding]:
        severity = {"warning": "warning", "failure": "error", "fail": "error"}
        return [Finding(i["line"], "gpu.health", severity.get(i["status"].lower(), "warning"),
                        f"dcgmi health: GPU {i['gpu']} {i['system']}: {i['status']}"
                        + (f" - {i['message']}" if i["message"] else ""),
                        detail={"gpu_index": to_int(i["gpu"]), "system": i["system"], "status": i["status"],
                                "message": i["message"] or None})
                for i in self.items if i["status"].lower() != "healthy"]  # fmt: skip
