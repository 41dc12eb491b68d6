"""Stack dumps: gdb ``bt`` / ``thread apply all bt``, pstack/gstack, eu-stack, py-spy ``dump``, faulthandler.

Producers and forms seen (PROVENANCE.md): gdb 7.x-14.x and the pstack/gstack scripts built on it
(``Thread 55 (Thread 0x7f0085cb9700 (LWP 69796)):``, ``Thread 4 (Thread 0x… (LWP 3913167) "cuda0000"):``,
gstack's ``Thread 1 (process 24745):``; frames ``#7  0x00007f… in ncclAllReduce () from libnccl.so.2``,
``#0 pthread_cond_wait@@GLIBC_2.3.2 () at …/pthread_cond_wait.S:185``, a long frame wrapped onto an indented
``from LIB`` / ``at FILE:LINE`` line, the pager's ``---Type <return> to continue`` prompt;
``Program received signal SIGBUS, Bus error.``, ``Thread 787 "name" received signal SIGBUS, Bus error.``,
``Program terminated with signal 7, Bus error.``, ``[Switching to Thread 0x… (LWP 3925)]``); eu-stack
(``TID 1234:`` and ``#0  0x00007f… __poll``); py-spy 0.1-0.4 ``dump`` (``Process 1234: python train.py``,
``Thread 0x7F… (active): "MainThread"``, ``Thread 686181 (idle+gil): "MainThread"``, frames
``    all_reduce (torch/distributed/distributed_c10d.py:1316)``, ``--locals`` lines); CPython's faulthandler
(``Fatal Python error: Bus error``, ``Thread 0x00007f… (most recent call first):``, ``Current thread 0x…
(most recent call first):``, ``  File "x.py", line 12 in f``).

Events: ``proc.stack``, one per thread (or per bare ``bt``): ``detail.frames`` (function names, top first),
``top``, ``tool``, ``thread`` (gdb's thread number, py-spy's or faulthandler's thread id), ``lwp``, ``name``,
``state`` — where the thread waits, from ``data/stack_frames.toml`` (``collective``, ``device_sync``,
``data_loading``, ``host_io``, ``shm``, ``lock``; null when no frame is known) —, ``states`` (those of all its
frames), ``waits_in`` (the frame that gave the state) and ``signal`` when the dump follows a fatal signal
delivered to that thread. ``proc.signal``, one per fatal-signal line (``code`` the signal number). Other
lines (prompts, ``(gdb) bt``, py-spy's ``Python v3.8`` line) are ``other`` rows; nothing is lost.

Example::

    Thread 787 "imagenet_fake_d" received signal SIGBUS, Bus error.
    (gdb) bt
    #0 0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long, void**, void**, int, void**) ()

gives a ``proc.signal`` (code 7) and a ``proc.stack`` with ``state = "shm"``, ``signal = "SIGBUS"``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from ..reading.base import SourceResult
from ..text import split_lines
from .jobsniff import sniff_scores
from .telemetry import Finding, other, result

NAME = "stacks"
FORMS = (
    "gdb bt / thread apply all bt (gdb 7-14), pstack / gstack, with a fatal signal's lines before it",
    "eu-stack (TID N: and #N 0xADDR func)",
    "py-spy dump 0.1-0.4 (Process / Thread 0x… (active|idle[+gil]): \"name\" / func (file:line), --locals)",
    "Python faulthandler dumps (Fatal Python error: …, Thread/Current thread 0x… (most recent call first):)",
)

#: gdb's thread header: its number, then ``Thread 0xADDR (LWP n)``, ``process n`` or ``LWP n``, then a name.
_GDB_THREAD = re.compile(
    r'^Thread (\d+) \((?:Thread (0x[0-9a-fA-F]+) \(LWP (\d+)\)|process (\d+)|LWP (\d+))(?: "([^"]*)")?\):\s*$')
_GDB_FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-fA-F]+) in )?(\S.*?)\s*$")
_EU_THREAD = re.compile(r"^TID (\d+):\s*$")
_EU_FRAME = re.compile(r"^#(\d+)\s+(0x[0-9a-fA-F]+)\s+(\S+)(?:\s+-\s+(\S+))?\s*$")
_PYSPY_PROCESS = re.compile(r"^Process (\d+): ")
_PYSPY_THREAD = re.compile(r'^Thread (0x[0-9a-fA-F]+|\d+) \((active|idle)(?:\+gil)?\)(?:: "([^"]*)")?\s*$')
_PYSPY_FRAME = re.compile(r"^ {2,}(\S.*?) \(([^()]*?)(?::(\d+))?\)\s*$")
_FH_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):\s*$|^Stack \(most recent call first\):\s*$")
_FH_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (\S+)\s*$')
#: Lines that belong to the stack above them: a wrapped gdb frame, the pager, faulthandler's gaps, py-spy's locals.
_STACK_MORE = re.compile(r"^\s+(?:from \S|at \S+:\d+)|^-{2,3}Type <(?:return|RET)>|^\s+<no Python frame>|^\s+\.\.\.\s*$|^ {6,}\S")
_GDB_SIGNAL = re.compile(
    r"^(?:Program|Thread (\d+)(?: \"[^\"]*\")?) (?:received|terminated with) signal (SIG[A-Z0-9]+|\d+), ([^.]+)\.?\s*$")
_FH_SIGNAL = re.compile(r"^Fatal Python error: (Segmentation fault|Bus error|Aborted|Floating point exception|Illegal instruction)\s*$")
#: Lines that belong to the signal above them: gdb's stop location and its thread switch.
_SIGNAL_MORE = re.compile(r"^\[(?:Switching to|Current thread is) |^0x[0-9a-fA-F]+ in \S|^\s+from \S|^\d+\s+\S+: No such file or directory\."
                          r"|^[\w:~<>.]+ \([^()]*\) (?:at \S+:\d+|from \S+)\s*$")
_THREAD_ENTRY = re.compile(r"^(?:start_thread|clone|clone3|__clone|__clone3|thread_start)$")
_GDB_CHATTER = re.compile(r"^\(gdb\) |^\[(?:New Thread|New LWP|Thread debugging|Inferior \d|Switching to|Current thread is) |"
                          r"^Starting program: |^Using host libthread_db|^Core was generated by ")
_LWP = re.compile(r"\(LWP (\d+)\)|Current thread is (\d+) ")

#: The lines that open a dump pasted into a job's output (:mod:`.joblog` hands them and the indented lines
#: under them to this source): gdb's thread headers, frames, signal, thread-switch and pager lines, py-spy's
#: thread headers, gdb's prompt, faulthandler's fatal-signal line and thread headers (its ``File`` lines are
#: indented under them).
JOB_HEAD = (r'^(?:Thread \d+ \((?:Thread 0x[0-9a-fA-F]+ \(LWP \d+\)|process \d+|LWP \d+)|#\d+ +(?:0x[0-9a-fA-F]+ in |[\w:~<>.@]+ \()'
            r'|Thread (?:0x[0-9a-fA-F]+|\d+) \((?:active|idle)(?:\+gil)?\)|(?:Program|Thread \d+(?: "[^"]*")?) '
            r'(?:received|terminated with) signal |\[Switching to Thread |-{2,3}Type <(?:return|RET)>|\(gdb\) '
            r'|(?:Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):|Stack \(most recent call first\):'
            r'|Fatal Python error: (?:Segmentation fault|Bus error|Aborted|Floating point exception|Illegal instruction)\s*$)')

#: Linux signal numbers (asm-generic/signal.h, x86 and arm64 alike) and faulthandler's names for them.
SIGNALS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6, "SIGBUS": 7,
           "SIGFPE": 8, "SIGKILL": 9, "SIGUSR1": 10, "SIGSEGV": 11, "SIGUSR2": 12, "SIGPIPE": 13, "SIGALRM": 14,
           "SIGTERM": 15}  # fmt: skip
_FAULTHANDLER = {"Segmentation fault": "SIGSEGV", "Bus error": "SIGBUS", "Aborted": "SIGABRT",
                 "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}  # fmt: skip


@dataclass(frozen=True)
class FrameState:
    """A row of ``data/stack_frames.toml``."""

    state: str
    tier: int
    function: re.Pattern[str] | None
    file: re.Pattern[str] | None


@cache
def frame_states() -> tuple[FrameState, ...]:
    """The rows of ``data/stack_frames.toml``, best tier first."""
    data = tomllib.loads(resources.files("forensics.data").joinpath("stack_frames.toml").read_text("utf-8"))
    rows = [FrameState(r["state"], int(r["tier"]), re.compile(r["function"]) if "function" in r else None,
                       re.compile(r["file"]) if "file" in r else None) for r in data["frame"]]  # fmt: skip
    return tuple(sorted(rows, key=lambda r: r.tier))


def frame_state(function: str, file: str | None) -> tuple[str, int] | None:
    """The state and tier a frame puts its thread in, or None.

    >>> frame_state("ncclAllReduce", "/usr/lib/libnccl.so.2"), frame_state("??", "/usr/lib64/libcuda.so.1")
    (('collective', 1), ('device_sync', 2))
    """
    for row in frame_states():
        if row.function is not None and not row.function.search(function):
            continue
        if row.file is not None and not (file and row.file.search(file)):
            continue
        return row.state, row.tier
    return None


@dataclass
class Stack:
    """One thread's stack as read so far."""

    line: int
    tool: str
    thread: str | None = None
    lwp: int | None = None
    name: str | None = None
    active: bool | None = None
    pid: int | None = None
    current: bool = False  # faulthandler's "Current thread", gdb's bare bt: the thread a signal hit
    lines: list[str] = field(default_factory=list)
    frames: list[tuple[str, str | None]] = field(default_factory=list)  # (function, file or library)
    signal: str | None = None

    def finding(self) -> Finding:
        names = [f for f, _ in self.frames]
        states: list[str] = []
        best: tuple[int, str, str] | None = None  # (tier, state, frame)
        for i, (function, where) in enumerate(self.frames):
            if (found := frame_state(function, where)) is None:
                continue
            state, tier = found
            if tier == 2 and _library_thread(self.frames, i):
                continue
            if state not in states:
                states.append(state)
            if best is None or tier < best[0]:
                best = (tier, state, function if function != "??" else f"?? ({where})")
        detail: dict[str, Any] = {"tool": self.tool, "thread": self.thread, "lwp": self.lwp, "name": self.name,
                                  "active": self.active, "frames": names, "top": names[0] if names else None,
                                  "state": best[1] if best else None, "states": states,
                                  "waits_in": best[2] if best else None, "signal": self.signal}  # fmt: skip
        return Finding(self.line, "proc.stack", "error" if self.signal else "notice", "\n".join(self.lines),
                       pid=self.pid, detail=detail)


