"""NCCL_DEBUG output: ``host:pid:tid [cudaDev] NCCL INFO|WARN|TRACE`` lines of every NCCL version seen,
behind any launcher prefix (mpirun, pdsh, ``srun -l``, torchrun, Ray, a log viewer's line numbers) and
any collector's stamp (container runtime, log shipper, ``mpirun --timestamp-output``, CloudWatch).

Families (``grammars/nccl.lark``): ``nccl.version`` (``NCCL version 2.4.7+cuda10.0``, ``NCCL version 2.26.2
compiled with CUDA 12.4``), ``nccl.init`` (``comm … rank R nranks N cudaDev D … busId B … Init COMPLETE``
and nccl-tests' rank table: the rank ↔ host ↔ pid ↔ GPU map that fills ``rank`` and ``gpu`` of the
process's other NCCL lines), ``nccl.abort``, ``nccl.warn`` (``where`` file:line, ``function``),
``nccl.net_error`` (IB/RoCE completion errors, old ``error N, opcode, len, vendor err`` and new
``status=N … localGid … remoteGids…`` / ``… hca mlx5_0``, IB async events ``Got async event : port error``,
``mlx5_1:1 async fatal event on QP (0x…): …``, ``GID table changed``, ``NET/IBP``, aws-ofi ``NET/OFI``;
socket errors with their peer and errno), ``nccl.warn`` also keeps a CUDA failure's number and name
(``Cuda failure 'out of memory'`` → ``cuda_code`` 2, ``cudaErrorMemoryAllocation``), ``nccl.error_chain``
(consecutive ``file:line -> N`` lines of a thread, folded, ``code`` = the ncclResult it began with; and an
application's ``NCCL failure file.cu:95 'unhandled cuda error'``, ``via`` application), ``nccl.conn_closed``
and ``nccl.ras`` (the RAS report's sections, one record each).

A job log interleaves NCCL, PyTorch and trainer output: this source, :mod:`.torch` and :mod:`.trainlog`
read a file alike (:mod:`.joblog`); sniffing only decides the file's label.

Example::

    kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid fd00:… remoteGidsfd00:…

becomes ``kind=nccl.net_error code=12 host=kp-ddp-worker-0 pid=3468`` with ``detail`` ``{"status_name":
"IBV_WC_RETRY_EXC_ERR", "vendor_err": 129, "peer": "10.216.210.236", "direction": "Recv", …}``.

This module holds the source's name, forms and families (the knowledge); the reading of a job log is
:mod:`.joblog`'s, which registers the source (``joblog.SOURCES['nccl']``: ``sniff`` and ``parse``).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ..families import Families, row
from ..pci import canonical_bdf
from ..reading.fields import _data, _find, _first, _generic, to_int

NAME = "nccl"
FORMS = (
    "host:pid:tid [cudaDev] NCCL INFO|WARN|TRACE lines (NCCL 2.0 to 2.29), optional [%F %T] stamp; host [cudaDev]",
    "file.cc:N WARN without the word NCCL (up to 2.3) or without any host prefix",
    "NCCL version banners (+cudaX.Y / compiled with CUDA X.Y)",
    "NCCL RAS report sections (2.24+)",
    "nccl-tests rank table (#  Rank N Pid P on host device D [0xbus]; 1.x without Group/Pid) and NCCL failure lines",
    "launcher prefixes: mpirun [1,0]<stdout>: / [155], pdsh host: (doubled), srun -l N:, torchrun [rank3]:, Ray (pid=N)",
    "collector stamps: RFC3339 / ISO with offset, mpirun --timestamp-output ctime, CloudWatch | ts |",
)


# ---------------------------------------------------------------------------------------- families


@cache
def _nccl_codes() -> dict[str, dict[int, str]]:
    data = _data("nccl_codes.toml")
    return {table: {int(k): v for k, v in data[table].items()} for table in ("result", "wc_status")}


#: The text of a WARN line after its file:line (and function): up to 2.3 without the word NCCL.
_WARN_TEXT = re.compile(r"^(?:[\w./-]+:\d+ (?:\(\w+\) )?)?(?:NCCL )?WARN\b:? ?(?:Function: \w+ Line: \d+: )?")
#: ``NET/IB : mlx5_1:1 async fatal event on QP (0x7309dc3bb338): invalid request …``, ``NET/IB : Got async
#: event : port error``, ``NET/IB : mlx5_0:1 Got async event : …``, ``… GID table changed``
_ASYNC = re.compile(
    r"NET/\w+\s*:\s*(?:(?P<device>[\w.-]+):(?P<port>\d+) )?(?:(?:Got async (?:error )?event|async fatal event"
    r"(?: on (?P<object>QP|CQ|SRQ)\b[^(:]*(?:\((?P<handle>0x[0-9a-fA-F]+|\(nil\))\))?)?)\s*:\s*(?P<event>.*?)\s*$"
    r"|(?P<gid>GID table change)d?)"
)
#: A peer as NCCL prints one, ``10.0.0.1<43236>``: after ``peer``, ``to``, ``from``.
#: (a site's logger prints ``connect to 172.16.30.229:39953``)
_PEER = re.compile(r"(?:peer|[Cc]onnect to|\bto|\bfrom) ([^\s<]+)<(\d+)>|[Cc]onnect to (\d{1,3}(?:\.\d{1,3}){3}):(\d+)\b")


@cache
def _cuda_codes() -> tuple[dict[int, str], dict[str, int], dict[str, int]]:
    """CUDA error numbers → names, their texts → numbers, and ncclGetErrorString texts → results."""
    data = _data("nccl_codes.toml")
    return {int(k): v for k, v in data["cuda"].items()}, data["cuda_text"], data["result_text"]


def _warn_text(line: str) -> str:
    return _WARN_TEXT.sub("", line, count=1).strip()


def _cuda_fields(text: str) -> dict[str, Any]:
    """The CUDA error inside an NCCL line: ``Cuda failure 'out of memory'``, ``Cuda failure 401 '…'``,
    ``CUDA error 401``, ``failed to open CUDA IPC handle : 217 peer access is not supported …``."""
    m = re.search(r"Cuda failure (?:(\d+) )?'([^']*)'|CUDA error (\d+)(?: '([^']*)')?|CUDA IPC handle : (\d+) ([^\n]*)", text)
    if not m:
        return {}
    number = to_int(m.group(1) or m.group(3) or m.group(5))
    error = (m.group(2) or m.group(4) or m.group(6) or "").strip() or None
    names, texts, _ = _cuda_codes()
    if number is None and error is not None:
        number = texts.get(error)
    fields = {"cuda_code": number, "cuda_name": names.get(number) if number is not None else None, "cuda_error": error}
    return {k: v for k, v in fields.items() if v is not None}


def _net_error(parts: dict[str, Any], text: str) -> dict[str, Any]:
    line = _first(text)
    m = re.search(r"with (?:error|status=?)\s*(\d+),? opcode[ =](\d+),? len[ =](\d+),? vendor err (\d+)", line)
    status = to_int(m.group(1)) if m else None
    peer = _PEER.search(line)
    event = _ASYNC.search(line)
    ofi = re.search(r"Function: (\w+) Line: (\d+)", line)  # aws-ofi-nccl's own log
    fields: dict[str, Any] = {
        "where": _find(r"^([\w./-]+:\d+) ", line) or (f"{ofi.group(1)}:{ofi.group(2)}" if ofi else None),
        "function": _find(r"^[\w./-]+:\d+ \((\w+)\)", line) or (ofi.group(1) if ofi else None),
        "transport": _find(r"NET/(\w+)", line),
        "peer": (peer.group(1) or peer.group(3)) if peer else None,
        "peer_port": to_int(peer.group(2) or peer.group(4)) if peer else None,
        "status": status, "status_name": _nccl_codes()["wc_status"].get(status) if status is not None else None,
        "opcode": to_int(m.group(2)) if m else None, "len": to_int(m.group(3)) if m else None,
        "vendor_err": to_int(m.group(4)) if m else None, "direction": _find(r"\((Send|Recv)\)", line),
        "local_gid": _find(r"localGid (\S+)", line), "remote_gid": _find(r"remoteGids?\s*(\S+)", line),
        # the HCA: the completion's "hca mlx5_ib0" (2.2x), an async event's "mlx5_1:1"
        "device": _find(r"\bhca (\S+)", line) or (event.group("device") if event else None),
        "port": to_int(event.group("port")) if event else None,
        "event": (event.group("event") or ("GID table change" if event.group("gid") else None)) if event else None,
        "object": event.group("object") if event else None, "handle": event.group("handle") if event else None,
        "detected_in": _find(r"fatal error \(detected in (\w+)\)", line),
        "verb": _find(r"Call to (\w+) (?:failed|returned)", line),
        "errno": _find(r"(?:failed|returned)(?: with error)? ?:? ([A-Z][A-Za-z ]+?)\s*$", line),
        "text": _warn_text(line),
        # the fabric's own error (a work completion, an async event, the IB/OFI plugin: the grammar's first
        # anchor), or a socket the peer closed or reset: often only the echo, on its peer, of a fabric error
        "layer": "socket" if parts["tokens"][0].type == "A_NCCL__NET_ERROR_2" else "fabric",
    }  # fmt: skip
    return row("nccl.net_error", "error", {k: v for k, v in fields.items() if v is not None}, code=status)


def _warn(parts: dict[str, Any], text: str) -> dict[str, Any]:
    line = _first(text)
    cuda = _cuda_fields(line)
    # (no where/function key when the line has none: a logger's prefix may name the site)
    fields = {"where": _find(r"^([\w./-]+:\d+) ", line), "function": _find(r"^[\w./-]+:\d+ \((\w+)\)", line),
              "text": _warn_text(line), **cuda}  # fmt: skip
    return row("nccl.warn", "warning", {k: v for k, v in fields.items() if v is not None}, code=cuda.get("cuda_code"))


def _error_chain(parts: dict[str, Any], text: str) -> dict[str, Any]:
    if parts["tokens"][0].type == "A_NCCL__ERROR_CHAIN_2":
        return _failure(text)
    steps = re.findall(r"NCCL INFO ([\w./-]+:\d+) -> (\d+)(?: \[([^\]]+)\])?", text)
    # the first "-> N" is where the error began; a later frame may map it to another result
    code = to_int(steps[0][1]) if steps else None
    final = to_int(steps[-1][1]) if steps else None
    thread = next((t for _, _, t in reversed(steps) if t), None)
    return row("nccl.error_chain", "error", code=code, stack=[w for w, _, _ in steps],
               result=_nccl_codes()["result"].get(code) if code is not None else None, thread=thread,
               final_code=final if final != code else None)  # fmt: skip


def _failure(text: str) -> dict[str, Any]:
    """An application's check of an NCCL call (nccl-tests' NCCLCHECK, TurboMind): the last frame of the
    chain, ``code`` the result its text names."""
    line = _first(text)
    m = re.search(r"(?:^(?P<host>[\w.-]+): )?(?:Test NCCL failure|NCCL failure|Failed, NCCL error) (?P<where>\S+:\d+) '(?P<error>[^']*)'", line)
    error = m.group("error") if m else ""
    code = _cuda_codes()[2].get(re.sub(r"\s*\(run with NCCL_DEBUG.*$", "", error))
    out = row("nccl.error_chain", "error", code=code, stack=[m.group("where")] if m else [],
              result=_nccl_codes()["result"].get(code) if code is not None else None, error=error or None,
              via="application")  # fmt: skip
    if m and m.group("host"):
        out["host"] = m.group("host")
    return out


def _conn_closed(parts: dict[str, Any], text: str) -> dict[str, Any]:
    return row("nccl.conn_closed", "warning", local_rank=to_int(_find(r"localRank (\d+)", text)))


def _comm(kind: str, severity: str):  # noqa: ANN202 - an enricher
    def enrich(parts: dict[str, Any], text: str) -> dict[str, Any]:
        line = _first(text)
        m = re.match(r"#?\s*Rank\s+(\d+) (?:Group\s+\d+ )?(?:Pid\s+(\d+) )?on\s+(\S+) device\s+(\d+) \[(0x[0-9a-fA-F]+)\] ?(.*)", line)
        if m:  # nccl-tests' rank table (1.x prints no Group/Pid, and a bus id of 0x00)
            bus = to_int(m.group(5), 16)
            return {**row(kind, severity, pid=to_int(m.group(2)), gpu=f"0000:{bus:02x}:00.0" if bus else None,
                          cuda_dev=to_int(m.group(4)), product=m.group(6).strip() or None, via="nccl-tests"),
                    "rank": to_int(m.group(1)), "host": m.group(3)}  # fmt: skip
        bus_id = _find(r"busId ([0-9a-fA-F:]+)", line)
        fields = {
            "comm": _find(r"comm (0x[0-9a-fA-F]+)", line), "nranks": to_int(_find(r"n[Rr]anks (\d+)", line)),
            "nnodes": to_int(_find(r"nNodes (\d+)", line)), "local_rank": to_int(_find(r"localRank (\d+)", line)),
            "local_ranks": to_int(_find(r"localRanks (\d+)", line)),
            "cuda_dev": to_int(_find(r"cudaDev (\d+)", line)), "nvml_dev": to_int(_find(r"nvmlDev (\d+)", line)),
            "bus_id": bus_id, "comm_id": _find(r"commId (0x[0-9a-fA-F]+)", line),
            "phase": _find(r" - (\w+ (?:COMPLETE|START))", line),
        }  # fmt: skip
        return {**row(kind, severity, {k: v for k, v in fields.items() if v is not None},
                      gpu=canonical_bdf(bus_id, nccl=True) if bus_id else None),
                "rank": to_int(_find(r" rank (\d+)", line))}  # fmt: skip

    return enrich


def _version(parts: dict[str, Any], text: str) -> dict[str, Any]:
    return row("nccl.version", "info", version=_find(r"NCCL version (\d+\.\d+(?:\.\d+)?(?:-\d+)?)", text),
               cuda=_find(r"(?:\+cuda|compiled with CUDA )(\d+(?:\.\d+)*)", text),
               cuda_runtime=to_int(_find(r"CUDA runtime version (\d+)", text)),
               cuda_driver=to_int(_find(r"driver version (\d+)", text)))  # fmt: skip


def _ras(parts: dict[str, Any], text: str) -> dict[str, Any]:
    lines = text.split("\n")
    ranks = [{"rank": to_int(r), "gpu": to_int(g), "pid": to_int(p), "node": n}
             for r, g, p, n in re.findall(r"Rank (\d+) -- GPU (\d+) managed by process (\d+) on node (\S+)", text)]  # fmt: skip
    statuses = sorted(set(re.findall(r"\b(MISMATCH|TIMEOUT|ERROR|ABORTED|INCOMPLETE|DEAD|UNREACHABLE)\b", text)))
    detail: dict[str, Any] = {"section": lines[0].strip(), "statuses": statuses}
    if ranks:
        detail["ranks"] = ranks
    counts = re.findall(r"(\d+) ranks? have launched up to operation (\d+)", text)
    if counts:
        detail["op_counts"] = [{"ranks": to_int(a), "op": to_int(b)} for a, b in counts]
    return row("nccl.ras", "warning" if statuses else "info", detail)


NCCL = Families("nccl", {
    "nccl.net_error": _net_error, "nccl.warn": _warn, "nccl.error_chain": _error_chain,
    "nccl.conn_closed": _conn_closed, "nccl.abort": _comm("nccl.abort", "warning"),
    "nccl.init": _comm("nccl.init", "info"), "nccl.version": _version, "nccl.ras": _ras,
}, generic=_generic)  # fmt: skip
