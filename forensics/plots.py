"""Plots of incidents and fleets, as Plotly figures (for notebooks) and plain specs (for the report).

Every function here has two forms: ``*_spec`` returns the figure as a plain dict (``data`` and
``layout``, what ``Plotly.newPlot`` takes), which the HTML report embeds; the public form wraps it in a
``plotly.graph_objects.Figure``, which a notebook displays.

Log text is untrusted and Plotly renders a subset of HTML in labels and hover text (``<br>``, ``<b>``,
``<a href>``), so every string that comes from the data goes through :func:`plain` first: ``<``, ``>``
and ``&`` become entities, which Plotly shows as the characters.
"""

from __future__ import annotations

import html
from datetime import timedelta
from typing import Any

import polars as pl

#: How many hosts a heat map shows (those with the most failures).
HEAT_HOSTS = 40
#: Characters of a message in hover text.
HOVER_CHARS = 200
#: A colour per severity and per evidence role (the timeline's markers).
SEVERITY_COLORS = {"critical": "#99000d", "error": "#e34a33", "warning": "#f59e0b", "notice": "#4575b4",
                   "info": "#91bfdb", "debug": "#bbbbbb"}  # fmt: skip
ROLE_SYMBOLS = {"failure": "x", "precursor": "diamond", "related": "circle-open", "follower": "triangle-up-open"}


def plain(text: Any, limit: int | None = None) -> str:
    """``text`` safe for Plotly's labels: entities for ``<``, ``>`` and ``&``, cut to ``limit`` characters.

    >>> plain('<img src=x onerror="alert(1)">')
    '&lt;img src=x onerror="alert(1)"&gt;'
    """
    s = "" if text is None else str(text)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    return html.escape(s, quote=False)


def _figure(spec: dict[str, Any]) -> Any:
    import plotly.graph_objects as go

    return go.Figure(spec)


def _facts(source: Any, diagnoses: pl.DataFrame | None) -> pl.DataFrame:
    """The incident facts of a dataset (diagnosed here when ``diagnoses`` is None), or the facts given."""
    if isinstance(source, pl.DataFrame):
        return source
    from .mine import diagnose
    from .stats import incident_facts

    return incident_facts(source, diagnose(source) if diagnoses is None else diagnoses)


def _bucket(facts: pl.DataFrame) -> tuple[str, str]:
    """The time bucket of a cause-over-time chart for the window: day, ISO week or month."""
    first, last = facts["when"].min(), facts["when"].max()
    days = (last - first).days if first is not None and last is not None else 0  # type: ignore[operator]
    if days > 180:
        return "1mo", "month"
    if days > 21:
        return "1w", "week"
    return "1d", "day"


#: The length of a bucket in milliseconds (Plotly's bar width on a date axis), and of the padding around them.
_BUCKET_MS = {"1d": 86_400_000, "1w": 7 * 86_400_000, "1mo": 30 * 86_400_000}


def _date_range(first: Any, last: Any, pad: timedelta) -> list[str]:
    """An explicit date-axis range: Plotly's automatic one around a single point or bar is a millisecond
    wide (a one-day dataset read ``23:59:59.9996 … 00:00:00.0004``)."""
    return [(first - pad).isoformat(), (last + pad).isoformat()]


def causes_over_time_spec(facts: pl.DataFrame) -> dict[str, Any]:
    """Incidents per day, week or month (by the window's length), stacked by root cause; each bar is
    as wide as its bucket, and the axis spans the buckets with one more on each side."""
    every, unit = _bucket(facts)
    counts = (
        facts.drop_nulls("when").with_columns(bucket=pl.col("when").dt.truncate(every))
        .group_by("bucket", "root_cause").len().sort("bucket", "root_cause")
    )  # fmt: skip
    data = []
    for (cause,), part in counts.group_by("root_cause", maintain_order=True):
        data.append({"type": "bar", "name": plain(cause), "x": [b.isoformat() for b in part["bucket"]],
                     "y": part["len"].to_list(), "width": [_BUCKET_MS[every] * 0.9] * part.height, "offset": 0,
                     "hovertemplate": f"%{{x}}<br>{plain(cause)}: %{{y}}<extra></extra>"})  # fmt: skip
    undated = facts["when"].is_null().sum()
    title = f"Incidents per {unit} by root cause" + (f" ({undated} without a time left out)" if undated else "")
    xaxis: dict[str, Any] = {"type": "date"}
    if counts.height:
        pad = timedelta(milliseconds=_BUCKET_MS[every])
        xaxis["range"] = _date_range(counts["bucket"].min(), counts["bucket"].max() + pad, pad)
    return {"data": data, "layout": {"title": {"text": title}, "barmode": "stack", "xaxis": xaxis,
                                     "yaxis": {"title": {"text": "incidents"}}, "legend": {"orientation": "h"},
                                     "margin": {"t": 50, "l": 50, "r": 20, "b": 40}}}  # fmt: skip