_ANY_HEADER = re.compile(r"(?m)^(?:#0 |Thread |TID \d|Current thread |Stack \(|Fatal Python error: |Program )")
#: A job source this sure of a file with a dump in it takes the file, and hands the dump's lines to this source.
JOB_WINS = 0.3


def sniff(head: str) -> float:
    """How sure we are that ``head`` is a stack dump: stack lines (thread headers, frames, signal lines) make
    at least two lines and 40% of its non-blank lines, and no job source knows the rest (a job's output with
    a dump pasted in is the job's, which gives the dump's lines to this source)."""
    if not _ANY_HEADER.search(head):  # most files: not one line a dump could open with
        return 0.0
    lines = [x for x in head.splitlines() if x.strip()]
    pyspy = any(_PYSPY_THREAD.match(x) for x in lines)
    gdb = any(_GDB_FRAME.match(x) for x in lines)
    stack = sum(1 for x in lines if _GDB_THREAD.match(x) or _GDB_FRAME.match(x) or _EU_THREAD.match(x)
                or _FH_THREAD.match(x) or _FH_FRAME.match(x) or _GDB_SIGNAL.match(x) or _FH_SIGNAL.match(x)
                or _PYSPY_THREAD.match(x) or (pyspy and _PYSPY_FRAME.match(x)) or _SIGNAL_MORE.match(x)
                or _STACK_MORE.match(x) or _GDB_CHATTER.match(x) or (gdb and x[:1] in " \t"))  # fmt: skip
    headers = sum(1 for x in lines if _GDB_THREAD.match(x) or _EU_THREAD.match(x) or _FH_THREAD.match(x)
                  or _PYSPY_THREAD.match(x) or _GDB_SIGNAL.match(x) or re.match(r"^#0\s", x))  # fmt: skip
    if not (headers and stack >= 2 and stack >= 0.4 * len(lines)):
        return 0.0
    return 0.0 if max(sniff_scores(head).values(), default=0.0) >= JOB_WINS else 0.9


