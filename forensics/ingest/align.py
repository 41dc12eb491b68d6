"""Per incident: which host each file is from, one time line in UTC, and one identity per GPU.

All of it is Polars over the incident's rows; nothing here reads files.

*Hosts* — a file's host is the one its own rows name most often (journal and syslog host fields, NCCL
``host:pid:tid`` prefixes, torchrun reports); else the host its container names (a bug report's
``uname:`` line, a sosreport's ``hostname``); else the first folder below the incident root (an
archive's name without its endings). Rows that name no host get their file's. A file whose rows name
only an IPv4 address (Talos' ``dmesg``, a pdsh prefix) in a host's folder is that folder's host; one
address beside one name (pdsh by address before NCCL's ``host:pid:tid``) is that name's alias. In a
host's folder, the one name a job log gives that nothing else in the incident gives (NCCL and torchrun
in a container print its host name: ``user``, a hex id) is the folder's host. A name
that names no machine (``localhost``, ``(none)``: what a journal prints before the host name is set,
early in a boot; a redacted copy's ``<cluster_name>``) counts as no name.

*Clocks* — ``detail.ts_from`` says how each ``ts`` was obtained:

- ``printed``: the stamp carried its zone; ``local``: wall clock read in ``incident.toml``'s
  ``timezone``; ``assumed``: wall clock with no zone known, read as UTC;
- year-less stamps (syslog, journal ``short``) are dated from, in order: ``incident.toml``'s ``year``,
  the stamps of the incident's other files (same host first), the bug report's ``Date:``, the archive
  member's modification time; ``detail.year_from`` says which;
- ``aligned``: an uptime stamp (raw ``dmesg``) turned into UTC with the boot's wall-clock start,
  learnt from another file of the same host and boot — lines with both stamps (kern.log with the
  embedded uptime, journal realtime + monotonic) or the same message in a wall-clock file
  (``dmesg -T``); ``detail.aligned_by`` names that file. Boots are split where the uptime goes back.

*Identities* — one row per GPU per host: bus id, UUID, serial, minor number, product and the ranks
that used it, from ``nvidia-smi`` dumps, NVRM identity lines, NCCL init lines and bug-report
``/proc/driver/nvidia/gpus/*/information`` sections. Rows that name a rank but no GPU get the rank's
GPU; rows that name a GPU (or a pid) but no rank get the rank that used it, when only one did.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import polars as pl

from ..pci import canonical_bdf
from ..reading import envelope
from ..reading.base import short_host
from .discover import strip_archive

_TS = pl.Datetime("us", "UTC")
IDENTITY_COLUMNS = {
    "incident": pl.String, "host": pl.String, "gpu": pl.String, "uuid": pl.String, "serial": pl.String,
    "minor": pl.Int32, "product": pl.String, "ranks": pl.List(pl.Int32), "learnt_from": pl.List(pl.String),
}  # fmt: skip


def set_detail(key: str, value: pl.Expr, *, when: pl.Expr) -> pl.Expr:
    """``detail`` with ``key`` set to the string ``value`` on the rows where ``when`` holds."""
    detail = pl.col("detail")
    encoded = pl.concat_str(pl.lit(f'"{key}":'), pl.struct(v=value).struct.json_encode().str.slice(5).str.head(-1))
    present = detail.str.contains(f'"{key}": ?', literal=False)
    replaced = detail.str.replace(f'"{key}": ?(?:"[^"]*"|null)', encoded.str.replace_all(r"\$", "$$$$"))
    spliced = pl.when(detail.str.strip_chars() == "{}").then(pl.concat_str(pl.lit("{"), encoded, pl.lit("}"))) \
        .otherwise(pl.concat_str(pl.lit("{"), encoded, pl.lit(","), detail.str.strip_chars().str.slice(1)))  # fmt: skip
    return pl.when(when).then(pl.when(present).then(replaced).otherwise(spliced)).otherwise(detail)


def _detail(key: str) -> pl.Expr:
    return pl.col("detail").str.json_path_match(f"$.{key}")


# --- hosts -------------------------------------------------------------------------------------------


def file_hosts(events: pl.DataFrame, files: pl.DataFrame, container_hosts: dict[str, str]) -> pl.DataFrame:
    """``files`` with its ``host`` column decided (see the module docstring)."""
    address = pl.col("host").str.contains(_IPV4)
    from_rows = (
        events.filter(pl.col("host").is_not_null() & ~_placeholder(pl.col("host")))
        .group_by("file", "host").agg(n=pl.len())
        .sort(["file", "n", "host"], descending=[False, True, False])
        .group_by("file", maintain_order=True)
        .agg(content=pl.col("host").first(), named=pl.col("host").filter(~address).first(),
             _names=(~address).sum(), _addresses=address.sum(), _named=pl.col("host").filter(~address))
    )  # fmt: skip
    containers = pl.DataFrame(
        {"container": list(container_hosts), "from_container": list(container_hosts.values())},
        schema={"container": pl.String, "from_container": pl.String},
    )
    folder = pl.col("file").str.split("#").list.first()
    first_dir = pl.when(folder.str.contains("/")).then(folder.str.split("/").list.first())
    one_address = pl.col("_addresses") == 1
    out = (
        files.join(from_rows, on="file", how="left")
        .join(containers, on="container", how="left")
        .with_columns(folder=first_dir.map_elements(strip_archive, return_dtype=pl.String))
        # One IPv4 address beside one name (a pdsh prefix by address before NCCL's host name) is an
        # alias of that name; an address alone (Talos' dmesg, a pdsh prefix) in a host's folder is an
        # alias of the folder's name.
        .with_columns(content=pl.when(one_address & (pl.col("_names") == 1)).then(pl.col("named"))
                      .when(one_address & (pl.col("_names") == 0) & pl.col("folder").is_not_null()).then(None)
                      .otherwise(pl.col("content")))  # fmt: skip
    )
    return (
        _container_names(out)
        .with_columns(host=short_host(pl.coalesce("content", "from_container", "folder")))
        .drop("content", "named", "from_container", "folder", "_names", "_addresses", "_named")
    )


def _container_names(files: pl.DataFrame) -> pl.DataFrame:
    """A file whose rows name one host that no other folder names, in a host's folder (its other files
    are of just the folder's name: a journal or kern.log naming it, a dmesg naming none; the file itself
    may name the folder too, in a pdsh prefix), is that host's: NCCL and torchrun in a container print
    the container's host name (``user``, a hex id). ``alias`` keeps the name replaced, for
    :func:`fill_hosts`."""
    rows = files.select("file", "folder", "content", "from_container", "_named").to_dicts()
    by_folder: dict[str | None, set[str]] = {}  # the hosts a folder's files are of (its name: files that name none)
    for r in rows:
        host = r["content"] or r["from_container"] or r["folder"]
        if host is not None:
            by_folder.setdefault(r["folder"], set()).add(host)
    named_by_others = {f: {h for g, hosts in by_folder.items() if g != f for h in hosts} | set(by_folder) - {f}
                       for f in by_folder}  # fmt: skip
    alias: dict[str, tuple[str, str]] = {}
    for r in rows:
        folder = r["folder"]
        # (a bug report or sosreport names its host itself)
        if folder is None or r["from_container"] or not r["_named"]:
            continue
        names = set(r["_named"]) - {folder}
        if len(names) != 1:
            continue
        (name,) = names
        if by_folder[folder] - {name} == {folder} and name not in named_by_others[folder]:
            alias[r["file"]] = (name, folder)
    if not alias:
        return files.with_columns(alias=pl.lit(None, pl.String))
    names = pl.col("file").replace_strict({f: a[0] for f, a in alias.items()}, default=None, return_dtype=pl.String)
    hosts = pl.col("file").replace_strict({f: a[1] for f, a in alias.items()}, default=None, return_dtype=pl.String)
    return files.with_columns(alias=names, content=pl.coalesce(hosts, "content"))


_IPV4 = r"^\d{1,3}(?:\.\d{1,3}){3}$"


def _placeholder(host: pl.Expr) -> pl.Expr:
    """Host names that name no machine: the journal's before the host name is set, and a redacted
    copy's marker (``<cluster_name>``, ``<hostname>``)."""
    return host.str.contains(r"^(?:localhost(?:\.localdomain)?|\(none\)|<[^<>\s]*>)$")


