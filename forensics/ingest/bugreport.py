"""Split an ``nvidia-bug-report.log`` (FACTS.md §C10) into its sections, each to be parsed on its own.

``nvidia-bug-report.sh`` writes a prologue (``Date:``, ``uname:``, ``command line flags:``), then one
section per file or command, each opened by a line of underscores and a blank line::

    ____________________________________________

    *** /var/log/kern.log
    *** ls: -rw-r----- 1 syslog adm 1234 2025-01-25 10:34:54.000000000 +0000 /var/log/kern.log
    <the file>

or a command header (``dmesg:``, ``/usr/bin/nvidia-smi --query``, ``lspci -d "10de:*" -v -xxx``) and its
output. The section that greps every kernel log for NVRM lines is split again into one part per log it
names (``  /var/log/messages:``, ``  journalctl -b -1:``). A section is named by its path or command;
its lines keep their numbers in the whole report.

>>> text = b"Start of NVIDIA bug report log file.\\nDate: Sat Jan 25 10:40:01 UTC 2025\\n" + SEPARATOR + \\
...     b"\\n\\n*** /proc/cmdline\\n*** ls: -r--r--r-- 1 root root 0 /proc/cmdline\\nro quiet\\n"
>>> [(s.name, s.data, s.first_line) for s in split(text)]
[('header', b'Start of NVIDIA bug report log file.\\nDate: Sat Jan 25 10:40:01 UTC 2025', 1), ('/proc/cmdline', b'ro quiet\\n', 7)]
>>> facts(text)["date"]
'Sat Jan 25 10:40:01 UTC 2025'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SEPARATOR = b"_" * 44
_SEPARATOR = re.compile(rb"^_{40,}[ \t]*\r?$", re.M)
_SCAN = re.compile(rb"^\s*Scanning kernel log files for NVIDIA kernel messages", re.I)
_SCAN_PART = re.compile(rb"^  (\S[^\n]*?):[ \t]*\r?$", re.M)


@dataclass
class Section:
    """One section: its name, content, the line of the report its content starts at, and a note."""

    name: str
    data: bytes
    first_line: int
    note: str | None = None


def is_bug_report(head: bytes) -> bool:
    """True when ``head`` (the first KBs of a decompressed file) is an nvidia-bug-report log."""
    return b"Start of NVIDIA bug report log file" in head[:4096] or b"nvidia-bug-report.sh Version" in head[:4096]


def split(data: bytes) -> list[Section]:
    """The sections of a bug report, in order (the prologue is ``header``)."""
    sections: list[Section] = []
    starts = [m.start() for m in _SEPARATOR.finditer(data)]
    bounds = [0, *starts, len(data)]
    line = 1
    for i in range(len(bounds) - 1):
        chunk = data[bounds[i]:bounds[i + 1]]
        chunk_line = line
        line += chunk.count(b"\n")
        if i == 0:
            body = chunk.rstrip(b"\n")
            if body.strip():
                sections.append(Section("header", body, chunk_line))
            continue
        sections.extend(_section(chunk, chunk_line))
    return sections


def _section(chunk: bytes, line: int) -> list[Section]:
    """One separator-opened chunk as a section (or, for the NVRM scan, one section per log it names)."""
    lines = chunk.split(b"\n")
    i = 1  # the separator
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines):
        return []
    header = lines[i].decode("utf-8", "replace").strip()
    i += 1
    note = None
    if header.startswith("*** "):
        name = header[4:]
        if m := re.match(r"(.*?) (does not exist|is not readable)$", name):
            return [Section(m[1], b"", line + i, f"the bug report says: {m[2]}")]
        if i < len(lines) and lines[i].startswith(b"*** ls:"):
            i += 1
    else:
        name = header.rstrip(":").strip() or "section"
        if _SCAN.match(lines[i - 1]):
            return _scan_parts(b"\n".join(lines[i:]), line + i)
        if name.startswith("Skipping "):
            note = name
    body = b"\n".join(lines[i:])
    return [Section(name, _trim(body), line + i, note)]


def _scan_parts(body: bytes, line: int) -> list[Section]:
    """The NVRM-grep section split by the ``  <log>:`` lines that open each part."""
    parts: list[Section] = []
    marks = list(_SCAN_PART.finditer(body))
    if not marks:
        return [Section("kernel messages", _trim(body), line)]
    if body[: marks[0].start()].strip():
        parts.append(Section("kernel messages", _trim(body[: marks[0].start()]), line))
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(body)
        start_line = line + body[: m.end()].count(b"\n") + 1
        content = body[m.end() + 1 : end]
        parts.append(Section(f"kernel messages: {m[1].decode('utf-8', 'replace')}", _trim(content), start_line))
    return parts


def _trim(body: bytes) -> bytes:
    """Content without the blank line the script adds after it, ending with one newline."""
    body = body.rstrip(b"\n")
    return body + b"\n" if body else b""


def facts(data: bytes) -> dict[str, str]:
    """What the prologue says: ``date`` (the ``Date:`` line), ``host`` (from ``uname:``), ``kernel``."""
    head = data[:8192].decode("utf-8", "replace")
    out: dict[str, str] = {}
    if m := re.search(r"^Date: *(.+?)\s*$", head, re.M):
        out["date"] = m[1]
    if m := re.search(r"^uname: *\S+ +(\S+) +(\S+)", head, re.M):
        out["host"], out["kernel"] = m[1], m[2]
    return out