def parse(data: bytes, *, file: str, incident: str = "", host: str | None = None, year: int | None = None,
          timezone: str | None = None, on_error: str = "keep", full: bool = False) -> SourceResult:  # fmt: skip
    """Parse a stack dump into ``proc.stack`` and ``proc.signal`` events (other lines as ``other``)."""
    series, bad_utf8 = split_lines(data)
    lines = series.to_list()
    findings: list[Finding] = []
    stacks: list[Stack] = []
    stack: Stack | None = None
    signal: Finding | None = None  # the last signal, until a stack takes it
    target: tuple[str | None, int | None] = (None, None)  # the thread it hit: gdb number, LWP
    pid: int | None = None
    pyspy = False
    records = 0

    def open_stack(n: int, text: str, tool: str, **ids: Any) -> Stack:
        nonlocal records
        s = Stack(n, tool, lines=[text], pid=pid, **ids)
        if signal is not None and _hit(s, target):
            s.signal = signal.detail["signal"]
        stacks.append(s)
        records += 1
        return s

    for n, text in enumerate(lines, 1):
        if m := _GDB_THREAD.match(text):
            stack = open_stack(n, text, "gdb", thread=m[1], lwp=_pid(m[3] or m[4] or m[5]), name=m[6])
        elif m := _EU_THREAD.match(text):
            stack = open_stack(n, text, "eu-stack", thread=m[1], lwp=_pid(m[1]))
        elif m := _FH_THREAD.match(text):
            stack = open_stack(n, text, "faulthandler", thread=m[2], current=m[1] != "Thread")
        elif m := _PYSPY_THREAD.match(text):
            pyspy = True
            tid = m[1]
            stack = open_stack(n, text, "py-spy", thread=tid, name=m[3], active=m[2] == "active",
                               lwp=_pid(tid))  # fmt: skip
        elif (m := _GDB_SIGNAL.match(text)) or (m := _FH_SIGNAL.match(text)):
            name = _signal_name(m)
            signal = Finding(n, "proc.signal", "error", text, code=SIGNALS.get(name),
                             detail={"signal": name, "thread": m[1] if m.re is _GDB_SIGNAL else None})  # fmt: skip
            target, stack = (m[1] if m.re is _GDB_SIGNAL else None, None), None
            findings.append(signal)
            records += 1
        elif signal is not None and stack is None and _SIGNAL_MORE.match(text):
            signal.message += "\n" + text
            if lwp_match := _LWP.search(text):
                target = (lwp_match[2] or target[0], _pid(lwp_match[1]) or target[1])
        elif m := _GDB_FRAME.match(text):
            eu = _EU_FRAME.match(text) if " in " not in text else None
            if stack is None or (m[1] == "0" and stack.frames):  # a bare `bt`: the current thread's stack
                stack = open_stack(n, text, "eu-stack" if eu else "gdb", current=True, thread=target[0], lwp=target[1])
            else:
                stack.lines.append(text)
            stack.frames.append((eu[3], eu[4]) if eu else _gdb_frame(m[3]))
        elif stack is not None and pyspy and (m := _PYSPY_FRAME.match(text)) and not text.startswith(" " * 6):
            stack.lines.append(text)
            stack.frames.append((m[1], m[2]))
        elif stack is not None and (m := _FH_FRAME.match(text)):
            stack.lines.append(text)
            stack.frames.append((m[3], m[1]))
        elif stack is not None and (_STACK_MORE.match(text) or (stack.tool == "gdb" and text[:1] in " \t" and stack.frames)):
            # a gdb frame wrapped onto indented lines (its argument list, then `at FILE:LINE` or `from LIB`)
            stack.lines.append(text)
            if (wrapped := re.search(r"(?:^|\s)(?:from (\S+)|at (\S+?):\d+)\s*$", text)) and stack.frames:
                function, where = stack.frames[-1]
                stack.frames[-1] = (function, where or wrapped[1] or wrapped[2])
        elif not text.strip():
            continue  # a blank line ends nothing: gdb and faulthandler put one between threads
        else:
            if m := _PYSPY_PROCESS.match(text):
                pid = _pid(m[1])
            stack = None
            findings.append(other(n, text))
    for s in stacks:
        s.pid = s.pid if s.pid is not None else s.lwp
    findings += [s.finding() for s in stacks]
    return result([], findings, lines=len(lines), records=records, unparsed=0, source=NAME, file=file,
                  incident=incident, host=host, invalid_utf8_lines=bad_utf8)  # fmt: skip