def fill_hosts(events: pl.DataFrame, files: pl.DataFrame) -> pl.DataFrame:
    """Rows that name no host get their file's; the address alias decided by :func:`file_hosts` (a
    file's one IPv4 address, beside at most one name) becomes the file's host."""
    hosts = files.select("file", "alias", file_host="host")
    out = events.join(hosts, on="file", how="left", maintain_order="left").with_columns(
        host=pl.when(_placeholder(pl.col("host")) | (pl.col("host") == pl.col("alias"))).then(None).otherwise(pl.col("host"))
    ).drop("alias")
    address = pl.col("host").str.contains(_IPV4)
    addresses = pl.col("host").filter(address).n_unique().over("file")
    names = pl.col("host").filter(~address).n_unique().over("file")
    alias = (address & (addresses == 1) & (names <= 1)
             & pl.col("file_host").is_not_null() & (pl.col("file_host") != pl.col("host")))  # fmt: skip
    return out.with_columns(
        host=pl.when(alias).then(pl.col("file_host")).otherwise(pl.coalesce("host", "file_host"))
    ).drop("file_host")


# --- clocks ------------------------------------------------------------------------------------------


def _in_zone(timezone: str) -> pl.Expr:
    """``ts``, a wall clock read as UTC, re-read in ``timezone``."""
    return pl.col("ts").dt.replace_time_zone(None).dt.replace_time_zone(timezone, ambiguous="earliest",
                                                                        non_existent="null").dt.convert_time_zone("UTC")  # fmt: skip


