"""nvidia-smi output: ``-q`` text (any ``-d`` subset), ``-q -x`` XML, ``--query-gpu`` CSV, the plain table.

Producers and versions seen (PROVENANCE.md, FACTS.md §C12): ``-q`` text from 304.x to 610.x with the
value column at any offset, 4- and 8-hex-digit domains, ``Clocks Throttle Reasons`` (old) and ``Clocks
Event Reasons`` (535+), per-structure (Single/Double Bit) and SRAM/DRAM ECC layouts, Retired Pages and
Remapped Rows, 610's `` [Deprecated; ...]`` version notes and KMD/CUDA UMD lines, several dumps in one
file; ``-q -x`` XML DTD v9 to v13 (with or without DOCTYPE, truncated files read as far as they go);
``--query-gpu=… --format=csv[,noheader,nounits]`` with any ``--help-query-gpu`` field (and its aliases,
e.g. ``gpu_bus_id``, ``retired_pages.dbe``), the command line or a prompt above the header, ``-l`` loops,
``[N/A]``-style values read as unknown; the plain ``nvidia-smi`` table of every layout (325.x to 580.x,
Linux and Windows), where a GPU printed as ``ERR!`` is one nvidia-smi cannot read. ``Unable to
determine (detect) the device handle for GPU…``, ``No devices were found`` and ``GPU is lost`` become
``gpu.missing``; ``NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver``
``gpu.driver``; ``Failed to initialize NVML: …`` in a file that is nvidia-smi's ``cuda.error`` (the kind
the torch source gives the line alone).

Output: one ``gpus`` row per GPU per dump, CSV sample or table (typed columns: counts as integers, °C, W, MHz,
link gen/width as integers, booleans), and derived ``events``: ``gpu.ecc_uncorrectable``,
``gpu.remap_pending``, ``gpu.remap_failure``, ``gpu.retired_pages``, ``gpu.pcie_degraded``,
``gpu.pcie_replays``, ``gpu.thermal_slowdown``, ``gpu.power_slowdown``, ``gpu.reset_required``,
``gpu.missing``. The text format is parsed with ``grammars/nvsmi.lark`` and Lark's indenter:
indentation is structure.

Example: a block with ``Remapped Rows / Pending : Yes`` gives a ``gpus`` row with
``remapped_rows_pending = true`` and an event ``gpu.remap_pending`` on that line.
"""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa
from lark import Token, Transformer
from lark.exceptions import LarkError
from lark.indenter import DedentError, Indenter

from ..grammar import parser
from ..pci import canonical_bdf
from ..reading import envelope
from ..reading.base import SourceResult, events_table
from ..reading.fields import to_float, to_int
from ..schema import GPUS
from ..text import split_lines
from . import derive, gpuseries, telemetry

NAME = "nvsmi"
#: A ``--query-gpu`` loop's samples: stamps in the machine's wall clock, a bare-number device is the GPU index.
LOCAL_TIME = True
GPU_INDEX = True
#: Kinds this source derives per reading itself (from the gpus rows); the series rules add the others.
_PER_ROW = frozenset({"gpu.thermal_slowdown", "gpu.power_slowdown", "gpu.pcie_degraded", "gpu.pcie_replays",
                      "gpu.ecc_uncorrectable"})
FORMS = (
    "nvidia-smi -q text, any -d subset, drivers 304.x-610.x (value column at any offset)",
    "nvidia-smi -q -x XML, DTD v9-v13, with or without DOCTYPE, truncated",
    "nvidia-smi --query-gpu=... --format=csv[,noheader,nounits], -l loops, any field or alias",
    "nvidia-smi (the plain table), drivers 325.x-580.x, ERR! rows",
)

_MISSING = re.compile(r"Unable to (?:determine|detect) the device handle for GPU ?(\S+?):? |No devices were found|GPU is lost")
# nvidia-smi's own failures, one line each: (pattern, kind, severity). "Failed to initialize NVML" keeps the
# kind and detail the torch source gives it (the diagnosis rules read cuda.error) when a file is nvidia-smi's.
_FAILURES = (
    (_MISSING, "gpu.missing", "critical"),
    (re.compile(r"NVIDIA-SMI has failed because it couldn.t communicate with the NVIDIA driver"), "gpu.driver", "critical"),
    (re.compile(r"Failed to initialize NVML: .+"), "cuda.error", "error"),
)
_NVML_VERSION = re.compile(r"^\s*NVML library version: (\S+)")
#: An event read from one line: (line, kind, severity, message, gpu, detail).
Failure = tuple[int, str, str, str, str | None, dict[str, Any]]


@dataclass
class Node:
    key: str
    value: str | None
    line: int
    children: list[Node] = field(default_factory=list)


class _Indenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types: list[str] = []
    CLOSE_PAREN_types: list[str] = []
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8


class _Tree(Transformer):
    def pair(self, children: list[Any]) -> Node:
        token: Token = children[0]
        key, _, value = str(token).partition(" :")
        return Node(key.strip(), value.strip() or None, token.line or 0, [c for c in children[1:] if isinstance(c, Node)])

    def section(self, children: list[Any]) -> Node:
        token: Token = children[0]
        return Node(str(token).strip(), None, token.line or 0, [c for c in children[1:] if isinstance(c, Node)])

    def start(self, children: list[Any]) -> list[Node]:
        return [c for c in children if isinstance(c, Node)]


# ---------------------------------------------------------------------------------------- fields

