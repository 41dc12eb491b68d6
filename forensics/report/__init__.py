"""The HTML report: one self-contained file with the fleet's summary and a page per incident.

Everything is inline — styles, Plotly's script, this package's script and the chart data — so the
file opens with no network. The fleet page opens on the incidents — cause, confidence, first failure
and caveats, the unknown and least sure first — then has the summary, the root-cause and component
tables, the incidents over time, the first-failure heat map, the lead times, the repeat offenders and
the Xid counts; each incident's page has its diagnosis, its caveats, its evidence, an interactive
timeline across its hosts and sources zoomed on the failure, and the rows it does not draw.

Log text is untrusted. HTML is written with every value escaped (:func:`html.escape`); chart data sits
in ``<script type="application/json">`` with ``<``, ``>`` and ``&`` as JSON escapes, so no text can end
the element; the page's script only sets ``textContent``; chart labels are escaped for Plotly
(:func:`forensics.plots.plain`).

A timeline keeps every evidence row and, of the rest, those nearest the first failure, up to
:data:`TIMELINE_ROWS` per incident (fewer when there are many incidents, so that the file stays
below about :data:`TIMELINE_BUDGET` rows in all); ``forensics timeline`` gives every row. The chart
draws the rows within :data:`ZOOM` of the failure; farther ones (a boot line weeks earlier) are
listed under it, not drawn, so that they do not squash the failure into a few pixels.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from .. import plots, series
from .._modules import make_callable
from ..errors import InputError
from ..mine.language import Library
from ..mine.timeline import marked
from ..offenders import repeat_offenders
from ..output import _first_failure_text, evidence_where, headline, stat_cell
from ..stats import incident_facts, stats, summary, xid_counts
from ..store import _atomic_write, incident_key

#: Timeline rows per incident at most, and in all (the per-incident cap shrinks to fit, to 20 at least).
TIMELINE_ROWS = 400
TIMELINE_BUDGET = 50_000
#: Incidents whose events are read at once.
CHUNK = 200
MESSAGE_CHARS = 2000
#: A timeline chart draws the rows this close to the failure (the first failure's time, else the earliest
#: timed evidence); the others are listed below it.
ZOOM = timedelta(hours=6)


def _e(value: Any) -> str:
    return html.escape("-" if value is None else str(value), quote=True)


def _json_script(id_: str, obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{_e(id_)}">{text}</script>'


def _ts(t: datetime | None) -> str:
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _table(df: pl.DataFrame, *, cls: str = "", id_: str | None = None, links: dict[str, str] | None = None,
           names: dict[str, str] | None = None) -> str:  # fmt: skip
    """``df`` as an escaped HTML table; ``links`` maps a column to the page ids its values link to."""
    numeric = {c for c, t in df.schema.items() if t.is_numeric()}
    names = names or {}
    head = "".join(f'<th class="num">{_e(names.get(c, c))}</th>' if c in numeric else f"<th>{_e(names.get(c, c))}</th>"
                   for c in df.columns)  # fmt: skip
    body = []
    for row in df.iter_rows(named=True):
        cells = []
        for c, v in row.items():
            text = _e(stat_cell(c, v)) if not isinstance(v, datetime) else _e(_ts(v))
            if links and c in links and v is not None:
                text = f'<a href="#{_e(links[c].format(key=incident_key(str(v))))}">{text}</a>'
            cells.append(f'<td class="num">{text}</td>' if c in numeric else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    attrs = (f' class="{cls}"' if cls else "") + (f' id="{_e(id_)}"' if id_ else "")
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _chart(id_: str, spec: dict[str, Any], specs: list[str]) -> str:
    specs.append(_json_script(id_, spec))
    return f'<div class="chart" data-spec="{_e(id_)}"></div>'


def build(ds: Any, *, incident: str | None = None, library: Library | None = None,
          title: str | None = None) -> str:  # fmt: skip
    """The report of dataset ``ds`` (of one incident when ``incident`` is given) as an HTML string."""
    ids = ds.incidents.select("incident").collect().get_column("incident").to_list()
    if incident is not None and incident not in ids:
        raise InputError(f"no incident {incident!r} in the dataset")
    d = ds.diagnoses(incident=incident, library=library)
    records = ds.incidents.select(
        "incident", hosts="hosts", path="path",
        label=pl.col("labels").str.json_path_match("$.label.root_cause"),
    ).collect()  # fmt: skip
    if incident is not None:
        records = records.filter(pl.col("incident") == incident)
    facts = incident_facts(ds, d).sort("when", "incident", nulls_last=True)
    specs: list[str] = []
    fleet = _fleet(ds, d, facts, specs) if incident is None else ""
    pages = _incident_pages(ds, d, facts, records, specs)
    name = title or f"gpu-forensics report: {Path(str(ds.root)).name}"
    css = resources.files(__package__).joinpath("report.css").read_text("utf-8")
    js = resources.files(__package__).joinpath("report.js").read_text("utf-8")
    from plotly.offline import get_plotlyjs

    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    nav = '<a href="#fleet">Fleet</a>' if incident is None else ""
    return "".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(name)}</title><style>{css}</style></head><body>",
        f'<header><h1>{_e(name)}</h1>{nav}<span class="meta">{d.height} incident(s) · generated {generated} · '
        f"{_e(ds.root)}</span></header><main>",
        fleet, *pages, "</main>", *specs,
        f"<script>{get_plotlyjs()}</script><script>{js}</script></body></html>",
    ])  # fmt: skip


def _fleet(ds: Any, d: pl.DataFrame, facts: pl.DataFrame, specs: list[str]) -> str:
    head = summary(facts)
    cards = [("incidents", f"{head['incidents']:,}")]
    if head["window_days"]:
        cards += [("days", f"{head['window_days']:,}"), ("per day", str(head["per_day"])), ("MTBF (h)", str(head["mtbf_h"]))]
    if head["gpu_hours_lost"] is not None:
        cards.append(("GPU-hours lost", f"{head['gpu_hours_lost']:,.1f}"))
    if head["gpu_hours_unknown"]:
        cards.append(("GPU-hours unknown", f"{head['gpu_hours_unknown']:,} incident(s)"))
    window = f"{_ts(head['first'])} to {_ts(head['last'])} (UTC)" if head["first"] is not None else "no incident has a time"
    out = ['<section class="page" id="fleet" data-title="Fleet">', _incident_index(d, facts),
           "<h2>Fleet summary</h2>",
           f'<p class="note">{_e(window)}. Shares are counts over the total; MTBF is the window over the count.</p>',
           '<div class="cards">', *(f"<div class=card><strong>{_e(v)}</strong><span>{_e(k)}</span></div>" for k, v in cards), "</div>"]  # fmt: skip
    by_cause = stats(ds, "cause", diagnoses=d)
    out += ["<h2>Root causes</h2>", _table(by_cause), "<h3>By component</h3>", _table(stats(ds, "component", diagnoses=d)),
            "<h3>By chain (the rule that fired), with the median lead time from first precursor to failure</h3>",
            _table(stats(ds, "rule", diagnoses=d))]
    out += ['<div class="grid2">', _chart("chart-causes", plots.causes_over_time_spec(facts), specs),
            _chart("chart-lead", plots.lead_times_spec(facts), specs), "</div>",
            _chart("chart-heat", plots.failure_heatmap_spec(facts), specs)]  # fmt: skip
    offenders = repeat_offenders(ds, d)
    out.append("<h2>Repeat offenders</h2>")
    if offenders.height:
        out.append(_table(offenders.with_columns(pl.col("incident_ids").list.join(", ")),
                          names={"ci_low": "95% low", "ci_high": "95% high"}))  # fmt: skip
    else:
        out.append('<p class="note">No card, slot, node or job fails more often than chance allows (α = 0.01).</p>')
    xids = xid_counts(ds.events)
    if xids.height:
        out += ["<h2>Xid events</h2>", _table(xids)]
    out.append("</section>")
    return "".join(out)


#: Below this confidence a diagnosis is listed among the first, with the unknowns.
LOW_CONFIDENCE = 0.5


def _incident_index(d: pl.DataFrame, facts: pl.DataFrame) -> str:
    """The incidents, what a reader checks first: the unknown ones, then the least sure, then the rest;
    each with its cause, confidence, first failure and caveats."""
    index = (
        facts.select("incident", "when", "root_cause", "confidence", "first_host", "first_gpu", "component",
                     "lead_time_s", "gpu_hours_lost")
        .join(d.select("incident", caveats=pl.col("caveats").list.join("; ")), on="incident", how="left")
        .sort(pl.col("root_cause") != "unknown", "confidence", "incident")
        .select("incident", "root_cause", "confidence", pl.col("when").alias("when (UTC)"), "first_host",
                "first_gpu", "caveats", "component", "lead_time_s", "gpu_hours_lost")
    )  # fmt: skip
    unknown = int((index["root_cause"] == "unknown").sum())
    low = int(((index["root_cause"] != "unknown") & (index["confidence"] < LOW_CONFIDENCE)).sum())
    damaged = int((index["caveats"].fill_null("") != "").sum())
    said = f"{unknown} unknown, {low} below {LOW_CONFIDENCE:.0%} confidence, {damaged} with caveats (damaged input)"
    return "".join([
        "<h2>Incidents</h2>",
        f'<p class="note">{index.height} incident(s): {_e(said)}; the unknown and least sure first.</p>',
        f'<p><input id="filter" type="search" placeholder="filter: id, cause, host…" aria-label="filter incidents"> '
        f'<span class="note" id="filter-count">{index.height} shown</span></p>',
        _table(index, id_="incident-index", links={"incident": "incident-{key}"}),
    ])  # fmt: skip


def _cap(n_incidents: int) -> int:
    return max(20, min(TIMELINE_ROWS, TIMELINE_BUDGET // max(n_incidents, 1)))


def _timelines(ds: Any, d: pl.DataFrame, cap: int) -> dict[str, pl.DataFrame]:
    """Each incident's timeline rows, evidence first kept, then the nearest to the first failure."""
    files = ds.parts("events")
    ids = d["incident"].to_list()
    out: dict[str, pl.DataFrame] = {}
    for start in range(0, len(ids), CHUNK):
        group = ids[start : start + CHUNK]
        events = pl.scan_parquet([files[i] for i in group if i in files]).collect() if group else None
        if events is None or events.height == 0:
            continue
        part = d.filter(pl.col("incident").is_in(group))
        rows = marked(events, part)
        center = part.select("incident", center=pl.coalesce("first_ts", pl.col("evidence").list.eval(
            pl.element().struct.field("ts")).list.min()))  # fmt: skip
        rows = rows.join(center, on="incident", how="left", maintain_order="left").with_columns(
            _order=pl.when(pl.col("mark").is_not_null()).then(-1)
            .otherwise((pl.col("ts") - pl.col("center")).abs().dt.total_microseconds().fill_null(2**62))
        ).with_columns(_rank=pl.col("_order").rank("ordinal").over("incident"))  # fmt: skip
        kept = rows.with_columns(total=pl.len().over("incident")).filter(pl.col("_rank") <= cap)
        for (key,), one in kept.drop("_order", "_rank", "center").group_by("incident"):
            out[str(key)] = one.sort(pl.col("ts").is_null(), "ts", "file", "line")
    return out