def apply_timezone(events: pl.DataFrame, timezone: str | None) -> pl.DataFrame:
    """Wall-clock stamps read as UTC for want of a zone, re-read in ``timezone``."""
    if not timezone or events.height == 0:
        return events
    assumed = _detail("ts_from") == "assumed"
    return events.with_columns(
        ts=pl.when(assumed).then(_in_zone(timezone)).otherwise(pl.col("ts")),
        detail=set_detail("ts_from", pl.lit("local"), when=assumed),
    )


def local_times(gpus: pl.DataFrame, timezone: str | None) -> pl.DataFrame:
    """The ``gpus`` rows' stamps (``nvidia-smi``'s, always the machine's local time, read as UTC by the
    parser) re-read in ``timezone``."""
    if not timezone or gpus.height == 0:
        return gpus
    return gpus.with_columns(ts=_in_zone(timezone))


def date_deltas(events: pl.DataFrame) -> pl.DataFrame:
    """The ``dmesg -H`` rows (``[  +0.000127]``, ``detail.delta_s``) of each file dated from the header
    above them once :func:`date_yearless` gave that header its year (:func:`envelope.after_headers`)."""
    delta = _detail("delta_s").cast(pl.Float64, strict=False)
    need = events.filter(pl.col("ts").is_null() & delta.is_not_null()).get_column("file").unique()
    if need.is_empty():
        return events
    out = events.with_row_index("_row")
    parts = [
        out.filter(pl.col("file") == file).sort("line").select(
            "_row", _ts=envelope.after_headers(pl.col("ts"), delta))
        for file in need.to_list()
    ]  # fmt: skip
    dated = pl.concat(parts)
    return (
        out.join(dated, on="_row", how="left")
        .with_columns(ts=pl.coalesce("ts", "_ts").dt.cast_time_unit("us"))
        .drop("_row", "_ts")
    )


