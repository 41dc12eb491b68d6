"""Jupyter: the notebooks run from top to bottom, the ``.forensics`` namespace, plots, rich display."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

import forensics
from forensics import plots
from forensics.stats import incident_facts

from .conftest import FIRST_CORPUS

ROOT = Path(__file__).parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_two_notebooks_are_there() -> None:
    assert [p.name for p in NOTEBOOKS] == ["01-one-incident.ipynb", "02-fleet-postmortem.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_text_renders_and_is_not_stale(path: Path) -> None:
    cells = json.loads(path.read_text("utf-8"))["cells"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    # A heading is "# Title": "# # Title" renders a literal "#".
    assert not [m for m in markdown if re.match(r"#+ #", m)]
    assert all(m.startswith("# ") for m in markdown if m.startswith("#"))
    # No count of the corpus's incidents in the prose: it grows (23, then 246), the notebook prints the count.
    assert not [m for m in markdown if re.search(r"corpus's \d+ incidents|\d+ real incidents", m)]
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "mkdtemp" not in code and "window_us" not in code and code.rstrip().endswith("WORK.cleanup()  # the temporary dataset and files of this notebook")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    # The kernel gets a temporary folder of its own (another run's notebook may be using /tmp right now).
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    # Any cell that raises fails the test (CellExecutionError, with the cell and its traceback).
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()  # fmt: skip
    assert list(tmp_path.glob("forensics-notebook-*")) == []  # the notebook left nothing in its /tmp
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # The figures reached the notebook as Plotly figures, the tables as HTML.
    kinds = {k for o in outputs for k in o.get("data", {})}
    assert {"application/vnd.plotly.v1+json", "text/html"} <= kinds


@pytest.fixture(scope="module")
def corpus_ds(tmp_path_factory: pytest.TempPathFactory) -> forensics.store.OpenDataset:
    out = tmp_path_factory.mktemp("corpus") / "ds"
    forensics.ingest(FIRST_CORPUS, out, jobs=1)
    return forensics.open_dataset(out)


def test_namespace_filters_like_polars(corpus_ds: forensics.store.OpenDataset) -> None:
    ev = corpus_ds.events
    all_ = ev.collect()
    assert ev.forensics.kinds("pcie.*").collect().equals(all_.filter(pl.col("kind").str.starts_with("pcie.")))
    assert ev.forensics.xid(79, 48).collect()["code"].unique().sort().to_list() == [48, 79]
    assert ev.forensics.xid().collect().height == all_.filter(pl.col("kind") == "gpu.xid").height
    assert set(ev.forensics.errors("critical").collect()["severity"]) == {"critical"}
    assert set(ev.forensics.errors().collect()["severity"]) == {"error", "critical"}
    # An address in any spelling finds the GPU.
    a1 = ev.forensics.gpu("00000000:A1:00.0").collect()
    assert a1.height > 0 and set(a1["gpu"]) == {"0000:a1:00.0"} and a1.equals(ev.forensics.gpu("a1:00.0").collect())
    # The DataFrame namespace is the same.
    assert all_.forensics.incident("host-oom-python").height == all_.filter(pl.col("incident") == "host-oom-python").height
    names = ev.forensics.xid(79).forensics.detail("name").collect()["name"].to_list()
    assert names == ["ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"] * len(names) and names
    counts = ev.forensics.counts("kind").collect()
    assert counts["events"].sum() == all_.height and counts["events"].is_sorted(descending=True)
    with pytest.raises(ValueError, match="severity 'bad'"):
        ev.forensics.errors("bad")
    with pytest.raises(ValueError, match="not a PCI address"):
        ev.forensics.gpu("nope")


def test_around_keeps_the_window(corpus_ds: forensics.store.OpenDataset) -> None:
    ev = corpus_ds.events.collect().drop_nulls("ts")
    t = ev["ts"][0]
    got = ev.forensics.around(t.isoformat(), "30s")
    assert got.height >= 1
    assert all(abs((x - t).total_seconds()) <= 30 for x in got["ts"])
    assert ev.forensics.around(datetime(1999, 1, 1, tzinfo=UTC), "1h").height == 0


def test_dataset_displays_as_tables(corpus_ds: forensics.store.OpenDataset) -> None:
    page = corpus_ds._repr_html_()
    assert "<table>" in page and "<td>events</td><td style='text-align:right'>735</td>" in page
    assert corpus_ds.counts()["incidents"] == 15


def test_plots_are_figures_with_escaped_text(corpus_ds: forensics.store.OpenDataset) -> None:
    d = forensics.diagnose(corpus_ds)
    facts = incident_facts(corpus_ds, d)
    fig = plots.causes_over_time(facts)
    dated = facts["when"].is_not_null().sum()
    assert sum(sum(t.y) for t in fig.data) == dated
    assert fig.layout.title.text.endswith(f"({15 - dated} without a time left out)")
    heat = plots.failure_heatmap(corpus_ds, d)
    assert sum(map(sum, heat.data[0].z)) == d.filter(pl.col("first_host").is_not_null()).height
    tl = forensics.timeline(corpus_ds, "ib-retry-exceeded-roce-nccl")
    fig = plots.timeline_figure(tl)
    # These NCCL lines print no time and no uptime: they are drawn by their line in the file.
    assert tl["ts"].is_null().all() and tl["uptime_s"].is_null().all()
    assert sum(len(t.x) for t in fig.data) == tl.height and fig.layout.xaxis.title.text.startswith("line in the file")
    timed = forensics.timeline(corpus_ds, "xid79-fallen-off-bus-akash")
    fig = plots.timeline_figure(timed)
    assert sum(len(t.x) for t in fig.data) == timed.drop_nulls("ts").height > 0 and fig.layout.xaxis.type == "date"
    # Markup in a message reaches Plotly as entities.
    hostile = tl.with_columns(message=pl.lit('<img src=x onerror="alert(1)">'))
    spec = plots.timeline_spec(hostile)
    text = json.dumps(spec)
    assert "<img" not in text and "&lt;img src=x" in text