def _incident_pages(ds: Any, d: pl.DataFrame, facts: pl.DataFrame, records: pl.DataFrame, specs: list[str]) -> list[str]:
    timelines = _timelines(ds, d, _cap(d.height))
    info = {r["incident"]: r for r in records.iter_rows(named=True)}
    fact = {r["incident"]: r for r in facts.iter_rows(named=True)}
    pages = []
    for row in d.iter_rows(named=True):
        iid = row["incident"]
        key = incident_key(iid)
        rec, f = info.get(iid, {}), fact.get(iid, {})
        alts = ", ".join(f"{a['root_cause']} {a['score']:.2f} ({a['rule']})" for a in row["alternatives"]) or "-"
        facts_dl = [("root cause", f'<span class="cause">{_e(row["root_cause"])}</span> ({_e(f.get("component"))})'),
                    ("confidence", _e(f"{row['confidence']:.2f}")), ("rule", _e(row["rule"])),
                    ("first failure", _e(_first_failure_text(row))), ("also considered", _e(alts)),
                    ("lead time", _e("-" if f.get("lead_time_s") is None else f"{f['lead_time_s']:,.1f} s")),
                    ("GPU-hours lost", _e("-" if f.get("gpu_hours_lost") is None else f"{f['gpu_hours_lost']:,.1f} ({f['basis']})")),
                    ("hosts", _e(", ".join(rec.get("hosts") or []) or "-")), ("archive", _e(rec.get("path"))),
                    ("label (incident.toml)", _e(rec.get("label")))]  # fmt: skip
        if row["caveats"]:
            facts_dl.insert(2, ("caveats", "<br>".join(_e(c) for c in row["caveats"])))
        out = [f'<section class="page" id="incident-{_e(key)}" data-title="{_e(iid)}" hidden>',
               f'<h2>{_e(iid)}</h2><p><a href="#fleet">← fleet</a></p>',
               '<dl class="facts">', *(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in facts_dl), "</dl>", "<h3>Evidence</h3>"]  # fmt: skip
        if row["evidence"]:
            out.append(_evidence_table(row["evidence"]))
        else:
            out.append('<p class="note">No evidence: no rule matched.</p>')
        tl = timelines.get(iid)
        if tl is not None and tl.height:
            total = tl["total"][0]
            title = f"{iid}: {tl.height} of {total} event(s)" if total > tl.height else f"{iid}: {total} event(s)"
            near, far = _zoom(tl.drop("total"), series.failure_time(row))
            out += ["<h3>Timeline</h3>", _chart(f"tl-{key}", plots.timeline_spec(near, title=title), specs)]
            if total > tl.height:
                out.append(f'<p class="note">The {tl.height} events nearest the first failure and every evidence row; '
                           f"<code>forensics timeline DATASET --incident {_e(iid)}</code> lists all {total}.</p>")  # fmt: skip
            if far.height:
                hours = ZOOM.total_seconds() / 3600
                out += [f"<h3>Far from the failure ({far.height} more than {hours:g} h away, not drawn)</h3>",
                        _timeline_table(far)]  # fmt: skip
            undrawn = _undrawn(near)
            if undrawn.height:
                out += [f"<h3>Not on the chart ({undrawn.height} without a time)</h3>", _timeline_table(undrawn)]
        else:
            out.append('<p class="note">No events.</p>')
        out += _telemetry(ds, row, key, specs)
        out.append("</section>")
        pages.append("".join(out))
    return pages