def date_yearless(events: pl.DataFrame, *, year: int | None, timezone: str | None,
                  report_date: datetime | None, mtimes: dict[str, float]) -> pl.DataFrame:  # fmt: skip
    """Give year-less stamps (kept in ``detail.stamp``) their year from the context."""
    if events.height == 0:
        return events
    stamp = _detail("stamp")
    need = events.with_row_index("_row").filter(pl.col("ts").is_null() & stamp.is_not_null()).with_columns(stamp=stamp)
    need = need.filter(~pl.col("stamp").str.contains(r"^\s*\d+(?:\.\d+)?\s*$"))  # not an uptime
    if need.height == 0:
        return events
    known = events.filter(pl.col("ts").is_not_null() & _detail("ts_from").is_in(["printed", "local", "assumed"]))
    updates = []
    for (file, host), part in need.group_by("file", "host", maintain_order=True):
        chosen, source = _year_for(part, str(file), host, year=year, timezone=timezone, known=known,
                                   report_date=report_date, mtimes=mtimes)  # fmt: skip
        if chosen is None:
            continue
        ts, how = _yearless_utc(chosen, timezone)
        updates.append(part.select("_row", _ts=ts, _from=how, _year_from=pl.lit(source)))
    if not updates:
        return events
    upd = pl.concat(updates)
    out = events.with_row_index("_row").join(upd, on="_row", how="left", maintain_order="left")
    hit = pl.col("_ts").is_not_null()
    out = out.with_columns(ts=pl.coalesce("ts", "_ts")).with_columns(
        detail=set_detail("ts_from", pl.col("_from"), when=hit)
    ).with_columns(detail=set_detail("year_from", pl.col("_year_from"), when=hit))
    return out.drop("_row", "_ts", "_from", "_year_from")


def _yearless_utc(year: int, timezone: str | None) -> tuple[pl.Expr, pl.Expr]:
    """The time of a year-less ``stamp`` in ``year``: syslog (``Jan  1 03:18:01``) or glog's month-day
    (``01-01T03:18:01.006231``, as the job-output source keeps it)."""
    stamp = pl.col("stamp")
    glog = stamp.str.contains(r"^\d\d-\d\dT")
    text = pl.when(glog).then(pl.concat_str(pl.lit(f"{year}-"), stamp)).otherwise(stamp)
    return envelope.to_utc(text, pl.when(glog).then(pl.lit("iso")).otherwise(pl.lit("syslog")), year=year,
                           timezone=timezone)  # fmt: skip


def _year_for(part: pl.DataFrame, file: str, host: Any, *, year: int | None, timezone: str | None,
              known: pl.DataFrame, report_date: datetime | None, mtimes: dict[str, float]) -> tuple[int | None, str]:  # fmt: skip
    if year is not None:
        return year, "incident.toml"
    others = known.filter(pl.col("file") != file)
    same_host = others.filter(pl.col("host") == host) if host is not None else others.clear()
    reference: datetime | None = None
    source = ""
    for frame, name in ((same_host, "context"), (others, "context")):
        if frame.height:
            reference, source = frame.get_column("ts").median(), name  # type: ignore[assignment]
            break
    if reference is None and report_date is not None:
        reference, source = report_date, "bug report date"
    if reference is None and (mtime := mtimes.get(file.split("#")[0])) is not None:
        reference, source = datetime.fromtimestamp(mtime, UTC), "archive mtime"
    if reference is None:
        return None, ""
    best: tuple[float, int] | None = None
    for candidate in (reference.year - 1, reference.year, reference.year + 1):
        ts, _ = _yearless_utc(candidate, timezone)
        value = part.select(ts.median()).item()
        if value is None:
            continue
        distance = abs((value - reference).total_seconds())
        if best is None or distance < best[0]:
            best = (distance, candidate)
    return (best[1], source) if best else (None, "")


#: How far apart (µs) the uptimes of one message in two files of the same boot may be.
_SAME_LINE_US = 1_000_000