def failure_heatmap_spec(facts: pl.DataFrame, *, hosts: int = HEAT_HOSTS) -> dict[str, Any]:
    """First failures per host (rows, the ``hosts`` with most) and GPU (columns; ``host`` for
    failures that name no GPU)."""
    cells = (
        facts.drop_nulls("first_host").with_columns(gpu=pl.col("first_gpu").fill_null("host"))
        .group_by("first_host", "gpu").len()
    )  # fmt: skip
    top = cells.group_by("first_host").agg(pl.col("len").sum()).sort(["len", "first_host"], descending=[True, False])
    rows = top["first_host"].head(hosts).to_list()
    cols = sorted(cells.filter(pl.col("first_host").is_in(rows))["gpu"].unique().to_list(), key=lambda g: (g == "host", g))
    index = {(h, g): n for h, g, n in cells.iter_rows()}
    z = [[index.get((h, g), 0) for g in cols] for h in rows]
    shown = f"the {len(rows)} hosts with most" if top.height > len(rows) else f"{len(rows)} host(s)"
    return {"data": [{"type": "heatmap", "z": z, "x": [plain(g) for g in cols], "y": [plain(h) for h in rows],
                      "colorscale": [[0, "#ffffff"], [0.001, "#fee5d9"], [1, "#99000d"]], "zmin": 0, "xgap": 1, "ygap": 1,
                      "hovertemplate": "%{y} %{x}: %{z} first failure(s)<extra></extra>"}],
            "layout": {"title": {"text": f"First failures per host and GPU ({shown})"},
                       "xaxis": {"type": "category", "title": {"text": "GPU (PCI address)"}},
                       "yaxis": {"type": "category", "autorange": "reversed"},
                       "height": max(300, 120 + 22 * len(rows)), "margin": {"t": 50, "l": 160, "r": 20, "b": 100}}}  # fmt: skip


def lead_times_spec(facts: pl.DataFrame) -> dict[str, Any]:
    """The lead time from a chain's first precursor to its failure, per root cause (box plots, log scale)."""
    timed = facts.drop_nulls("lead_time_s").filter(pl.col("lead_time_s") > 0)
    data = [{"type": "box", "name": plain(cause), "x": part["lead_time_s"].to_list(), "boxpoints": "all",
             "orientation": "h", "hovertemplate": f"{plain(cause)}: %{{x:.3s}} s<extra></extra>"}
            for (cause,), part in timed.sort("root_cause").group_by("root_cause", maintain_order=True)]  # fmt: skip
    return {"data": data, "layout": {"title": {"text": f"Lead time from first precursor to failure ({timed.height} chains)"},
                                     "xaxis": {"type": "log", "title": {"text": "seconds"}}, "showlegend": False,
                                     "height": max(260, 100 + 40 * len(data)), "margin": {"t": 50, "l": 140, "r": 20, "b": 50}}}  # fmt: skip