# gpus column → paths in a GPU block (text keys joined by "/", then XML tags); the first found wins.
TEXT_FIELDS: dict[str, list[str]] = {
    "product": ["Product Name"], "serial": ["Serial Number"], "uuid": ["GPU UUID"], "minor": ["Minor Number"],
    "vbios": ["VBIOS Version"], "bus_id": ["PCI/Bus Id"],
    "pcie_gen_max": ["PCI/GPU Link Info/PCIe Generation/Max"],
    "pcie_gen_current": ["PCI/GPU Link Info/PCIe Generation/Current"],
    "pcie_width_max": ["PCI/GPU Link Info/Link Width/Max"],
    "pcie_width_current": ["PCI/GPU Link Info/Link Width/Current"],
    "pcie_replays": ["PCI/Replays Since Reset"], "pcie_replay_rollovers": ["PCI/Replay Number Rollovers"],
    "retired_pages_sbe": ["Retired Pages/Single Bit ECC"], "retired_pages_dbe": ["Retired Pages/Double Bit ECC"],
    "retired_pages_pending": ["Retired Pages/Pending Page Blacklist", "Retired Pages/Pending Page Retirement", "Retired Pages/Pending"],
    "remapped_rows_correctable": ["Remapped Rows/Correctable Error"],
    "remapped_rows_uncorrectable": ["Remapped Rows/Uncorrectable Error"],
    "remapped_rows_pending": ["Remapped Rows/Pending"],
    "remapped_rows_failure": ["Remapped Rows/Remapping Failure Occurred"],
    "temp_gpu_c": ["Temperature/GPU Current Temp", "Temperature/Gpu"], "temp_memory_c": ["Temperature/Memory Current Temp"],
    "power_draw_w": ["GPU Power Readings/Power Draw", "GPU Power Readings/Average Power Draw", "Power Readings/Power Draw"],
    "power_limit_w": ["GPU Power Readings/Current Power Limit", "GPU Power Readings/GPU Ceiling Power Limit/Current Power Limit",
                      "Power Readings/Power Limit", "Power Readings/Enforced Power Limit"],
    "clock_sm_mhz": ["Clocks/SM"], "clock_mem_mhz": ["Clocks/Memory"],
    "reset_required": ["GPU Reset Status/Reset Required"],
    "drain_and_reset_recommended": ["GPU Reset Status/Drain and Reset Recommended"],
    "fabric_state": ["Fabric/State"], "fabric_status": ["Fabric/Status"],
    "fabric_clique_id": ["Fabric/CliqueId", "Fabric/Clique Id"],
    "fabric_cluster_uuid": ["Fabric/ClusterUUID", "Fabric/Cluster UUID"],
    "fabric_health_summary": ["Fabric/Health/Summary"],
}  # fmt: skip
XML_FIELDS: dict[str, list[str]] = {
    "product": ["product_name"], "serial": ["serial"], "uuid": ["uuid"], "minor": ["minor_number"],
    "vbios": ["vbios_version"], "bus_id": ["pci/pci_bus_id"],
    "pcie_gen_max": ["pci/pci_gpu_link_info/pcie_gen/max_link_gen"],
    "pcie_gen_current": ["pci/pci_gpu_link_info/pcie_gen/current_link_gen"],
    "pcie_width_max": ["pci/pci_gpu_link_info/link_widths/max_link_width"],
    "pcie_width_current": ["pci/pci_gpu_link_info/link_widths/current_link_width"],
    "pcie_replays": ["pci/replay_counter"], "pcie_replay_rollovers": ["pci/replay_rollover_counter"],
    "retired_pages_sbe": ["retired_pages/multiple_single_bit_retirement/retired_count"],
    "retired_pages_dbe": ["retired_pages/double_bit_retirement/retired_count"],
    "retired_pages_pending": ["retired_pages/pending_blacklist", "retired_pages/pending_retirement"],
    "remapped_rows_correctable": ["remapped_rows/remapped_row_corr"],
    "remapped_rows_uncorrectable": ["remapped_rows/remapped_row_unc"],
    "remapped_rows_pending": ["remapped_rows/remapped_row_pending"],
    "remapped_rows_failure": ["remapped_rows/remapped_row_failure"],
    "temp_gpu_c": ["temperature/gpu_temp"], "temp_memory_c": ["temperature/memory_temp"],
    "power_draw_w": ["gpu_power_readings/power_draw", "gpu_power_readings/average_power_draw", "power_readings/power_draw"],
    "power_limit_w": ["gpu_power_readings/current_power_limit", "power_readings/power_limit", "power_readings/enforced_power_limit"],
    "clock_sm_mhz": ["clocks/sm_clock"], "clock_mem_mhz": ["clocks/mem_clock"],
    "reset_required": ["gpu_reset_status/reset_required"],
    "drain_and_reset_recommended": ["gpu_reset_status/drain_and_reset_recommended"],
}  # fmt: skip
# ECC counts: the SRAM/DRAM layout (535+) is summed; the older per-structure layout has a Total.
ECC_TEXT = {"corrected": ["SRAM Correctable", "DRAM Correctable"], "uncorrected": ["SRAM Uncorrectable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED", "DRAM Uncorrectable"],
            "corrected_old": ["Single Bit/Total"], "uncorrected_old": ["Double Bit/Total"]}  # fmt: skip
ECC_XML = {"corrected": ["sram_correctable", "dram_correctable"], "uncorrected": ["sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_uncorrectable"],
           "corrected_old": ["single_bit/total"], "uncorrected_old": ["double_bit/total"]}  # fmt: skip
REASONS = ("Clocks Event Reasons", "Clocks Throttle Reasons", "clocks_event_reasons", "clocks_throttle_reasons")

_INT_COLUMNS = {"minor", "pcie_gen_max", "pcie_gen_current", "pcie_width_max", "pcie_width_current", "pcie_replays",
                "pcie_replay_rollovers", "retired_pages_sbe", "retired_pages_dbe", "remapped_rows_correctable",
                "remapped_rows_uncorrectable", "ecc_volatile_corrected", "ecc_volatile_uncorrected",
                "ecc_aggregate_corrected", "ecc_aggregate_uncorrected", "fabric_clique_id"}  # fmt: skip
_FLOAT_COLUMNS = {"temp_gpu_c", "temp_memory_c", "power_draw_w", "power_limit_w", "clock_sm_mhz", "clock_mem_mhz"}
_BOOL_COLUMNS = {"retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure", "reset_required",
                 "drain_and_reset_recommended"}  # fmt: skip


def _typed(column: str, value: str | None) -> Any:
    """A printed value as its gpus column's type: "24564 MiB" → 24564, "Yes" → True, "N/A" → None."""
    if column in _INT_COLUMNS:
        number = _number(value)
        return to_int(number) if number is not None else None
    if column in _FLOAT_COLUMNS:
        return _number(value)
    if column in _BOOL_COLUMNS:
        return _bool(value)
    return value


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    m = re.match(r"\s*\[?(-?\d+(?:\.\d+)?)", value)
    return to_float(m[1]) if m else None