def align_uptime(events: pl.DataFrame) -> pl.DataFrame:
    """Turn uptime-only rows into UTC with the boot start learnt from the host's other files."""
    if events.height == 0:
        return events
    ev = events.with_row_index("_row").with_columns(
        _boot=(pl.col("uptime_s").forward_fill().diff().fill_null(0) < -1).cum_sum().over("file"),
        _key=pl.col("message").str.slice(0, 300),
        _us=(pl.col("uptime_s") * 1e6).round().cast(pl.Int64),
    )
    raw = ev.filter(pl.col("ts").is_null() & pl.col("uptime_s").is_not_null() & pl.col("host").is_not_null())
    if raw.height == 0:
        return events
    raw_boots = raw.select("host", "file", "_boot").unique()
    # Anchors with both stamps: the boot's start is ts - uptime (a median per boot of the anchor file).
    both = ev.filter(pl.col("ts").is_not_null() & pl.col("uptime_s").is_not_null())
    both = both.with_columns(_offset=pl.col("ts").dt.epoch("us") - pl.col("_us"))
    boot_start = both.group_by("host", "file", "_boot").agg(_start=pl.col("_offset").median())
    # A raw line is of an anchor's boot when the same message has (nearly) the same uptime there: a
    # kern.log line repeats the printk stamp exactly, a journal entry's monotonic time is when journald
    # read the message, a few milliseconds later.
    exact = (
        raw.select("host", "file", "_boot", "_key", "_us").sort("_us")
        .join_asof(both.select("host", "_key", "_us", a_file="file", a_boot="_boot").sort("_us"),
                   on="_us", by=["host", "_key"], strategy="nearest", tolerance=_SAME_LINE_US,
                   check_sortedness=False)  # sorted on _us just above
        .drop_nulls("a_file")
        .join(boot_start.rename({"file": "a_file", "_boot": "a_boot"}), on=["host", "a_file", "a_boot"])
        .select("host", "file", "_boot", "a_file", _start="_start")
    )  # fmt: skip
    # Wall-clock-only files (dmesg -T): pair each message printed once in both.
    wall = ev.filter(pl.col("ts").is_not_null() & pl.col("uptime_s").is_null())
    once = pl.len().over("host", "file", "_boot", "_key") == 1
    by_message = (
        raw.filter(once).select("host", "file", "_boot", "_key", "_us")
        .join(wall.filter(pl.len().over("host", "file", "_key") == 1)
              .select("host", "_key", a_file="file", a_us=pl.col("ts").dt.epoch("us")), on=["host", "_key"])  # fmt: skip
        .select("host", "file", "_boot", "a_file", _start=(pl.col("a_us") - pl.col("_us")).cast(pl.Float64))
    )
    candidates = pl.concat([exact.with_columns(pl.col("_start").cast(pl.Float64)), by_message])
    if candidates.height == 0:
        return events
    starts = (
        candidates.join(raw_boots, on=["host", "file", "_boot"])
        .group_by("host", "file", "_boot")
        .agg(_start=pl.col("_start").median(), _by=pl.col("a_file").mode().sort().first())
    )
    out = ev.join(starts, on=["host", "file", "_boot"], how="left", maintain_order="left")
    out = out.with_columns(_hit=pl.col("ts").is_null() & pl.col("uptime_s").is_not_null() & pl.col("_start").is_not_null())
    hit = pl.col("_hit")
    aligned = pl.from_epoch((pl.col("_start") + pl.col("_us")).round().cast(pl.Int64), time_unit="us").dt.replace_time_zone("UTC")
    out = out.with_columns(ts=pl.when(hit).then(aligned).otherwise(pl.col("ts")))
    out = out.with_columns(detail=set_detail("ts_from", pl.lit("aligned"), when=hit)).with_columns(
        detail=set_detail("aligned_by", pl.col("_by"), when=hit)
    )
    return out.drop("_row", "_boot", "_key", "_us", "_start", "_by", "_hit")


#: How far apart the timed copies of one line (one per file) may lie and still be one moment.
TWIN_SPREAD_S = 2
TWIN_SPREAD = pl.duration(seconds=TWIN_SPREAD_S)


