"""A job log cut into chunks that no record spans: a cut falls after a run of lines that no block of
:mod:`.records` can start, continue or end on (see :func:`_cut`), so each chunk is read on its own and
memory follows the chunk, not the file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..regex import for_python
from ..text import WHITESPACE
from .prefix import GLUE_HINTS, GLUED
from .records import WINDOW

#: Bytes per chunk of a big job log (cut at a line where no record spans). A chunk's frames take tens of
#: times its bytes at their peak, and each chunk has a fixed cost (~0.1 s: Polars operations and the
#: regexes it compiles again for each). ``forensics parse --format parquet`` of a 537 MB generated log,
#: one run each: 2 MB chunks 91.7 s and a 352 MB peak, 2.5 MB 80.0 s and 389 MB (60.4 s and 395 MB in
#: another), 3 MB 72.6 s and 401 MB
#: (32 MB: 1,275 MB); the 64 MB log in memory, two runs each: 2 MB 5.9 / 5.6 MB/s, 3 MB 6.4 / 6.0, 4 MB
#: 7.3 / 6.9. What the chunks carry to the next (step streams folded, errors, the rank map) stays small:
#: the peak does not grow with the file.
CHUNK_BYTES = 5 * 512 * 1024
#: How many times CHUNK_BYTES a chunk may grow while looking for a place no record spans.
MAX_GROWTH = 8


#: What may start, continue or end a block on a row: the class patterns of ``data/job_records.toml``
#: unanchored (a logger prefix may stand before them). :func:`_row_marked` adds an indented row and one
#: ending as a logger prefix does. A blank row is not marked: a block takes one only when the next row with text
#: continues it (a chained traceback, a C++ stack, a RAS table), and that row is marked.
_MARKER = re.compile(
    rb'Traceback \(most|File "|During handling|The above exception|frame #\d|Exception raised from|terminate called'
    rb"|what\(\)|FAILED|Failures:|NO_OTHER_FAILURES|Root Cause|:\d+ -> \d|Job summary|Communicators|^Errors|^Warnings"
    rb"|block: \[|\^\^|CUDA kernel errors|CUDA_LAUNCH_BLOCKING|TORCH_USE_CUDA_DSA|Device-side assertion tracking|Search for .cuda"
    rb"|Last error|nccl\w+Error"
    rb"|CUDA runtime version|NCCL version|Watchdog caught"
    # a rule (a report's frame, a RAS title's underline) is a row of its own, not a Keras bar's [=====>...]
    rb"|(?:={6,}|-{6,})(?:\s|\x1b\[[0-9;]*m)*$"
)
#: An indented row with text: a traceback's code line, a report's field, a RAS table row. Not a progress
#: bar's (`` 45%|███▌ | 45/100``): an open RAS table is the one block that takes any indented row, and
#: a bar's row is none of its own.
_INDENTED = re.compile(rb"^(?![ \t]*\d+%\|)\s+\S")
#: A row ending as a logger prefix in brackets does (:data:`.prefix.LOGGER_FORMS`) may be that prefix
#: alone, its message on the next row (DeepSpeed's ``[…] [INFO] [fused_optimizer.py:344:_update_scale]``):
#: a bracket without spaces (a level, a call site, ``[host:pid=N]``, NCCL's ``[cudaDev]``), a stamp in
#: brackets, a call site's ``file.py:N]`` (glog, c10, vLLM). Not a message's own ``[repeated 12x across
#: cluster]``, nor a progress bar's ``[elapsed<remaining, …]`` (tqdm, Lightning).
_PREFIX_END = re.compile(rb"(?:\[[^\]\s]*\]|\[\d{4}-\d\d-\d\d[ T][^\]]*\]|:\d+\])\s*$")
_BAR_TIMES = re.compile(rb"\[\d+:\d\d(?::\d\d)?<(?:\d+:\d\d(?::\d\d)?|\?)[^\[\]]*\]\s*$")
_GLUED = re.compile(for_python(GLUED))
_GLUE_HINTS = tuple(hint.encode() for hint in GLUE_HINTS)


#: A launcher's or logger's prefix at the start of a line (mpirun tags, pdsh hosts, ``[rank3]:``, Ray):
#: what follows it is tested as a row too, and nothing following it is a prefix alone (its message next).
_LEAD = re.compile(rb"^(?:\[\d+,\d+\]<\w+>: ?|\[\d+\] |[\w.-]+: (?:[\w.-]+: )?|\[(?:rank|default)\d+\]: ?|\([^)]*pid=\d+[^)]*\) )+")


def _rows(line: bytes) -> list[bytes]:
    """The rows the prefix peeling makes of a line: one per carriage-return segment (empty ones
    dropped), and the text glued after a progress bar as a row of its own (:func:`.prefix.lines_frame`)."""
    segments = ([s for s in line.split(b"\r") if s] or [b""]) if b"\r" in line else [line]
    rows: list[bytes] = []
    for segment in segments:
        glued = None
        if any(hint in segment for hint in _GLUE_HINTS):
            glued = _GLUED.match(segment.decode("utf-8", "surrogateescape"))
        rows += [segment] if glued is None else [g.encode("utf-8", "surrogateescape") for g in glued.group("bar", "rest")]
    return rows


def _row_marked(row: bytes) -> bool:
    if _MARKER.search(row) or _INDENTED.match(row):
        return True
    if _PREFIX_END.search(row) and not _BAR_TIMES.search(row):
        return True
    lead = _LEAD.match(row)
    if not lead:
        return False
    rest = row[lead.end():]
    # (a launcher prefix alone on its row: its message follows on the next)
    return not rest.strip() or bool(_MARKER.search(rest) or _INDENTED.match(rest))


def _marked(line: bytes) -> bool:
    """Whether a line may start, continue or end a block: one of its rows may."""
    return any(_row_marked(row) for row in _rows(line))


def _cut(buf: bytes) -> int | None:
    """Where to end a chunk of ``buf``: after a line with ``WINDOW + 1`` lines before it that no block
    can start, continue or end on, and before a line with text no block can either (a row's block may
    depend on the next row with text), so no record spans the cut. None when there is none."""
    tail_start = max(0, len(buf) - 4 * 1024 * 1024)
    tail_start = buf.rfind(b"\n", 0, tail_start) + 1 if tail_start else 0
    ends = [m.start() for m in re.finditer(rb"\n", buf[tail_start:])]
    starts = [0, *(e + 1 for e in ends)]
    clean = 0
    # text_from[k]: whether the first line with text from line k on is marked (None: none in the buffer)
    text_from: list[bool | None] = [None] * (len(ends) + 1)
    for k in range(len(ends) - 1, -1, -1):
        line = buf[tail_start + starts[k]: tail_start + ends[k]]
        marked = _marked(line)
        text_from[k] = marked if line.decode("utf-8", "replace").strip(WHITESPACE) else text_from[k + 1]
        clean = 0 if marked else clean + 1
        cut = k + WINDOW + 1  # the last line of the chunk
        if clean >= WINDOW + 2 and text_from[cut + 1] is False:
            return tail_start + ends[cut] + 1
    return None


def iter_chunks(read: Any, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Chunks of whole lines from ``read(n)``, each cut where no record spans (see :func:`_cut`); a
    chunk with no such place grows, up to ``MAX_GROWTH`` times ``size``, and is then cut at a line end."""
    pending = b""
    while True:
        block = read(size)
        if not block:
            break
        buf = pending + block
        if len(block) < size:  # the end of the input: what is left is one chunk, nothing to cut
            pending = buf
            break
        end = buf.rfind(b"\n") + 1
        if not end:
            pending = buf
            continue
        cut = _cut(buf[:end])
        if cut is None:
            if len(buf) < MAX_GROWTH * size:
                pending = buf
                continue
            cut = end
        yield buf[:cut]
        pending = buf[cut:]
    if pending:
        yield pending