def _bool(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().lower()
    if v in ("yes", "true", "active", "1"):
        return True
    if v in ("no", "false", "not active", "0", "none"):
        return False
    return None


def _flatten(nodes: list[Node], prefix: str = "") -> dict[str, tuple[str | None, int]]:
    out: dict[str, tuple[str | None, int]] = {}
    for n in nodes:
        path = f"{prefix}{n.key}"
        out.setdefault(path, (n.value, n.line))
        out.update({k: v for k, v in _flatten(n.children, path + "/").items() if k not in out})
    return out


def _reasons(nodes: list[Node]) -> list[str] | None:
    for n in nodes:
        if n.key in REASONS:
            if not n.children:  # a vGPU guest prints <clocks_throttle_reasons>N/A</...>: unknown, not "none active"
                return None
            active = []
            for leaf in _leaves(n.children):
                if _bool(leaf.value):
                    name = re.sub(r"^clocks_(?:event|throttle)_reasons?_", "", leaf.key)
                    active.append(re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_"))
            return active
    return None


def _fabric_health(nodes: list[Node]) -> tuple[list[str] | None, int]:
    """The items of the ``Fabric / Health`` block (550+) as printed (``Bandwidth: Full``), and its line."""
    for fabric in (n for n in nodes if n.key == "Fabric"):
        for health in (n for n in fabric.children if n.key == "Health"):
            return [f"{leaf.key}: {leaf.value}" for leaf in _leaves(health.children) if leaf.key != "Summary"], health.line
    return None, 0


#: What the Fabric block prints when all is well or nothing applies (NVML_GPU_FABRIC_STATE_COMPLETED and
#: NVML_SUCCESS; NOT_SUPPORTED and N/A off NVLink-fabric systems), and the health items' bad values
#: (NVML_GPU_FABRIC_HEALTH_MASK_*: bandwidth "Degraded", route recovery / route unhealthy / access timeout
#: recovery "True", 580's incorrect configuration anything but none; summary
#: NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY / _LIMITED_CAPACITY). "Partition Assigned" is no fault.
_FABRIC_FINE = {"state": ("Completed", "N/A", "Not Supported"), "status": ("Success", "N/A", "Not Supported")}
_FABRIC_HEALTH_BAD = re.compile(r"^(?:Bandwidth: Degraded|(?:Route Recovery in progress|Route Unhealthy|Access Timeout Recovery): True"
                                r"|Incorrect Configuration: (?!(?:N/A|Not Supported|None|False)$).+)$")
_FABRIC_SUMMARY_BAD = ("Unhealthy", "Limited Capacity")


def _fabric_problems(r: dict[str, Any]) -> list[str]:
    """What is wrong in a GPU's fabric registration, as the block prints it (empty: nothing)."""
    problems = [f"{name} {r[f'fabric_{name}']}" for name, fine in _FABRIC_FINE.items()
                if r.get(f"fabric_{name}") is not None and r[f"fabric_{name}"] not in fine]  # fmt: skip
    if (summary := r.get("fabric_health_summary")) in _FABRIC_SUMMARY_BAD:
        problems.append(f"health {summary}")
    problems += [item for item in r.get("fabric_health") or [] if _FABRIC_HEALTH_BAD.match(item)]
    return problems


def _leaves(nodes: list[Node]) -> list[Node]:
    out = []
    for n in nodes:
        if n.value is not None:
            out.append(n)
        out.extend(_leaves(n.children))
    return out


def _gpu_row(block: Node, dump: dict[str, Any], fields: dict[str, list[str]], ecc_paths: dict[str, list[str]],
             ecc_section: str) -> tuple[dict[str, Any], dict[str, int]]:  # fmt: skip
    flat = _flatten(block.children)
    row: dict[str, Any] = {"line": block.line, "ts": dump.get("ts"), "driver": dump.get("driver"), "cuda": dump.get("cuda")}
    lines: dict[str, int] = {}
    for column, paths in fields.items():
        for path in paths:
            if path in flat and flat[path][0] not in (None, "N/A", "[N/A]"):
                value, line = flat[path]
                lines[column] = line or block.line
                row[column] = _typed(column, value)
                break
    for scope in ("volatile", "aggregate"):
        section = f"{ecc_section}/{scope.capitalize() if ecc_section[0].isupper() else scope}"
        for kind in ("corrected", "uncorrected"):
            values = [_number(flat.get(f"{section}/{p}", (None, 0))[0]) for p in ecc_paths[kind]]
            known = [v for v in values if v is not None]
            if not known:
                old = [_number(flat.get(f"{section}/{p}", (None, 0))[0]) for p in ecc_paths[f"{kind}_old"]]
                known = [v for v in old if v is not None]
            if known:
                row[f"ecc_{scope}_{kind}"] = int(sum(known))
                lines[f"ecc_{scope}_{kind}"] = flat.get(f"{section}/{ecc_paths[kind][0]}", (None, 0))[1] or block.line
    row["clocks_event_reasons"] = _reasons(block.children)
    row["fabric_health"], lines["fabric_health"] = _fabric_health(block.children)
    row["gpu"] = canonical_bdf(block.key.split()[-1] if block.key.startswith("GPU ") else row.get("bus_id") or block.value)
    row["gpu"] = row["gpu"] or canonical_bdf(row.get("bus_id"))
    return row, lines


# ---------------------------------------------------------------------------------------- formats


def _text_dumps(text: str) -> tuple[list[tuple[dict[str, Any], list[Node]]], list[Node]]:
    """(dump facts, GPU blocks) per dump, and every top-level node (for gpu.missing lines)."""
    nodes = _parse_text(text)
    dumps: list[tuple[dict[str, Any], list[Node]]] = []
    current: dict[str, Any] = {}
    blocks: list[Node] = []
    for n in nodes:
        if "NVSMI LOG" in n.key:
            if blocks or current:
                dumps.append((current, blocks))
            current, blocks = {}, []
        elif n.key == "Timestamp":
            current["stamp"] = n.value
        elif n.key in ("Driver Version", "KMD Version"):  # 610+: the KMD line replaces the deprecated one
            current["driver"] = _version(n.value) if n.key == "KMD Version" else current.get("driver") or _version(n.value)
        elif n.key in ("CUDA Version", "CUDA UMD Version"):
            current["cuda"] = _version(n.value) if n.key == "CUDA UMD Version" else current.get("cuda") or _version(n.value)
        elif re.match(r"GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d", n.key):
            blocks.append(n)
        else:  # a GPU's Fabric block quoted alone (`-q | grep -A4 Fabric`), maybe under the command line
            blocks += [Node("GPU", None, f.line, [f]) for f in _fabric_blocks(n)]
    if blocks or current:
        dumps.append((current, blocks))
    return dumps, nodes


def _fabric_blocks(node: Node) -> list[Node]:
    """The ``Fabric`` sections at or under ``node`` (a top-level node that is no GPU block)."""
    if node.key == "Fabric" and node.children:
        return [node]
    return [f for child in node.children for f in _fabric_blocks(child)]


def _version(value: str | None) -> str | None:
    """A driver or CUDA version without 610's " [Deprecated; ...]" note; "Not Found" (no CUDA) is unknown."""
    version = re.sub(r"\s*\[[^\]]*\]?$", "", value or "").strip()
    return None if version in ("", "N/A", "Not Found") else version


def _parse_text(text: str) -> list[Node]:
    lark = parser(NAME, _Tree, postlex=_Indenter)
    body = text if text.endswith("\n") else text + "\n"
    try:
        return lark.parse(body)
    except (LarkError, DedentError):
        # Ragged indentation (hand-edited or cut pastes): snap each line to an indentation already open.
        return lark.parse(_regular_indentation(body))


def _regular_indentation(text: str) -> str:
    out, stack = [], [0]
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if not stripped:
            out.append("")
            continue
        width = len(line) - len(stripped)
        dedented = False
        while len(stack) > 1 and width < stack[-1]:
            stack.pop()
            dedented = True
        if width > stack[-1] and not dedented:
            stack.append(width)
        out.append(" " * stack[-1] + stripped)
    return "\n".join(out) + "\n"


def _xml_nodes(data: bytes) -> tuple[list[tuple[dict[str, Any], list[Node]]], str | None]:
    """GPU blocks from ``-q -x``; a truncated file yields the elements that closed before the cut."""
    parser_ = ET.XMLPullParser(events=("start", "end"))
    error = None
    root: ET.Element | None = None
    try:
        parser_.feed(re.sub(rb"<!DOCTYPE[^>]*>", b"", data))
        parser_.close()
    except ET.ParseError as exc:
        error = f"XML cut or malformed: {exc}"
    try:
        for event, elem in parser_.read_events():
            if event == "start" and root is None:
                root = elem
    except ET.ParseError as exc:
        error = error or f"XML cut or malformed: {exc}"
    if root is None:
        return [], error or "no XML element"
    dump = {"stamp": _text(root.find("timestamp")), "driver": _version(_text(root.find("driver_version"))),
            "cuda": _version(_text(root.find("cuda_version")))}  # fmt: skip
    # ElementTree keeps no line numbers: a GPU block's line is that of its <gpu …> tag in the file.
    starts = [data.count(b"\n", 0, m.start()) + 1 for m in re.finditer(rb"<gpu[\s>]", data)]
    blocks = []
    for n, g in enumerate(root.findall("gpu")):
        block = _to_node(g, f"GPU {g.get('id', '')}")
        block.line = starts[n] if n < len(starts) else 1
        blocks.append(block)
    return [(dump, blocks)], error


def _text(elem: ET.Element | None) -> str | None:
    return elem.text.strip() if elem is not None and elem.text and elem.text.strip() else None


def _to_node(elem: ET.Element, key: str | None = None) -> Node:
    return Node(key or elem.tag, _text(elem), 0, [_to_node(c) for c in elem])


# A --query-gpu field name as the header prints it: dotted, any case, digits ("fabric.cliqueId",
# "ecc.errors.uncorrected.aggregate.sram.l2"), a unit in brackets unless ``nounits``.
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*(?: \[[^\]]*\])?")
_QUERY = re.compile(r"--query-gpu[= ]([A-Za-z0-9_.,]+)")
# Header roots of ``nvidia-smi --help-query-gpu`` (a header names at least one: "hello, world" is no header).
_ROOTS = {"timestamp", "driver_version", "count", "name", "gpu_name", "serial", "gpu_serial", "uuid", "gpu_uuid",
          "pci", "gpu_bus_id", "pcie", "index", "display_mode", "display_active", "display_attached",
          "persistence_mode", "addressing_mode", "accounting", "driver_model", "vbios_version", "inforom",
          "gom", "gpu_operation_mode", "fan", "pstate", "clocks_throttle_reasons", "clocks_event_reasons",
          "memory", "compute_mode", "compute_cap", "utilization", "encoder", "ecc", "retired_pages",
          "remapped_rows", "temperature", "power", "enforced", "clocks", "mig", "fabric", "reset_status",
          "gpu_recovery_action", "minor_number", "protected_memory", "module", "gsp", "c2c"}  # fmt: skip


def _cells(line: str) -> list[str]:
    """A CSV line's cells, stripped; a line the csv module rejects (a stray CR) is split at its commas."""
    try:
        cells = next(csv.reader([line], skipinitialspace=True), [])
    except csv.Error:
        cells = line.split(",")
    return [c.strip() for c in cells]


def _header(cells: list[str]) -> list[str] | None:
    """The field names of a ``--query-gpu`` header line (units dropped), or None if it is not one."""
    names = [c.strip() for c in cells]
    if not all(_FIELD.fullmatch(n) for n in names) or not any(re.split(r"[. ]", n, maxsplit=1)[0] in _ROOTS for n in names):
        return None
    return [re.sub(r" \[.*\]$", "", n) for n in names]


def _csv_layout(lines: list[str]) -> tuple[list[list[str] | None], int]:
    """Each line's role in a ``--query-gpu`` capture: its field names if it is a sample row (None if it is a
    header, a command line or other text), and how many lines are headers or rows (0: not such a capture).

    The names come from the last header line above, else from the ``--query-gpu=`` list of the command line
    (``noheader``), else ``field0..``; a row has as many cells as there are names.
    """
    roles: list[list[str] | None] = []
    names: list[str] | None = None
    structural = 0
    for line in lines:
        cells = _cells(line)
        if not line.strip():
            roles.append(None)
        elif (query := _QUERY.search(line)) and "--format" in line:
            names = query[1].strip(",").split(",")
            roles.append(None)
        elif (header := _header(cells)) is not None:
            names, structural = header, structural + 1
            roles.append(None)
        elif names is not None and len(cells) == len(names):
            roles.append(names)
            structural += 1
        else:
            roles.append(None)
    return roles, structural


# The values nvidia-smi prints in brackets where a reading is missing.
_BRACKETED = re.compile(r"\[(?:N/A|Not Supported|Unknown Error|Insufficient Permissions|GPU is lost|GPU requires reset|"
                        r"No permission|Requested functionality has been deprecated)\]", re.I)


def _noheader_names(lines: list[str]) -> list[str] | None:
    """``field0..`` for a ``noheader`` capture without its command: every line the same number (≥ 2) of cells,
    one at least an nvidia-smi bracketed value (``[N/A]``) or a GPU's UUID or bus id."""
    if not lines or not all("," in line for line in lines if line.strip()):
        return None
    counts = {len(_cells(line)) for line in lines if line.strip()}
    if len(counts) != 1 or (width := counts.pop()) < 2:
        return None
    cells = {c.strip() for line in lines for c in _cells(line)}
    if not any(_BRACKETED.fullmatch(c) or re.fullmatch(r"GPU-[0-9a-fA-F-]{36}|[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", c)
               for c in cells):  # fmt: skip
        return None
    return [f"field{i}" for i in range(width)]


def _csv_rows(lines: list[str]) -> list[dict[str, Any]]:
    """``--query-gpu`` samples (one dict per row, field name → printed value, plus its line)."""
    roles, structural = _csv_layout(lines)
    if not structural and (names := _noheader_names(lines)):
        roles = [names if line.strip() else None for line in lines]
    out: list[dict[str, Any]] = []
    for n, (line, role) in enumerate(zip(lines, roles, strict=True), start=1):
        if role is not None:
            cells = _cells(line)
            out.append({"line": n, **dict(zip(role, cells, strict=True))})
    return out


# gpus column → ``--help-query-gpu`` names (canonical first, then its aliases); the first printed one wins.
_CSV_FIELDS: dict[str, list[str]] = {
    "bus_id": ["pci.bus_id", "gpu_bus_id"], "uuid": ["uuid", "gpu_uuid"], "serial": ["serial", "gpu_serial"],
    "product": ["name", "gpu_name"], "driver": ["driver_version"], "vbios": ["vbios_version"],
    "minor": ["minor_number"],
    "pcie_gen_current": ["pcie.link.gen.current", "pcie.link.gen.gpucurrent"],
    "pcie_gen_max": ["pcie.link.gen.max", "pcie.link.gen.gpumax"],
    "pcie_width_current": ["pcie.link.width.current"], "pcie_width_max": ["pcie.link.width.max"],
    "ecc_volatile_corrected": ["ecc.errors.corrected.volatile.total"],
    "ecc_volatile_uncorrected": ["ecc.errors.uncorrected.volatile.total"],
    "ecc_aggregate_corrected": ["ecc.errors.corrected.aggregate.total"],
    "ecc_aggregate_uncorrected": ["ecc.errors.uncorrected.aggregate.total"],
    "retired_pages_sbe": ["retired_pages.single_bit_ecc.count", "retired_pages.sbe"],
    "retired_pages_dbe": ["retired_pages.double_bit.count", "retired_pages.dbe"],
    "retired_pages_pending": ["retired_pages.pending"],
    "remapped_rows_correctable": ["remapped_rows.correctable"],
    "remapped_rows_uncorrectable": ["remapped_rows.uncorrectable"],
    "remapped_rows_pending": ["remapped_rows.pending"], "remapped_rows_failure": ["remapped_rows.failure"],
    "temp_gpu_c": ["temperature.gpu"], "temp_memory_c": ["temperature.memory"],
    "power_draw_w": ["power.draw", "power.draw.average", "power.draw.instant"],
    "power_limit_w": ["power.limit", "enforced.power.limit"],
    "clock_sm_mhz": ["clocks.current.sm", "clocks.sm"], "clock_mem_mhz": ["clocks.current.memory", "clocks.mem"],
    "reset_required": ["reset_status.reset_required"],
    "drain_and_reset_recommended": ["reset_status.drain_and_reset_recommended"],
    "fabric_state": ["fabric.state"], "fabric_status": ["fabric.status"],
    "fabric_clique_id": ["fabric.cliqueId", "fabric.clique_id"],
    "fabric_cluster_uuid": ["fabric.clusterUuid", "fabric.cluster_uuid"],
    "fabric_health_summary": ["fabric.health.summary"],
}  # fmt: skip
# ``clocks_event_reasons.active`` (``clocks_throttle_reasons.active`` before 535) is NVML's bit mask
# (nvml.h, nvmlClocksEventReason*); it names the reasons when their own columns were not queried.
_REASON_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
                0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
                0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}  # fmt: skip