def twin_times(events: pl.DataFrame) -> pl.DataFrame:
    """A row still without a time takes the time of its twin: the same message, printed once on the
    same host in another file that has the time (``dmesg --reltime`` next to kern.log, a trimmed
    excerpt next to the journal). ``ts_from`` says ``twin`` and ``aligned_by`` names the file.

    Only unambiguous pairs: the message occurs once among the untimed rows of its file, and among the
    host's timed rows once, or in several files at one moment (dmesg beside kern.log: the same line
    twice, within ``TWIN_SPREAD_S``); it takes the earliest."""
    if events.height == 0 or events["ts"].null_count() in (0, events.height):
        return events
    key = pl.col("message").str.slice(0, 300)
    ev = events.with_columns(_key=key)
    untimed = ev.filter(pl.col("ts").is_null() & pl.col("host").is_not_null() & (pl.col("source") == "kernel"))
    untimed = untimed.filter(pl.len().over("host", "file", "_key") == 1).select("host", "file", "line", "_key")
    timed = ev.filter(pl.col("ts").is_not_null() & (pl.col("source").is_in(["kernel", "journal"])))
    timed = (
        timed.sort("ts", "file", "line")
        .group_by("host", "_key", maintain_order=True)
        .agg(_ts=pl.col("ts").first(), _by=pl.col("file").first(), _n=pl.len(), _files=pl.col("file").n_unique(),
             _spread=pl.col("ts").last() - pl.col("ts").first())
        .filter((pl.col("_n") == 1) | ((pl.col("_n") == pl.col("_files")) & (pl.col("_spread") <= TWIN_SPREAD)))
        .select("host", "_key", "_ts", "_by")
    )  # fmt: skip
    pairs = untimed.join(timed, on=["host", "_key"]).filter(pl.col("file") != pl.col("_by")).drop("_key")
    if pairs.height == 0:
        return events
    out = events.join(pairs, on=["host", "file", "line"], how="left", maintain_order="left")
    hit = pl.col("ts").is_null() & pl.col("_ts").is_not_null()
    out = out.with_columns(detail=set_detail("ts_from", pl.lit("twin"), when=hit)).with_columns(
        detail=set_detail("aligned_by", pl.col("_by"), when=hit), ts=pl.coalesce("ts", "_ts"))
    return out.drop("_ts", "_by")


def report_date(text: str | None) -> datetime | None:
    """The bug report's ``Date:`` (``date`` output: ``Sat Jan 25 10:40:01 UTC 2025``) in UTC, if readable."""
    if not text:
        return None
    m = re.search(r"(\w{3}) +(\d{1,2}) (\d\d:\d\d:\d\d) (?:(\w+) )?(\d{4})", text)
    if not m:
        return None
    try:
        naive = datetime.strptime(f"{m[1]} {m[2]} {m[3]} {m[5]}", "%b %d %H:%M:%S %Y")
    except ValueError:
        return None
    return naive.replace(tzinfo=UTC)


# --- identities --------------------------------------------------------------------------------------


def information_facts(text: str) -> dict[str, Any]:
    """A bug report's ``/proc/driver/nvidia/gpus/<bdf>/information`` section as identity fields.

    >>> information_facts("Model: \\t\\t NVIDIA H100 80GB HBM3\\nGPU UUID: \\t GPU-1d2c\\nBus Location: \\t 0000:3b:00.0\\nDevice Minor: \\t 2\\n")
    {'product': 'NVIDIA H100 80GB HBM3', 'uuid': 'GPU-1d2c', 'gpu': '0000:3b:00.0', 'minor': 2}
    """
    fields = dict(re.findall(r"^([A-Za-z][A-Za-z ]*?):\s*(.*?)\s*$", text, re.M))
    out: dict[str, Any] = {}
    if fields.get("Model"):
        out["product"] = fields["Model"]
    if (uuid := fields.get("GPU UUID")) and uuid.startswith("GPU-"):
        out["uuid"] = uuid
    if gpu := canonical_bdf(fields.get("Bus Location", "")):
        out["gpu"] = gpu
    if (minor := fields.get("Device Minor", "")).isdigit():
        out["minor"] = int(minor)
    return out


