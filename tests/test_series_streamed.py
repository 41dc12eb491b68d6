"""Telemetry series read in chunks (issue 34: bounded memory): each real series sample, cut into small chunks,
gives the samples, events and counts it gives read whole, the events derived from the series included (a
rule's look-back carried across a cut); ``iter_parse_path`` streams them with their samples. (Speed and
memory are measured by ``bench/run.py``, never here.)"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from forensics.parse import SERIES_SOURCES, iter_parse_path, parse_bytes
from forensics.sources import dcgm, disks, gpuseries, nicstats, telemetry

GOLDEN = Path(__file__).parent / "golden"
MODULES = {"gpuseries": gpuseries, "disks": disks, "nicstats": nicstats, "dcgm": dcgm}
#: The series among each source's real samples (not smartctl, ethtool, ip or dcgmi reports: one report each).
SERIES = [p for name in MODULES for p in sorted((GOLDEN / name).glob("*.log"))
          if name == "gpuseries" or re.search(r"iostat|sar-n|scrape|xid-errors", p.name)]  # fmt: skip


def _sorted(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(r, default=str, sort_keys=True) for r in rows)


def test_the_series_cases_are_there() -> None:
    assert {p.parent.name for p in SERIES} == set(MODULES) and len(SERIES) >= 12


@pytest.mark.parametrize("case", SERIES, ids=[p.stem for p in SERIES])
@pytest.mark.parametrize("size", [64, 400])
def test_a_series_in_small_chunks_gives_what_whole_gives(case: Path, size: int) -> None:
    module = MODULES[case.parent.name]
    data = case.read_bytes() * 3  # three captures one after another: cuts fall inside and between them
    whole = module.parse(data, file=case.name)
    chunks = list(module.iter_parse(io.BytesIO(data).read, file=case.name, chunk_bytes=size))
    parts = telemetry.combined(chunks)
    assert whole.samples.num_rows + whole.events.num_rows > 0
    assert _sorted(parts.samples.to_pylist()) == _sorted(whole.samples.to_pylist())
    assert _sorted(parts.events.to_pylist()) == _sorted(whole.events.to_pylist())
    assert (parts.lines, parts.records, parts.unparsed) == (whole.lines, whole.records, whole.unparsed)
    assert [c.lines for c in chunks] == sorted(c.lines for c in chunks)  # the lines read so far


def test_a_power_collapse_across_a_cut_is_one_event_on_its_reading() -> None:
    # the real 5xx capture (GPU 0 at 86, 267, 280, 284 W), then a reading of the same GPU at 12 W in a chunk of
    # its own: the median it is held against is that of the readings before the cut
    case = GOLDEN / "gpuseries" / "nvidia-smi-dmon-5xx-dcgm-issue-232-gtemp-mtemp.log"
    data = case.read_bytes()
    drop = b"    0     12     42      -      0      0      0      0      0      0   6250   1710 \n"
    both = data + drop
    whole = [e for e in gpuseries.parse(both, file="f").events.to_pylist() if e["kind"] == "gpu.power_drop"]
    chunks = list(gpuseries.iter_parse(io.BytesIO(both).read, file="f", chunk_bytes=len(data)))
    assert len(chunks) == 2
    again = [e for e in telemetry.combined(chunks).events.to_pylist() if e["kind"] == "gpu.power_drop"]
    assert len(whole) == 1 and again == whole
    assert again[0]["line"] == data.count(b"\n") + 1
    # (its samples name readings before the cut)
    assert json.loads(again[0]["detail"])["samples"] == ["f:4", "f:7", "f:8"]  # first, previous, its own


@pytest.mark.parametrize("case", ["sysstat-374-iostat-xt-12-mb-time-line-01", "stress-ng-148-iostat-x-12-sdb-util-100-01"])
def test_iostat_is_cut_where_a_report_starts(case: str) -> None:
    # with -t before each time line (no blank line needed: this excerpt has none), else after a blank line
    data = (GOLDEN / "disks" / f"{case}.log").read_bytes() * 40
    chunks = list(telemetry.cut_chunks(io.BytesIO(data).read, 1024, disks._report_start))
    assert b"".join(chunks) == data and len(chunks) > 10
    assert all(len(c) < 4096 for c in chunks)  # cut where a report starts, never grown for want of one
    starts = [c.lstrip(b"\n").split(b"\n")[0] for c in chunks[1:]]
    assert all(re.match(rb"\d\d/\d\d/\d\d |Device", s) for s in starts), starts


@pytest.mark.parametrize("source", SERIES_SOURCES)
def test_iter_parse_path_streams_a_series_with_its_samples(source: str, tmp_path: Path) -> None:
    case = next(p for p in SERIES if p.parent.name == source)
    data = case.read_bytes() * 50
    path = tmp_path / case.name
    path.write_bytes(data)
    pieces = list(iter_parse_path(path))
    whole = parse_bytes(data, file=str(path))
    assert pieces[-1].source == source
    samples = [r for p in pieces for r in p.samples.to_pylist()]
    assert _sorted(samples) == _sorted(whole.samples.to_pylist())
    assert pieces[-1].files.to_pylist()[0]["lines"] == whole.files.to_pylist()[0]["lines"]


def test_ingest_of_a_big_series_keeps_its_chunks_samples_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A series over ``archive.STREAM_BYTES`` is ingested chunk by chunk: its samples are those of the file
    ingested whole, row for row, and stay in one piece per chunk (never joined in memory)."""
    import functools

    from forensics.ingest import archive
    from forensics.ingest.discover import IncidentRef
    from forensics.ingest.incident import read_incident

    case = next(p for p in SERIES if p.parent.name == "gpuseries")
    (tmp_path / "node1").mkdir()
    (tmp_path / "node1" / "dmon.log").write_bytes(case.read_bytes() * 40)
    ref = IncidentRef("big", tmp_path)
    whole = read_incident(ref)
    monkeypatch.setattr(archive, "STREAM_BYTES", 4096)
    monkeypatch.setattr(gpuseries, "iter_parse", functools.partial(gpuseries.iter_parse, chunk_bytes=1024))
    streamed = read_incident(ref)
    assert streamed.samples.num_rows == whole.samples.num_rows > 0
    assert _sorted(streamed.samples.to_pylist()) == _sorted(whole.samples.to_pylist())
    assert streamed.samples.column("line").num_chunks > 3  # (a piece per chunk)
    keys = ("line", "kind", "gpu", "message", "detail")
    assert _sorted([{k: r[k] for k in keys} for r in streamed.events.to_pylist()]) == \
        _sorted([{k: r[k] for k in keys} for r in whole.events.to_pylist()])  # fmt: skip