#: Telemetry readings without a time listed per incident at most.
SNAPSHOT_ROWS = 200


def _telemetry(ds: Any, row: dict[str, Any], key: str, specs: list[str]) -> list[str]:
    """An incident's telemetry around its first failure (:func:`forensics.series.window`): a chart per
    family and host with the failure and the derived events marked, then the readings without a time."""
    part = ds.parts("samples").get(row["incident"])
    if part is None or not Path(part).exists():
        return []
    rows = series.window(pl.scan_parquet(part), row)
    if rows.height == 0:
        return []
    center = series.failure_time(row)
    timed = rows.filter(pl.col("ts").is_not_null())
    out = ["<h3>Telemetry around the failure</h3>"]
    if timed.height:
        events = pl.scan_parquet(ds.parts("events")[row["incident"]]).filter(
            pl.col("detail").str.contains('"metric"', literal=True)).select("file", "line", "kind", "message", "detail").collect()  # fmt: skip
        span = "" if center is None else (f" from {series.BEFORE.total_seconds() / 60:g} min before the first failure "
                                          f"to {series.AFTER.total_seconds() / 60:g} min after")  # fmt: skip
        out.append(f'<p class="note">{timed.height:,} reading(s) of {_e(", ".join(timed["host"].unique(maintain_order=True).fill_null("?")))}'
                   f"{_e(span)}; the dashed line is the first failure, diamonds the events read from the curves.</p>")  # fmt: skip
        charts = plots.series_spec(timed, events, failure=center, gpu=row.get("first_gpu"))
        out += ['<div class="grid2">', *(_chart(f"ts-{key}-{i}", spec, specs) for i, spec in enumerate(charts)), "</div>"]
    snaps = rows.filter(pl.col("ts").is_null())
    if snaps.height:
        shown = snaps.head(SNAPSHOT_ROWS).select("host", "device", "metric", "value", "unit",
                                                 where=pl.concat_str("file", pl.lit(":"), "line"))  # fmt: skip
        more = f" (the first {SNAPSHOT_ROWS})" if snaps.height > SNAPSHOT_ROWS else ""
        out += [f"<h4>Readings without a time ({snaps.height:,}){_e(more)}</h4>", _table(shown)]
    return out


