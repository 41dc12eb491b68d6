"""PyTorch and torchrun output: tracebacks, CUDA errors, ProcessGroupNCCL watchdogs, elastic reports.

Families (``grammars/traceback.lark``): ``py.exception`` (one record per traceback, chained
"During handling…"/"direct cause" exceptions and Python 3.11+ caret lines included; rank-prefixed lines
of interleaved ranks kept apart), classified by its exception (``data/job_errors.toml``) into
``cuda.illegal_address``, ``cuda.device_assert`` (with the kernel's assertion text and site, printed
before or after the traceback), ``cuda.launch_failure``, ``cuda.ecc``, ``cuda.oom`` (tried/total/free
bytes, other processes), ``cuda.error``, ``torch.nccl_error`` (DistBackendError, ncclSystemError …),
``train.grad_nonfinite`` (Megatron's "found NaN in local grad norm"); ``py.traceback`` for frames whose
exception line is not there; ``cpp.abort`` (``terminate called after throwing …`` with its ``what()``,
classified the same way) and ``cpp.stack`` (``frame #N`` stacks); ``torch.watchdog_timeout`` (every
generation of FACTS.md §C8: ``seq``, ``op``, ``numel_in``/``numel_out``, ``timeout_ms``, ``ran_ms``,
``pg``), ``torch.watchdog_progress`` ("last enqueued / last completed NCCL work"),
``torch.heartbeat_timeout``, ``torch.nccl_error``; ``cuda.device_assert`` lines (one record per site,
``threads`` counted); ``job.exit`` (elastic ``failed (exitcode: N) local_rank: L (pid: P)``),
``job.child_failed`` (one per entry of the ChildFailedError report: rank, local rank, host, time, exit
code, signal, ``root_cause``) and ``job.report`` (the report's head).

Example::

    [rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.

becomes ``kind=torch.watchdog_timeout rank=0 severity=error`` with ``detail`` ``{"seq": 7753, "op":
"_REDUCE_SCATTER_BASE", "timeout_ms": 600000, "ran_ms": 600061, "where": "ProcessGroupNCCL.cpp:607", …}``.

This module holds the source's name, forms and families (the knowledge); the reading of a job log is
:mod:`.joblog`'s, which registers the source (``joblog.SOURCES['torch']``: ``sniff`` and ``parse``).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ..families import Families, row
from ..reading.fields import _data, _find, _first, _generic, to_float, to_int
from .nccl import _nccl_codes

NAME = "torch"
FORMS = (
    "Python tracebacks (chained, 3.11+ carets, [rank0]: prefixed, vLLM ERROR MM-DD hh:mm:ss file:line] prefixed)",
    "ProcessGroupNCCL [E file:line], [rank0]:[E1206 18:44:12.7 file:line] (glog, no year), [PG … Rank r] tags",
    "C++ terminate called after throwing … what(): …, frame #N stacks, Exception raised from …",
    "CUDA device-side assert lines (ATen, Windows paths, THCUNN template signatures)",
    "torch.distributed.elastic failed (exitcode: N) lines (logging or glog style) and ChildFailedError reports",
)


# ---------------------------------------------------------------------------------------- families


@cache
def _errors() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((e["kind"], re.compile(e["pattern"])) for e in _data("job_errors.toml")["error"])


def classify_error(text: str) -> str | None:
    """The kind an error message means (``data/job_errors.toml``), or None.

    >>> classify_error("RuntimeError: CUDA error: an illegal memory access was encountered")
    'cuda.illegal_address'
    """
    for kind, pattern in _errors():
        if pattern.search(text):
            return kind
    return None


_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
            11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}  # fmt: skip
_UNITS = {"b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "kb": 1000, "mb": 1000**2,
          "gb": 1000**3, "bytes": 1}  # fmt: skip


def _bytes(amount: str | None) -> int | None:
    if not amount:
        return None
    m = re.match(r"([\d.]+)\s*([KMGT]i?B|B|bytes)", amount.strip(), flags=re.IGNORECASE)
    number = to_float(m.group(1)) if m else None  # "73.952.19 MiB" (a garbled paste) is no size
    return None if m is None or number is None else to_int(number * _UNITS.get(m.group(2).lower(), 1))


def _pg_rank(text: str) -> tuple[int | None, str | None]:
    """The rank and process-group tag of a ProcessGroupNCCL message (``[PG 1 Rank 0]`` …)."""
    m = re.search(r"\[((?:PG [^\]\n]*?)?)Rank (\d+)\]", text)
    if not m:
        return None, None
    return to_int(m.group(2)), (m.group(1).strip() or None)


def _watchdog_timeout(parts: dict[str, Any], text: str) -> dict[str, Any]:
    rank, pg = _pg_rank(text)
    work = dict(re.findall(r"(\w+(?:\(ms\))?)=([^,)\n]*)", _find(r"WorkNCCL\(([^\n]*?)\) ran", text) or ""))
    fields = {
        "seq": to_int(work.get("SeqNum")), "op": work.get("OpType"), "numel_in": to_int(work.get("NumelIn")),
        "numel_out": to_int(work.get("NumelOut")), "timeout_ms": to_int(work.get("Timeout(ms)")),
        "ran_ms": to_int(_find(r"ran for (\d+) milliseconds", text)), "pg": pg,
    }  # fmt: skip
    return {**row("torch.watchdog_timeout", "error", {k: v for k, v in fields.items() if v is not None}), "rank": rank}


def _watchdog_progress(parts: dict[str, Any], text: str) -> dict[str, Any]:
    rank, pg = _pg_rank(text)
    fields = {"seq": to_int(_find(r"(?:at work|Timeout at NCCL work): (\d+)", text)),
              "last_enqueued": to_int(_find(r"last enqueued NCCL work: (-?\d+)", text)),
              "last_completed": to_int(_find(r"last completed NCCL work: (-?\d+)", text)), "pg": pg}  # fmt: skip
    return {**row("torch.watchdog_progress", "error", {k: v for k, v in fields.items() if v is not None}), "rank": rank}


def _heartbeat(parts: dict[str, Any], text: str) -> dict[str, Any]:
    rank, pg = _pg_rank(text)
    fields = {"stuck_s": to_int(_find(r"got stuck for (\d+) seconds", text)),
              "work_meta_size": to_int(_find(r"workMetaList_\.size\(\)=(\d+)", text)), "pg": pg}  # fmt: skip
    return {**row("torch.heartbeat_timeout", "critical", {k: v for k, v in fields.items() if v is not None}), "rank": rank}


#: What PyTorch's "NCCL error in: …, <reason>" says, as the ncclResult_t it names (nccl.h's strings).
_NCCL_REASONS = (
    (r"unhandled cuda error", 1), (r"unhandled system error", 2), (r"internal error", 3),
    (r"invalid argument", 4), (r"invalid usage", 5), (r"remote process exited or there was a network error", 6),
)  # fmt: skip


def _nccl_error(parts: dict[str, Any], text: str) -> dict[str, Any]:
    rank, pg = _pg_rank(text)
    cause = _find(r"thread terminated with exception: ([^\n]*)", text)
    kind = (classify_error(cause) if cause else None) or "torch.nccl_error"
    if kind in ("job.report", "train.loss_nonfinite", "train.grad_nonfinite"):
        kind = "torch.nccl_error"
    names = {v: k for k, v in _nccl_codes()["result"].items()}
    named = _find(r"\b(nccl(?:UnhandledCuda|System|Internal|InvalidArgument|InvalidUsage|Remote)Error)\b", text)
    result = names.get(named) if named else next((c for rx, c in _NCCL_REASONS if re.search(rx, text)), None)
    fields = {"pg": pg, "cause": cause, "via": "watchdog" if cause else None, "text": _first(text),
              "result": _nccl_codes()["result"].get(result) if result is not None else None,
              "nccl_version": _find(r"NCCL version (\d+\.\d+\.\d+)", text),
              "last_error": _find(r"Last error:\s*\n?\s*([^\n]+)", text)}  # fmt: skip
    return {**row(kind, "error", {k: v for k, v in fields.items() if v is not None}, code=result), "rank": rank}


def _cpp_abort(parts: dict[str, Any], text: str) -> dict[str, Any]:
    what = _find(r"\n[ \t]+what\(\): +([^\n]*)", text)
    rank, pg = _pg_rank(what or "")
    kind = (classify_error(what) if what else None) or "cpp.abort"
    if kind in ("job.report",):
        kind = "cpp.abort"
    fields = {"exception": _find(r"instance of '([^']*)'", text), "what": what, "pg": pg,
              "raised_from": _find(r"Exception raised from (\S+ at \S+)", text),
              "frames": len(re.findall(r"\nframe #\d+: ", text)) or None}  # fmt: skip
    return {**row(kind, "critical", {k: v for k, v in fields.items() if v is not None}), "rank": rank}


def _cpp_stack(parts: dict[str, Any], text: str) -> dict[str, Any]:
    frames = re.findall(r"(?:^|\n)frame #\d+: ([^\n]*?)(?: \+ 0x[0-9a-f]+)? \(0x[0-9a-f]+ in ([^)\n]*)\)", text)
    return row("cpp.stack", "info", frames=[f for f, _ in frames] or None,
               raised_from=_find(r"Exception raised from (\S+ at \S+)", text))  # fmt: skip


def _device_assert(parts: dict[str, Any], text: str) -> dict[str, Any]:
    line = _first(text)
    # MSVC builds print no kernel name: ``C:\…\NLLLoss2d.cu:103: block: [4,0,0], …``
    m = re.match(r"(?P<where>.*?:\d+): (?:(?P<kernel>.*?): )?block: \[(?P<block>[\d,]+)\], thread: \[(?P<thread>[\d,]+)\] "
                 r"Assertion (?P<assert>.*?) failed\.?\s*$", line)  # fmt: skip
    fields = {k: v for k, v in (m.groupdict() if m else {"text": line}).items() if v is not None}
    if "assert" in fields:
        fields["assert"] = fields["assert"].strip("`'\"")
    fields["threads"] = text.count("\n") + 1
    return row("cuda.device_assert", "error", fields)


_SLURM_SIGNALS = {"Killed": "SIGKILL", "Terminated": "SIGTERM", "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT"}


def _job_exit(parts: dict[str, Any], text: str) -> dict[str, Any]:
    m = re.search(r"exitcode: (-?\d+)|exits with return code = (-?\d+)|Exited with exit code (\d+)", text)
    code = to_int(next((g for g in m.groups() if g is not None), None) if m else None)
    srun = re.search(r"srun: error: (\S+): tasks? ([\d,\-]+): (Killed|Terminated|Segmentation fault|Aborted)", text)
    signal = _SIGNALS.get(-code) if code and code < 0 else (_SLURM_SIGNALS[srun[3]] if srun else None)
    out = row("job.exit", "error" if code or signal else "info", code=code, pid=to_int(_find(r"\(pid: (\d+)\)", text)),
              local_rank=to_int(_find(r"local_rank: (\d+)", text)), binary=_find(r"of binary: (\S+)", text),
              signal=signal, tasks=_find(r"srun: error: \S+: tasks? ([\d,\-]+):", text))  # fmt: skip
    if host := _find(r"srun: error: (\S+): task", text):
        out["host"] = host
    return out


def _child_failed(parts: dict[str, Any], text: str) -> dict[str, Any]:
    fields = dict(re.findall(r"\n[ \t]+(time|host|rank|exitcode|error_file|traceback)[ \t]*:[ \t]*([^\n]*)", text))
    code = to_int(_find(r"^(-?\d+)", fields.get("exitcode", "")))
    signal = _find(r"Signal \d+ \((\w+)\)", fields.get("traceback", "")) or (_SIGNALS.get(-code) if code and code < 0 else None)
    detail = {
        "failure": to_int(_find(r"^\[(\d+)\]", text)), "time": fields.get("time"), "host": fields.get("host"),
        "local_rank": to_int(_find(r"local_rank: (\d+)", fields.get("rank", ""))), "signal": signal,
        "error_file": fields.get("error_file"), "traceback": fields.get("traceback"),
    }  # fmt: skip
    out = row("job.child_failed", "error", {k: v for k, v in detail.items() if v is not None},
              code=code, pid=to_int(_find(r"\(pid: (\d+)\)", fields.get("exitcode", ""))))
    out["rank"] = to_int(_find(r"^(\d+)", fields.get("rank", "")))
    out["host"] = fields.get("host")
    if fields.get("time"):  # torchrun writes the agent's local time as 2023-06-14_22:36:10
        out["stamp"] = fields["time"].replace("_", "T", 1)
    return out


def _report(parts: dict[str, Any], text: str) -> dict[str, Any]:
    return row("job.report", "error", script=_find(r"(?:^|\n)(\S+) FAILED", text),
               no_other_failures="<NO_OTHER_FAILURES>" in text or None)  # fmt: skip


def _py_exception(parts: dict[str, Any], text: str) -> dict[str, Any]:
    lines = text.split("\n")
    frames = [{"file": f, "line": to_int(n), "function": fn}
              for f, n, fn in re.findall(r'(?:^|\n)[ \t]+File "([^"\n]*)", line (\d+)(?:, in ([^\n]*))?', text)]  # fmt: skip
    # The exception lines are those no traceback line kind claims: not a frame, code, caret, header.
    exc_lines = [ln for ln in lines if ln.strip() and not re.match(
        r'[ \t]+File "|[ \t]{4,}|[ \t]+[\^~]+[ \t]*$|Traceback \(most recent call last\)|During handling of the above'
        r'|The above exception was the direct cause', ln)]  # fmt: skip
    if not exc_lines:
        return row("py.traceback", "warning", frames=frames, cut=True)
    last = _last_exception(exc_lines)
    exc_text = "\n".join(exc_lines[exc_lines.index(last):])
    exc_type = _find(r"^([A-Za-z_][\w.]*)(?::|$)", last)
    kind = classify_error(exc_text) or "py.exception"
    detail: dict[str, Any] = {"type": exc_type, "error": last.split(": ", 1)[1] if ": " in last else last,
                              "frames": frames, "chained": len(exc_lines) > len(exc_lines[exc_lines.index(last):]) or None}  # fmt: skip
    out = row(kind, "error", {k: v for k, v in detail.items() if v is not None})
    if kind == "cuda.oom":
        out["detail"].update(_oom_fields(exc_text))
    if kind == "job.killed" and "Killed" in exc_text:
        out["detail"]["signal"] = "SIGKILL"
    if kind == "job.report":
        out["detail"]["script"] = _find(r"\n(\S+) FAILED", text)
    rank = to_int(_find(r"\bRank (\d+)\b", exc_text))
    if rank is not None:
        out["rank"] = rank
    node = _find(r"\bnode: (\S+)", exc_text)
    if node:
        out["detail"]["node"] = node
    return out


#: The numbers CUDA, THC, Caffe and the CUDA samples print for an error (``error=2``, ``(802)``,
#: ``code=802(…)``, ``(4 vs. 0)``, ``Error 802:``).
_CUDA_CODE = re.compile(r"\berror=(\d+)\b|[Cc]uda runtime error \((\d+)\)|\bcode=(\d+)\(|\((\d+) vs\. 0\)|\bError (\d+): ")


def _error_line(parts: dict[str, Any], text: str) -> dict[str, Any]:
    """An error line with no traceback above it (the ``cuda.error`` family): its kind is what the
    message means (``data/job_errors.toml``), a CUDA error when nothing more precise matches."""
    line = _first(text).strip()
    kind = classify_error(text) or "cuda.error"
    if kind in ("job.report", "torch.watchdog_timeout"):  # those need their own family's fields
        kind = "cuda.error"
    m = _CUDA_CODE.search(line)
    cuda_code = to_int(next(g for g in m.groups() if g)) if m else None
    detail: dict[str, Any] = {"type": _find(r"^(?:\S*\s)?([A-Za-z_][\w.]*(?:Error|Exception))\b:?", line),
                              "error": line, "cuda_code": cuda_code, "traceback": False}  # fmt: skip
    if kind == "cuda.oom":
        detail.update(_oom_fields(text))
    if kind == "job.killed":
        detail["signal"] = "SIGKILL" if "Killed" in line else None
    out = row(kind, "critical" if kind == "job.killed" else "error", {k: v for k, v in detail.items() if v is not None},
              code=cuda_code)  # fmt: skip
    rank = to_int(_find(r"\bRank (\d+)\b", line))
    if rank is not None:
        out["rank"] = rank
    return out


def _last_exception(exc_lines: list[str]) -> str:
    """The final exception line of a (chained) traceback: the last line that names an exception type."""
    named = [ln for ln in exc_lines if re.match(r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning|Fault)\b", ln)]
    if named:
        return named[-1]
    return exc_lines[0]


def _oom_fields(text: str) -> dict[str, Any]:
    size = r"([\d.]+ ?[KMGT]i?B)"
    fields = {
        "tried_bytes": _bytes(_find(rf"Tried to allocate {size}", text)),
        "gpu_index": to_int(_find(r"\bGPU (\d+)", text)),
        "total_bytes": _bytes(_find(rf"total capacity of {size}", text) or _find(rf"{size} total capacity", text)),
        "free_bytes": _bytes(_find(rf"of which {size} is free", text) or _find(rf"{size} free", text)),
        "process_bytes": _bytes(_find(rf"this process has {size} memory in use", text)),
        "allocated_bytes": _bytes(_find(rf"{size} is allocated by PyTorch", text) or _find(rf"{size} already allocated", text)),
        "reserved_unallocated_bytes": _bytes(_find(rf"{size} is reserved by PyTorch but unallocated", text)),
    }  # fmt: skip
    others = [{"pid": to_int(p), "bytes": _bytes(b)} for p, b in re.findall(rf"Process (\d+) has {size} memory in use", text)]
    out: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if others:
        out["other_processes"] = others
    return out


TORCH = Families("traceback", {
    "torch.watchdog_timeout": _watchdog_timeout, "torch.watchdog_progress": _watchdog_progress,
    "torch.heartbeat_timeout": _heartbeat, "torch.nccl_error": _nccl_error, "cpp.abort": _cpp_abort,
    "cpp.stack": _cpp_stack, "cuda.device_assert": _device_assert, "job.exit": _job_exit,
    "job.child_failed": _child_failed, "job.report": _report, "py.exception": _py_exception,
    "cuda.error": _error_line,
}, generic=_generic)  # fmt: skip
