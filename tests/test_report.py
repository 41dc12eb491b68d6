"""The HTML report: every incident has a page, log text stays text, and it works in a real browser.

The browser tests drive Debian's Chromium (``make test`` installs it when it can; ``.ci/run`` requires
it) through Playwright, offline: a request for anything but the file itself fails the test.
"""

from __future__ import annotations

import io
import os
import re
import shutil
from pathlib import Path

import pytest
import polars as pl
from click.testing import CliRunner

import forensics
from forensics.cli import main
from forensics.report import build
from forensics.store import incident_key

from .conftest import FIRST_CORPUS

CORPUS = Path(__file__).parents[1] / "corpus"
#: Markup in a log line, a host name and an incident id; each would run script if written raw.
LINE = ('NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=<script>window.__pwned=1</script>, GPU has fallen off the bus. '
        '"><img src=x onerror="window.__pwned=2"> & &lt;b&gt;')  # fmt: skip
HOST = 'node"><svg onload="window.__pwned=3">'
SYSLOG_HOST = 'n"><svg/onload=alert(5)>'  # a syslog host: no spaces, no dots (the short name is kept)
INCIDENT = "inc'><img src=x onerror=window.__pwned=4>"


@pytest.fixture(scope="module")
def corpus_ds(tmp_path_factory: pytest.TempPathFactory) -> forensics.store.OpenDataset:
    out = tmp_path_factory.mktemp("corpus") / "ds"
    forensics.ingest(FIRST_CORPUS, out, jobs=1)
    return forensics.open_dataset(out)


@pytest.fixture(scope="module")
def hostile_ds(tmp_path_factory: pytest.TempPathFactory) -> forensics.store.OpenDataset:
    root = tmp_path_factory.mktemp("hostile")
    inc = root / "incidents" / "x"
    (inc / HOST).mkdir(parents=True)
    (inc / "incident.toml").write_text(f'id = "{INCIDENT}"\n[job]\nname = "<b>job</b>"\ngpus = 8\ncheckpoint_interval_s = 3600\n')
    (inc / HOST / "kern.log").write_text(
        f"2025-03-01T10:00:00.000000+00:00 {SYSLOG_HOST} kernel: pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0\n"
        f"2025-03-01T10:00:01.000000+00:00 {SYSLOG_HOST} kernel: {LINE}\n"
        f"2025-03-01T10:00:02.000000+00:00 {SYSLOG_HOST} kernel: <img src=y onerror=alert(1)> unparsed line\n"
    )
    forensics.ingest([root / "incidents"], root / "ds", jobs=1)
    return forensics.open_dataset(root / "ds")


def test_every_incident_has_a_page_and_an_index_row(corpus_ds: forensics.store.OpenDataset) -> None:
    text = build(corpus_ds)
    ids = corpus_ds.incidents.select("incident").collect()["incident"].to_list()
    assert len(ids) == 15
    for i in ids:
        key = incident_key(i)
        assert text.count(f'id="incident-{key}"') == 1
        assert text.count(f'href="#incident-{key}"') == 1
    assert '<section class="page" id="fleet"' in text
    # Self-contained: the HTML fetches nothing (no src= or href= to another place; the browser test
    # checks that the scripts fetch nothing either).
    assert not re.search(r'\b(src|href)="(?!#)', text[: text.index("<script")])


def test_markup_from_logs_is_written_as_text(hostile_ds: forensics.store.OpenDataset) -> None:
    text = build(hostile_ds)
    page = text[: text.index('<script type="application/json"')]  # the HTML part, before the chart data
    assert "<img" not in page and "<svg" not in page and "<b>job" not in page
    assert hostile_ds.events.collect()["host"].to_list()[:2] == [SYSLOG_HOST] * 2  # the markup reached the tables
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=&quot;window.__pwned=2&quot;&gt;" in page
    data = text[text.index('<script type="application/json"') : text.index("<script>")]
    # Chart data cannot end its <script> element or open another, and Plotly gets entities, not tags.
    assert "<" not in data.replace('<script type="application/json"', "").replace("</script>", "")
    assert "&lt;script&gt;window.__pwned=1" in data.encode().decode("unicode_escape", errors="ignore")
    # One <script> for the chart data of each chart, Plotly's and the page's: none from the logs.
    assert text.count("<script>") == 2


def test_report_command_writes_one_file(corpus_ds: forensics.store.OpenDataset, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(corpus_ds.root), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"report: {out.resolve()} (") and result.output.endswith("MB); open it in a browser\n")
    assert out.read_text("utf-8").startswith("<!DOCTYPE html>")