# The plain ``nvidia-smi`` table (79 columns before 525, 87 on 535/536, 89 on 550+): a GPU is two lines,
# "| idx name persistence-or-driver-model | bus id disp | volatile uncorr. ECC |" and
# "| fan temp perf usage / cap | used / total | util compute |"; any cell may read ERR!.
_TABLE_BANNER = re.compile(r"^[ \t]*\|[ \t]*NVIDIA-SMI \d", re.M)
_TABLE_GPU = re.compile(r"^[ \t]*\|[ \t]*(\d+)[ \t]+([^|\n]*?)[ \t]+(On|Off|TCC|WDDM|MCDM|N/A|ERR!)[ \t]*"
                        r"\|[ \t]*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])[ \t]+(\S+)[ \t]*\|[ \t]*(\S+)[ \t]*\|", re.M)
_TABLE_STATE = re.compile(r"^[ \t]*\|[ \t]*(\S+)[ \t]+(\S+)[ \t]+(\S+)[ \t]+(\S+)[ \t]*/[ \t]*(\S+)[ \t]*\|"
                          r"[ \t]*(\S+)[ \t]*/[ \t]*(\S+)[ \t]*\|[ \t]*(\S+)[ \t]+(\S+)[ \t]*\|")
_Q_GPU = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:", re.M)
#: A ``-q`` Fabric block quoted without its GPU (``nvidia-smi -q | grep -A 4 Fabric``): the file opens with it,
#: or with the command line and then it (the tail of a dump cut before its header is no such quote).
_Q_FABRIC = re.compile(r"\A\s*(?:[^\n]*nvidia-smi[^\n]*\n)?[ \t]*Fabric[ \t]*\r?\n[ \t]+State[ \t]+: \S")
_CTIME = re.compile(r"^\s*\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\s*$")