def identities(incident: str, events: pl.DataFrame, gpus: pl.DataFrame, facts: list[dict[str, Any]]) -> pl.DataFrame:
    """One row per (host, GPU): every spelling and number the incident gives for it."""
    parts = []
    if gpus.height:
        parts.append(gpus.select("host", "gpu", "uuid", "serial", pl.col("minor").cast(pl.Int32), "product",
                                 rank=pl.lit(None, pl.Int32), learnt_from=pl.lit("nvidia-smi")))  # fmt: skip
    driver = events.filter(pl.col("kind") == "gpu.driver")
    if driver.height:
        nvrm = driver.select("host", "gpu", "file", "line", uuid=_detail("uuid"), serial=_detail("serial"),
                             minor=_detail("minor").cast(pl.Int32, strict=False), product=pl.lit(None, pl.String),
                             rank=pl.lit(None, pl.Int32), learnt_from=pl.lit("NVRM")).filter(
            pl.col("uuid").is_not_null() | pl.col("serial").is_not_null() | pl.col("minor").is_not_null())  # fmt: skip
        # "NVRM: GPU Board Serial Number: …" names no bus: it is the GPU of the identity line just above.
        above = pl.col("line").shift(1).over("file", order_by="line") == pl.col("line") - 1
        nvrm = nvrm.with_columns(
            gpu=pl.when(pl.col("gpu").is_null() & above).then(pl.col("gpu").shift(1).over("file", order_by="line"))
            .otherwise(pl.col("gpu"))
        )  # fmt: skip
        parts.append(nvrm.drop("file", "line"))
    nccl = events.filter((pl.col("kind") == "nccl.init") & pl.col("gpu").is_not_null())
    if nccl.height:
        parts.append(nccl.select("host", "gpu", uuid=pl.lit(None, pl.String), serial=pl.lit(None, pl.String),
                                 minor=pl.lit(None, pl.Int32), product=_detail("product"), rank=pl.col("rank"),
                                 learnt_from=pl.lit("NCCL")))  # fmt: skip
    if facts:
        parts.append(pl.DataFrame(facts, schema={"host": pl.String, "gpu": pl.String, "uuid": pl.String,
                                                 "serial": pl.String, "minor": pl.Int32, "product": pl.String},
                                  strict=False).with_columns(rank=pl.lit(None, pl.Int32),
                                                             learnt_from=pl.lit("bug report")))  # fmt: skip
    if not parts:
        return pl.DataFrame(schema=IDENTITY_COLUMNS)
    rows = pl.concat(parts, how="vertical_relaxed")
    # A UUID or serial seen without a bus id joins the row that has both (when only one has it).
    for key in ("uuid", "serial"):
        known = (
            rows.filter(pl.col("gpu").is_not_null() & pl.col(key).is_not_null())
            .group_by("host", key).agg(_gpu=pl.col("gpu").unique())
            .filter(pl.col("_gpu").list.len() == 1).with_columns(pl.col("_gpu").list.first())
        )  # fmt: skip
        rows = rows.join(known, on=["host", key], how="left", nulls_equal=False).with_columns(
            gpu=pl.coalesce("gpu", "_gpu")).drop("_gpu")  # fmt: skip
    first = [pl.col(c).drop_nulls().first().alias(c) for c in ("uuid", "serial", "minor", "product")]
    return (
        rows.group_by("host", "gpu")
        .agg(*first, ranks=pl.col("rank").drop_nulls().unique().sort(),
             learnt_from=pl.col("learnt_from").unique().sort())  # fmt: skip
        .with_columns(incident=pl.lit(incident))
        .select(list(IDENTITY_COLUMNS))
        .cast(IDENTITY_COLUMNS)  # type: ignore[arg-type]
        .sort("host", "gpu", nulls_last=True)
    )


def fill_identities(events: pl.DataFrame, ids: pl.DataFrame) -> pl.DataFrame:
    """Fill ``gpu`` from the rank and ``rank`` from the GPU (or the pid) where one alone fits."""
    if events.height == 0:
        return events
    pairs = ids.filter(pl.col("gpu").is_not_null()).explode("ranks").filter(pl.col("ranks").is_not_null())
    rank_gpu = pairs.group_by("host", "ranks").agg(_gpu=pl.col("gpu").unique()).filter(pl.col("_gpu").list.len() == 1)
    gpu_rank = pairs.group_by("host", "gpu").agg(_rank=pl.col("ranks").unique()).filter(pl.col("_rank").list.len() == 1)
    pid_rank = (
        events.filter(pl.col("pid").is_not_null() & pl.col("rank").is_not_null())
        .group_by("host", "pid").agg(_prank=pl.col("rank").unique())
        .filter(pl.col("_prank").list.len() == 1)
    )  # fmt: skip
    out = (
        events.with_row_index("_row")
        .join(pid_rank.with_columns(pl.col("_prank").list.first()), on=["host", "pid"], how="left", maintain_order="left")
        .with_columns(rank=pl.coalesce("rank", "_prank"))
        .join(rank_gpu.with_columns(pl.col("_gpu").list.first()).rename({"ranks": "rank"}), on=["host", "rank"],
              how="left", maintain_order="left")  # fmt: skip
        .with_columns(gpu=pl.coalesce("gpu", "_gpu"))
        .join(gpu_rank.with_columns(pl.col("_rank").list.first()), on=["host", "gpu"], how="left", maintain_order="left")
        .with_columns(rank=pl.coalesce("rank", "_rank"))
    )
    return out.drop("_row", "_prank", "_gpu", "_rank")


