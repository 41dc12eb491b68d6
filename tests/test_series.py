"""An incident's telemetry on its time axis (issue 34, point 5): :func:`forensics.series.series`, the charts
of :func:`forensics.plots.series_spec` and the report's section.

A real capture (a ``sar -n DEV`` golden copied into an incident) is read and drawn value for value; a
synthetic thermal incident (``forensics synth`` writes the ``dmon`` capture its cause shows in) has the
failure and the derived events on its curves.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import forensics
from forensics import plots, series
from forensics.report import build
from forensics.schema import SAMPLE_METRICS
from forensics.synth import synth

from .conftest import GOLDEN

SAR = GOLDEN / "nicstats" / "sysstat-85-sar-n-dev-9.0.4-el6-ampm-bond-01.log"


def test_every_charted_metric_is_in_the_vocabulary() -> None:
    charted = [m for f in series.families() for m in f["metrics"]]
    assert set(charted) <= SAMPLE_METRICS
    assert len(charted) == len(set(charted))  # one chart per metric


@pytest.fixture(scope="module")
def sar_ds(tmp_path_factory: pytest.TempPathFactory) -> forensics.store.OpenDataset:
    root = tmp_path_factory.mktemp("sar")
    (root / "inc" / "storage01").mkdir(parents=True)
    shutil.copy(SAR, root / "inc" / "storage01" / "sar-n-dev.log")
    forensics.ingest([root / "inc"], root / "ds", jobs=1)
    return forensics.open_dataset(root / "ds")


def test_a_real_capture_is_drawn_value_for_value(sar_ds: forensics.store.OpenDataset) -> None:
    rows = forensics.series(sar_ds)
    # sar -n DEV 2 1 of sysstat 9.0.4: 11 interfaces at 01:15:27 PM; its kB/s columns are what it printed
    assert rows["family"].unique().to_list() == ["nic_traffic"]
    assert rows.height == 22 and rows["ts"].unique().to_list() == [datetime(2015, 10, 28, 13, 15, 27, tzinfo=UTC)]
    charts = plots.series_spec(rows)  # no failure: nothing was diagnosed
    assert [c["layout"]["title"]["text"] for c in charts] == ["NIC traffic (kB/s) · storage01"]
    traces = {t["name"]: (t["x"], t["y"]) for t in charts[0]["data"]}
    assert len(traces) == 22
    assert traces["rx_kb_per_s em2"] == (["2015-10-28T13:15:27+00:00"], [0.43])
    assert traces["tx_kb_per_s em2"] == (["2015-10-28T13:15:27+00:00"], [0.43])
    assert traces["rx_kb_per_s em1"] == (["2015-10-28T13:15:27+00:00"], [0.0])
    assert "shapes" not in charts[0]["layout"]


@pytest.fixture(scope="module")
def thermal_ds(tmp_path_factory: pytest.TempPathFactory) -> forensics.store.OpenDataset:
    root = tmp_path_factory.mktemp("thermal")
    synth(root / "inc", 1, seed=11, hosts_per_incident=(1, 1), causes=["thermal"], lemons=())
    forensics.ingest([root / "inc"], root / "ds", jobs=1)
    return forensics.open_dataset(root / "ds")


def test_the_failure_and_the_derived_events_are_on_the_curves(thermal_ds: forensics.store.OpenDataset) -> None:
    d = forensics.diagnose(thermal_ds).row(0, named=True)
    rows = forensics.series(thermal_ds)
    failure = series.failure_time(d)
    timed = rows.drop_nulls("ts")
    assert timed["ts"].min() >= failure - series.BEFORE and timed["ts"].max() <= failure + series.AFTER
    assert set(rows["host"]) == {d["first_host"]}
    events = thermal_ds.events.collect()
    charts = plots.series_spec(rows, events, failure=failure, gpu=d["first_gpu"])
    titles = [c["layout"]["title"]["text"].split(" · ")[0] for c in charts]
    assert titles == ["Temperature (°C)", "Power (W)", "Clocks (MHz)", "GPU utilization (%)"]
    for chart in charts:  # the first failure, a dashed line on every chart
        assert chart["layout"]["shapes"][0]["x0"] == failure.isoformat()
    temperature = charts[0]["data"]
    assert sum(t["mode"] == "lines+markers" or t["mode"] == "lines" for t in temperature) == 8  # a curve per GPU
    thick = [t["name"] for t in temperature if t.get("line", {}).get("width") == 3]
    assert thick == [f"temperature_c {d['first_gpu']}"]
    # the markers are the derived events, at their readings
    derived = events.filter(pl.col("kind").is_in(["gpu.temp_rise", "gpu.thermal_slowdown"]) & (pl.col("source") == "gpuseries"))
    marks = [t for t in temperature if t["mode"] == "markers"]
    assert len(marks) == 1
    expected = derived.sort("ts").select(x=pl.col("ts").map_elements(lambda t: t.isoformat(), return_dtype=pl.String),
                                         y=pl.col("detail").str.json_path_match("$.value").cast(pl.Float64))  # fmt: skip
    assert_frame_equal(pl.DataFrame({"x": marks[0]["x"], "y": marks[0]["y"]}), expected)
    assert expected["y"].to_list()[-1] >= 88  # the curve climbs to a slowdown temperature


def test_the_report_draws_an_incidents_telemetry(thermal_ds: forensics.store.OpenDataset) -> None:
    text = build(thermal_ds)
    assert "<h3>Telemetry around the failure</h3>" in text
    specs = [json.loads(s.split(">", 1)[1].split("</script>", 1)[0])
             for s in text.split('<script type="application/json" id="ts-')[1:]]  # fmt: skip
    assert len(specs) == 4 and all(s["data"] for s in specs)
    # the timeline is still the page's first chart (its hover test takes the first)
    page = text.split('<section class="page" id="incident-')[1]
    assert page.index('data-spec="tl-') < page.index('data-spec="ts-')


def test_a_counter_is_drawn_as_its_growth_per_minute() -> None:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    curve = pl.DataFrame({"ts": [t0 + timedelta(seconds=s) for s in (0, 30, 90, 120)], "line": [1, 2, 3, 4],
                          "value": [10.0, 12.0, 12.0, 3.0]})  # fmt: skip
    grown = plots._growth(curve)
    assert grown["value"].to_list() == [4.0, 0.0, None]  # +2 in 30 s; none; a reset is no growth
