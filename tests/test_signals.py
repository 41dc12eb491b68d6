"""The signals index: written by ingest, read by diagnosis, never able to change a diagnosis."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import forensics
from forensics.cli import main
from forensics.mine import engine, signals
from forensics.mine.language import load_library

from .conftest import FIRST_CORPUS

#: Three real incidents: a PCIe chain, a memory chain, a hang.
PICKED = ("pcie-fatal-cmplto-training-hang", "hbm-dbe-row-remap-xid48-63-94", "xid79-fallen-off-bus-akash")


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    root = tmp_path / "incidents"
    for path in FIRST_CORPUS:
        if path.name in PICKED:
            shutil.copytree(path, root / path.name)
    assert len(list(root.iterdir())) == len(PICKED)
    return root


def _ids(ds: forensics.store.OpenDataset) -> list[str]:
    return sorted(ds.parts("events"))


def test_ingest_writes_the_index_and_diagnosis_reads_it(archive: Path, tmp_path: Path) -> None:
    report = forensics.ingest([archive], tmp_path / "ds", jobs=1)
    library = load_library()
    assert report.index == {"kept": 0, "selected": 3, "rows": report.index["rows"]} and report.index_error is None
    assert [p.name for p in (tmp_path / "ds" / "signals").iterdir()] == [f"{signals.fingerprint(library)}.parquet"]
    ds = forensics.open_dataset(tmp_path / "ds")
    index, stale = signals.load(ds, library, _ids(ds))
    assert stale == [] and index is not None
    rows = index.rows(_ids(ds))
    expected = engine.select_rows(ds.events.collect(), library)
    assert rows.sort("incident", "file", "line").equals(expected.sort("incident", "file", "line"))
    # The same answers as from the events themselves (no index on that path), evidence and all.
    assert forensics.diagnose(ds).equals(forensics.diagnose(ds.events))
    assert forensics.diagnose(ds, incident=PICKED[1]).equals(forensics.diagnose(ds.events, incident=PICKED[1]))
    # Nothing changed: the next ingest keeps every row and writes nothing.
    again = forensics.ingest([archive], tmp_path / "ds", jobs=1)
    assert again.index == {"kept": 3, "selected": 0, "rows": None}


def test_a_changed_incident_is_read_from_its_events_until_the_index_catches_up(archive: Path, tmp_path: Path) -> None:
    forensics.ingest([archive], tmp_path / "ds", jobs=1)
    index = next((tmp_path / "ds" / "signals").iterdir())
    before = tmp_path / "index-before.parquet"
    shutil.copy(index, before)
    changed = archive / PICKED[2]
    log = next(p for p in sorted(changed.rglob("*")) if p.is_file() and p.suffix in (".log", ".txt"))
    with log.open("ab") as f:  # the card is reseated: later the host logs an uncorrectable ECC error
        f.write(b"\n[99999.000000] NVRM: Xid (PCI:0000:3b:00): 48, pid=4242, name=python, DBE (double bit error) "
                b"ECC error detected\n")  # fmt: skip
    report = forensics.ingest([archive], tmp_path / "ds", jobs=1)
    assert report.count("replaced") == 1 and report.index["kept"] == 2 and report.index["selected"] == 1
    ds = forensics.open_dataset(tmp_path / "ds")
    fresh = forensics.diagnose(ds)
    assert fresh.equals(forensics.diagnose(ds.events))
    # An index older than the dataset (a refresh that never ran): the changed incident is stale, read from its events.
    shutil.copy(before, index)
    index, stale = signals.load(ds, load_library(), _ids(ds))
    assert stale == [PICKED[2]] and index is not None
    assert forensics.diagnose(ds).equals(fresh)


@pytest.mark.parametrize("damage", ["garbage", "empty", "missing"])
def test_a_damaged_index_changes_nothing_but_speed(archive: Path, tmp_path: Path, damage: str) -> None:
    forensics.ingest([archive], tmp_path / "ds", jobs=1)
    ds = forensics.open_dataset(tmp_path / "ds")
    expected = forensics.diagnose(ds.events)
    index = next((tmp_path / "ds" / "signals").iterdir())
    if damage == "missing":
        index.unlink()
    else:
        index.write_bytes(b"PAR1\x00\xff not parquet" if damage == "garbage" else b"")
    assert signals.load(ds, load_library(), _ids(ds)) == (None, _ids(ds))
    assert forensics.diagnose(ds).equals(expected)
    # The next ingest rebuilds it.
    assert forensics.ingest([archive], tmp_path / "ds", jobs=1).index["selected"] == 3


def test_other_rules_do_not_read_the_index(archive: Path, tmp_path: Path) -> None:
    forensics.ingest([archive], tmp_path / "ds", jobs=1)
    ds = forensics.open_dataset(tmp_path / "ds")
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "any-xid"\ncause = "gpu_hardware"\nweight = 0.5\n'
                     '[[rule.step]]\nkind = "gpu.xid"\n')  # fmt: skip
    mine = load_library([rules])
    assert signals.fingerprint(mine) != signals.fingerprint(load_library())
    assert signals.load(ds, mine, _ids(ds)) == (None, _ids(ds))
    assert forensics.diagnose(ds, library=mine).equals(forensics.diagnose(ds.events, library=mine))


def test_an_index_that_cannot_be_written_leaves_the_ingest_standing(archive: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    def full(root: object) -> dict:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(signals, "refresh", full)
    result = CliRunner().invoke(main, ["ingest", str(archive), "-o", str(tmp_path / "ds"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert (f"Warning: {tmp_path / 'ds'}: the signals index was not refreshed ([Errno 28] No space left on device); "
            "diagnosis reads every incident's events instead") in result.stderr  # fmt: skip
    ds = forensics.open_dataset(tmp_path / "ds")
    assert _ids(ds) == sorted(PICKED) and not (tmp_path / "ds" / "signals").exists()
    assert forensics.diagnose(ds).equals(forensics.diagnose(ds.events))