# --- samples -----------------------------------------------------------------------------------------


def align_samples(samples: pl.DataFrame, ids: pl.DataFrame, *, timezone: str | None,
                  local_sources: frozenset[str], index_sources: frozenset[str]) -> pl.DataFrame:  # fmt: skip
    """The ``samples`` rows on the incident's time line and GPUs.

    Stamps of the sources in ``local_sources`` (the machine's wall clock, read as UTC by the parser) are
    re-read in ``timezone``. A row with no ``gpu`` gets the canonical bus id its ``device`` names: a UUID
    (``GPU-…``) through the identities, a bare number (``0``) of a source in ``index_sources`` as
    nvidia-smi's index — the position in bus order among the host's GPUs, used only when a full list of
    them is known (an ``nvidia-smi -q`` dump or a bug report's ``information`` sections).
    """
    if samples.height == 0:
        return samples
    out = samples
    if timezone:
        out = out.with_columns(ts=pl.when(pl.col("source").is_in(list(local_sources))).then(_in_zone(timezone))
                               .otherwise(pl.col("ts")))  # fmt: skip
    known = ids.filter(pl.col("gpu").is_not_null())
    by_uuid = known.filter(pl.col("uuid").is_not_null()).select("host", device="uuid", _uuid_gpu="gpu").unique(
        ["host", "device"], keep="none")  # fmt: skip
    full = known.filter(pl.col("learnt_from").list.set_intersection(["nvidia-smi", "bug report"]).list.len() > 0)
    by_index = (
        known.filter(pl.col("host").is_in(full.get_column("host").unique().implode()))
        .sort("host", "gpu").select("host", "gpu")
        .with_columns(device=pl.int_range(pl.len()).over("host").cast(pl.String))
        .rename({"gpu": "_index_gpu"})
    )  # fmt: skip
    indexed = pl.col("source").is_in(list(index_sources)) & pl.col("device").str.contains(r"^\d+$")
    return (
        out.with_row_index("_row")
        .join(by_uuid, on=["host", "device"], how="left", maintain_order="left")
        .join(by_index, on=["host", "device"], how="left", maintain_order="left")
        .with_columns(gpu=pl.coalesce(
            pl.col("gpu").map_elements(canonical_bdf, return_dtype=pl.String, skip_nulls=True),
            "_uuid_gpu", pl.when(indexed).then(pl.col("_index_gpu"))))  # fmt: skip
        .sort("_row").drop("_row", "_uuid_gpu", "_index_gpu")
    )


def series_gpus(events: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame:
    """Events that sit on a sample row (those derived from a GPU's series) and name no GPU get the one ingest
    gave that row (:func:`align_samples`): a row of a series is one GPU's reading."""
    if events.height == 0 or samples.height == 0:
        return events
    rows = (
        samples.filter(pl.col("gpu").is_not_null()).group_by("file", "line").agg(_series_gpu=pl.col("gpu").unique())
        .filter(pl.col("_series_gpu").list.len() == 1).with_columns(pl.col("_series_gpu").list.first())
    )  # fmt: skip
    if rows.height == 0:
        return events
    return (events.join(rows, on=["file", "line"], how="left", maintain_order="left")
            .with_columns(gpu=pl.coalesce("gpu", "_series_gpu")).drop("_series_gpu"))  # fmt: skip