def _table_rows(lines: list[str]) -> list[dict[str, Any]]:
    """gpus rows of plain ``nvidia-smi`` tables; ``_unreadable`` lists the fields of a GPU it could not read (ERR!)."""
    rows: list[dict[str, Any]] = []
    head: dict[str, Any] = {}
    for n, line in enumerate(lines, start=1):
        if _CTIME.match(line):
            head = {"ts": line.strip()}
        elif m := re.search(r"Driver Version: (\S+)", line):
            head["driver"] = m[1]
            head["cuda"] = c[1] if (c := re.search(r"CUDA Version: (\S+)", line)) else None
        elif m := _TABLE_GPU.match(line):
            index, product, _, bus_id, _, ecc = m.groups()
            row: dict[str, Any] = {"line": n, **head, "gpu": canonical_bdf(bus_id), "bus_id": bus_id,
                                   "product": None if product == "ERR!" else product,
                                   "ecc_volatile_uncorrected": _typed("ecc_volatile_uncorrected", ecc), "_lines": {}}  # fmt: skip
            state = _TABLE_STATE.match(lines[n]) if n < len(lines) else None
            cells = [product, ecc, *(state.groups() if state else ())]
            if state:
                _, temp, _, usage, cap, *_ = state.groups()
                row |= {"temp_gpu_c": _number(temp), "power_draw_w": _number(usage), "power_limit_w": _number(cap)}
                row["_lines"] = dict.fromkeys(("temp_gpu_c", "power_draw_w", "power_limit_w"), n + 1)
            if product == "ERR!" or cells.count("ERR!") >= 3:  # one ERR! (a power reading) is transient
                row["_unreadable"] = cells.count("ERR!")
            rows.append(row | {"index": to_int(index)})
    return rows


