"""Parse one file with the source that fits it: ``parse_file(path) -> pyarrow.Table`` of events."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc

from . import sources
from .errors import InputError
from .reading.base import SourceResult, count_lines, events_table, shift_lines
from .schema import FILES, GPUS, METRICS, SAMPLES
from .sources import joblog, journal, kernel, nvsmi

#: How much of a file sniffing reads.
SNIFF_BYTES = 64 * 1024
#: Below this confidence no source claims a file, and ``auto`` falls back to the kernel source's
#: ``other`` rows so that nothing is lost.
MIN_CONFIDENCE = 0.05
ON_ERROR = ("keep", "warn", "raise")
#: A file no source claims is read for the lines worth keeping up to this size (a binary or a dump beyond
#: it is only counted: reading it as kernel lines would cost memory for nothing).
UNCLAIMED_READ_BYTES = 64 << 20
#: An unclaimed file whose first bytes are more than this share not text is binary (random bytes: about
#: 0.5; a log in Latin-1 or with a stray escape sequence: a few hundredths).
BINARY_SHARE = 0.3
#: How much of an unclaimed file that measure reads.
BINARY_SAMPLE = 1 << 20
#: Sources that read a job's output (streamed in chunks, see :mod:`forensics.sources.joblog`).
JOB_SOURCES = ("nccl", "torch", "trainlog")
#: Sources of line-oriented logs: they give the records of interest unless ``all_lines`` (see
#: :mod:`forensics.reading.interest`), and are streamed in chunks (as are the :data:`JOB_SOURCES`, which
#: do the same).
LINE_SOURCES = ("kernel", "journal")
#: Telemetry series (dmon, iostat and sar, dcgm-exporter scrapes): streamed in chunks of whole reports, their
#: ``samples`` with each (``iter_parse`` of :mod:`forensics.sources.telemetry`'s sources).
SERIES_SOURCES = ("gpuseries", "disks", "nicstats", "dcgm")


@dataclass
class Parsed:
    """The rows of one input and its ``files`` row."""

    events: pa.Table
    files: pa.Table
    source: str | None
    gpus: pa.Table
    metrics: pa.Table = field(default_factory=METRICS.empty_table)
    confidence: float | None = None
    samples: pa.Table = field(default_factory=SAMPLES.empty_table)  # telemetry readings (issue 34)


def read_bytes(path: str | Path) -> bytes:
    """The bytes of ``path``, or an InputError that says why they cannot be read."""
    with _open(path) as stream:
        return stream.read()


def _open(path: str | Path) -> BinaryIO:
    try:
        return Path(path).open("rb")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory (use `forensics ingest` for incident folders)") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def parse_bytes(
    data: bytes,
    *,
    file: str,
    source: str = "auto",
    incident: str = "",
    host: str | None = None,
    year: int | None = None,
    timezone: str | None = None,
    on_error: str = "keep",
    all_lines: bool = False,
) -> Parsed:
    """Parse ``data`` (the content of ``file``) into events and its ``files`` row.

    ``forensics parse`` and ``forensics ingest`` both read every file through here, so a file gives the
    same rows under both (``parse --all-lines`` keeps every record, as ingest does). A file no source claims (a command's output, smartd's mail, an application's
    own log) is read by the kernel source: every line is a row, ``other`` unless the kernel source gives
    it a kind, and its ``files`` row keeps ``source`` null. Two kinds of unclaimed file have every line
    counted but not every line kept, ``files.error`` saying so: one larger than :data:`UNCLAIMED_READ_BYTES`
    (no row), and a binary one (:func:`binary_share`), of which only the rows the kernel source gives a
    kind are kept (an Xid line after a core dump's bytes).

    Line-oriented logs (kernel, journal text) and a job's output give the records of interest
    (:mod:`forensics.reading.interest`); ``all_lines=True`` (what ingest does) keeps every other record
    too, as ``other`` rows (and a job's step lines as ``train.step`` rows; their values are in ``metrics``
    either way). Either way ``files.lines`` counts every line.
    """
    check_options(year=year, timezone=timezone, on_error=on_error)
    chosen, confidence = _choose(data, source)
    if chosen is None and len(data) > UNCLAIMED_READ_BYTES:
        note = f"claimed by no source and larger than {UNCLAIMED_READ_BYTES >> 20} MiB: lines counted, not read"
        listed = SourceResult(events_table([]), lines=count_lines(data), records=0, unparsed=0, error=note)
        return Parsed(events=listed.events, files=_files_row(listed, incident=incident, file=file, source=None,
                                                             size=len(data), confidence=confidence),
                      source=None, gpus=GPUS.empty_table(), confidence=confidence)  # fmt: skip
    module = sources.get(chosen or "kernel")
    split = nvsmi.extent(data) if chosen == "nvsmi" and source == "auto" else None
    head, rest = (data, b"") if split is None else _cut(data, split)
    lined = {"all_lines": all_lines} if (chosen or "kernel") in (*LINE_SOURCES, *JOB_SOURCES) else {}
    result: SourceResult = module.parse(
        head, file=file, incident=incident, host=host, year=year, timezone=timezone, on_error=on_error, **lined
    )
    if rest.strip():  # a file is read by every family whose records it holds: the output after the dump
        after = parse_bytes(rest, file=file, incident=incident, host=host, year=year, timezone=timezone,
                            on_error=on_error, all_lines=all_lines)  # fmt: skip
        result = _joined(result, after, offset=split or 0)
    if chosen is None and (share := binary_share(data[:BINARY_SAMPLE])) > BINARY_SHARE:
        result = _known_only(result, share)
    gpus = result.gpus if result.gpus is not None else GPUS.empty_table()
    metrics = result.metrics if result.metrics is not None else METRICS.empty_table()
    samples = result.samples if result.samples is not None else SAMPLES.empty_table()
    files = _files_row(result, incident=incident, file=file, source=chosen, size=len(data), confidence=confidence)
    return Parsed(events=result.events, files=files, source=chosen, gpus=gpus, metrics=metrics, confidence=confidence,
                  samples=samples)


#: The years ``year=`` may name: a stamp's year, and the one before and after it, must be dates.
YEARS = (1970, 9998)


def check_options(*, year: int | None = None, timezone: str | None = None, on_error: str = "keep") -> None:
    """An :class:`~forensics.errors.InputError` naming the first option value that makes no sense.

    >>> check_options(timezone="Mars/Base")
    Traceback (most recent call last):
    forensics.errors.InputError: timezone 'Mars/Base' is not an IANA time zone name (for example UTC, Europe/Berlin, America/New_York)
    """
    if on_error not in ON_ERROR:
        raise InputError(f"on_error must be one of {', '.join(ON_ERROR)}, not {on_error!r}")
    if year is not None and not YEARS[0] <= year <= YEARS[1]:
        raise InputError(f"year {year} is out of range: give one from {YEARS[0]} to {YEARS[1]}")
    if timezone is not None:
        from zoneinfo import ZoneInfo

        try:
            ZoneInfo(timezone)
        except (KeyError, ValueError, OSError):  # not found, a malformed name, a folder of zones ("America")
            raise InputError(f"timezone {timezone!r} is not an IANA time zone name "
                             "(for example UTC, Europe/Berlin, America/New_York)") from None  # fmt: skip


def _cut(data: bytes, lines: int) -> tuple[bytes, bytes]:
    """``data`` cut after its first ``lines`` lines."""
    at = 0
    for _ in range(lines):
        end = data.find(b"\n", at)
        at = len(data) if end < 0 else end + 1
    return data[:at], data[at:]


def _joined(first: SourceResult, after: Parsed, *, offset: int) -> SourceResult:
    """The rows of a file's first family and of the output after it (its line numbers shifted)."""
    events, metrics, samples = (shift_lines(t, offset) for t in (after.events, after.metrics, after.samples))
    f = after.files.to_pylist()[0]
    return SourceResult(
        pa.concat_tables([first.events, events]), lines=first.lines + f["lines"], records=first.records + f["records"],
        unparsed=first.unparsed + f["unparsed"], error=first.error or f["error"],
        invalid_utf8_lines=first.invalid_utf8_lines, gpus=first.gpus,
        metrics=pa.concat_tables([first.metrics, metrics]) if first.metrics is not None else metrics,
        samples=pa.concat_tables([first.samples, samples]) if first.samples is not None else samples,
    )  # fmt: skip


def _known_only(result: SourceResult, share: float) -> SourceResult:
    """The rows of a binary file no source claims that have a kind (an Xid line after a core dump's bytes),
    its lines counted: the rest is the binary's bytes cut at its newlines, not lines anyone wrote."""
    kinds = result.events.column("kind")
    keep = pc.invert(pc.is_in(kinds, value_set=pa.array(["other", "unparsed"])))
    kept = result.events.filter(keep)
    note = (f"claimed by no source and binary ({share:.0%} of its bytes are not text): lines counted, "
            f"{kept.num_rows} row(s) with a kind kept")  # fmt: skip
    return SourceResult(kept, lines=result.lines, records=kept.num_rows, unparsed=0, error=note,
                        invalid_utf8_lines=0)  # fmt: skip


def binary_share(data: bytes) -> float:
    """The share of ``data``'s bytes that are not text: control bytes other than whitespace and escape,
    and bytes of invalid UTF-8. NUL bytes are left out of both counts: a log cut by a crash often holds
    a run of them between its lines (the file system's preallocated blocks).

    >>> binary_share(b"[ 1.0] NVRM: ok\\n"), round(binary_share(bytes(range(256))), 2)
    (0.0, 0.6)
    """
    text = data.replace(b"\0", b"")
    if not text:
        return 0.0
    control = len(text) - len(text.translate(None, _CONTROL))
    invalid = text.decode("utf-8", "replace").count("\ufffd") - text.count("\ufffd".encode())
    return (control + invalid) / len(text)


_CONTROL = bytes([*range(1, 9), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])  # not \t\n\v\f\r or ESC


def families(events: pa.Table) -> str | None:
    """The families whose records ``events`` (one file's rows) hold: their ``source``, sorted, comma-separated.

    >>> families(pa.table({"source": ["torch", "kernel", "torch"]}))
    'kernel,torch'
    """
    found = sorted({s for s in events.column("source").unique().to_pylist() if s})
    return ",".join(found) or None


def _files_row(result: SourceResult, *, incident: str, file: str, source: str | None, size: int,
               confidence: float | None = None, read_by: str | None = None) -> pa.Table:  # fmt: skip
    error = result.error
    if result.invalid_utf8_lines:
        note = f"{result.invalid_utf8_lines} line(s) not valid UTF-8, kept with \\x escapes"
        error = f"{error}; {note}" if error else note
    row = {"incident": incident, "file": file, "source": source, "bytes": size, "lines": result.lines,
           "records": result.records, "unparsed": result.unparsed, "error": error, "host": result.host,
           "confidence": None if confidence is None else round(confidence, 3),
           "families": read_by if read_by is not None else families(result.events)}  # fmt: skip
    return pa.Table.from_pylist([row], schema=FILES)


def _choose(head: bytes, source: str) -> tuple[str | None, float | None]:
    """The source for a file starting with ``head`` and how sure sniffing is (None when it was named)."""
    if source != "auto":
        sources.get(source)
        return source, None
    name, confidence = sources.sniff(head[:SNIFF_BYTES].decode("utf-8", "replace"))
    return (name if name and confidence >= MIN_CONFIDENCE else None), confidence


def iter_parse_path(path: str | Path, *, source: str = "auto", incident: str = "", host: str | None = None,
                    year: int | None = None, timezone: str | None = None, on_error: str = "keep",
                    all_lines: bool = False, name: str | None = None) -> Iterator[Parsed]:  # fmt: skip
    """Like :func:`parse_path`, in pieces: a kernel log (syslog too), a journal in any form, a job's
    output (NCCL, PyTorch, training logs) and a telemetry series (:data:`SERIES_SOURCES`) are read as a stream and come in chunks of whole records, so
    memory stays bounded whatever their size; other files come whole. The ``files`` row comes with the
    last piece (the others have none). ``name``: the file's name in the rows (by default ``path``).
    """
    p = Path(path)
    name = str(path) if name is None else name
    with _open(p) as stream:
        head = stream.peek(SNIFF_BYTES)[:SNIFF_BYTES]
        chosen, confidence = _choose(head, source)
        streamed = chosen in (*JOB_SOURCES, *LINE_SOURCES, *SERIES_SOURCES)
        if not streamed:
            stream.close()
            yield parse_bytes(read_bytes(p), file=name, source=source, incident=incident, host=host, year=year,
                              timezone=timezone, on_error=on_error, all_lines=all_lines)  # fmt: skip
            return
        check_options(year=year, timezone=timezone, on_error=on_error)
        options = dict(file=name, incident=incident, host=host, year=year, timezone=timezone, on_error=on_error)
        if chosen == "journal" and journal._mode(head) == "text":
            chunks = journal.iter_parse_text(stream.read, all_lines=all_lines, **options)  # type: ignore[arg-type]
        elif chosen == "journal":
            chunks = journal.iter_parse(stream, **options)  # type: ignore[arg-type]
        elif chosen in SERIES_SOURCES:
            chunks = sources.get(chosen).iter_parse(stream.read, **options)  # type: ignore[attr-defined]
        elif chosen == "kernel":
            chunks = kernel.iter_parse(stream.read, all_lines=all_lines, **options)  # type: ignore[arg-type]
        else:
            chunks = joblog.iter_parse(stream.read, source=chosen, all_lines=all_lines, **options)  # type: ignore[arg-type]
        records = unparsed = 0
        last: SourceResult | None = None
        read_by: set[str] = set()
        for chunk in chunks:
            read_by.update((families(chunk.events) or "").split(","))
            records += chunk.records
            unparsed += chunk.unparsed
            last = chunk
            yield Parsed(events=chunk.events, files=FILES.empty_table(), source=chosen, gpus=GPUS.empty_table(),
                         metrics=chunk.metrics if chunk.metrics is not None else METRICS.empty_table(),
                         samples=chunk.samples if chunk.samples is not None else SAMPLES.empty_table())  # fmt: skip
    if chosen in JOB_SOURCES and last is not None:  # the job log's totals come with its last piece
        records, unparsed = last.records, last.unparsed
    total = SourceResult(events_table([]), lines=last.lines if last else 0, records=records, unparsed=unparsed,
                         error=last.error if last else None, invalid_utf8_lines=last.invalid_utf8_lines if last else 0,
                         host=last.host if last else None)  # fmt: skip
    files = _files_row(total, incident=incident, file=name, source=chosen, size=p.stat().st_size,
                       confidence=confidence, read_by=",".join(sorted(read_by - {""})) or None)
    yield Parsed(events=events_table([]), files=files, source=chosen, gpus=GPUS.empty_table(), confidence=confidence)


def parse_file(
    path: str | Path,
    *,
    source: str = "auto",
    incident: str = "",
    host: str | None = None,
    year: int | None = None,
    timezone: str | None = None,
    on_error: str = "keep",
    table: str = "events",
    all_lines: bool = False,
) -> pa.Table:
    """Parse one log file into the ``events`` table (or, with ``table="gpus"``, the ``gpus`` table of
    an nvidia-smi dump; ``table="metrics"``, the training steps of a job log; ``table="samples"``, the
    readings of a telemetry file; ``table="files"``, the file's ``files`` row).

    ``source`` is a registered source name or ``auto`` (decided by content); ``year`` dates year-less
    stamps (syslog, journal ``short``), ``timezone`` (IANA name) reads stamps printed in local time;
    ``on_error``: ``keep`` (unparsed records become ``unparsed`` rows), ``warn`` (also noted in the
    ``files`` row), ``raise`` (a :class:`~forensics.errors.ParseError`); ``all_lines``: kernel logs,
    journal text and job output keep the records of no interest too, as ``other`` rows.

    >>> import forensics, tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
    ...     _ = f.write("[ 1843.308145] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\\n")
    >>> t = forensics.parse_file(f.name); os.unlink(f.name)
    >>> t.column("kind")[0].as_py(), t.column("gpu")[0].as_py(), t.column("code")[0].as_py()
    ('gpu.xid', '0000:3b:00.0', 79)
    """
    if table not in ("events", "gpus", "metrics", "samples", "files"):
        raise InputError(f"table must be events, gpus, metrics, samples or files, not {table!r}")
    parsed = parse_path(path, source=source, incident=incident, host=host, year=year, timezone=timezone,
                        on_error=on_error, all_lines=all_lines)  # fmt: skip
    return getattr(parsed, table)


def parse_path(path: str | Path, **options: object) -> Parsed:
    """Like :func:`parse_file` but also returns the ``files`` row."""
    return parse_bytes(read_bytes(path), file=str(path), **options)  # type: ignore[arg-type]