def _zoom(tl: pl.DataFrame, center: datetime | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rows the chart draws (within :data:`ZOOM` of ``center``, and those without a time) and the
    timed rows farther away. Without a center, the median time of the rows is the center."""
    timed = tl.filter(pl.col("ts").is_not_null())
    if timed.height == 0:
        return tl, tl.clear()
    if center is None:
        center = timed["ts"].sort()[timed.height // 2]
    far = pl.col("ts").is_not_null() & ((pl.col("ts") - pl.lit(center)).abs() > ZOOM)
    return tl.filter(~far), tl.filter(far)


_ROLES = {"failure": 0, "precursor": 1, "related": 2, "follower": 3}


def _evidence_table(evidence: list[dict[str, Any]]) -> str:
    """The evidence, the failure first, then precursors, related rows and followers, each in time order."""
    rows = []
    for e in sorted(evidence, key=lambda e: (_ROLES.get(e["role"], 4), e["ts"] is None, e["ts"] or 0)):
        kind = e["kind"] + ("" if e["code"] is None else f" {e['code']}")
        rows.append(f'<tr class="{_e(e["role"])}"><td>{_e(e["role"])}</td><td>{_e(_ts(e["ts"]))}</td><td>{_e(e["host"])}</td>'
                    f'<td>{_e(kind)}</td><td>{_e(evidence_where(e))}</td>'
                    f'<td class="msg">{_e(headline(str(e["message"]))[:MESSAGE_CHARS])}</td></tr>')  # fmt: skip
    return ("<table><thead><tr><th>role</th><th>time (UTC)</th><th>host</th><th>kind</th><th>where</th><th>message</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")  # fmt: skip


def _undrawn(tl: pl.DataFrame) -> pl.DataFrame:
    """The rows the timeline chart cannot place (it draws the wall clock when any row has one, else
    the uptime, else the line): the rows without a time, when others have one."""
    if tl["ts"].is_not_null().any():
        return tl.filter(pl.col("ts").is_null())
    if tl["uptime_s"].is_not_null().any():
        return tl.filter(pl.col("uptime_s").is_null())
    return tl.clear()


def _timeline_table(tl: pl.DataFrame) -> str:
    rows = []
    for r in tl.iter_rows(named=True):
        kind = r["kind"] + ("" if r["code"] is None else f" {r['code']}")
        when = _ts(r["ts"]) if r["ts"] is not None else ("-" if r["uptime_s"] is None else f"uptime {r['uptime_s']:.3f}s")
        rows.append(f'<tr class="{_e(r["mark"] or "")}"><td>{_e(r["mark"] or "")}</td><td>{_e(when)}</td><td>{_e(r["host"])}</td>'
                    f'<td>{_e(r["source"])}</td><td>{_e(kind)}</td><td>{_e(r["severity"])}</td>'
                    f'<td>{_e(r["file"])}:{_e(r["line"])}</td><td class="msg">{_e(str(r["message"])[:MESSAGE_CHARS])}</td></tr>')  # fmt: skip
    return ("<table><thead><tr><th>mark</th><th>time (UTC)</th><th>host</th><th>source</th><th>kind</th><th>severity</th>"
            f"<th>where</th><th>message</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")  # fmt: skip


def report(ds: Any, path: str | Path, *, incident: str | None = None, library: Library | None = None) -> Path:
    """Write the report of ``ds`` to ``path`` (atomically: a failed run leaves any old file as it was)."""
    text = build(ds, incident=incident, library=library)
    target = Path(path).expanduser()
    if not target.parent.is_dir():
        raise InputError(f"{target.parent}: no such directory")
    _atomic_write(target, text.encode("utf-8"))
    return target


make_callable(__name__, report)
