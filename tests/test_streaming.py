"""Every streamed source gives, read in small chunks, the events it gives read whole; the lines of interest
are the same whichever engine finds them; the lines of no interest are counted, and kept with
``--all-lines``. (Speed and memory are measured by ``bench/run.py``, never here.)"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from forensics import output
from forensics.cli import main
from forensics.parse import iter_parse_path, parse_bytes, parse_path
from forensics.reading import interest
from forensics.sources import joblog, journal, kernel
from forensics.text import split_lines

from .conftest import golden_cases


def _rows(table: pa.Table) -> list[dict]:
    return [json.loads(line) for line in output.jsonl_lines(table)]


def _joined(chunks: list) -> list[dict]:
    return [row for chunk in chunks for row in _rows(chunk.events)]


KERNEL_CASES = golden_cases("kernel")


@pytest.mark.parametrize("case", KERNEL_CASES, ids=[c.stem for c in KERNEL_CASES])
@pytest.mark.parametrize("all_lines", [False, True], ids=["interest", "all-lines"])
def test_kernel_in_small_chunks_gives_what_whole_gives(case: Path, all_lines: bool) -> None:
    data = case.read_bytes()
    whole = kernel.parse(data, file=case.name, all_lines=all_lines)
    chunks = list(kernel.iter_parse(io.BytesIO(data).read, file=case.name, chunk_bytes=1024, all_lines=all_lines))
    assert _joined(chunks) == _rows(whole.events)
    assert chunks[-1].lines == whole.lines == (data.count(b"\n") + (not data.endswith(b"\n") and bool(data)))
    assert sum(c.records for c in chunks) == whole.records
    assert sum(c.unparsed for c in chunks) == whole.unparsed


def test_a_big_kernel_log_is_read_in_chunks_cut_where_records_start() -> None:
    """Golden logs one after another, well past a chunk: every record comes whole, in its place."""
    data = b"".join(c.read_bytes().rstrip(b"\n") + b"\n" for c in KERNEL_CASES if c.suffix == ".log")
    chunks = list(kernel.iter_chunks(io.BytesIO(data).read, 4096))
    assert len(chunks) > 10 and b"".join(c for c, _ in chunks) == data
    # (the year of year-less stamps given: read whole, they take it from a stamp anywhere in the file;
    # read in chunks, from the chunks before)
    whole = kernel.parse(data, file="all.log", year=2024)
    streamed = list(kernel.iter_parse(io.BytesIO(data).read, file="all.log", chunk_bytes=4096, year=2024))
    # (the logs of many hosts one after another go back in the year many times: read in chunks, the
    # going back to an earlier month is followed inside a chunk only, so the times are left out here)
    def untimed(rows: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "ts"} for r in rows]

    assert untimed(_joined(streamed)) == untimed(_rows(whole.events))
    assert {r["kind"] for r in _rows(whole.events)} >= {"gpu.xid", "pcie.aer", "host.oom_kill", "other"}


TEXT_JOURNALS = [c for c in golden_cases("journal") if journal._mode(c.read_bytes()[:65536]) == "text"]


@pytest.mark.parametrize("case", TEXT_JOURNALS, ids=[c.stem for c in TEXT_JOURNALS])
@pytest.mark.parametrize("all_lines", [False, True], ids=["interest", "all-lines"])
def test_text_journal_in_small_chunks_gives_what_whole_gives(case: Path, all_lines: bool) -> None:
    """``journalctl -o short*``/``cat``, syslog files naming their services, the daemons' own logs: read in
    chunks of 1 KiB (boots numbered across them, a paste's prefix taken off every line) as read whole."""
    data = case.read_bytes()
    whole = journal.parse(data, file=case.name, all_lines=all_lines)
    chunks = list(journal.iter_parse_text(io.BytesIO(data).read, file=case.name, chunk_bytes=1024, all_lines=all_lines))
    assert _joined(chunks) == _rows(whole.events)
    assert chunks[-1].lines == whole.lines == (data.count(b"\n") + (not data.endswith(b"\n") and bool(data)))
    assert sum(c.records for c in chunks) == whole.records


JSON_JOURNALS = [c for c in golden_cases("journal") if journal._mode(c.read_bytes()[:65536]) != "text"]


@pytest.mark.parametrize("case", JSON_JOURNALS, ids=[c.stem for c in JSON_JOURNALS])
def test_journal_export_in_small_chunks_gives_what_whole_gives(case: Path) -> None:
    """(A stream with no ``peek``, io.BytesIO, has its mode read all the same: ``-o verbose`` too.)"""
    data = case.read_bytes()
    whole = journal.parse(data, file=case.name)
    chunks = list(journal.iter_parse(io.BytesIO(data), file=case.name, chunk_entries=2))
    assert _joined(chunks) == _rows(whole.events)


JOB_CASES = [(s, c) for s in ("nccl", "torch", "trainlog") for c in golden_cases(s)]


@pytest.mark.parametrize(("source", "case"), JOB_CASES, ids=[f"{s}/{c.stem}" for s, c in JOB_CASES])
def test_job_log_in_small_chunks_gives_what_whole_gives(source: str, case: Path) -> None:
    data = case.read_bytes()
    whole = list(joblog.iter_parse(io.BytesIO(data).read, file=case.name, source=source))
    small = list(joblog.iter_parse(io.BytesIO(data).read, file=case.name, source=source, chunk_bytes=512))
    assert _joined(small) == _joined(whole)


@pytest.mark.parametrize("case", KERNEL_CASES + golden_cases("journal"), ids=lambda c: c.stem)
def test_hyperscan_and_polars_find_the_same_lines_of_interest(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("hyperscan")
    data = case.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    lines, _ = split_lines(data)
    prefilters = (kernel.KERNEL.prefilter(),)
    monkeypatch.setattr(interest, "HYPERSCAN_BYTES", 0)
    by_hyperscan = interest.of_interest(lines, data, prefilters)
    monkeypatch.setattr(interest, "HYPERSCAN_BYTES", 1 << 40)
    monkeypatch.setattr(interest, "PYTHON_ROWS", 1 << 40)
    monkeypatch.setattr(interest, "_database", lambda _: None)
    by_python = interest.of_interest(lines, data, prefilters)
    monkeypatch.setattr(interest, "PYTHON_ROWS", 0)
    by_polars = interest.of_interest(lines, data, prefilters)
    assert by_hyperscan.to_list() == by_polars.to_list() == by_python.to_list()
    assert by_polars.any() or not lines.str.contains(kernel.KERNEL.prefilter()).any()


def test_lines_of_no_interest_are_counted_and_kept_on_request(tmp_path: Path) -> None:
    """The one Xid line of a (synthetic) three-line dmesg is an event; the two probe lines are counted in
    ``files.lines`` and come back as ``other`` rows with ``--all-lines``."""
    log = tmp_path / "dmesg.log"
    log.write_text(
        "[    5.033458] device veth83fefc6 entered promiscuous mode\n"
        "[ 1843.308145] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
        "[ 1843.400000] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
    )
    parsed = parse_path(log)
    assert [r["kind"] for r in _rows(parsed.events)] == ["gpu.xid"]
    assert parsed.files.column("lines").to_pylist() == [3] and parsed.files.column("records").to_pylist() == [1]
    kept = parse_bytes(log.read_bytes(), file=str(log), all_lines=True)
    assert [r["kind"] for r in _rows(kept.events)] == ["other", "gpu.xid", "other"]
    assert kept.files.column("lines").to_pylist() == [3]
    result = CliRunner().invoke(main, ["parse", str(log), "--format", "csv", "--all-lines"])
    assert result.exit_code == 0 and result.output.count("\n") == 4  # the header and three rows
    result = CliRunner().invoke(main, ["parse", str(log), "--format", "csv"])
    assert result.exit_code == 0 and result.output.count("\n") == 2


def test_parse_path_streams_a_kernel_log_with_its_files_row_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "kern.log"
    log.write_bytes(b"".join(c.read_bytes().rstrip(b"\n") + b"\n" for c in KERNEL_CASES[:40]))
    monkeypatch.setattr(kernel, "FIRST_CHUNK_BYTES", 2048)
    monkeypatch.setattr(kernel, "CHUNK_BYTES", 8192)
    pieces = list(iter_parse_path(log, source="kernel"))
    assert len(pieces) > 3 and all(p.files.num_rows == 0 for p in pieces[:-1])
    whole = parse_path(log, source="kernel")
    assert [r for p in pieces for r in _rows(p.events)] == _rows(whole.events)
    files = pieces[-1].files.to_pylist()[0]
    assert {k: files[k] for k in ("lines", "records", "unparsed", "bytes")} == {
        k: whole.files.to_pylist()[0][k] for k in ("lines", "records", "unparsed", "bytes")}


def test_ingest_reads_a_big_file_in_chunks_its_records_of_interest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file over ``archive.STREAM_BYTES`` is not read into memory: ingest reads it in chunks and keeps its
    records of interest, as ``parse`` gives them; its lines are all counted and the digest is the one of
    the file read whole."""
    from forensics.ingest import archive
    from forensics.ingest.discover import IncidentRef
    from forensics.ingest.incident import digest, read_incident

    (tmp_path / "node1").mkdir()
    log = tmp_path / "node1" / "kern.log"
    log.write_bytes(b"".join(c.read_bytes().rstrip(b"\n") + b"\n" for c in KERNEL_CASES[:40]))
    ref = IncidentRef("big", tmp_path)
    whole_digest = digest(ref)
    monkeypatch.setattr(archive, "STREAM_BYTES", 4096)
    monkeypatch.setattr(kernel, "FIRST_CHUNK_BYTES", 2048)
    monkeypatch.setattr(kernel, "CHUNK_BYTES", 8192)
    assert digest(ref) == whole_digest
    tables = read_incident(ref)
    parsed = parse_path(log)
    assert len(list(iter_parse_path(log))) > 3  # (read in chunks)
    keys = ("line", "kind", "code", "gpu", "message")
    got = [{k: r[k] for k in keys} for r in tables.events.to_pylist()]
    assert got == [{k: r[k] for k in keys} for r in parsed.events.to_pylist()] and got
    files = tables.files.to_pylist()[0]
    assert (files["file"], files["lines"], files["records"], files["bytes"]) == (
        "node1/kern.log", log.read_bytes().count(b"\n"), parsed.files.column("records")[0].as_py(), log.stat().st_size)


def test_a_syslog_crossing_new_year_in_a_later_chunk_is_dated_as_read_whole() -> None:
    """A real kern.log's December lines, then the same lines a month later (``Jan  3``): read in chunks of
    1 KiB, the January rows of later chunks fall in the next year, as read whole."""
    december = (Path(__file__).parent / "golden" / "kernel" /
                "kernlog-rminitadapter-0x24-0x72-xid48-dbe-xid64-blacklisting-failed-01.log").read_bytes()
    data = december * 3 + december.replace(b"Dec  2 ", b"Jan  3 ") * 3
    whole = kernel.parse(data, file="kern.log", year=2023)
    chunks = list(kernel.iter_parse(io.BytesIO(data).read, file="kern.log", chunk_bytes=1024, year=2023))
    assert len(chunks) > 4 and _joined(chunks) == _rows(whole.events)
    years = [(r["message"] is not None, r["ts"][:4]) for r in _joined(chunks)]
    half = len(years) // 2
    assert {y for _, y in years[:half]} == {"2023"} and {y for _, y in years[half:]} == {"2024"}
    # a chunk cut right at the crossing: its first January stamp follows the chunk before's December one
    january = kernel.parse_text(december.replace(b"Dec  2 ", b"Jan  3 "), file="kern.log", incident="", host=None,
                                timezone=None, on_error="keep", year=2023, month_before=12)
    assert {r["ts"][:4] for r in _rows(january.events)} == {"2024"} and (january.year, january.month) == (2024, 1)


def test_the_catalogs_anchors_kept_on_disk_are_the_catalogs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The anchors read back from the cache are those the catalogs give; a damaged cache file is read anew."""
    from forensics import messages

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    expected = tuple(messages.load().anchors())
    assert interest._catalog_anchors.__wrapped__() == expected  # written
    (cached,) = tmp_path.glob("gpu-forensics/anchors-*.json")
    assert interest._catalog_anchors.__wrapped__() == expected  # read back
    cached.write_text('["only this"')
    assert interest._catalog_anchors.__wrapped__() == expected


def test_parse_path_streams_a_text_journal_with_its_files_row_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``journalctl -o short*`` logs one after another, read through ``iter_parse_path`` in small chunks:
    the rows and counts of the file read whole."""
    log = tmp_path / "journal.log"
    short = [c for c in TEXT_JOURNALS if c.name.startswith("journal-short")][:30]
    log.write_bytes(b"".join(c.read_bytes().rstrip(b"\n") + b"\n" for c in short))
    whole = parse_bytes(log.read_bytes(), file=str(log), source="journal", all_lines=True)
    monkeypatch.setattr(kernel, "FIRST_CHUNK_BYTES", 2048)
    monkeypatch.setattr(kernel, "CHUNK_BYTES", 8192)
    pieces = list(iter_parse_path(log, source="journal", all_lines=True))
    assert len(pieces) > 3 and all(p.files.num_rows == 0 for p in pieces[:-1])
    assert [r for p in pieces for r in _rows(p.events)] == _rows(whole.events)
    keys = ("lines", "records", "unparsed", "bytes", "source")
    assert {k: pieces[-1].files.to_pylist()[0][k] for k in keys} == {k: whole.files.to_pylist()[0][k] for k in keys}