def test_one_incident_report(corpus_ds: forensics.store.OpenDataset, tmp_path: Path) -> None:
    out = tmp_path / "one.html"
    result = CliRunner().invoke(main, ["report", str(corpus_ds.root), "-o", str(out), "--incident", "host-oom-python"])
    assert result.exit_code == 0, result.output
    text = out.read_text("utf-8")
    assert 'id="fleet"' not in text and text.count('<section class="page"') == 1


def test_bad_input_is_one_line_and_keeps_the_old_file(corpus_ds: forensics.store.OpenDataset, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("old")
    result = CliRunner().invoke(main, ["report", str(corpus_ds.root), "-o", str(out), "--incident", "nope"])
    assert result.exit_code != 0 and result.output == "Error: no incident 'nope' in the dataset\n"
    assert out.read_text() == "old"
    result = CliRunner().invoke(main, ["report", str(corpus_ds.root), "-o", str(tmp_path / "no" / "r.html")])
    assert result.exit_code != 0 and result.output == f"Error: {tmp_path / 'no'}: no such directory\n"


# -- in a real browser --------------------------------------------------------------------------------


def _chromium() -> str | None:
    return os.environ.get("FORENSICS_CHROMIUM") or next(
        (p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome")) if p), None)


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    path = _chromium()
    if path is None:
        message = "no Chromium (Debian package chromium; `make test` installs it when run as root)"
        if os.environ.get("FORENSICS_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])  # fmt: skip
        yield b
        b.close()


class Page:
    """A report open in the browser, with every console error, page error and outside request kept."""

    def __init__(self, browser, path: Path) -> None:  # type: ignore[no-untyped-def]
        self.problems: list[str] = []
        self.page = browser.new_page(viewport={"width": 1300, "height": 900})
        self.page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        self.page.route(re.compile(r"^(?!file:|data:|blob:|about:)"), self._refuse)
        self.url = path.as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready]")

    def _refuse(self, route) -> None:  # type: ignore[no-untyped-def]
        self.problems.append(f"request: {route.request.url}")
        route.abort()

    def show(self, hash_: str) -> None:
        self.page.evaluate("h => { location.hash = h; }", hash_)
        self.page.wait_for_function("h => !document.getElementById(h).hidden", arg=hash_)


def _not_blank(png: bytes) -> int:
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB").resize((130, 90))
    return len(img.getcolors(maxcolors=1 << 16) or [])


def test_report_in_chromium(browser, corpus_ds: forensics.store.OpenDataset, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = forensics.report.report(corpus_ds, tmp_path / "report.html")
    view = Page(browser, path)
    page = view.page
    assert not page.locator("#fleet").is_hidden()
    # The fleet's charts are drawn by Plotly (an SVG each), the empty ones say why.
    assert page.locator("#fleet div.chart .main-svg").count() >= 2
    assert page.locator("#fleet div.chart").count() == 3
    assert _not_blank(page.screenshot()) > 20
    ids = corpus_ds.incidents.select("incident").collect()["incident"].to_list()
    assert page.locator("#incident-index tbody tr").count() == len(ids)
    for i in ids:
        key = f"incident-{incident_key(i)}"
        view.show(key)
        assert page.locator(f"[id='{key}'] h2").inner_text() == i
        assert page.locator("#fleet").is_hidden()
        assert page.locator(f"[id='{key}'] div.chart .main-svg").count() >= 1  # its timeline
    # The index filter hides what does not match.
    view.show("fleet")
    page.fill("#filter", "gpu_memory")
    assert page.locator("#incident-index tbody tr:not([hidden])").count() == 2
    assert view.problems == []


def test_injected_markup_stays_text_in_chromium(browser, hostile_ds: forensics.store.OpenDataset, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = forensics.report.report(hostile_ds, tmp_path / "hostile.html")
    view = Page(browser, path)
    page = view.page
    key = f"incident-{incident_key(INCIDENT)}"
    view.show(key)
    text = page.locator(f"[id='{key}']").inner_text()
    assert "name=<script>window.__pwned=1</script>" in text
    assert '"><img src=x onerror="window.__pwned=2"> & &lt;b&gt;' in text
    assert page.locator(f"[id='{key}'] h2").inner_text() == INCIDENT
    # Hover over every point of the timeline: Plotly shows the markup as characters, not elements.
    # (Plotly drops hovers closer together than its minimum interval: wait between them.)
    hovered = page.evaluate("""async k => {
        const gd = document.getElementById(k).querySelector('div.chart');
        const out = [];
        for (let c = 0; c < gd.data.length; c++) {
            for (let p = 0; p < gd.data[c].x.length; p++) {
                await new Promise(r => setTimeout(r, 80));
                Plotly.Fx.hover(gd, [{curveNumber: c, pointNumber: p}]);
                out.push(gd.querySelector('.hoverlayer').textContent);
            }
        }
        return out;
    }""", key)  # fmt: skip
    assert len(hovered) == 2  # the AER and the Xid (the unparsed line is an `other`, left out of timelines)
    assert any("<script>window.__pwned=1</script>" in h for h in hovered), hovered
    assert page.evaluate("typeof window.__pwned") == "undefined"
    # No element from the logs: no <img>, no <foreignObject>, and the only SVG <image> is the heat map's raster.
    assert page.locator("img, svg foreignObject").count() == 0
    assert page.evaluate("[...document.querySelectorAll('svg image')].every(e => e.parentElement.matches('g.hm'))")
    assert page.locator("script:not([type]), script[type='application/json']").count() == page.evaluate(
        "document.scripts.length")
    assert view.problems == []


# -- what a reader sees first (issue 32) ----------------------------------------------------------------


def test_the_fleet_page_opens_on_the_incidents_unknown_and_least_sure_first(corpus_ds: forensics.store.OpenDataset) -> None:
    text = build(corpus_ds)
    fleet = text[text.index('id="fleet"') :]
    assert fleet.index("<h2>Incidents</h2>") < fleet.index("<h2>Fleet summary</h2>") < fleet.index("<h2>Root causes</h2>")
    index = fleet[fleet.index('id="incident-index"') :]
    index = index[: index.index("</table>")]
    head = re.findall(r"<th[^>]*>([^<]+)</th>", index)
    assert head[:7] == ["incident", "root_cause", "confidence", "when (UTC)", "first_host", "first_gpu", "caveats"]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", index)[1:]]
    d = corpus_ds.diagnoses().sort(pl.col("root_cause") != "unknown", "confidence", "incident")
    # (the page prints two decimals; a confidence lowered by a runner-up or a caveat has three)
    assert [(c[1], float(c[2])) for c in cells] == [(r["root_cause"], round(r["confidence"], 2)) for r in d.iter_rows(named=True)]
    unknown = int((d["root_cause"] == "unknown").sum())
    low = int(((d["root_cause"] != "unknown") & (d["confidence"] < 0.5)).sum())
    assert f"15 incident(s): {unknown} unknown, {low} below 50% confidence, 0 with caveats (damaged input)" in fleet


def test_a_one_day_dataset_has_a_day_wide_time_axis() -> None:
    from datetime import UTC, datetime, timedelta

    from forensics.plots import causes_over_time_spec, timeline_spec

    t = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
    facts = pl.DataFrame({"when": [t, t + timedelta(minutes=5)], "root_cause": ["driver", "hang"]})
    spec = causes_over_time_spec(facts)
    lo, hi = (datetime.fromisoformat(v) for v in spec["layout"]["xaxis"]["range"])
    assert (lo, hi) == (datetime(2025, 2, 28, tzinfo=UTC), datetime(2025, 3, 3, tzinfo=UTC))
    assert {w for trace in spec["data"] for w in trace["width"]} == {0.9 * 86_400_000}
    one = pl.DataFrame({"ts": [t], "uptime_s": [None], "host": ["h"], "source": ["kernel"], "severity": ["error"],
                        "mark": ["failure"], "kind": ["gpu.xid"], "code": [79], "file": ["k"], "line": [1],
                        "message": ["m"]}, schema_overrides={"uptime_s": pl.Float64})  # fmt: skip
    lo, hi = (datetime.fromisoformat(v) for v in timeline_spec(one)["layout"]["xaxis"]["range"])
    assert (lo, hi) == (t - timedelta(seconds=30), t + timedelta(seconds=30))


def test_an_incident_timeline_zooms_on_the_failure_and_lists_far_rows(tmp_path: Path) -> None:
    # Real: the driver was loaded 12 days before the Xid 94 (corpus/PROVENANCE.md).
    forensics.ingest([CORPUS / "mem-akash-244-node4-xid94-contained-device-unhealthy"], tmp_path / "ds", jobs=1)
    ds = forensics.open_dataset(tmp_path / "ds")
    text = build(ds)
    key = incident_key("mem-akash-244-node4-xid94-contained-device-unhealthy")
    page = text[text.index(f'id="incident-{key}"') :]
    page = page[: page.index("</section>")]
    assert "<h3>Far from the failure (8 more than 6 h away, not drawn)</h3>" in page
    far = page[page.index("Far from the failure") :]
    assert "NVRM: loading NVIDIA UNIX x86_64 Kernel Module" in far and "Xid (PCI:0000:00:08): 94" not in far
    import json as _json

    spec = _json.loads(re.search(rf'<script type="application/json" id="tl-{key}">(.*?)</script>', text).group(1))
    drawn = [x for trace in spec["data"] for x in trace["x"]]
    assert drawn and all(x.startswith("2024-08-09") for x in drawn)