#: Lines of a plain ``nvidia-smi`` table (its borders and rows) and of its head (the date, the command).
_TABLE_LINE = re.compile(r"^[ \t]*(?:[|+]|$)")
#: Lines of a ``-q`` dump: indented fields, its banner and head fields, a GPU's heading, blank lines.
_Q_LINE = re.compile(r"^(?:[ \t]|$|=+NVSMI LOG=+|Timestamp|Driver Version|CUDA Version|Attached GPUs|GPU [0-9A-Fa-f]{4,8}:)")


def extent(data: bytes) -> int | None:
    """The number of lines an ``nvidia-smi`` table or ``-q`` dump spans from the top of ``data``, when
    other output follows it (a job's log that opens with ``nvidia-smi``); None when the dump runs to the
    end or ``data`` is XML or CSV (those are the whole file)."""
    mode = _mode(data)
    if mode not in ("table", "text"):
        return None
    lines = data[:SCAN_BYTES].decode("utf-8", "replace").splitlines()
    own = _TABLE_LINE if mode == "table" else _Q_LINE
    start = next((n for n, line in enumerate(lines) if (_TABLE_BANNER if mode == "table" else _Q_START).search(line)),
                 None)  # fmt: skip
    if start is None:
        return None
    end = start
    for n in range(start, len(lines)):
        if own.match(lines[n]) or _CTIME.match(lines[n]):
            end = n
        elif lines[n].strip():
            break
    else:
        return None
    # the last line of the dump is its last non-blank line
    while end > start and not lines[end].strip():
        end -= 1
    return end + 1


#: How far :func:`extent` looks for a dump's end.
SCAN_BYTES = 4 << 20
_Q_START = re.compile(r"=+NVSMI LOG=+|^GPU [0-9A-Fa-f]{4,8}:")


# ---------------------------------------------------------------------------------------- parse


def _mode(data: bytes) -> str:
    """``xml`` (``-q -x``), ``csv`` (``--query-gpu``), ``table`` (plain ``nvidia-smi``) or ``text`` (``-q``)."""
    head = data[:4096].lstrip()
    if head.startswith(b"<?xml") or head.startswith(b"<!DOCTYPE nvidia_smi_log") or head.startswith(b"<nvidia_smi_log"):
        return "xml"
    text = data[:65536].decode("utf-8", "replace")
    if _csv_confidence(text.splitlines()[:200]):
        return "csv"
    if not _is_q_dump(text) and "|" in text and ("NVIDIA-SMI" in text and _TABLE_BANNER.search(text) or _TABLE_GPU.search(text)):
        return "table"
    return "text"


def _is_q_dump(text: str) -> bool:
    return "==============NVSMI LOG==============" in text or bool(_Q_GPU.search(text)) or bool(_Q_FABRIC.search(text))


def _csv_confidence(lines: list[str]) -> float:
    """1.0 when a ``--query-gpu`` header (or the command, for ``noheader``) opens ``lines`` (a prompt or the
    command above the header is fine) and a sample row or nothing follows it; 0.6 for a ``noheader`` capture
    without its command (:func:`_noheader_names`); else 0."""
    filled = [line for line in lines if line.strip()]
    roles, _ = _csv_layout(filled[:4])
    for n, line in enumerate(filled[:3]):
        cells = _cells(line)
        opens = (_QUERY.search(line) and "--format" in line) or (
            (names := _header(cells)) is not None and (len(names) > 1 or "." in names[0]))
        if opens and (n + 1 == len(filled) or roles[n + 1] is not None or n + 1 < 3 and _header(
                _cells(filled[n + 1])) is not None):  # fmt: skip
            return 1.0
    return 0.6 if _noheader_names(filled[:50]) else 0.0


