"""Postmortem statistics: shares from counts, MTBF, GPU-hours lost, Xid counts, the command."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import forensics
from forensics.cli import main
from forensics.stats import incident_facts, summary

from .conftest import FIRST_CORPUS

CORPUS = Path(__file__).parents[1] / "corpus"


@pytest.fixture(scope="module")
def corpus_ds(tmp_path_factory: pytest.TempPathFactory) -> forensics.store.OpenDataset:
    out = tmp_path_factory.mktemp("corpus") / "ds"
    forensics.ingest(FIRST_CORPUS, out, jobs=1)
    return forensics.open_dataset(out)


@pytest.mark.parametrize("by", ["cause", "component", "rule", "host", "gpu", "month", "job"])
def test_shares_are_counts_over_the_total(corpus_ds: forensics.store.OpenDataset, by: str) -> None:
    t = forensics.stats(corpus_ds, by)
    assert t["incidents"].sum() == 15
    assert t["share"].sum() == pytest.approx(1.0)
    assert (t["share"] - t["incidents"] / 15).abs().max() < 1e-12


def test_the_root_cause_table_follows_the_diagnoses(corpus_ds: forensics.store.OpenDataset) -> None:
    t = forensics.stats(corpus_ds, "cause")
    assert t.row(0, named=True)["root_cause"] == "gpu_hardware" and t.row(0, named=True)["incidents"] == 3
    assert dict(zip(t["root_cause"], t["incidents"], strict=True)) == (
        forensics.diagnose(corpus_ds).group_by("root_cause").len().pipe(lambda d: dict(zip(d["root_cause"], d["len"], strict=True))))


def test_gpu_hours_lost_from_the_job_facts() -> None:
    t0 = datetime(2025, 1, 1, 12, tzinfo=UTC)
    diagnoses = pl.DataFrame({
        "incident": ["a", "b", "c"], "root_cause": ["gpu_memory", "network", "hang"], "rule": ["r", "s", "t"],
        "confidence": [0.9, 0.8, 0.5],
        "first_host": ["h", "h", "g"], "first_gpu": [None, None, None], "first_ts": [t0, t0, None],
        "evidence": [[], [], []],
    }, schema_overrides={"first_gpu": pl.String, "evidence": pl.List(pl.Struct({"ts": pl.Datetime("us", "UTC"), "role": pl.String}))})  # fmt: skip

    class Ds:
        incidents = pl.LazyFrame({
            "incident": ["a", "b", "c"], "last_ts": [t0, t0, t0],
            "labels": ['{"job": {"gpus": 64, "last_checkpoint": "2025-01-01T11:30:00Z"}}',
                       '{"job": {"gpus": 8, "checkpoint_interval_s": 3600}}', "{}"],
        })  # fmt: skip

    facts = incident_facts(Ds(), diagnoses).sort("incident")
    assert facts["gpu_hours_lost"].to_list() == [32.0, 4.0, None]
    assert facts["basis"].to_list() == ["last checkpoint", "half the checkpoint interval", "unknown: no [job] gpus"]
    head = summary(facts)
    assert (head["incidents"], head["gpu_hours_lost"], head["gpu_hours_unknown"]) == (3, 36.0, 1)


def test_lead_time_counts_only_precursors_before_the_failure() -> None:
    t0 = datetime(2025, 1, 1, 12, tzinfo=UTC)
    ev = pl.Struct({"ts": pl.Datetime("us", "UTC"), "role": pl.String})
    diagnoses = pl.DataFrame({
        "incident": ["a", "b", "c"], "root_cause": ["pcie_link"] * 3, "rule": ["r"] * 3, "confidence": [0.9] * 3,
        "first_host": ["h"] * 3, "first_gpu": [None] * 3, "first_ts": [t0] * 3,
        "evidence": [
            [{"ts": t0, "role": "failure"}, {"ts": t0 - timedelta(seconds=600), "role": "precursor"},
             {"ts": t0 - timedelta(seconds=60), "role": "precursor"}, {"ts": t0 + timedelta(hours=2), "role": "precursor"}],
            [{"ts": t0, "role": "failure"}, {"ts": t0 + timedelta(seconds=5), "role": "precursor"}],  # only after
            [{"ts": None, "role": "failure"}, {"ts": t0, "role": "precursor"}],  # the failure has no time
        ],
    }, schema_overrides={"first_gpu": pl.String, "evidence": pl.List(ev)})  # fmt: skip

    class Ds:
        incidents = pl.LazyFrame({"incident": ["a", "b", "c"], "last_ts": [t0] * 3, "labels": ["{}"] * 3})

    assert incident_facts(Ds(), diagnoses).sort("incident")["lead_time_s"].to_list() == [600.0, None, None]


def test_xid_counts(corpus_ds: forensics.store.OpenDataset) -> None:
    x = forensics.stats(corpus_ds, "xid")
    row = x.filter(pl.col("xid") == 13).row(0, named=True)
    assert (row["events"], row["incidents"], row["gpus"]) == (629, 1, 1)
    assert x["events"].sum() == 653


def test_xid_counts_per_gpu(corpus_ds: forensics.store.OpenDataset) -> None:
    x = forensics.stats(corpus_ds, "xid_gpu")
    assert x.columns == ["host", "gpu", "xid", "events", "incidents", "name"]
    assert x["events"].sum() == 653 and x["events"].is_sorted(descending=True)
    assert x.row(0, named=True) | {"name": None} == {"host": "h100-38", "gpu": "0000:38:00.0", "xid": 13, "events": 629,
                                                     "incidents": 1, "name": None}  # fmt: skip


def test_stats_by_rule_are_the_chains(corpus_ds: forensics.store.OpenDataset) -> None:
    t = forensics.stats(corpus_ds, "rule")
    d = forensics.diagnose(corpus_ds)
    assert dict(zip(t["rule"], t["incidents"], strict=True)) == dict(d.group_by("rule").len().iter_rows())


def test_stats_command(corpus_ds: forensics.store.OpenDataset) -> None:
    r = CliRunner().invoke(main, ["stats", str(corpus_ds.root), "--by", "component"])
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert lines[0].startswith("15 incidents, 2024-04-05 to 2025-02-23 (323.79 days): 0.046 per day, MTBF 518.06 h")
    assert lines[2].split()[:3] == ["COMPONENT", "INCIDENTS", "SHARE"]
    assert lines[3].split()[:3] == ["GPU", "3", "20.0%"]
    md = CliRunner().invoke(main, ["stats", str(corpus_ds.root), "--format", "markdown"]).output
    assert "| root_cause | incidents | share |" in md
    csv = CliRunner().invoke(main, ["stats", str(corpus_ds.root), "--format", "csv"]).output
    assert pl.read_csv(csv.encode())["incidents"].sum() == 15


def test_a_hang_is_a_component_of_its_own_not_unknown() -> None:
    from forensics.stats import COMPONENTS

    assert COMPONENTS["hang"] == "Collective hang" and COMPONENTS["unknown"] == "Unknown"
    assert [cause for cause, component in COMPONENTS.items() if component == "Unknown"] == ["unknown"]


def test_stats_on_a_folder_that_is_not_a_dataset_is_an_error() -> None:
    folder = Path(__file__).parents[1] / "corpus" / "xid79-off-bus-no-xid-line-nvsentinel"
    r = CliRunner().invoke(main, ["stats", str(folder)])
    assert (r.exit_code, r.output) == (1, f"Error: {folder}: not a gpu-forensics dataset (no dataset.json); make one "
                                          "with `forensics ingest`\n")  # fmt: skip


def test_unread_lists_the_trouble_no_source_or_catalog_reads(tmp_path: Path) -> None:
    """A robot's own log (an iCub board's Ethernet CRC errors, robotology/icub-main#846): five error lines no
    source types and no catalog reads, each named with where it is; a corpus incident whose lines the catalogs
    read lists none of them."""
    robot = CORPUS / "net-robotology-846-icub-eth-rx-crc-error-board-timeout"
    xid = CORPUS / "xid79-fallen-off-bus-akash"
    forensics.ingest([robot, xid], tmp_path / "ds", jobs=1)
    ds = forensics.open_dataset(tmp_path / "ds")
    t = forensics.stats(ds, "unread")
    assert t.columns == ["template", "lines", "incidents", "sources", "where"]
    assert t["lines"].sum() == 5 and set(t["incidents"]) == {1}
    assert sorted(int(w.rsplit(":", 1)[1]) for w in t["where"]) == [1, 2, 3, 4, 5]
    assert all(w.startswith(f"{robot.name} node-a/yarprobotinterface.log:") for w in t["where"])
    assert any("ETH monitor: detected RX CRC error" in s for s in t["template"])
    out = CliRunner().invoke(main, ["stats", str(tmp_path / "ds"), "--by", "unread", "--format", "csv"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == "template,lines,incidents,sources,where" and len(lines) == 6
    text = CliRunner().invoke(main, ["stats", str(tmp_path / "ds"), "--by", "unread"]).output
    assert text.splitlines()[0].split() == ["TEMPLATE", "LINES", "INCIDENTS", "SOURCES", "WHERE"]
    assert max(len(line) for line in text.splitlines()) < 100 + 120  # templates cut to 100 characters in a table
