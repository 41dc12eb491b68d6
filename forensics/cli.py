"""The ``forensics`` command: a thin click layer, one library call per command.

Library errors (:class:`~forensics.errors.ForensicsError`) print as ``Error: …`` and exit 1;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import click
import pyarrow as pa

from . import output, sources
from .errors import ForensicsError, InputError
from .parse import ON_ERROR, Parsed, check_options, iter_parse_path, parse_bytes
from .reading.base import events_table
from .stats import BY as STATS_BY

FORMATS = ("table", "summary", "jsonl", "csv", "parquet")


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ForensicsError as exc:
            if ctx.params.get("debug"):
                raise
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Group)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="gpu-forensics")
def main(debug: bool) -> None:
    """Offline log forensics for GPU training clusters."""


@main.command("parse")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--source", default="auto", show_default=True, help="A source name (see `forensics sources`) or auto.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
@click.option("--on-error", type=click.Choice(ON_ERROR), default="keep", show_default=True,
              help="keep: unparsed records become rows; warn: also report them; raise: stop at the first.")
@click.option("--year", type=int, help="Year of year-less stamps (syslog, journal short), 1970 to 9998.")
@click.option("--timezone", help="IANA zone of stamps printed in local time (default: UTC, noted as assumed).")
@click.option("--incident", default="", help="Incident id to put in the rows.")
@click.option("--table", "table_name", type=click.Choice(["events", "gpus", "metrics", "samples"]), default="events",
              show_default=True, help="events; gpus: the per-GPU rows of nvidia-smi dumps; metrics: training steps; "
              "samples: telemetry readings (sensors, GPU series).")
@click.option("--all-lines", is_flag=True,
              help="Kernel logs, journal text, job output: keep every record as a row (those of no interest as `other`).")
def parse_cmd(files: tuple[str, ...], source: str, fmt: str, out: Path | None, on_error: str,
              year: int | None, timezone: str | None, incident: str, table_name: str, all_lines: bool) -> None:  # fmt: skip
    """Parse log files into event rows (FILE `-` reads standard input).

    Example: forensics parse dmesg.log --format jsonl -o events.jsonl
    """
    if source != "auto":
        sources.get(source)
    check_options(year=year, timezone=timezone, on_error=on_error)
    if fmt == "parquet" and out is None:
        raise InputError("--format parquet needs -o FILE")
    missing = [f for f in files if f != STDIN and not Path(f).is_file()]
    if missing:
        what = "is a directory" if Path(missing[0]).is_dir() else "no such file"
        raise InputError(f"{missing[0]}: {what}")
    options = {"source": source, "incident": incident, "year": year, "timezone": timezone, "on_error": on_error,
               "all_lines": all_lines}
    if table_name != "events" and fmt in ("table", "summary"):
        raise InputError(f"--table {table_name} prints as jsonl, csv or parquet")
    with _destination(out, binary=fmt == "parquet") as stream:
        names = [Path(f).name for f in files]
        writer = _Writer(fmt, stream, table=table_name, paths=len(set(names)) < len(names))
        for f in files:
            read = [parse_bytes(sys.stdin.buffer.read(), file="<stdin>", **options)] if f == STDIN \
                else iter_parse_path(f, **options)  # type: ignore[arg-type]  # fmt: skip
            for parsed in read:
                writer.add(parsed)
                if on_error == "warn":
                    for note in parsed.files.column("error").to_pylist():
                        if note:
                            click.echo(f"Warning: {f}: {note}", err=True)
        writer.close()


#: The FILE that stands for standard input.
STDIN = "-"


class _Writer:
    """Writes the rows as they come (jsonl, csv, parquet) or once at the end (table, summary)."""

    def __init__(self, fmt: str, stream: IO[Any], *, table: str, paths: bool = False) -> None:
        self.fmt, self.stream, self.table, self.paths = fmt, stream, table, paths
        self.kept: list[pa.Table] = []
        self.files: list[pa.Table] = []
        self.parquet: Any = None
        self.header = True
        self.widths: list[int] = []
        self.any = False

    def add(self, parsed: Parsed) -> None:
        rows = getattr(parsed, self.table)
        self.files.append(parsed.files)
        if self.fmt == "summary":
            self.kept.append(rows)
        elif self.fmt == "table":  # (aligned as the widths seen so far allow: the rows come as they are read)
            self.any = self.any or rows.num_rows > 0
            self.stream.write(output.table_text(rows, widths=self.widths, paths=self.paths))
            self.stream.flush()
        elif rows.num_rows or (self.fmt == "parquet" and self.parquet is None):
            self._write(rows)
            if self.fmt != "parquet":
                self.stream.flush()

    def _write(self, rows: pa.Table) -> None:
        if self.fmt == "jsonl":
            for line in output.jsonl_lines(rows):
                self.stream.write(line)
                self.stream.write("\n")
        elif self.fmt == "csv":
            self.stream.write(output.csv_text(rows, header=self.header))
            self.header = False
        else:
            import pyarrow.parquet as pq

            if self.parquet is None:
                self.parquet = pq.ParquetWriter(self.stream, rows.schema, compression="zstd")
            self.parquet.write_table(rows)

    def close(self) -> None:
        files = pa.concat_tables(self.files) if self.files else pa.table({})
        if self.fmt == "table" and not self.any:
            self.stream.write(output.table_text(events_table([])))
        elif self.fmt == "summary":
            self.stream.write(output.summary_text(pa.concat_tables(self.kept), files))
        elif self.parquet is not None:
            self.parquet.close()


class _Bytes(click.ParamType):
    """A byte count: ``1073741824``, ``512M``, ``2G``, ``1.5GiB``."""

    name = "bytes"
    _UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        import re

        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", str(value), re.I)
        if not m or float(m[1]) <= 0:
            self.fail(f"{value!r} is not a byte count such as 512M or 2G", param, ctx)
        return int(float(m[1]) * self._UNITS[m[2].lower()])


@main.command("ingest")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The dataset folder (made if missing; an existing dataset is updated).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: every core).")
@click.option("--max-file-bytes", type=_Bytes(), default="1G", show_default=True,
              help="Cap on the decompressed size of one file; larger ones are listed with an error.")
@click.option("--max-incident-bytes", type=_Bytes(), default="8G", show_default=True,
              help="Cap on the decompressed bytes of one incident.")
@click.option("--engine", type=click.Choice(["processes", "dask"]), default=None,
              help="Where incidents are read: local processes (default) or a Dask cluster.")
@click.option("--scheduler", metavar="ADDRESS",
              help="The Dask scheduler (tcp://host:8786); implies --engine dask. Without it, "
                   "--engine dask starts a local cluster of --jobs workers.")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress and no notes: only the warnings (what could not be read) and the summary.")
def ingest_cmd(paths: tuple[str, ...], out: Path, jobs: int | None, max_file_bytes: int,
               max_incident_bytes: int, engine: str | None, scheduler: str | None, quiet: bool) -> None:  # fmt: skip
    """Read incident folders and archives into a Parquet dataset, then print what it holds.

    Each PATH is an incident (a folder or archive) or a folder of incidents.

    Examples: forensics ingest /archive/incidents -o incidents.ds --jobs 8;
    forensics ingest /shared/incidents -o /shared/incidents.ds --scheduler tcp://sched:8786
    """
    from .ingest import ingest
    from .store import open_dataset

    bar = None if quiet else _Progress()
    if engine == "processes" and scheduler:
        raise click.UsageError("--scheduler runs on a Dask cluster; it cannot be combined with --engine processes")
    report = ingest(paths, out, jobs=jobs, max_file_bytes=max_file_bytes, max_incident_bytes=max_incident_bytes,
                    progress=bar, engine=engine or ("dask" if scheduler else "processes"), scheduler=scheduler)
    if bar is not None:
        bar.close()
    _tell_ingest(report, quiet=quiet)
    counts = ", ".join(f"{report.count(s)} {s}" for s in ("added", "replaced", "unchanged", "failed"))
    click.echo(f"{report.dataset}: {counts}")
    click.echo(output.dataset_text(open_dataset(out)), nl=False)
    broken = [d for d in report.done if not d.whole]
    if broken:
        click.echo(f"Error: {len(broken)} of {len(report.done)} incident(s) not read whole (named above); "
                   f"what could be read is stored", err=True)  # fmt: skip
        raise SystemExit(NOT_WHOLE)


#: ``forensics ingest``'s exit status when an incident could not be read whole (README "Exit status").
NOT_WHOLE = 3


def _tell_ingest(report: Any, *, quiet: bool) -> None:
    """Name on stderr every incident and file that was not read whole (``Warning:``), every empty
    incident, and, unless ``quiet``, each file no source claimed and each other note (``Note:``)."""
    from .ingest.archive import is_loss

    def note(text: str) -> None:
        if not quiet:
            click.echo(f"Note: {text}", err=True)

    for d in sorted(report.done, key=lambda d: d.id):
        if d.status == "failed":
            click.echo(f"Warning: {d.path}: not ingested: {d.error}", err=True)
        for file, why in d.problems:
            where = f"{d.id}: {file or '(the archive)'}"
            if is_loss(why):
                click.echo(f"Warning: {where}: not read whole: {why}", err=True)
            else:
                note(f"{where}: {why}")
        for file, lines in d.unclaimed:
            note(f"{d.id}: {file}: claimed by no source; its {lines:,} line(s) kept as other rows")
        if d.empty:
            what = "it holds no file" if d.files == 0 else f"its {d.files} file(s) gave no row"
            click.echo(f"Warning: {d.id}: empty incident: {what}", err=True)
    for skipped in report.skipped:
        if skipped.doc:
            note(f"{skipped.path}: {skipped.why}")
        else:
            click.echo(f"Warning: {skipped.path}: {skipped.why}", err=True)
    if report.index_error:
        click.echo(f"Warning: {report.dataset}: the signals index was not refreshed ({report.index_error}); "
                   "diagnosis reads every incident's events instead", err=True)  # fmt: skip


@main.command("synth")
@click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="A new or empty folder (an earlier synth output is replaced).")
@click.option("--incidents", "-n", type=click.IntRange(min=0), required=True, help="How many incidents.")
@click.option("--seed", type=int, default=1, show_default=True, help="The same seed gives byte-identical output.")
@click.option("--hosts-per-incident", default="2-4", show_default=True, metavar="A-B",
              help="Hosts (8 GPUs each) per incident, drawn between A and B.")
@click.option("--causes", metavar="CAUSE,...", help="Draw only these root causes (default: all).")
@click.option("--lemons", default="card,slot,node", show_default=True, metavar="KIND,...",
              help="Repeat offenders to plant: card, slot, node, or none.")
def synth_cmd(out: Path, incidents: int, seed: int, hosts_per_incident: str, causes: str | None, lemons: str) -> None:
    """Write labelled synthetic incidents (the truth is in each incident.toml).

    Example: forensics synth -o build/synth --incidents 1000 --seed 1
    """
    from .synth import synth

    low, sep, high = hosts_per_incident.partition("-")
    if not (low.isdigit() and (not sep or high.isdigit())):
        raise InputError(f"--hosts-per-incident {hosts_per_incident!r}: expected A-B, for example 2-4")
    kinds = () if lemons.strip() == "none" else tuple(k.strip() for k in lemons.split(",") if k.strip())
    report = synth(out, incidents, seed=seed, hosts_per_incident=(int(low), int(high or low)),
                   causes=[c.strip() for c in causes.split(",") if c.strip()] if causes else None, lemons=kinds)  # fmt: skip
    click.echo(f"{report.out}: {report.incidents:,} incidents, {report.files:,} files, {report.bytes / 1e6:,.1f} MB")
    for cause, count in sorted(report.causes.items(), key=lambda kv: (-kv[1], kv[0])):
        click.echo(f"  {cause:<18} {count:>6,}")
    for kind, where in report.lemons.items():
        click.echo(f"lemon {kind}: {where}")


@contextmanager
def _dataset(path: Path, *, ingest: bool = True) -> Iterator[Any]:
    """``path`` as an open dataset: a dataset folder as it is; with ``ingest``, an incident (or a folder of
    them) ingested into a temporary dataset first (deleted afterwards); without, anything else is an error."""
    from .ingest import ingest as ingest_paths
    from .store import open_dataset

    if (path / "dataset.json").is_file() or (not ingest and path.exists()):
        yield open_dataset(path)  # not a dataset: open_dataset's error says so and how to make one
        return
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    with tempfile.TemporaryDirectory(prefix="forensics-") as tmp:
        report = ingest_paths([str(path)], Path(tmp) / "ds", jobs=1)
        for d in report.done:
            if d.status == "failed":
                raise InputError(f"{d.path}: not ingested: {d.error}")
        yield open_dataset(Path(tmp) / "ds")


def _library(rules: tuple[str, ...]) -> Any:
    from .mine import load_library

    return load_library(list(rules)) if rules else None


_RULES_OPTION = click.option("--rules", multiple=True, type=click.Path(exists=True, path_type=Path),
                             help="Rule files or folders to use instead of the built-in library (repeatable).")  # fmt: skip


@main.command("diagnose")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--incident", help="Only this incident of the dataset.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table", show_default=True,
              help="table: the diagnoses and their evidence; json: one object per incident and line; markdown.")
@click.option("--evidence/--no-evidence", default=True, show_default=True,
              help="table: list each incident's evidence rows under the table.")
@_RULES_OPTION
def diagnose_cmd(path: Path, incident: str | None, fmt: str, evidence: bool, rules: tuple[str, ...]) -> None:
    """Root cause, confidence, first failure, evidence and caveats of each incident.

    PATH is a dataset (from `forensics ingest`) or an incident folder or archive, which is ingested
    into a temporary dataset first. The diagnoses are kept in the dataset's `diagnoses` table
    (DATASET/diagnoses/*.parquet) and redone when the incident or the rules change.

    Example: forensics diagnose incidents.ds --incident job-4711 --format json
    """
    library = _library(rules)
    with _dataset(path) as ds:
        result = ds.diagnoses(incident=incident, library=library)
        if ds.save_error:
            click.echo(f"Warning: {path}: the diagnoses were not stored in the dataset ({ds.save_error})", err=True)
    if incident is not None and result.height == 0:
        raise InputError(f"{path}: no incident {incident!r}")
    if fmt == "json":
        for line in output.diagnosis_json_lines(result):
            click.echo(line)
    elif fmt == "markdown":
        click.echo(output.diagnosis_markdown(result), nl=False)
    else:
        click.echo(output.diagnosis_text(result, evidence=evidence), nl=False)


@main.command("eval")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_RULES_OPTION
def eval_cmd(path: Path, fmt: str, rules: tuple[str, ...]) -> None:
    """How right `diagnose` is against the [label] of each incident.toml: accuracy, per-cause
    precision and recall, the confusion matrix, first-failure agreement.

    Example: forensics eval build/synth.ds
    """
    from .mine.evaluate import evaluate

    library = _library(rules)
    with _dataset(path) as ds:
        ev = evaluate(ds, library=library)
    if ev.rows.height == 0:
        raise InputError(f"{path}: no incident has a [label] root_cause in its incident.toml")
    if fmt == "json":
        click.echo(json.dumps({"incidents": ev.rows.height, "accuracy": round(ev.accuracy, 4),
                               "first_failure": ev.first_failure(), "per_cause": ev.per_cause.to_dicts(),
                               "confusion": ev.confusion.to_dicts()}))  # fmt: skip
        return
    click.echo(output.evaluation_text(ev), nl=False)


class _Duration(click.ParamType):
    """A positive duration no longer than ten years (``30s``, ``10m``, ``2h``) as a timedelta: the API's window
    convention."""

    name = "duration"
    LONGEST_US = 3650 * 86400 * 10**6

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        from .mine.language import duration_us

        try:
            us = value // timedelta(microseconds=1) if isinstance(value, timedelta) else duration_us(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a duration such as 30s, 10m, 2h", param, ctx)
        if not 0 < us <= self.LONGEST_US:
            self.fail(f"{value!r} is not a duration above 0 and up to 3650d", param, ctx)
        return timedelta(microseconds=us)


def _kinds(text: str | None) -> list[str] | None:
    return [k.strip() for k in text.split(",") if k.strip()] if text else None


@main.command("timeline")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--incident", help="The incident (needed when the dataset holds several).")
@click.option("--around", metavar="TS|failure", help="Only rows around this ISO time, or the diagnosed first failure.")
@click.option("--window", type=_Duration(), help="Half-width of the --around window [default: 10m].")
@click.option("--kinds", metavar="KIND,...",
              help="Only these kinds (globs: gpu.*; all: every kind); default all but other and train.step.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl", "csv"]), default="table", show_default=True,
              help="table; json: one array; jsonl: one object per line; csv.")
@_RULES_OPTION
def timeline_cmd(path: Path, incident: str | None, around: str | None, window: timedelta | None, kinds: str | None,
                 fmt: str, rules: tuple[str, ...]) -> None:  # fmt: skip
    """All sources of all hosts of one incident on one clock, evidence marked (! failure, > precursor,
    + related, ~ follower).

    Example: forensics timeline incidents.ds --incident job-4711 --around failure --window 5m
    """
    from .mine.timeline import timeline

    if window is not None and around is None:
        around = "failure"
    library = _library(rules)
    with _dataset(path) as ds:
        rows = timeline(ds, incident, around=around, window=window or "10m", kinds=_kinds(kinds), library=library)
    if fmt == "table":
        click.echo(output.timeline_text(rows), nl=False)
    else:
        click.echo(output.frame_text(rows, fmt), nl=False)


@main.command("mine")
@click.argument("dataset", type=click.Path(path_type=Path))
@click.option("--target", required=True, metavar="KIND[:CODE]", help="The failure to explain, e.g. gpu.xid:79.")
@click.option("--window", type=_Duration(), default="30m", show_default=True, help="How far back a precursor may lie.")
@click.option("--by", type=click.Choice(["gpu", "host", "incident"]), default="host", show_default=True,
              help="The key a precursor must share with the target.")
@click.option("--min-support", type=click.IntRange(min=1), default=2, show_default=True,
              help="Sequences: how many targets a sequence must precede.")
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rows per table.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def mine_cmd(dataset: Path, target: str, window: timedelta, by: str, min_support: int, top: int, fmt: str) -> None:
    """Which events precede TARGET, ranked by lift over their base rate, with lead times; then the
    frequent ordered sequences (2-4 events) that end in it.

    Example: forensics mine incidents.ds --target gpu.xid:79 --window 30m --by host
    """
    from .mine.precursors import parse_target, precursors, sequences

    kind, code = parse_target(target)
    with _dataset(dataset, ingest=False) as ds:
        pre = precursors(ds.events, kind, code, by=by, window=window)
        seq = sequences(ds.events, kind, code, by=by, window=window, min_support=min_support)
    if fmt == "json":
        click.echo(json.dumps({"target": target, "by": by, "window_s": window.total_seconds(),
                               "precursors": pre.head(top).to_dicts(), "sequences": seq.head(top).to_dicts()}))  # fmt: skip
        return
    click.echo(output.mining_text(target, pre.head(top), seq.head(top), window=window, by=by), nl=False)


@main.command("stats")
@click.argument("dataset", type=click.Path(path_type=Path))
@click.option("--by", type=click.Choice(list(STATS_BY)), default="cause", show_default=True,
              help="The grouping (rule: per chain; xid: Xid events per code; xid_gpu: per host, GPU and code; "
                   "unread: the lines reporting trouble that no source or catalog reads, per template).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "markdown"]), default="table",
              show_default=True)  # fmt: skip
@_RULES_OPTION
def stats_cmd(dataset: Path, by: str, fmt: str, rules: tuple[str, ...]) -> None:
    """The fleet's postmortem table: incidents per root cause (or component, host, GPU, month, job)
    with shares recomputed from counts, MTBF, GPU-hours lost and lead times; or Xid counts; or the lines
    that report trouble but that nothing reads (--by unread: what the diagnoses could not weigh).

    Example: forensics stats incidents.ds --by component --format markdown
    """
    from .stats import incident_facts, stats, summary

    library = _library(rules)
    with _dataset(dataset, ingest=False) as ds:
        diagnoses = None if by.startswith("xid") or by == "unread" else ds.diagnoses(library=library)
        table = stats(ds, by, diagnoses=diagnoses)
        head = None if diagnoses is None else summary(incident_facts(ds, diagnoses))
    if fmt == "csv":
        click.echo(table.write_csv(), nl=False)
    elif fmt == "json":
        click.echo(json.dumps({"summary": head, "by": by, "rows": table.to_dicts()}, default=str))
    else:
        click.echo(output.stats_text(table, head, markdown=fmt == "markdown"), nl=False)


@main.command("report")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file to write (replaced only when the report is complete).")
@click.option("--incident", help="Only this incident's page (no fleet summary).")
@_RULES_OPTION
def report_cmd(path: Path, out: Path, incident: str | None, rules: tuple[str, ...]) -> None:
    """One self-contained HTML report (no network needed to view it): the fleet summary, root-cause
    table, charts, repeat offenders, and a page per incident with its diagnosis, evidence and an
    interactive timeline. PATH is a dataset, an incident folder or an archive.

    Example: forensics report incidents.ds -o report.html
    """
    from .report import report

    library = _library(rules)
    with _dataset(path) as ds:
        written = report(ds, out, incident=incident, library=library)
    click.echo(f"report: {written.resolve()} ({written.stat().st_size / 1e6:,.1f} MB); open it in a browser")


@main.command("offenders")
@click.argument("dataset", type=click.Path(path_type=Path))
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True), default=0.01, show_default=True,
              help="Family-wise false-alarm rate of the Poisson (card, slot, node) and binomial (job) tests.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_RULES_OPTION
def offenders_cmd(dataset: Path, alpha: float, fmt: str, rules: tuple[str, ...]) -> None:
    """Repeat offenders: the cards, slots, nodes and jobs that fail more than chance allows, each with
    its decision (card, slot, node, job, undetermined), the reasoning and its incidents.

    Example: forensics offenders incidents.ds
    """
    from .offenders import repeat_offenders

    library = _library(rules)
    with _dataset(dataset) as ds:
        found = repeat_offenders(ds, ds.diagnoses(library=library), alpha=alpha)
    if fmt == "json":
        for row in found.iter_rows(named=True):
            click.echo(json.dumps(row))
        return
    if found.height == 0:
        click.echo("no repeat offenders")
        return
    for row in found.iter_rows(named=True):
        click.echo(f"{row['decision']:<12} {row['who']:<28} {row['incidents']:>4} incidents "
                   f"[95% {row['ci_low']:g}–{row['ci_high']:g}] (expected {row['expected']:g}, p {row['p_value']:.1e}): "
                   f"{row['reason']}")  # fmt: skip
        shown = ", ".join(row["incident_ids"][:8]) + (f", … {len(row['incident_ids']) - 8} more" if len(row["incident_ids"]) > 8 else "")
        click.echo(f"{'':<12} {shown}")


class _Progress:
    """A progress bar on a terminal (incidents, bytes, ETA); plain lines otherwise."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.tty = sys.stderr.isatty()

    def __call__(self, done: Any, n: int, total: int) -> None:
        if not self.tty:
            what = "" if done.status == "unchanged" else f" ({done.files} file(s), {done.events:,} events, {done.seconds:.1f} s)"
            click.echo(f"[{n}/{total}] {done.status} {done.id}{what}", err=True)
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="incident", file=sys.stderr, dynamic_ncols=True)
        self.bar.update(1)
        self.bar.set_postfix_str(f"{done.id[:30]} {done.bytes / 1e6:.1f} MB", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@main.command("sources")
def sources_cmd() -> None:
    """List the sources and the printed forms each understands."""
    for name, module in sources.SOURCES.items():
        click.echo(name)
        for form in module.FORMS:
            click.echo(f"  - {form}")


@contextmanager
def _destination(out: Path | None, *, binary: bool) -> Iterator[IO[Any]]:
    """stdout, or a temporary file renamed over ``out`` only when writing succeeded."""
    if out is None:
        yield sys.stdout.buffer if binary else sys.stdout
        return
    out = out.expanduser()
    if not out.parent.is_dir():
        raise InputError(f"{out.parent}: no such directory")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    umask = os.umask(0o022)  # read (and put back): the mode a file made with open() would get
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8", newline=None if binary else "") as f:
            yield f
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


if __name__ == "__main__":  # pragma: no cover
    main()
