"""Parse one file with the source that fits it: ``parse_file(path) -> pyarrow.Table`` of events."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from . import messages, sources
from .errors import InputError
from .schema import FILES, GPUS, METRICS
from .sources import joblog, journal, kernel, nvsmi
from .sources.base import SourceResult, count_lines, events_table

#: How much of a file sniffing reads.
SNIFF_BYTES = 64 * 1024
#: Below this confidence no source claims a file, and ``auto`` falls back to the kernel source's
#: ``other`` rows so that nothing is lost.
MIN_CONFIDENCE = 0.05
ON_ERROR = ("keep", "warn", "raise")
#: A file no source claims is read for the lines worth keeping up to this size (a binary or a dump beyond
#: it is only counted: reading it as kernel lines would cost memory for nothing).
UNCLAIMED_READ_BYTES = 64 << 20
#: Sources that read a job's output (streamed in chunks, see :mod:`forensics.sources.joblog`).
JOB_SOURCES = ("nccl", "torch", "trainlog")
#: Sources of line-oriented logs: they give the records of interest unless ``all_lines`` (see
#: :mod:`forensics.sources.interest`); the kernel's are streamed in chunks.
LINE_SOURCES = ("kernel", "journal")


@dataclass
class Parsed:
    """The rows of one input and its ``files`` row."""

    events: pa.Table
    files: pa.Table
    source: str | None
    gpus: pa.Table
    metrics: pa.Table = field(default_factory=METRICS.empty_table)
    confidence: float | None = None


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
    unclaimed: str = "other",
    all_lines: bool = False,
) -> Parsed:
    """Parse ``data`` (the content of ``file``) into events and its ``files`` row.

    A file no source claims is read as ``other`` rows (``unclaimed="other"``, what ``forensics parse``
    does) or, with ``unclaimed="list"`` (what ingest does with the configuration files and command
    outputs of an archive), keeps only the rows that say something: those the kernel source gives a
    kind, those a message catalog reads (:mod:`forensics.messages`: smartd's mail, ``hpasmcli``'s
    failed power supply, a container runtime's error) and those with words of trouble; its ``files`` row
    keeps ``source`` null and counts every line. One larger than :data:`UNCLAIMED_READ_BYTES` is only
    counted, and its ``files.error`` says so.

    Line-oriented logs (kernel, journal text) give the records of interest
    (:mod:`forensics.sources.interest`); ``all_lines=True`` keeps every other record too, as ``other``
    rows. Either way ``files.lines`` counts every line.
    """
    if on_error not in ON_ERROR:
        raise InputError(f"on_error must be one of {', '.join(ON_ERROR)}, not {on_error!r}")
    chosen, confidence = _choose(data, source)
    if chosen is None and unclaimed == "list" and len(data) > UNCLAIMED_READ_BYTES:
        note = f"claimed by no source and larger than {UNCLAIMED_READ_BYTES >> 20} MiB: lines counted, not read"
        listed = SourceResult(events_table([]), lines=count_lines(data), records=0, unparsed=0, error=note)
        return Parsed(events=listed.events, files=_files_row(listed, incident=incident, file=file, source=None,
                                                             size=len(data), confidence=confidence),
                      source=None, gpus=GPUS.empty_table(), confidence=confidence)  # fmt: skip
    if chosen is None and unclaimed == "list":
        result = sources.get("kernel").parse(data, file=file, incident=incident, host=host, year=year,
                                             timezone=timezone, on_error=on_error)  # fmt: skip
        kept = _said(result.events)
        listed = SourceResult(kept, lines=result.lines, records=kept.num_rows, unparsed=0, error=result.error)
        return Parsed(events=kept, files=_files_row(listed, incident=incident, file=file, source=None,
                                                     size=len(data), confidence=confidence),
                      source=None, gpus=GPUS.empty_table(), confidence=confidence)  # fmt: skip
    module = sources.get(chosen or "kernel")
    split = nvsmi.extent(data) if chosen == "nvsmi" and source == "auto" else None
    head, rest = (data, b"") if split is None else _cut(data, split)
    lined = {"all_lines": all_lines} if (chosen or "kernel") in LINE_SOURCES else {}
    result: SourceResult = module.parse(
        head, file=file, incident=incident, host=host, year=year, timezone=timezone, on_error=on_error, **lined
    )
    if rest.strip():  # a file is read by every family whose records it holds: the output after the dump
        after = parse_bytes(rest, file=file, incident=incident, host=host, year=year, timezone=timezone,
                            on_error=on_error, unclaimed=unclaimed, all_lines=all_lines)  # fmt: skip
        result = _joined(result, after, offset=split or 0)
    gpus = result.gpus if result.gpus is not None else GPUS.empty_table()
    metrics = result.metrics if result.metrics is not None else METRICS.empty_table()
    files = _files_row(result, incident=incident, file=file, source=chosen, size=len(data), confidence=confidence)
    return Parsed(events=result.events, files=files, source=chosen, gpus=gpus, metrics=metrics, confidence=confidence)


def _cut(data: bytes, lines: int) -> tuple[bytes, bytes]:
    """``data`` cut after its first ``lines`` lines."""
    at = 0
    for _ in range(lines):
        end = data.find(b"\n", at)
        at = len(data) if end < 0 else end + 1
    return data[:at], data[at:]


def _joined(first: SourceResult, after: Parsed, *, offset: int) -> SourceResult:
    """The rows of a file's first family and of the output after it (its line numbers shifted)."""
    def shifted(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index("line")
        return t.set_column(i, t.schema.field(i), pc.add(t.column("line"), offset).cast(t.schema.field(i).type))

    events, metrics = shifted(after.events), shifted(after.metrics)
    f = after.files.to_pylist()[0]
    return SourceResult(
        pa.concat_tables([first.events, events]), lines=first.lines + f["lines"], records=first.records + f["records"],
        unparsed=first.unparsed + f["unparsed"], error=first.error or f["error"],
        invalid_utf8_lines=first.invalid_utf8_lines, gpus=first.gpus,
        metrics=pa.concat_tables([first.metrics, metrics]) if first.metrics is not None else metrics,
    )  # fmt: skip


def _said(events: pa.Table) -> pa.Table:
    """The rows of an unclaimed file worth keeping: a kind of their own, a catalog's reading, or words of
    trouble (:data:`forensics.messages.TROUBLE`)."""
    if events.num_rows == 0:
        return events
    frame = pl.from_arrow(events)
    read = messages.frame(messages.load(), frame.get_column("message")).get_column("i")
    keep = frame.with_row_index("_i").filter(
        ~pl.col("kind").is_in(["other", "unparsed"]) | pl.col("_i").is_in(read.implode())
        | pl.col("message").str.contains(messages.TROUBLE)
    )  # fmt: skip
    return keep.drop("_i").to_arrow().cast(events.schema)


def _files_row(result: SourceResult, *, incident: str, file: str, source: str | None, size: int,
               confidence: float | None = None) -> pa.Table:  # fmt: skip
    error = result.error
    if result.invalid_utf8_lines:
        note = f"{result.invalid_utf8_lines} line(s) not valid UTF-8, kept with \\x escapes"
        error = f"{error}; {note}" if error else note
    row = {"incident": incident, "file": file, "source": source, "bytes": size, "lines": result.lines,
           "records": result.records, "unparsed": result.unparsed, "error": error, "host": result.host,
           "confidence": None if confidence is None else round(confidence, 3)}  # fmt: skip
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
                    all_lines: bool = False) -> Iterator[Parsed]:  # fmt: skip
    """Like :func:`parse_path`, in pieces: a kernel log, a journal in ``-o json`` or ``-o export`` form and
    a job's output (NCCL, PyTorch, training logs) are read as a stream and come in chunks of whole
    records, so memory stays bounded whatever their size; other files come whole. The ``files`` row
    comes with the last piece (the others have none).
    """
    p = Path(path)
    with _open(p) as stream:
        head = stream.peek(SNIFF_BYTES)[:SNIFF_BYTES]
        chosen, confidence = _choose(head, source)
        streamed = chosen in (*JOB_SOURCES, "kernel") or (chosen == "journal" and journal._mode(head) != "text")
        if not streamed:
            stream.close()
            yield parse_path(p, source=source, incident=incident, host=host, year=year, timezone=timezone,
                             on_error=on_error, all_lines=all_lines)  # fmt: skip
            return
        if on_error not in ON_ERROR:
            raise InputError(f"on_error must be one of {', '.join(ON_ERROR)}, not {on_error!r}")
        options = dict(file=str(path), incident=incident, host=host, year=year, timezone=timezone, on_error=on_error)
        if chosen == "journal":
            chunks = journal.iter_parse(stream, **options)  # type: ignore[arg-type]
        elif chosen == "kernel":
            chunks = kernel.iter_parse(stream.read, all_lines=all_lines, **options)  # type: ignore[arg-type]
        else:
            chunks = joblog.iter_parse(stream.read, source=chosen, **options)  # type: ignore[arg-type]
        records = unparsed = 0
        last: SourceResult | None = None
        for chunk in chunks:
            records += chunk.records
            unparsed += chunk.unparsed
            last = chunk
            yield Parsed(events=chunk.events, files=FILES.empty_table(), source=chosen, gpus=GPUS.empty_table(),
                         metrics=chunk.metrics if chunk.metrics is not None else METRICS.empty_table())  # fmt: skip
    if chosen in JOB_SOURCES and last is not None:  # the job log's totals come with its last piece
        records, unparsed = last.records, last.unparsed
    total = SourceResult(events_table([]), lines=last.lines if last else 0, records=records, unparsed=unparsed,
                         error=last.error if last else None, invalid_utf8_lines=last.invalid_utf8_lines if last else 0,
                         host=last.host if last else None)  # fmt: skip
    files = _files_row(total, incident=incident, file=str(path), source=chosen, size=p.stat().st_size,
                       confidence=confidence)
    yield Parsed(events=events_table([]), files=files, source=chosen, gpus=GPUS.empty_table())


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
    an nvidia-smi dump; ``table="metrics"``, the training steps of a job log; ``table="files"``, the
    file's ``files`` row).

    ``source`` is a registered source name or ``auto`` (decided by content); ``year`` dates year-less
    stamps (syslog, journal ``short``), ``timezone`` (IANA name) reads stamps printed in local time;
    ``on_error``: ``keep`` (unparsed records become ``unparsed`` rows), ``warn`` (also noted in the
    ``files`` row), ``raise`` (a :class:`~forensics.errors.ParseError`); ``all_lines``: kernel and
    journal text keep the records of no interest too, as ``other`` rows.

    >>> import forensics, tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
    ...     _ = f.write("[ 1843.308145] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\\n")
    >>> t = forensics.parse_file(f.name); os.unlink(f.name)
    >>> t.column("kind")[0].as_py(), t.column("gpu")[0].as_py(), t.column("code")[0].as_py()
    ('gpu.xid', '0000:3b:00.0', 79)
    """
    if table not in ("events", "gpus", "metrics", "files"):
        raise InputError(f"table must be events, gpus, metrics or files, not {table!r}")
    parsed = parse_path(path, source=source, incident=incident, host=host, year=year, timezone=timezone,
                        on_error=on_error, all_lines=all_lines)  # fmt: skip
    return getattr(parsed, table)


def parse_path(path: str | Path, **options: object) -> Parsed:
    """Like :func:`parse_file` but also returns the ``files`` row."""
    return parse_bytes(read_bytes(path), file=str(path), **options)  # type: ignore[arg-type]