def sniff(head: str) -> float:
    """How sure we are that a file starting with ``head`` is an nvidia-smi dump (0..1)."""
    raw = head.encode("utf-8", "replace")
    mode = _mode(raw)
    if mode == "xml":
        return 1.0 if b"nvidia_smi_log" in raw else 0.0
    if mode == "csv":
        return _csv_confidence(head.splitlines()[:200])
    if _is_q_dump(head):
        return 1.0
    if mode == "table":
        return 1.0 if _TABLE_BANNER.search(head) else 0.9
    return 0.9 if any(pattern.search(head) for pattern, kind, _ in _FAILURES if kind != "cuda.error") else 0.0


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse an nvidia-smi dump into ``gpus`` rows and derived ``events``."""
    lines, bad_utf8 = split_lines(data)
    text = "\n".join(lines.to_list())
    mode = _mode(data)
    error = None
    rows: list[dict[str, Any]] = []
    series = None
    try:
        if mode == "csv":
            # a sample of columns the gpus table has none of (fan.speed alone) gives no row
            records = _csv_rows(lines.to_list())
            samples = map(_csv_gpu, records)
            rows = [g for g in samples if set(g) - {"line", "ts", "gpu", "clocks_event_reasons"} or g["clocks_event_reasons"] is not None]
            # a -l loop is a series too: its readings are samples, and the series rules derive their events
            series = gpuseries.query_samples(records, source=NAME, file=file, incident=incident, host=host,
                                             timezone=timezone)
        elif mode == "table":
            rows = _table_rows(lines.to_list())
        else:
            dumps, error = _xml_nodes(data) if mode == "xml" else (_text_dumps(text)[0], None)
            fields, ecc, ecc_section = (XML_FIELDS, ECC_XML, "ecc_errors") if mode == "xml" else (TEXT_FIELDS, ECC_TEXT, "ECC Errors")
            for dump, blocks in dumps:
                for block in blocks:
                    row, where = _gpu_row(block, dump | {"ts": dump.get("stamp")}, fields, ecc, ecc_section)
                    row["_lines"] = where
                    rows.append(row)
            if mode == "text" and _TABLE_GPU.search(text):  # the table pasted beside a -q dump
                rows = sorted(rows + _table_rows(lines.to_list()), key=lambda r: r["line"])
    except (LarkError, DedentError) as exc:
        error = f"not an nvidia-smi dump this parser can read: {str(exc).splitlines()[0]}"
    failures = _failures(lines.to_list(), seen={r["line"] for r in rows if r.get("_unreadable")})
    gpus = _gpus_table(rows, file=file, incident=incident, host=host, timezone=timezone)
    # nvidia-smi prints its time stamps in the machine's local time, without a zone
    events = _events(rows, failures, file=file, incident=incident, host=host, gpus=gpus,
                     ts_from="local" if timezone else "assumed")  # fmt: skip
    unparsed = 1 if error and not rows else 0
    if unparsed:
        events = pa.concat_tables([events, events_table([_event_row("unparsed", "warning", 1, text[:2000], None, None,
                                                                    {"error": error}, file, incident, host, None)])])  # fmt: skip
    if series is not None and series.num_rows:
        derived = derive.events(series, skip=_PER_ROW, ts_from="local" if timezone else "assumed")
        if derived.height:
            extra = telemetry.events_frame(derived, source=NAME, file=file, incident=incident, host=host)
            events = pa.concat_tables([events, extra]).sort_by([("line", "ascending")])
    return SourceResult(events, lines=len(lines), records=len(rows) + len(failures) + unparsed, unparsed=unparsed,
                        error=error, invalid_utf8_lines=bad_utf8, gpus=gpus, samples=series)  # fmt: skip


def _failures(lines: list[str], *, seen: set[int]) -> list[Failure]:
    """nvidia-smi's failure lines (see ``_FAILURES``) outside the lines already read: (line, kind, severity,
    message, gpu, detail)."""
    out = []
    for n, line in enumerate(lines, start=1):
        for pattern, kind, severity in _FAILURES:
            if n not in seen and (m := pattern.search(line)):
                text = line.strip().lstrip("> ")
                gpu = canonical_bdf(m.group(1)) if pattern.groups and m.group(1) else None
                detail: dict[str, Any] = {"text": text}
                if kind == "cuda.error":
                    detail = {"error": m[0].strip(), "traceback": False}
                    if n < len(lines) and (v := _NVML_VERSION.match(lines[n])):
                        detail["nvml_version"] = v[1]
                out.append((n, kind, severity, text, gpu, detail))
                break
    return out


#: ``--query-gpu``'s fabric health fields (590+) and the item each is in ``-q``'s ``Fabric / Health`` block.
_CSV_HEALTH = {"fabric.health.bandwidth": "Bandwidth", "fabric.health.route_recovery_in_progress": "Route Recovery in progress",
               "fabric.health.route_unhealthy": "Route Unhealthy",
               "fabric.health.access_timeout_recovery": "Access Timeout Recovery",
               "fabric.health.incorrect_configuration": "Incorrect Configuration"}  # fmt: skip


def _csv_gpu(sample: dict[str, Any]) -> dict[str, Any]:
    """A gpus row from one ``--query-gpu`` sample; bracketed values (``[N/A]``, ``[Unknown Error]``) are unknown."""
    known = {name: value for name, value in sample.items()
             if name != "line" and value and value != "N/A" and not value.startswith("[")}  # fmt: skip
    row: dict[str, Any] = {"line": sample["line"]}
    for column, names in _CSV_FIELDS.items():
        if value := next((known[n] for n in names if n in known), None):
            row[column] = _typed(column, value)
    for name, value in known.items():  # a noheader sample without its command: recognise what has a shape
        if name.startswith("field"):
            if re.fullmatch(r"GPU-[0-9a-fA-F-]{36}", value):
                row.setdefault("uuid", value)
            elif re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", value):
                row.setdefault("bus_id", value)
            elif re.match(r"(?:NVIDIA|Tesla|GeForce|Quadro|TITAN|GRID) ", value):
                row.setdefault("product", value)
    row["clocks_event_reasons"] = _csv_reasons(sample)
    if health := [f"{_CSV_HEALTH[name]}: {sample[name].strip()}" for name in _CSV_HEALTH if name in sample]:
        row["fabric_health"] = health  # as -q prints them (`Bandwidth: Full`), [N/A] kept as printed
    row["ts"] = known.get("timestamp")
    row["gpu"] = canonical_bdf(row.get("bus_id"))
    if lost := sum(value == "[GPU is lost]" for value in sample.values()):
        row["_unreadable"] = lost
    return row


def _csv_reasons(sample: dict[str, Any]) -> list[str] | None:
    """Active clocks event (throttle) reasons of a sample: its per-reason columns, else its ``.active`` mask."""
    reasons = {re.sub(r"^clocks_(?:event|throttle)_reasons\.", "", n): v for n, v in sample.items()
               if re.match(r"clocks_(?:event|throttle)_reasons\.", str(n))}  # fmt: skip
    states = {name: _bool(value) for name, value in reasons.items() if name not in ("supported", "active")}
    if any(state is not None for state in states.values()):
        return [name for name, state in states.items() if state]
    mask = reasons.get("active") or ""
    if re.fullmatch(r"0x[0-9A-Fa-f]+", mask) and (word := to_int(mask, 16)) is not None:
        return [name for bit, name in _REASON_BITS.items() if word & bit]
    return None


def _gpus_table(rows: list[dict[str, Any]], *, file: str, incident: str, host: str | None, timezone: str | None) -> pa.Table:
    records = [{name: r.get(name) for name in GPUS.names} | {"incident": incident, "host": host, "file": file, "ts": None}
               for r in rows]  # fmt: skip
    table = pa.Table.from_pylist(records, schema=GPUS)
    stamps = pl.DataFrame({"s": [r.get("ts") for r in rows]}, schema={"s": pl.String})
    if stamps.height and stamps["s"].null_count() < stamps.height:
        # "Wed Jul 31 11:22:39 2024" (text and XML, local time) or "2024/07/31 11:22:39.123" (CSV).
        csv_form = pl.col("s").str.contains(r"^\d{4}/")
        frame = stamps.select(
            s=pl.when(csv_form).then(pl.col("s").str.replace_all("/", "-").str.replace(" ", "T")).otherwise(pl.col("s")),
            k=pl.when(csv_form).then(pl.lit("iso")).otherwise(pl.lit("ctime")),
        )
        ts, _ = envelope.to_utc(pl.col("s"), pl.col("k"), year=None, timezone=timezone)
        column = frame.select(ts).to_series().to_arrow().cast(GPUS.field("ts").type)
        table = table.set_column(GPUS.names.index("ts"), GPUS.field("ts"), column)
    return table


def _event_row(kind: str, severity: str, line: int, message: str, gpu: str | None, code: int | None,
               detail: dict[str, Any], file: str, incident: str, host: str | None, ts: Any) -> dict[str, Any]:  # fmt: skip
    return {"incident": incident, "host": host, "source": NAME, "file": file, "line": line, "ts": ts, "uptime_s": None,
            "kind": kind, "severity": severity, "gpu": gpu, "rank": None, "pid": None, "code": code,
            "message": message, "detail": json.dumps(detail, ensure_ascii=False)}  # fmt: skip


def _events(rows: list[dict[str, Any]], failures: list[Failure], *, file: str, incident: str, host: str | None,
            gpus: pa.Table, ts_from: str) -> pa.Table:  # fmt: skip
    out: list[dict[str, Any]] = []
    ts_column = gpus.column("ts").to_pylist() if gpus.num_rows else []
    for index, r in enumerate(rows):
        gpu, where, ts = r.get("gpu"), r.get("_lines", {}), ts_column[index] if ts_column else None
        label = f"{r.get('product') or 'GPU'} {gpu or ''}".strip()

        def emit(kind: str, severity: str, column: str, text: str, code: int | None = None, *,
                 r: dict[str, Any] = r, where: dict[str, int] = where, label: str = label, gpu: str | None = gpu,
                 ts: Any = ts, **detail: Any) -> None:  # fmt: skip
            detail = {"uuid": r.get("uuid"), "serial": r.get("serial"), **detail, **({"ts_from": ts_from} if ts else {})}
            out.append(_event_row(kind, severity, where.get(column, r["line"]), f"{label}: {text}", gpu, code, detail,
                                  file, incident, host, ts))  # fmt: skip

        if (n := r.get("ecc_volatile_uncorrected")) or (m := r.get("ecc_aggregate_uncorrected")):
            count = n or m
            emit("gpu.ecc_uncorrectable", "critical" if n else "warning", "ecc_volatile_uncorrected" if n else "ecc_aggregate_uncorrected",
                 f"{count} uncorrectable ECC error(s) ({'volatile' if n else 'aggregate'})", code=count,
                 volatile=r.get("ecc_volatile_uncorrected"), aggregate=r.get("ecc_aggregate_uncorrected"))  # fmt: skip
        if r.get("remapped_rows_pending"):
            emit("gpu.remap_pending", "error", "remapped_rows_pending", "row remapping pending (reset the GPU to activate)",
                 uncorrectable=r.get("remapped_rows_uncorrectable"), correctable=r.get("remapped_rows_correctable"))  # fmt: skip
        if r.get("remapped_rows_failure"):
            emit("gpu.remap_failure", "critical", "remapped_rows_failure", "row remapping failure occurred")
        if r.get("retired_pages_pending") or r.get("retired_pages_dbe"):
            emit("gpu.retired_pages", "error" if r.get("retired_pages_pending") else "warning",
                 "retired_pages_pending" if r.get("retired_pages_pending") else "retired_pages_dbe",
                 f"retired pages: {r.get('retired_pages_dbe') or 0} double-bit, {r.get('retired_pages_sbe') or 0} single-bit"
                 + (", retirement pending" if r.get("retired_pages_pending") else ""),
                 dbe=r.get("retired_pages_dbe"), sbe=r.get("retired_pages_sbe"), pending=r.get("retired_pages_pending"))  # fmt: skip
        width, width_max = r.get("pcie_width_current"), r.get("pcie_width_max")
        gen, gen_max = r.get("pcie_gen_current"), r.get("pcie_gen_max")
        if width and width_max and width < width_max:
            emit("gpu.pcie_degraded", "warning", "pcie_width_current", f"PCIe link x{width} of x{width_max}",
                 reason="width", width=width, width_max=width_max, gen=gen, gen_max=gen_max)  # fmt: skip
        elif gen and gen_max and gen < gen_max:
            # An idle GPU lowers its link speed on purpose: worth a note, not an alarm.
            emit("gpu.pcie_degraded", "info", "pcie_gen_current", f"PCIe gen {gen} of {gen_max}",
                 reason="gen", width=width, width_max=width_max, gen=gen, gen_max=gen_max)  # fmt: skip
        if replays := r.get("pcie_replays"):
            emit("gpu.pcie_replays", "warning", "pcie_replays", f"{replays} PCIe replays since reset", code=replays,
                 rollovers=r.get("pcie_replay_rollovers"))  # fmt: skip
        reasons = r.get("clocks_event_reasons") or []
        if hot := [x for x in reasons if "thermal" in x]:
            emit("gpu.thermal_slowdown", "warning", "temp_gpu_c", f"clocks slowed: {', '.join(hot)}", reasons=reasons,
                 temp_c=r.get("temp_gpu_c"))  # fmt: skip
        if power := [x for x in reasons if "power_brake" in x]:
            emit("gpu.power_slowdown", "warning", "power_draw_w", f"clocks slowed: {', '.join(power)}", reasons=reasons,
                 power_w=r.get("power_draw_w"))  # fmt: skip
        if unreadable := r.get("_unreadable"):
            text = f"nvidia-smi shows ERR! in {unreadable} fields of GPU {r['index']}" if "index" in r else (
                f"[GPU is lost] in {unreadable} fields")  # fmt: skip
            emit("gpu.missing", "critical", "line", text, gpu_index=r.get("index"), unreadable=unreadable)
        if problems := _fabric_problems(r):
            column = next((f"fabric_{name}" for name, fine in _FABRIC_FINE.items()
                           if r.get(f"fabric_{name}") not in (None, *fine)), "fabric_health")  # fmt: skip
            summary = "fabric_health_summary" if r.get("fabric_health_summary") in _FABRIC_SUMMARY_BAD else "fabric_health"
            emit("gpu.fabric", "warning" if column == "fabric_health" else "error",
                 summary if column == "fabric_health" else column,
                 f"NVLink fabric {'; '.join(problems)}", state=r.get("fabric_state"), status=r.get("fabric_status"),
                 clique_id=r.get("fabric_clique_id"), cluster_uuid=r.get("fabric_cluster_uuid"),
                 health_summary=r.get("fabric_health_summary"), health=r.get("fabric_health"))  # fmt: skip
        if r.get("reset_required") or r.get("drain_and_reset_recommended"):
            emit("gpu.reset_required", "error", "reset_required" if r.get("reset_required") else "drain_and_reset_recommended",
                 "reset required" if r.get("reset_required") else "drain and reset recommended",
                 reset_required=r.get("reset_required"), drain_and_reset=r.get("drain_and_reset_recommended"))  # fmt: skip
    for line, kind, severity, text, gpu, detail in failures:
        out.append(_event_row(kind, severity, line, text, gpu, None, detail, file, incident, host, None))
    out.sort(key=lambda e: e["line"])
    return events_table(out)
