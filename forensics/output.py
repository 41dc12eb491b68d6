"""Event tables as text: a readable table, a summary by kind, JSON Lines, CSV. No I/O here.

JSON Lines: one object per row with DESIGN.md's column names, ``ts`` as ISO-8601 UTC ending in ``Z``,
``detail`` as a JSON object. Built in Polars, so a million rows take about a second.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import polars as pl
import pyarrow as pa

_TS = "%Y-%m-%dT%H:%M:%S%.6fZ"
_MESSAGE_CHARS = 100

#: A Python exception line: ``RuntimeError: …``, ``torch.OutOfMemoryError: …``, ``KeyboardInterrupt``.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Warning|Failure|Timeout)\b.*$",
                        re.M)  # fmt: skip


def headline(message: str) -> str:
    """The line of a record that says what happened: its first line, except for a traceback, whose
    exception line (the last one, after any chained tracebacks) says it.

    >>> headline("Traceback (most recent call last):\\n  File \\"t.py\\", line 1, in <module>\\nValueError: bad")
    'ValueError: bad'
    >>> headline("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
    'NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.'
    """
    first = message.split("\n", 1)[0]
    if not first.lstrip().startswith("Traceback (most recent call last)"):
        return first
    found = _EXCEPTION.findall(message)
    return found[-1] if found else first


def _headline_expr(column: str = "message") -> pl.Expr:
    return pl.col(column).map_elements(headline, return_dtype=pl.String)


def _frame(events: pa.Table) -> pl.DataFrame:
    return pl.from_arrow(events)  # type: ignore[return-value]


def jsonl_lines(events: pa.Table, *, chunk: int = 200_000) -> Iterator[str]:
    """One JSON object per event row, in column order."""
    df = _frame(events)
    if "detail" not in df.columns:  # another table (gpus, metrics): plain JSON objects
        for start in range(0, df.height, chunk):
            part = df.slice(start, chunk).with_columns(pl.col("ts").dt.strftime(_TS))
            yield from part.select(_object(part)).to_series().to_list()
        return
    head = [c for c in df.columns if c != "detail"]
    for start in range(0, df.height, chunk):
        part = df.slice(start, chunk).with_columns(pl.col("ts").dt.strftime(_TS))
        row = pl.struct(head).struct.json_encode()
        # Splice the detail object in raw: it is JSON already, and must not become a string.
        encoded = part.select(
            pl.concat_str(row.str.head(-1), pl.lit(',"detail":'), pl.col("detail"), pl.lit("}"))
        ).to_series()
        yield from encoded.to_list()


def _object(df: pl.DataFrame) -> pl.Expr:
    """Each row as a JSON object; a float that is NaN or ±inf (which JSON cannot spell) becomes the
    string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` rather than a silent null."""
    fields = []
    for name, dtype in df.schema.items():
        key = f"{json.dumps(name)}:"
        col = pl.col(name)
        if dtype.is_float():
            value = (
                pl.when(col.is_null()).then(pl.lit("null"))
                .when(col.is_nan()).then(pl.lit('"NaN"'))
                .when(col == float("inf")).then(pl.lit('"Infinity"'))
                .when(col == float("-inf")).then(pl.lit('"-Infinity"'))
                .otherwise(pl.struct(col).struct.json_encode().str.slice(len(key) + 1).str.head(-1))
            )  # fmt: skip
        else:
            value = pl.struct(col).struct.json_encode().str.slice(len(key) + 1).str.head(-1)
        fields.append(pl.concat_str(pl.lit(key), value))
    return pl.concat_str(pl.lit("{"), pl.concat_str(fields, separator=","), pl.lit("}"))


def csv_text(events: pa.Table, *, header: bool = True) -> str:
    """CSV (with a header unless ``header=False``); ``detail`` stays a JSON string, ``ts`` ISO-8601 with ``Z``."""
    df = _frame(events).with_columns(pl.col("ts").dt.strftime(_TS))
    # CSV has no lists: a list column (clocks_event_reasons) becomes "a;b".
    return df.with_columns(pl.col(pl.List(pl.String)).list.join(";")).write_csv(include_header=header)


def table_text(events: pa.Table, *, widths: list[int] | None = None, paths: bool = False) -> str:
    """An aligned, human-readable table: line, time, host, kind, severity, gpu, code, message.

    Written in pieces (``forensics parse`` prints each chunk as it is read): pass the same ``widths``
    list to every call; the first call with rows prints the header and fills it, the next ones widen
    the columns when a value needs it and print no header, an empty piece prints nothing. ``paths``: name
    files by their paths as given (the caller knows two of its files share a name), not by their names.
    """
    df = _frame(events)
    if df.height == 0:
        return "" if widths is not None else "(no events)\n"
    files = df.get_column("file").unique()
    # a file's name alone, unless two files share it (a/job.log, b/job.log): then the paths as given
    name = pl.col("file").str.split("/").list.last()
    where = pl.col("file") if paths or files.str.split("/").list.last().n_unique() < files.len() else name
    view = df.select(
        pl.concat_str(where, pl.lit(":"), pl.col("line").cast(pl.String)).alias("where"),
        pl.coalesce(
            pl.col("ts").dt.strftime("%Y-%m-%d %H:%M:%S"),
            pl.col("uptime_s").map_batches(lambda s: s.round(6).cast(pl.String) + "s", return_dtype=pl.String),
            pl.lit("-"),
        ).alias("time"),
        pl.col("host").fill_null("-"),
        pl.col("kind"),
        pl.col("severity"),
        pl.col("gpu").fill_null("-"),
        pl.col("code").cast(pl.String).fill_null("-"),
        pl.col("message").str.split("\n").list.first().str.slice(0, _MESSAGE_CHARS).alias("message"),
    )
    rows = view.rows()
    names = ["WHERE", "TIME", "HOST", "KIND", "SEVERITY", "GPU", "CODE", "MESSAGE"]
    header = not widths
    wide = [max(len(names[i]), *(len(r[i]) for r in rows)) for i in range(len(names) - 1)]
    if widths is not None:
        widths[:] = [max(a, b) for a, b in zip(widths, wide, strict=True)] if widths else wide
        wide = widths
    out = ["  ".join(n.ljust(w) for n, w in zip(names, wide, strict=False)) + "  MESSAGE"] if header else []
    for r in rows:
        out.append("  ".join(v.ljust(w) for v, w in zip(r, wide, strict=False)) + "  " + r[-1])
    return "\n".join(line.rstrip() for line in out) + "\n"


def summary_counts(events: pa.Table) -> pl.DataFrame:
    """Events per source and kind, most frequent first."""
    return (
        _frame(events)
        .group_by("source", "kind")
        .agg(events=pl.len(), files=pl.col("file").n_unique())
        .sort(["events", "source", "kind"], descending=[True, False, False])
    )


def summary_text(events: pa.Table, files: pa.Table) -> str:
    """What was parsed: files, lines, records and unparsed, then the events by kind."""
    f = pl.from_arrow(files)
    counts = summary_counts(events)
    lines = [
        f"{f.height} file(s), {f['bytes'].sum():,} bytes, {f['lines'].sum():,} lines, "
        f"{f['records'].sum():,} records, {f['unparsed'].sum():,} unparsed"
    ]
    width = max([len(k) for k in counts["kind"].to_list()] + [4])
    sw = max([len(s or "") for s in counts["source"].to_list()] + [8])  # (vendorhealth is longer than 8)
    lines.append(f"{'SOURCE':<{sw}}  {'KIND':<{width}}  {'EVENTS':>8}  {'FILES':>5}")
    for source, kind, n, nfiles in counts.iter_rows():
        lines.append(f"{source:<{sw}}  {kind:<{width}}  {n:>8,}  {nfiles:>5}")
    return "\n".join(lines) + "\n"


def dataset_text(ds: object) -> str:
    """What a dataset holds: rows per table, then events per source and kind, and the files' totals."""
    import polars as pl

    tables = {name: getattr(ds, name) for name in ("incidents", "files", "events", "gpus", "metrics", "identities")}
    sizes = {name: lf.select(pl.len()).collect().item() for name, lf in tables.items()}
    files = tables["files"].select(
        pl.len().alias("n"), pl.col("bytes").sum(), pl.col("lines").sum(), pl.col("records").sum(),
        pl.col("unparsed").sum(), pl.col("source").is_null().sum().alias("unclaimed"),
        pl.col("error").is_not_null().sum().alias("errors"),
    ).collect().row(0, named=True)
    out = [
        "  ".join(f"{name} {n:,}" for name, n in sizes.items()),
        f"files: {files['bytes'] or 0:,} bytes, {files['lines'] or 0:,} lines, {files['records'] or 0:,} records, "
        f"{files['unparsed'] or 0:,} unparsed, {files['unclaimed']:,} claimed by no source, {files['errors']:,} with an error",
    ]
    counts = (
        tables["events"].group_by("source", "kind")
        .agg(events=pl.len(), incidents=pl.col("incident").n_unique())
        .sort(["events", "source", "kind"], descending=[True, False, False]).collect()
    )  # fmt: skip
    width = max([len(k) for k in counts["kind"].to_list()] + [4])
    sw = max([len(s or "") for s in counts["source"].to_list()] + [8])
    out.append(f"{'SOURCE':<{sw}}  {'KIND':<{width}}  {'EVENTS':>8}  {'INCIDENTS':>9}")
    for source, kind, n, incidents in counts.iter_rows():
        out.append(f"{source:<{sw}}  {kind:<{width}}  {n:>8,}  {incidents:>9}")
    return "\n".join(out) + "\n"


# -- diagnoses ----------------------------------------------------------------------------------------


def _iso(ts: object) -> str | None:
    return None if ts is None else ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # type: ignore[attr-defined]


def diagnosis_objects(diagnoses: pl.DataFrame) -> Iterator[dict[str, object]]:
    """One JSON-ready object per incident: ``incident``, ``root_cause``, ``confidence``, ``rule``,
    ``first_failure`` (host, rank, gpu, ts), ``evidence`` (file, line, ts, host, kind, code, role,
    message) and ``alternatives`` (root_cause, confidence, rule)."""
    for d in diagnoses.iter_rows(named=True):
        yield {
            "incident": d["incident"],
            "root_cause": d["root_cause"],
            "confidence": d["confidence"],
            "rule": d["rule"],
            "first_failure": {"host": d["first_host"], "rank": d["first_rank"], "gpu": d["first_gpu"],
                              "ts": _iso(d["first_ts"])},  # fmt: skip
            "evidence": [{**e, "ts": _iso(e["ts"])} for e in d["evidence"]],
            "alternatives": [{"root_cause": a["root_cause"], "confidence": a["score"], "rule": a["rule"]}
                             for a in d["alternatives"]],  # fmt: skip
            "caveats": list(d.get("caveats") or []),
        }


def diagnosis_json_lines(diagnoses: pl.DataFrame) -> Iterator[str]:
    for obj in diagnosis_objects(diagnoses):
        yield json.dumps(obj, ensure_ascii=False)


_ROLE_MARK = {"failure": "!", "precursor": ">", "related": "+", "follower": "~", "found": "?"}


def _first_failure_text(d: dict[str, object]) -> str:
    parts = [str(d["first_host"])] if d["first_host"] else []
    if d["first_rank"] is not None:
        parts.append(f"rank {d['first_rank']}")
    if d["first_gpu"]:
        parts.append(f"gpu {d['first_gpu']}")
    if d["first_ts"] is not None:
        parts.append(f"at {d['first_ts']:%Y-%m-%d %H:%M:%S}")  # type: ignore[str-format]
    return " ".join(parts) or "-"


def _evidence_line(e: dict[str, object]) -> tuple[str, ...]:
    when = f"{e['ts']:%Y-%m-%d %H:%M:%S}" if e["ts"] is not None else "-"  # type: ignore[str-format]
    kind = str(e["kind"]) + (f" {e['code']}" if e["code"] is not None else "")
    first = headline(str(e["message"]))[:_MESSAGE_CHARS]
    return (_ROLE_MARK.get(str(e["role"]), " "), evidence_where(e), when, kind, first)


def evidence_where(e: dict[str, object]) -> str:
    """``file:line`` of an evidence row, and its copies in other files: ``h/dmesg.log:48 (= journal.log:67)``."""
    copies = list(e.get("copies") or [])  # type: ignore[call-overload]
    here = f"{e['file']}:{e['line']}"
    return here + (f" (= {', '.join(c.rsplit('/', 1)[-1] for c in copies)})" if copies else "")


def diagnosis_text(diagnoses: pl.DataFrame, *, evidence: bool = True) -> str:
    """The diagnosis table, then (``evidence``) each incident's evidence rows, marked ``!`` failure,
    ``>`` precursor, ``+`` related, ``~`` follower; for an incident nothing explains, ``?`` marks what it
    holds (warnings, errors, lines a catalog reads)."""
    if diagnoses.height == 0:
        return "(no incidents)\n"
    rows = [(d["incident"], d["root_cause"], f"{d['confidence']:.2f}", d["rule"] or "-", _first_failure_text(d))
            for d in diagnoses.iter_rows(named=True)]  # fmt: skip
    out = _grid(["INCIDENT", "ROOT CAUSE", "CONF", "RULE", "FIRST FAILURE"], rows, set())
    if evidence:
        for d in diagnoses.iter_rows(named=True):
            out.append("")
            alt = ", ".join(f"{a['root_cause']} {a['score']:.2f}" for a in d["alternatives"][:3])
            out.append(f"{d['incident']}: {d['root_cause']} ({d['confidence']:.2f}, rule {d['rule'] or '-'})"
                       + (f"; also {alt}" if alt else ""))  # fmt: skip
            out += [f"  caveat: {c}" for c in d.get("caveats") or []]
            lines = [_evidence_line(e) for e in d["evidence"]]
            if not lines:
                out.append("  (no evidence: no rule matched, no warning or error found)")
            elif d["root_cause"] == "unknown":
                out.append("  no rule or catalog explains it; what it holds, most telling first:")
            out += ["  " + line for line in _grid([""] * 5, lines, set())[1:]] if lines else []
    return "\n".join(line.rstrip() for line in out) + "\n"


def _md(text: object) -> str:
    """Text safe in a Markdown table cell: pipes escaped, HTML and back-ticks neutralized."""
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("`", "'").replace("\n", " "))  # fmt: skip


def diagnosis_markdown(diagnoses: pl.DataFrame) -> str:
    """A Markdown summary table and, per incident, its evidence table: ready for a postmortem document."""
    out = ["| Incident | Root cause | Confidence | Rule | First failure |", "|---|---|---|---|---|"]
    for d in diagnoses.iter_rows(named=True):
        out.append(f"| {_md(d['incident'])} | {d['root_cause']} | {d['confidence']:.2f} | {_md(d['rule'] or '-')} | "
                   f"{_md(_first_failure_text(d))} |")  # fmt: skip
    for d in diagnoses.iter_rows(named=True):
        out += ["", f"## {_md(d['incident'])}: {d['root_cause']}", ""]
        if d["alternatives"]:
            out += ["Also considered: " + ", ".join(f"{a['root_cause']} ({a['score']:.2f}, {_md(a['rule'])})"
                                                    for a in d["alternatives"]), ""]  # fmt: skip
        out += [f"Caveat: {_md(c)}" for c in d.get("caveats") or []] + ([""] if d.get("caveats") else [])
        out += ["| | Where | Time | Kind | Message |", "|---|---|---|---|---|"]
        for e in d["evidence"]:
            mark, where, when, kind, message = _evidence_line(e)
            out.append(f"| {e['role']} | {_md(where)} | {when} | {_md(kind)} | {_md(message)} |")
    return "\n".join(out) + "\n"


def _grid(names: list[str], rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    widths = [max(len(names[i]), *(len(r[i]) for r in rows)) for i in range(len(names))]

    def fmt(values: tuple[str, ...] | list[str]) -> str:
        return "  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths, strict=True)))

    return [fmt(names).rstrip(), *(fmt(r).rstrip() for r in rows)]


def evaluation_text(ev: object) -> str:
    """Accuracy, the per-cause table and the confusion matrix (rows: truth, columns: answer)."""
    rows_df: pl.DataFrame = ev.rows  # type: ignore[attr-defined]
    n = rows_df.height
    right = int((rows_df["truth"] == rows_df["answer"]).sum())
    out = [f"{n:,} labelled incidents, accuracy {right / n:.1%} ({right:,}/{n:,})"]
    ff = ev.first_failure()  # type: ignore[attr-defined]
    out.append("first failure found: " + ", ".join(f"{k} {v:.1%}" if v is not None else f"{k} -" for k, v in ff.items()))
    out.append("")
    per = [(c, f"{s:,}", f"{a:,}", f"{k:,}", "-" if p is None else f"{p:.3f}", "-" if r is None else f"{r:.3f}")
           for c, s, a, k, p, r in ev.per_cause.iter_rows()]  # type: ignore[attr-defined]  # fmt: skip
    out += _grid(["CAUSE", "SUPPORT", "ANSWERED", "CORRECT", "PRECISION", "RECALL"], per, {1, 2, 3, 4, 5})
    out += ["", "confusion (rows: truth, columns: answer)"]
    conf: pl.DataFrame = ev.confusion  # type: ignore[attr-defined]
    cells = [tuple(str(v) for v in r) for r in conf.iter_rows()]
    out += _grid(["TRUTH", *conf.columns[1:]], cells, set(range(1, len(conf.columns))))
    return "\n".join(out) + "\n"


def timeline_text(rows: pl.DataFrame) -> str:
    """An incident's timeline: time (UTC, ms; the uptime when only that is known), host, source, kind and code, the evidence mark, message."""
    if rows.height == 0:
        return "(no events)\n"
    view = rows.select(
        pl.coalesce(
            pl.col("ts").dt.strftime("%Y-%m-%d %H:%M:%S%.3f"),
            pl.format("uptime {}s", pl.col("uptime_s").round(3)),
            pl.lit("-"),
        ),
        pl.col("host").fill_null("-"),
        pl.col("source"),
        pl.concat_str("kind", pl.lit(" "), pl.col("code").cast(pl.String), ignore_nulls=True).str.strip_chars(),
        pl.col("mark").replace_strict(_ROLE_MARK, default=" ", return_dtype=pl.String),
        pl.concat_str(pl.col("file").str.split("/").list.last(), pl.lit(":"), pl.col("line").cast(pl.String)),
        _headline_expr().str.slice(0, _MESSAGE_CHARS),
    ).rows()
    return "\n".join(_grid(["TIME (UTC)", "HOST", "SOURCE", "KIND", "", "WHERE", "MESSAGE"], view, set())) + "\n"


def frame_text(rows: pl.DataFrame, fmt: str) -> str:
    """A result frame (a timeline, a table of the API) as ``json`` (one array of objects), ``jsonl`` (one
    object per line) or ``csv`` (lists joined by ``;``); times are ISO-8601 UTC ending in ``Z``."""
    df = rows.with_columns(pl.col(pl.Datetime).dt.strftime(_TS))
    if fmt == "csv":
        return df.with_columns(pl.col(pl.List(pl.String)).list.join(";")).write_csv()
    objects = df.to_dicts()
    if fmt == "json":
        return json.dumps(objects, ensure_ascii=False) + "\n"
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects)


def mining_text(target: str, pre: pl.DataFrame, seq: pl.DataFrame, *, window: object, by: str) -> str:
    """The precursor table (support, confidence, lift, lead times) and the frequent sequences; ``window``
    is a timedelta."""
    n = int(pre["targets"][0]) if pre.height else 0
    out = [f"{target}: precursors within {window.total_seconds() / 60:g} min on the same {by}"  # type: ignore[attr-defined]
           + (f" ({n:,} targets)" if n else " (none found)")]  # fmt: skip
    if pre.height:

        def sec(v: float | None) -> str:
            return "-" if v is None else f"{v:,.1f}"

        rows = [(r["item"], f"{r['support']:,}", f"{r['confidence']:.3f}", f"{r['lift']:.2f}", sec(r["lead_p10_s"]),
                 sec(r["lead_median_s"]), sec(r["lead_p90_s"])) for r in pre.iter_rows(named=True)]  # fmt: skip
        out += _grid(["PRECURSOR", "SUPPORT", "CONFIDENCE", "LIFT", "LEAD P10 S", "MEDIAN S", "P90 S"], rows,
                     {1, 2, 3, 4, 5, 6})  # fmt: skip
    if seq.height:
        out += ["", "sequences ending in " + target]
        rows = [(r["sequence"], f"{r['support']:,}", f"{r['confidence']:.3f}") for r in seq.iter_rows(named=True)]
        out += _grid(["SEQUENCE", "SUPPORT", "CONFIDENCE"], rows, {1, 2})
    return "\n".join(out) + "\n"


#: A template's width in a text table (``stats --by unread``).
TEMPLATE_CELL = 100


def stat_cell(name: str, v: object) -> str:
    """One cell of a statistics table as text: shares in %, floats to one place (confidence to two),
    lists joined, nulls as ``-``."""
    if v is None:
        return "-"
    if name == "share":
        return f"{float(v):.1%}"  # type: ignore[arg-type]
    if name == "p_value":
        return f"{float(v):.2g}"  # type: ignore[arg-type]
    if isinstance(v, float):
        return f"{v:,.2f}" if name in ("confidence", "confidence_mean", "expected") else f"{v:,.1f}"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    if name == "template" and len(str(v)) > TEMPLATE_CELL:  # the whole one is in --format csv/json
        return str(v)[: TEMPLATE_CELL - 1] + "…"
    return f"{v:,}" if isinstance(v, int) else str(v)


def stats_text(table: pl.DataFrame, head: dict[str, object] | None, *, markdown: bool = False) -> str:
    """The statistics table (shares in %, hours and seconds rounded) under a one-line fleet summary."""
    out: list[str] = []
    if head is not None:
        window = (f", {head['first']:%Y-%m-%d} to {head['last']:%Y-%m-%d} ({head['window_days']:,} days): "  # type: ignore[str-format]
                  f"{head['per_day']} per day, MTBF {head['mtbf_h']} h" if head["window_days"] else "")  # fmt: skip
        lost = "" if head["gpu_hours_lost"] is None else f"; {head['gpu_hours_lost']:,.1f} GPU-hours lost"
        unknown = f"; GPU-hours lost unknown for {head['gpu_hours_unknown']:,} (no [job] gpus in incident.toml)" if head["gpu_hours_unknown"] else ""
        out += [f"{head['incidents']:,} incidents{window}{lost}{unknown}", ""]
    names = table.columns
    rows = [tuple(stat_cell(n, v) for n, v in zip(names, r, strict=True)) for r in table.iter_rows()]
    numeric = {i for i, n in enumerate(names) if table.schema[n].is_numeric()}
    if markdown:
        out.append("| " + " | ".join(names) + " |")
        out.append("|" + "|".join("---:" if i in numeric else "---" for i in range(len(names))) + "|")
        out += ["| " + " | ".join(_md(v) for v in r) + " |" for r in rows]
    else:
        out += _grid([n.upper() for n in names], rows, numeric) if rows else ["(no incidents)"]
    return "\n".join(out) + "\n"
