"""The interest scan of a big kernel log (:mod:`forensics.reading.interest`: one multi-pattern pass that picks the
lines worth parsing) finds every line a kernel-side message catalog reads: each row's message, built from its format
string as the catalog test builds it, is read in a log too big for the small path exactly as in a log of its own."""

from __future__ import annotations

from functools import cache

import polars as pl
import pytest

from forensics import messages
from forensics.reading import interest
from forensics.sources import kernel

from .test_messages import built

CATALOG = messages.load()
#: The catalogs of what a kernel log holds (the kernel's drivers, the NVIDIA driver, the fabric, the host's
#: firmware and daemons whose lines land in kern.log).
FILES = ("linux_", "nvidia_driver.toml", "infiniband.toml", "host.toml")
#: (A row whose pattern holds at a line's start reads a tool's own output, ``ibstat``'s table, not a log line.)
ROWS = sorted((e for e in CATALOG.entries if e.file.startswith(FILES) and "(?m:^" not in e.pattern), key=lambda e: e.id)
#: Lines of a healthy boot between the rows' lines (none of them of interest).
FILLER = "usb 1-{n}: new high-speed USB device number {n} using xhci_hcd"


def _message(entry: messages.Entry) -> str:
    """The row's message: built from its format when the row reads that, else its example (test_messages)."""
    if entry.format:
        message = built(entry.format)
        if any(h.id == entry.id for h in CATALOG.read(message)):
            return message
    return entry.example


#: The envelopes a kernel line is read in: dmesg, dmesg -T, kern.log (rsyslog), journalctl -k -o short-iso, and
#: pdsh's host before dmesg.
FORMS = {
    "dmesg": "[{up:12.6f}] {line}",
    "dmesg-T": "[Mon Dec  7 10:{m:02d}:{s:02d} 2026] {line}",
    "kern.log": "Dec  7 10:{m:02d}:{s:02d} gpu-node-7 kernel: [{up:12.6f}] {line}",
    "journal": "2026-12-07T10:{m:02d}:{s:02d}+0000 gpu-node-7 kernel: {line}",
    "pdsh": "gpu-node-7: [{up:12.6f}] {line}",
}


def _lines(message: str, form: str, at: int) -> list[str]:
    return [FORMS[form].format(up=at + i / 1e6, m=at // 60 % 60, s=at % 60, line=line)
            for i, line in enumerate(message.split("\n"))]  # fmt: skip


def _messages(entry: messages.Entry) -> list[str]:
    """The lines the row reads: the message built from its format and its example (a real line)."""
    return sorted({_message(entry), entry.example})


def _read(data: bytes) -> dict[int, tuple[str, set[str]]]:
    """Each record of a kernel log parsed as ``forensics parse`` does, by its first line: its kind and the rows that
    read it."""
    events = pl.from_arrow(kernel.parse(data, file="kern.log", year=2026).events)
    return {line: (kind, {h.id for h in CATALOG.read(text)})
            for line, kind, text in events.select("line", "kind", "message").iter_rows()}  # type: ignore[union-attr]  # fmt: skip


@cache
def _log(form: str) -> tuple[dict[tuple[str, str], int], tuple[str, ...]]:
    """One log holding every row's lines among a boot's: where each starts (line number), and its lines."""
    lines = [*(line for n in range(400) for line in _lines(FILLER.format(n=n), form, 50))]
    starts: dict[tuple[str, str], int] = {}
    for k, (entry, message) in enumerate((e, m) for e in ROWS for m in _messages(e)):
        lines.append("")
        starts[entry.id, message] = len(lines) + 1
        lines += _lines(message, form, 100 + k)
        lines += ["", *(line for n in range(20) for line in _lines(FILLER.format(n=n), form, 100 + k))]
    return starts, tuple(lines)


@cache
def _big(form: str) -> tuple[dict[tuple[str, str], int], dict[int, tuple[str, set[str]]], int]:
    """:func:`_log` parsed: where each row's lines start, how each record is read, the log's size."""
    starts, lines = _log(form)
    data = ("\n".join(lines) + "\n").encode()
    return starts, _read(data), len(data)


def test_both_engines_of_the_scan_find_every_row_s_line() -> None:
    """Hyperscan's one scan of the bytes (when installed) and the Polars passes flag the same lines: all the rows'."""
    starts, lines = _log("kern.log")
    column = pl.Series(lines)
    data = ("\n".join(lines) + "\n").encode()
    prefilters = (kernel.KERNEL.prefilter(),)
    passes = interest._passes(column, interest.patterns(prefilters))
    scan = interest.of_interest(column, data, prefilters)
    assert scan.equals(passes)
    assert all(passes[start - 1] for start in starts.values())


@pytest.mark.parametrize("form", FORMS)
def test_the_log_takes_the_big_file_path(form: str) -> None:
    starts, _, size = _big(form)
    assert size >= interest.HYPERSCAN_BYTES and max(starts.values()) > kernel.SMALL_LINES


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("entry", ROWS, ids=[e.id for e in ROWS])
def test_a_catalog_row_reads_its_line_in_a_big_log_as_in_a_small_one(entry: messages.Entry, form: str) -> None:
    starts, big, _ = _big(form)
    for message in _messages(entry):
        small = _read(("\n".join(_lines(message, form, 100)) + "\n").encode()).get(1, ("", set()))
        assert entry.id in small[1], (message, small)
        assert big.get(starts[entry.id, message]) == small, message