def timeline_spec(rows: pl.DataFrame, *, title: str | None = None) -> dict[str, Any]:
    """One incident's timeline (the rows of :func:`forensics.timeline`): a lane per host and source,
    a marker per event coloured by severity, evidence drawn larger with its role's symbol; hover shows
    the kind, code, file:line and message.

    The x axis is the wall clock when any row has a time; else the uptime (logs such as plain
    ``dmesg`` print only that); else the line in the file. Rows the chosen axis cannot place are
    counted in the title."""
    if rows["ts"].is_not_null().any():
        placed, x, axis = rows.drop_nulls("ts"), "ts", {"type": "date", "title": {"text": "time (UTC)"}}
        first, last = placed["ts"].min(), placed["ts"].max()
        axis["range"] = _date_range(first, last, max((last - first) / 20, timedelta(seconds=30)))  # type: ignore[operator]
    elif rows["uptime_s"].is_not_null().any():
        placed, x, axis = rows.drop_nulls("uptime_s"), "uptime_s", {"title": {"text": "uptime (s): these logs print no wall-clock time"}}
    else:
        placed, x, axis = rows, "line", {"title": {"text": "line in the file: these logs print no time"}}
    placed = placed.with_columns(lane=pl.concat_str(pl.col("host").fill_null("?"), pl.lit(" · "), "source"))
    data = []
    for (severity, mark), part in placed.group_by("severity", "mark", maintain_order=True):
        sev = severity or "info"
        hover = [f"<b>{plain(k)}{'' if c is None else ' ' + str(c)}</b> {plain(sev)}{'' if m is None else ' — ' + plain(m)}"
                 f"<br>{plain(f)}:{ln}<br>{plain(msg, HOVER_CHARS)}"
                 for k, c, m, f, ln, msg in part.select("kind", "code", "mark", "file", "line", "message").iter_rows()]  # fmt: skip
        xs = [t.isoformat() for t in part["ts"]] if x == "ts" else part[x].to_list()
        data.append({
            "type": "scatter", "mode": "markers", "name": plain(sev if mark is None else f"{mark} ({sev})"),
            "x": xs, "y": [plain(lane) for lane in part["lane"]], "hovertext": hover, "hoverinfo": "text+x",
            "marker": {"color": SEVERITY_COLORS.get(sev, "#636363"), "size": 7 if mark is None else 13,
                       "symbol": ROLE_SYMBOLS.get(mark, "circle"), "line": {"width": 1.5}},
        })  # fmt: skip
    lanes = placed["lane"].n_unique()
    text = title or "Timeline"
    if rows.height > placed.height:
        text += f" ({rows.height - placed.height} event(s) without a {'time' if x == 'ts' else 'uptime'} are listed below, not drawn)"
    return {"data": data, "layout": {"title": {"text": plain(text)}, "xaxis": axis,
                                     "yaxis": {"type": "category", "automargin": True},
                                     "height": max(260, 120 + 30 * lanes), "hovermode": "closest",
                                     "legend": {"orientation": "h"}, "margin": {"t": 50, "r": 20, "b": 40}}}  # fmt: skip


#: Points per curve at most: a day of ``dmon -d 1`` is 86,400 readings a GPU; longer curves are thinned evenly
#: (the readings an event sits on are always kept).
SERIES_POINTS = 600
#: The colour of the failure's line and of the derived events' markers on the curves.
FAILURE_COLOR = "#99000d"


