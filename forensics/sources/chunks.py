"""A job log cut into chunks that no record spans: a cut falls after a run of lines that no block of
:mod:`.records` can start, continue or end on (see :func:`_cut`), so each chunk is read on its own and
memory follows the chunk, not the file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

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


_MARKER = re.compile(
    rb'Traceback \(most|File "|During handling|The above exception|frame #\d|Exception raised from|terminate called'
    rb"|what\(\)|FAILED|Failures:|NO_OTHER_FAILURES|Root Cause|-> \d|={6,}|-{6,}|Job summary|Communicators|^Errors|^Warnings"
    rb"|block: \[|^\s|\^\^|CUDA kernel errors|CUDA_LAUNCH_BLOCKING|TORCH_USE_CUDA_DSA|Last error|nccl\w+Error"
    rb"|CUDA runtime version|NCCL version|Watchdog caught|\]\s*$|^$|\r"
)


#: A launcher's or logger's prefix at the start of a line (mpirun tags, pdsh hosts, ``[rank3]:``, Ray):
#: the anchored markers (an indented line, an empty one) are tested after it too.
_LEAD = re.compile(rb"^(?:\[\d+,\d+\]<\w+>: ?|\[\d+\] |[\w.-]+: (?:[\w.-]+: )?|\[(?:rank|default)\d+\]: ?|\([^)]*pid=\d+[^)]*\) )+")


def _marked(line: bytes) -> bool:
    if _MARKER.search(line):
        return True
    lead = _LEAD.match(line)
    return bool(lead and _MARKER.search(line[lead.end():]))


def _cut(buf: bytes) -> int | None:
    """Where to end a chunk of ``buf``: after a line with ``WINDOW + 1`` lines before it that no block
    can start, continue or end on (so no record spans the cut). None when there is none."""
    tail_start = max(0, len(buf) - 4 * 1024 * 1024)
    tail_start = buf.rfind(b"\n", 0, tail_start) + 1 if tail_start else 0
    ends = [m.start() for m in re.finditer(rb"\n", buf[tail_start:])]
    clean = 0
    starts = [0, *(e + 1 for e in ends)]
    for k in range(len(ends) - 1, -1, -1):
        line = buf[tail_start + starts[k]: tail_start + ends[k]]
        clean = clean + 1 if not _marked(line) else 0
        if clean >= WINDOW + 2:
            return tail_start + ends[k + WINDOW + 1] + 1 if k + WINDOW + 1 < len(ends) else len(buf)
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
