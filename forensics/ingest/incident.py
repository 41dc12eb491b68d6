"""One incident in, its tables out: discover → sniff and parse every member → align.

>>> import forensics.ingest.incident as inc, tempfile, pathlib
>>> with tempfile.TemporaryDirectory() as tmp:
...     d = pathlib.Path(tmp); (d / "node7").mkdir()
...     _ = (d / "node7" / "dmesg").write_text("[ 1843.308145] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\\n")
...     t = inc.read_incident(inc.IncidentRef("demo", d))
>>> t.events.select(["host", "kind", "code"]).to_pylist(), t.files.column("host").to_pylist()
([{'host': 'node7', 'kind': 'gpu.xid', 'code': 79}], ['node7'])
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any

import polars as pl
import pyarrow as pa

from .. import sources
from ..parse import Parsed, count_lines, iter_parse_path, parse_bytes
from ..reading.base import shift_lines, to_schema
from ..schema import EVENTS, FILES, GPUS, IDENTITIES, INCIDENTS, METRICS, SAMPLES
from . import align, bugreport, discover
from .archive import Limits
from .discover import CONFIG, IncidentRef, Item

_INFORMATION = re.compile(r"#/proc/driver/nvidia/gpus/[^/]+/information$")


@dataclass
class IncidentTables:
    """Every table of one incident, ready to be stored."""

    id: str
    events: pa.Table
    gpus: pa.Table
    metrics: pa.Table
    files: pa.Table
    identities: pa.Table
    incidents: pa.Table
    samples: pa.Table = field(default_factory=SAMPLES.empty_table)

    def tables(self) -> dict[str, pa.Table]:
        return {"events": self.events, "gpus": self.gpus, "metrics": self.metrics, "files": self.files,
                "identities": self.identities, "incidents": self.incidents, "samples": self.samples}  # fmt: skip


def digest(ref: IncidentRef, limits: Limits | None = None) -> str:
    """A digest of the incident's content (every member's path and bytes, and its ``incident.toml``)."""
    h = _new_digest(ref)
    for item in discover.members(ref, limits or Limits()):
        _hash_item(h, item)
    return h.hexdigest()


def _new_digest(ref: IncidentRef) -> Any:
    """The digest's start: a folder's ``incident.toml`` (an archive's is one of its members)."""
    h = hashlib.blake2b(digest_size=16)
    if ref.path.is_dir() and (ref.path / CONFIG).is_file():
        h.update((ref.path / CONFIG).read_bytes())
    return h


def _hash_item(h: Any, item: Item) -> None:
    m = item.member
    h.update(f"{m.path}\0{m.nbytes}\0{m.error}\0".encode())
    for block in m.blocks():
        h.update(block)


def read_incident(ref: IncidentRef, *, limits: Limits | None = None) -> IncidentTables:
    """Read and parse every file of ``ref`` and align the result (see :mod:`.align`)."""
    limits = limits or Limits()
    config, config_error = dict(ref.config), ref.config_error
    h = _new_digest(ref)
    events: list[pa.Table] = []
    gpus: list[pa.Table] = []
    metrics: list[pa.Table] = []
    samples: list[pa.Table] = []
    pieces: list[pa.Table] = []  # the samples of a big file's chunks, each aligned and stored on its own
    files: list[dict[str, Any]] = []
    container_hosts: dict[str, str] = {}
    facts: list[dict[str, Any]] = []
    report_text: str | None = None
    mtimes: dict[str, float] = {}
    for item in discover.members(ref, limits):
        _hash_item(h, item)
        m = item.member
        if m.path.rsplit("/", 1)[-1] == CONFIG and m.path.count("/") <= 1 and m.data is not None:
            config, config_error = discover.read_config(m.data)
            continue
        if m.mtime is not None and ref.path.is_file():
            mtimes[m.path.split("#")[0]] = m.mtime
        if item.container is not None and (host := discover.sos_hostname(item)):
            container_hosts[item.container] = host
        if m.path.endswith("#header") and m.data is not None:
            info = bugreport.facts(m.data)
            report_text = report_text or info.get("date")
            if "host" in info:
                container_hosts[item.container or m.path] = info["host"]
        if _INFORMATION.search(m.path) and m.data:
            facts.append({"file": m.path, **align.information_facts(m.data.decode("utf-8", "replace"))})
        if m.data is None or not item.parse:
            lines = sum(count_lines(b) for b in m.blocks()) if m.fs_path else count_lines(m.data or b"")
            files.append(_file_row(m.path, None, max(m.nbytes, 0), lines, 0, 0, m.error, None, item, None))
            continue
        if m.fs_path is not None:  # a big file: read in chunks, its records of interest (memory stays bounded)
            parsed, chunks = _streamed(m.fs_path, m.path)
        else:  # (every record: the clocks of an incident's files are aligned on lines of no interest too)
            parsed = parse_bytes(m.data, file=m.path, all_lines=True)
        row = parsed.files.to_pylist()[0]
        error = "; ".join(e for e in (m.error, row["error"]) if e) or None
        files.append(_file_row(m.path, row["source"], row["bytes"], row["lines"], row["records"], row["unparsed"],
                               error, row["confidence"], item, row["families"]))  # fmt: skip
        shift = item.first_line - 1
        events.append(shift_lines(parsed.events, shift))
        gpus.append(shift_lines(parsed.gpus, shift))
        metrics.append(shift_lines(parsed.metrics, shift))
        if m.fs_path is not None:  # (a streamed file's samples are its chunks', never joined)
            pieces += [shift_lines(chunk, shift) for chunk in chunks]
        else:
            samples.append(shift_lines(parsed.samples, shift))
    for f in files:  # a sosreport without a hostname file: the host in its folder's name
        container = f["container"]
        if container is not None and container not in container_hosts and not container.endswith((".log", ".gz")):
            if host := discover.sos_name_host(container or ref.path.name):
                container_hosts[container] = host
    incident_id = str(config.get("id") or ref.id)
    strip = _top_folder([f["file"] for f in files], incident_id)
    files_df = pl.DataFrame(files, schema={**_FILE_COLUMNS}) if files else pl.DataFrame(schema=_FILE_COLUMNS)
    ev = _frame(events, EVENTS)
    gp = _frame(gpus, GPUS)
    mt = _frame(metrics, METRICS)
    if strip:
        ev, gp, mt, files_df = (_strip(df, strip) for df in (ev, gp, mt, files_df))
        files_df = files_df.with_columns(pl.col("container").str.strip_prefix(strip))
        container_hosts = {k.removeprefix(strip): v for k, v in container_hosts.items()}
        facts = [{**f, "file": f["file"].removeprefix(strip)} for f in facts]
        mtimes = {k.removeprefix(strip): v for k, v in mtimes.items()}
    files_df = align.file_hosts(ev, files_df, container_hosts)
    ev = align.fill_hosts(ev, files_df)
    files_df = files_df.drop("alias")
    file_host = dict(files_df.select("file", "host").iter_rows())
    gp = gp.with_columns(host=pl.coalesce("host", pl.col("file").replace_strict(file_host, default=None)))
    mt = mt.with_columns(host=pl.coalesce("host", pl.col("file").replace_strict(file_host, default=None)))
    facts = [{**f, "host": file_host.get(f["file"])} for f in facts]
    timezone = config.get("timezone")
    ev = align.apply_timezone(ev, timezone)
    gp = align.local_times(gp, timezone)  # nvidia-smi's stamps: the machine's local time
    ev = align.date_yearless(ev, year=_int(config.get("year")), timezone=timezone,
                             report_date=align.report_date(report_text), mtimes=mtimes)  # fmt: skip
    ev = align.date_deltas(ev)
    ev = align.align_uptime(ev)
    ev = align.twin_times(ev)
    ids = align.identities(incident_id, ev, gp, facts)
    ev = align.fill_identities(ev, ids)
    # the samples of the small files at once, then each chunk of a big file's series on its own, let go once
    # stored (its pieces never joined: a 100 MB dmon holds 7.5 M rows, and each step below copies them)
    stored: list[pa.Table] = []
    part: pl.DataFrame | None = _frame(samples, SAMPLES)
    while part is not None:
        if strip:
            part = _strip(part, strip)
        part = part.with_columns(host=pl.coalesce("host", pl.col("file").replace_strict(file_host, default=None)))
        part = align.align_samples(part, ids, timezone=timezone, local_sources=sources.LOCAL_TIME,
                                   index_sources=sources.GPU_INDEX)  # fmt: skip
        ev = align.series_gpus(ev, part)
        if part.height:
            stored.append(to_schema(part.with_columns(incident=pl.lit(incident_id)), SAMPLES))
        part = pl.from_arrow(pieces.pop(0)) if pieces else None  # type: ignore[assignment]
    ev = ev.with_columns(incident=pl.lit(incident_id))
    gp = gp.with_columns(incident=pl.lit(incident_id))
    mt = mt.with_columns(incident=pl.lit(incident_id))
    files_df = files_df.with_columns(incident=pl.lit(incident_id))
    labels = {k: v for k, v in config.items() if k != "id"}
    if config_error:
        labels["config_error"] = config_error
    hosts = sorted(set(files_df.get_column("host").drop_nulls()) | set(ev.get_column("host").drop_nulls()))
    incidents = pa.Table.from_pylist([{
        "incident": incident_id, "hosts": hosts,
        "first_ts": ev.get_column("ts").min(), "last_ts": ev.get_column("ts").max(),
        "labels": json.dumps(labels, default=_json_default, sort_keys=True),
        "path": str(ref.path), "digest": h.hexdigest(),
    }], schema=INCIDENTS)  # fmt: skip
    return IncidentTables(
        id=incident_id,
        events=to_schema(ev, EVENTS),
        gpus=to_schema(gp, GPUS),
        metrics=to_schema(mt, METRICS),
        files=to_schema(files_df, FILES),
        identities=to_schema(ids, IDENTITIES),
        incidents=incidents,
        samples=pa.concat_tables(stored) if stored else SAMPLES.empty_table(),
    )


def _streamed(fs_path: str, name: str) -> tuple[Parsed, list[pa.Table]]:
    """The rows of a big file on disk read in chunks (:func:`~forensics.parse.iter_parse_path`), one
    chunk held at a time besides the rows kept, and the ``samples`` of each chunk apart (a series' millions
    of rows, aligned and stored chunk by chunk)."""
    pieces = list(iter_parse_path(fs_path, name=name))
    last = pieces[-1]

    def joined(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
        kept = [t for t in tables if t.num_rows]
        return pa.concat_tables(kept) if kept else schema.empty_table()

    return Parsed(events=joined([p.events for p in pieces], EVENTS), files=last.files, source=last.source,
                  gpus=joined([p.gpus for p in pieces], GPUS), metrics=joined([p.metrics for p in pieces], METRICS),
                  confidence=last.confidence), [p.samples for p in pieces if p.samples.num_rows]  # fmt: skip


_FILE_COLUMNS = {
    "incident": pl.String, "file": pl.String, "source": pl.String, "bytes": pl.Int64, "lines": pl.Int64,
    "records": pl.Int64, "unparsed": pl.Int64, "error": pl.String, "host": pl.String, "confidence": pl.Float64,
    "families": pl.String, "container": pl.String,
}  # fmt: skip


def _file_row(path: str, source: str | None, size: int, lines: int, records: int, unparsed: int,
              error: str | None, confidence: float | None, item: Item, read_by: str | None) -> dict[str, Any]:  # fmt: skip
    return {"incident": "", "file": path, "source": source, "bytes": size, "lines": lines, "records": records,
            "unparsed": unparsed, "error": error, "host": None, "confidence": confidence, "families": read_by,
            "container": item.container}  # fmt: skip


def _frame(tables: list[pa.Table], schema: pa.Schema) -> pl.DataFrame:
    nonempty = [t for t in tables if t.num_rows]
    return pl.from_arrow(pa.concat_tables(nonempty) if nonempty else schema.empty_table())  # type: ignore[return-value]


def _top_folder(paths: list[str], incident_id: str) -> str | None:
    """The one folder every member lies in, when it is the incident's own (named like it)."""
    tops = {p.split("/", 1)[0] for p in paths if "/" in p.split("#")[0]}
    if len(tops) != 1 or any("/" not in p.split("#")[0] for p in paths):
        return None
    top = tops.pop()
    return f"{top}/" if discover.strip_archive(top) == incident_id else None


def _strip(df: pl.DataFrame, prefix: str) -> pl.DataFrame:
    return df.with_columns(pl.col("file").str.strip_prefix(prefix))


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else None


def _json_default(value: Any) -> str:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)