def series_spec(rows: pl.DataFrame, events: pl.DataFrame | None = None, *, failure: Any = None,
                gpu: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Charts of an incident's telemetry (the rows of :func:`forensics.series`): one per family and host, a
    curve per metric and device, on a time axis; the failure a vertical line, the events that sit on a
    plotted reading (``events``' ``file``, ``line``, ``kind``, ``severity``, ``message``: the derived
    ``gpu.temp_rise``…) markers on their curve. The failing ``gpu``'s curves are drawn thicker. A family
    of counters is drawn as its growth per minute between readings. Rows without a time are not drawn."""
    from .series import families

    timed = rows.filter(pl.col("ts").is_not_null())
    if timed.height == 0:
        return []
    timed = timed.with_columns(who=pl.coalesce("gpu", "device", pl.lit("host")))
    marks = _marks(events)
    out = []
    for fam in families():
        part = timed.filter(pl.col("family") == fam["name"])
        for (host,), one in part.group_by("host", maintain_order=True):
            data = []
            for (metric, who), curve in one.group_by("metric", "who", maintain_order=True):
                curve = curve.sort("ts", "line")
                if fam["counter"]:
                    curve = _growth(curve)
                curve = curve.join(marks, on=["file", "line", "metric"], how="left", maintain_order="left") \
                    if marks.height else curve.with_columns(kind=pl.lit(None, pl.String))  # fmt: skip
                curve = _thin(curve)
                name = plain(f"{metric} {who}")
                width = 3 if gpu is not None and who == gpu else 1.5
                mode = "lines" if curve.height > 30 else "lines+markers"  # a few readings: each one seen
                data.append({"type": "scatter", "mode": mode, "name": name, "line": {"width": width},
                             "x": [t.isoformat() for t in curve["ts"]], "y": curve["value"].to_list(),
                             "hovertemplate": f"{name}: %{{y}}<extra></extra>"})  # fmt: skip
                hit = curve.filter(pl.col("kind").is_not_null())
                if hit.height:
                    data.append({"type": "scatter", "mode": "markers", "name": plain(f"{', '.join(hit['kind'].unique(maintain_order=True))} ({who})"),
                                 "x": [t.isoformat() for t in hit["ts"]], "y": hit["value"].to_list(),
                                 "hovertext": [plain(f"{k}: {m}", HOVER_CHARS) for k, m in hit.select("kind", "message").iter_rows()],
                                 "hoverinfo": "text+x", "marker": {"color": FAILURE_COLOR, "size": 11, "symbol": "diamond"}})  # fmt: skip
            out.append(_series_layout(data, f"{fam['title']} · {host}", failure))
    return out


def _marks(events: pl.DataFrame | None) -> pl.DataFrame:
    """The events that sit on a reading, by the reading's file, line and metric (``detail.metric``)."""
    schema = {"file": pl.String, "line": pl.Int64, "metric": pl.String, "kind": pl.String, "message": pl.String}
    if events is None or events.height == 0:
        return pl.DataFrame(schema=schema)
    return (
        events.with_columns(metric=pl.col("detail").str.json_path_match("$.metric"))
        .drop_nulls("metric").group_by("file", "line", "metric", maintain_order=True)
        .agg(pl.col("kind").first(), pl.col("message").str.split("\n").list.first().first())
        .cast(schema)  # type: ignore[arg-type]
    )  # fmt: skip


def _growth(curve: pl.DataFrame) -> pl.DataFrame:
    """A counter's growth per minute since the reading before (none for the first; a fall, a reset, is null)."""
    minutes = pl.col("ts").diff().dt.total_microseconds() / 60e6
    grown = pl.col("value").diff()
    return curve.with_columns(value=pl.when((grown >= 0) & (minutes > 0)).then(grown / minutes)).slice(1)


def _thin(curve: pl.DataFrame) -> pl.DataFrame:
    if curve.height <= SERIES_POINTS:
        return curve
    step = -(-curve.height // SERIES_POINTS)
    return curve.with_row_index("_i").filter((pl.col("_i") % step == 0) | pl.col("kind").is_not_null()).drop("_i")


def _series_layout(data: list[dict[str, Any]], title: str, failure: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {"title": {"text": plain(title), "font": {"size": 13}}, "height": 260,
                              "xaxis": {"type": "date"}, "yaxis": {"rangemode": "tozero"}, "hovermode": "x unified",
                              "legend": {"orientation": "h", "font": {"size": 10}},
                              "margin": {"t": 40, "l": 50, "r": 20, "b": 30}}  # fmt: skip
    if failure is not None:
        at = failure.isoformat()
        layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": at, "x1": at, "y0": 0, "y1": 1,
                             "line": {"color": FAILURE_COLOR, "width": 2, "dash": "dash"}}]  # fmt: skip
        layout["annotations"] = [{"x": at, "xref": "x", "y": 1, "yref": "paper", "text": "first failure",
                                  "showarrow": False, "xanchor": "left", "font": {"color": FAILURE_COLOR, "size": 10}}]  # fmt: skip
    return {"data": data, "layout": layout}


def series_figures(rows: pl.DataFrame, events: pl.DataFrame | None = None, *, failure: Any = None,
                   gpu: str | None = None) -> list[Any]:  # fmt: skip
    """Plotly figures of an incident's telemetry (:func:`series_spec`), one per family and host."""
    return [_figure(spec) for spec in series_spec(rows, events, failure=failure, gpu=gpu)]


def causes_over_time(source: Any, diagnoses: pl.DataFrame | None = None) -> Any:
    """A Plotly figure: incidents over time by root cause (``source`` is a dataset or incident facts)."""
    return _figure(causes_over_time_spec(_facts(source, diagnoses)))


def failure_heatmap(source: Any, diagnoses: pl.DataFrame | None = None, *, hosts: int = HEAT_HOSTS) -> Any:
    """A Plotly figure: first failures per host and GPU."""
    return _figure(failure_heatmap_spec(_facts(source, diagnoses), hosts=hosts))


def lead_times(source: Any, diagnoses: pl.DataFrame | None = None) -> Any:
    """A Plotly figure: lead times from first precursor to failure per root cause."""
    return _figure(lead_times_spec(_facts(source, diagnoses)))


def timeline_figure(rows: pl.DataFrame, *, title: str | None = None) -> Any:
    """A Plotly figure of a timeline (the rows :func:`forensics.timeline` returns)."""
    return _figure(timeline_spec(rows, title=title))


def components_bar(source: Any, diagnoses: pl.DataFrame | None = None) -> Any:
    """A Plotly figure: the root-cause table by component, as horizontal bars with shares."""
    facts = _facts(source, diagnoses)
    t = facts.group_by("component").len().sort("len")
    total = max(facts.height, 1)
    return _figure({"data": [{"type": "bar", "orientation": "h", "y": [plain(c) for c in t["component"]],
                              "x": t["len"].to_list(), "text": [f"{n / total:.1%}" for n in t["len"]],
                              "textposition": "auto"}],
                    "layout": {"title": {"text": f"Interruptions by component ({facts.height})"},
                               "margin": {"l": 140}}})  # fmt: skip


__all__ = ["causes_over_time", "components_bar", "failure_heatmap", "lead_times", "plain",
           "series_figures", "timeline_figure"]  # fmt: skip