def _pid(text: str | None) -> int | None:
    """A printed process or thread id (Linux's are below 2**22; a garbled one is no id)."""
    return int(text) if text and text.isdigit() and len(text) <= 10 and int(text) < 2**31 else None


def _library_thread(frames: list[tuple[str, str | None]], i: int) -> bool:
    """Do the frames of frame ``i``'s library run down to the thread's entry (a helper thread of its own)?"""
    library = frames[i][1]
    below = next((f for f, where in frames[i + 1:] if where != library), None)
    return below is not None and _THREAD_ENTRY.match(below) is not None


def _signal_name(m: re.Match[str]) -> str:
    """``SIGBUS`` from gdb's ``signal SIGBUS, Bus error`` (or ``signal 7, Bus error``) or faulthandler's header."""
    if m.re is _FH_SIGNAL:
        return _FAULTHANDLER[m[1]]
    if m[2].isdigit():
        return next((k for k, v in SIGNALS.items() if v == int(m[2])), f"SIG{m[2]}")
    return m[2]


def _hit(stack: Stack, target: tuple[str | None, int | None]) -> bool:
    """Is ``stack`` the thread the last signal hit (named by number or LWP, else the current thread)?"""
    number, lwp = target
    if number is None and lwp is None:
        return stack.current
    return (number is not None and stack.thread == number) or (lwp is not None and stack.lwp == lwp) or stack.current


def _gdb_frame(text: str) -> tuple[str, str | None]:
    """(function, file or library) of a gdb frame after ``#N  0xADDR in``: ``func (args) at f.c:12``,
    ``ncclShmOpen(char*, int) () from lib.so``, ``?? () from libcuda.so.1``, ``<signal handler called>``."""
    where = None
    if m := re.search(r" (?:from (\S+)|at (\S+?):\d+)\s*$", text):
        where, text = m[1] or m[2], text[: m.start()]
    text = text.rstrip()
    if text.count("(") != text.count(")"):  # the argument list goes on on the next lines
        text = text.split(" (", 1)[0]
    elif text.endswith(")"):  # drop the argument list: the parenthesis that closes at the end, matched backwards
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i].rstrip() or text
                break
    function = re.sub(r"\((?:[^()]|\([^()]*\))*\)(?: const)?$", "", text) if not text.startswith("<") else text
    return function.strip() or text, where
