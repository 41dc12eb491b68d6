"""The envelope of a log line: its stamp, host, facility/level, syslog identifier, and the message after it.

One anchored regex, with a named group per printed form, reads the prefix of every line at once in
Polars (Rust). Only the prefix is captured, so the work per line is a few dozen bytes however long the
message is. Forms (PROVENANCE.md "Format variants seen", FACTS.md §C3):

=====================  ==========================================================================
form                   example
=====================  ==========================================================================
``mono``               ``[ 1843.308145] msg``; ``-r``: ``<6>[ 1.5] msg``; caller id ``[  T291]``
``rel``                ``[  +0.000844] msg`` (``dmesg --reltime``/``-d`` deltas; ``[Sep19 16:18]``)
``ctime``              ``[Mon Oct  3 13:52:42 2022] msg`` (``dmesg -T``/``--ctime``, local time)
``iso``                ``2025-01-21T04:41:44,283302+00:00 msg``, with ``-x`` ``kern  :warn  : ``
``syslog``             ``Sep 19 16:18:02 bubz kernel: [68183.6] msg`` (any month locale, host optional)
``syslog_iso``         ``2025-01-02T15:20:12+0800 host kernel: msg`` (journal short-iso, rsyslog)
``journal_mono``       ``[    1.241863] archlinux kernel: msg`` (journalctl -o short-monotonic)
``kmsg``               ``6,1234,5678901234,-;msg`` (/dev/kmsg records; `` KEY=value`` continuations)
``rfc5424``            ``<14>1 2024-01-02T03:04:05Z host kernel - - - msg``
``talos``              ``10.0.0.7: kern: warning: [2026-04-22T21:27:51.29087688Z]: msg``
``none``               ``kernel: NVRM: …`` or bare ``NVRM: …``
=====================  ==========================================================================
"""

from __future__ import annotations

import re
import tomllib
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import polars as pl

from ..regex import ascii_classes, for_python
from ..text import key_lines, small_key
from .base import collect

_FACILITY = r"kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7]"
_LEVEL = r"emerg|alert|crit|err|warn|warning|notice|info|debug"
_MONTH = r"(?:[^\W\d_]{3,5}\.?|\d{1,2}[月월])"

#: The stamp alternatives (in the order the envelope tries them), and what may follow a stamp.
_STAMP = (
    r"(?:\[ *(?P<mono>\d+\.\d+)(?: <\s*(?P<delta>\d+\.\d+)>)?\]"
    # a paste that lost the first line's "[": "  123.456789] NVRM: ..." (dmesg's six decimals)
    r"|(?P<monocut> *\d+\.\d{6})\]"
    r"|\[ *\+(?P<rel>\d+\.\d+)\]"
    r"|\[(?P<human>[A-Z][a-z]{2} ?\d{1,2} \d\d:\d\d)\]"
    r"|\[(?P<ctime>\S+ +\S+ +\d{1,2} \d\d:\d\d:\d\d \d{4})\]"
    r"|(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r"|(?P<full>[A-Z][a-z]{2} (?P<fdate>\d{4}-\d\d-\d\d) (?P<ftime>\d\d:\d\d:\d\d(?:\.\d+)?) (?P<fzone>[A-Za-z]{1,6}|[+-]\d\d(?::?\d\d)?))"
    r"|(?P<unix>\d{9,11}\.\d{1,9})"
    rf"|(?P<sys>{_MONTH} +\d{{1,2}} \d\d:\d\d:\d\d(?:\.\d+)?))"
)
_AFTER_STAMP = (
    r"(?:\[ *(?P<caller>[TC]\d+)\])?"
    r" ?"
    # "Feb 23 03:28:16 kernel: [68183.615790] msg": a syslog line without a host keeps the uptime too.
    r"(?:(?P<kpfx>kernel(?:\[\d+\])?: )(?:\[ *(?P<kpup>\d+\.\d+)\] ?)?)?"
)

ENVELOPE = ascii_classes(
    r"^(?P<env>"
    r"<(?P<p5>\d{1,3})>1 (?P<ts5>\S+) (?P<h5>\S+) (?P<a5>\S+) (?P<pid5>\S+) \S+ (?:-|(?:\[[^\]]*\])+) ?"
    r"|(?P<kpri>\d{1,3}),(?P<kseq>\d+),(?P<kus>\d+),[^;]*;"
    r"|(?:<(?P<pri>\d{1,3})>)?"
    rf"(?:(?P<tip>[\w.:-]+): (?P<tfac>{_FACILITY}): +(?P<tlvl>\w+): \[(?P<tts>\d{{4}}-[^\]]+)\]:)?"
    rf"(?:(?P<xfac>{_FACILITY}) *:(?P<xlvl>{_LEVEL}) *: )?"
    + _STAMP + "?" + _AFTER_STAMP + r")"
)

#: Lines that open with a stamp or a ``[``: no RFC 5424, /dev/kmsg, priority, Talos or ``-x`` prefix can
#: match them (those need ``<``, ``N,N,``, ``word: `` or ``word :`` first), so the envelope reads them with
#: :data:`_STAMPED` — the same groups after those prefixes, and the same result — which the regex
#: engine runs several times faster than the whole alternation. (``dmesg``, ``-T``, kern.log,
#: journalctl short*: nearly every line of a kernel log.)
_STAMP_OPENING = ascii_classes(r"^(?:\[|" + _STAMP + ")")
_STAMPED = ascii_classes(r"^(?P<env>" + _STAMP + "?" + _AFTER_STAMP + r")")
#: The groups of the prefixes :data:`_STAMPED` leaves out (null on the lines it reads).
_PREFIX_GROUPS = tuple(sorted(re.compile(for_python(ENVELOPE)).groupindex.keys() - re.compile(for_python(_STAMPED)).groupindex.keys()))

#: After a syslog-style stamp: ``[host] ident[pid]: [uptime] [caller]``.
#: A line whose time and host were cut off still names its program: "nv-fabricmanager[3228]: …".
BARE_IDENT = r"^\s*(?P<i>[\w@.()/+-]*[\w)])\[(?P<p>\d+)\]: (?P<m>.*)$"
SYSLOG_HEAD = ascii_classes(
    r"^(?P<head> *(?:(?P<host>[^\s:\[\]]+) +)?(?P<ident>[^\s:\[\]]+)(?:\[(?P<ipid>\d+)\])?: "
    r"(?:\[ *(?P<kup>\d+\.\d+)\] ?)?(?:\[ *(?P<kcaller>[TC]\d+)\] ?)?)"
)

#: Lines per slice of the envelope pass.
SLICE_LINES = 200_000

#: The groups of :data:`ENVELOPE` that hold a stamp (a line with one of them is ``stamped``).
STAMP_GROUPS = _STAMP_GROUPS = ["ts5", "kus", "tts", "mono", "monocut", "rel", "human", "ctime", "iso", "sys", "full", "unix"]

_LEVEL_NAMES = {
    "emerg": "critical", "alert": "critical", "crit": "critical", "err": "error", "error": "error",
    "warn": "warning", "warning": "warning", "notice": "notice", "info": "info", "debug": "debug",
}  # fmt: skip
_PRIORITY = ["critical", "critical", "critical", "error", "warning", "notice", "info", "debug"]


@cache
def month_numbers() -> dict[str, int]:
    """Lower-cased, dot-less month abbreviations of every locale in ``data/months.toml`` → 1..12."""
    table = tomllib.loads(resources.files("forensics.data").joinpath("months.toml").read_text("utf-8"))
    out: dict[str, int] = {}
    for names in table.values():
        for number, name in enumerate(names, start=1):
            if out.setdefault(name, number) != number:
                raise ValueError(f"months.toml: {name!r} means two different months")
    return out


@cache
def _envelope_columns() -> dict[str, pl.Expr]:
    """The expressions that reduce the regex groups to the envelope columns (built once: building them
    costs more than running them on a small file)."""
    iso_sys = pl.col("iso").is_not_null() & ~pl.col("iso").str.contains(",", literal=True)
    level_from_pri = pl.coalesce("p5", "pri", "kpri").cast(pl.Int32, strict=False)
    form = (
        pl.when(pl.col("p5").is_not_null()).then(pl.lit("rfc5424"))
        .when(pl.col("kpri").is_not_null()).then(pl.lit("kmsg"))
        .when(pl.col("tts").is_not_null()).then(pl.lit("talos"))
        .when(pl.col("sys").is_not_null()).then(pl.lit("syslog"))
        .when(iso_sys).then(pl.lit("syslog_iso"))
        .when(pl.col("full").is_not_null()).then(pl.lit("syslog_full"))
        .when(pl.col("unix").is_not_null()).then(pl.lit("syslog_unix"))
        .when(pl.col("iso").is_not_null()).then(pl.lit("iso"))
        .when(pl.col("ctime").is_not_null()).then(pl.lit("ctime"))
        .when(pl.col("mono").is_not_null() | pl.col("monocut").is_not_null()).then(pl.lit("mono"))
        .when(pl.col("rel").is_not_null() | pl.col("human").is_not_null()).then(pl.lit("rel"))
        .otherwise(pl.lit("none"))
    )  # fmt: skip
    # journalctl -o short-full: "Wed 2015-12-02 22:53:58 IST"; a zone name other than UTC is local time.
    zone = pl.col("fzone")
    full_iso = pl.concat_str(
        pl.col("fdate"), pl.lit("T"), pl.col("ftime"),
        pl.when(zone.is_in(["UTC", "GMT", "Z"])).then(pl.lit("+0000"))
        .when(zone.str.contains(r"^[+-]")).then(zone.str.replace(":", "", literal=True).str.pad_end(5, "0"))
        .otherwise(pl.lit("")),
    )  # fmt: skip
    stamp_kind = (
        pl.when(pl.coalesce("ts5", "tts", "iso", "full").is_not_null()).then(pl.lit("iso"))
        .when(pl.col("unix").is_not_null()).then(pl.lit("unix"))
        .when(pl.col("ctime").is_not_null()).then(pl.lit("ctime"))
        .when(pl.col("sys").is_not_null()).then(pl.lit("syslog"))
        .when(pl.col("human").is_not_null()).then(pl.lit("human"))
    )  # fmt: skip
    return dict(
        form=form,
        level=pl.coalesce(
            pl.coalesce("xlvl", "tlvl").str.to_lowercase().replace_strict(_LEVEL_NAMES, default=None),
            (level_from_pri % 8).replace_strict(dict(enumerate(_PRIORITY)), default=None, return_dtype=pl.String),
        ),
        host=pl.coalesce("h5", "tip"),
        ident=pl.coalesce(pl.col("a5").replace("-", None), pl.when(pl.col("kpfx").is_not_null()).then(pl.lit("kernel"))),
        ipid=pl.col("pid5").cast(pl.Int64, strict=False),
        uptime_s=pl.coalesce(pl.coalesce("mono", "monocut").str.strip_chars(" ").cast(pl.Float64, strict=False), pl.col("kus").cast(pl.Float64, strict=False) / 1e6,
                             pl.col("kpup").cast(pl.Float64, strict=False)),
        delta_s=pl.coalesce("rel", "delta").cast(pl.Float64, strict=False),
        stamp=pl.coalesce("ts5", "tts", "iso", full_iso, "unix", "ctime", "sys", "human"),
        stamp_kind=stamp_kind,
        caller=pl.col("caller"),
        stamped=pl.any_horizontal(pl.col(_STAMP_GROUPS).is_not_null()),
        kernel_prefix=pl.col("kpfx").is_not_null(),
        # The "[host] ident[pid]:" head follows syslog-style stamps only.
        syslogish=(pl.col("sys").is_not_null() | iso_sys | pl.col("full").is_not_null() | pl.col("unix").is_not_null())
        & pl.col("kpfx").is_null() & pl.col("p5").is_null(),
        msg=pl.col("raw").str.slice(pl.col("env").str.len_chars()),
    )


def _envelope_frame(raw: pl.Series) -> pl.DataFrame:
    """The envelope columns of some lines (no syslog head yet)."""
    # One pass reduces the regex groups to the final columns, a morsel at a time, so the
    # dozens of mostly-null group columns never exist for the whole file at once.
    def groups_of(rows: pl.Series, regex: str) -> pl.LazyFrame:  # the regex groups of some lines, numbered
        return pl.LazyFrame({"raw": raw.filter(rows), "n": rows.arg_true()}).with_columns(
            e=pl.col("raw").str.extract_groups(regex)).unnest("e")  # fmt: skip

    opening = raw.str.contains(_STAMP_OPENING)
    parts = []
    if opening.any():
        parts.append(groups_of(opening, _STAMPED).with_columns(pl.lit(None, pl.String).alias(g) for g in _PREFIX_GROUPS))
    if not parts or not opening.all():
        parts.append(groups_of(~opening, ENVELOPE))
    groups = parts[0] if len(parts) == 1 else parts[0].merge_sorted(parts[1].select(parts[0].collect_schema().names()), key="n")
    return groups.select(**_envelope_columns()).pipe(collect, raw.len())


#: Up to this many lines, :func:`split` remembers its last results: a small file's sniff (its head) and
#: its parse split the same lines.
REMEMBER_LINES = 200


def split(lines: pl.Series, *, journal_mono: bool | None = None) -> pl.DataFrame:
    """Split every line into envelope columns and ``msg``.

    Columns: ``form``, ``level`` (normalized severity or null), ``host``, ``ident``, ``ipid``,
    ``uptime_s``, ``delta_s``, ``stamp`` (the printed wall-clock stamp), ``stamp_kind``
    (``iso``/``ctime``/``syslog``/``human``), ``caller``, ``stamped`` (the line had a stamp),
    ``kernel_prefix``, ``msg``. ``journal_mono`` decides whether ``[ 1.2] word ident: …`` lines carry a
    host (journalctl short-monotonic) rather than being plain dmesg; ``None`` decides from the lines.
    """
    key = small_key(lines, REMEMBER_LINES)
    return _split_small(key, journal_mono) if key else _split(lines, journal_mono=journal_mono)


@lru_cache(maxsize=4)
def _split_small(key: tuple[str, int], journal_mono: bool | None) -> pl.DataFrame:
    return _split(key_lines(key), journal_mono=journal_mono)


def _split(lines: pl.Series, *, journal_mono: bool | None) -> pl.DataFrame:
    # Slices of lines bound the memory the dozens of mostly-null regex groups take.
    df = pl.concat(
        [_envelope_frame(lines.slice(start, SLICE_LINES)) for start in range(0, max(len(lines), 1), SLICE_LINES)],
        rechunk=False,
    )
    if journal_mono is None:
        journal_mono = _looks_journal_mono(df)
    sysish = pl.col("syslogish")
    if journal_mono:
        sysish = sysish | ((pl.col("form") == "mono") & ~pl.col("kernel_prefix"))
    rows = df.select(sysish.arg_true()).to_series()
    if rows.len():
        heads = df.get_column("msg").gather(rows).to_frame().select(h=pl.col("msg").str.extract_groups(SYSLOG_HEAD)).unnest("h")
        n = df.height
        host = scatter(heads.get_column("host"), rows, n)
        ident = scatter(heads.get_column("ident"), rows, n)
        df = df.with_columns(
            host=pl.coalesce(pl.col("host"), host),
            ident=pl.coalesce(pl.col("ident"), ident),
            ipid=pl.coalesce(pl.col("ipid"), scatter(heads.get_column("ipid"), rows, n).cast(pl.Int64, strict=False)),
            uptime_s=pl.coalesce(scatter(heads.get_column("kup"), rows, n).cast(pl.Float64, strict=False), pl.col("uptime_s")),
            caller=pl.coalesce(scatter(heads.get_column("kcaller"), rows, n), pl.col("caller")),
            msg=pl.col("msg").str.slice(scatter(heads.get_column("head"), rows, n).str.len_chars().fill_null(0)),
        )
        df = df.with_columns(
            form=pl.when((pl.col("form") == "mono") & pl.col("ident").is_not_null())
            .then(pl.lit("journal_mono")).otherwise(pl.col("form"))
        )
    return df.drop("syslogish")


@lru_cache(maxsize=2)
@lru_cache(maxsize=2)
def head_split(head: str, lines: int = 200) -> pl.DataFrame:
    """:func:`split` of the first ``lines`` lines of ``head``, for sniffing (the kernel and journal
    sniffers look at the same head, so the split is made once: kept for the last heads asked; callers
    read the frame, never change it)."""
    return split(pl.Series(head.splitlines()[:lines], dtype=pl.String))


#: Up to this many rows :func:`scatter` places the values in Python (a tenth of the time of Polars' three
#: calls on a small file's columns).
SCATTER_IN_PYTHON = 4096


def scatter(values: pl.Series, rows: pl.Series, length: int) -> pl.Series:
    """A column of ``length`` nulls with ``values`` placed at ``rows``."""
    if length <= SCATTER_IN_PYTHON and not values.dtype.is_nested():
        column: list[Any] = [None] * length
        for row, value in zip(rows.to_list(), values.to_list(), strict=True):
            column[row] = value
        return pl.Series(values.name, column, dtype=values.dtype)
    out = pl.Series(values.name, [None], dtype=values.dtype).extend_constant(None, length - 1) if length else values.clear()
    if rows.len():
        out.scatter(rows, values)
    return out


def _looks_journal_mono(df: pl.DataFrame) -> bool:
    """True when most ``[ 1.2] …`` lines read ``host ident[pid]: …`` (journalctl short-monotonic)."""
    sample = df.filter(pl.col("form") == "mono").head(2000).get_column("msg")
    if sample.is_empty():
        return False
    hits = sample.str.contains(r"^[^\s:\[\]]+ (?:kernel|[\w.@-]+\[\d+\]|systemd(?:-\w+)?): ").sum()
    return hits * 2 > sample.len()


def to_utc_in(frame: pl.DataFrame, stamp: str, kind: pl.Expr, *, year: int | None, timezone: str | None,
              month_before: int | None = None) -> tuple[pl.Expr, pl.Expr]:  # fmt: skip
    """:func:`to_utc` of ``frame``'s column ``stamp``; plain nulls when the column holds no stamp (the
    expressions that read a stamp cost a small file milliseconds: most job output has none)."""
    if frame.get_column(stamp).null_count() == frame.height:
        return pl.lit(None, pl.Datetime("us", "UTC")), pl.lit(None, pl.String)
    # (computed here, in stages: each part of the stamp is read once, where the expressions of
    # :func:`to_utc` in one plan read the regex groups and the local time again for every use, ~20 ms
    # for a few rows)
    done = _to_utc_staged(frame.lazy(), pl.col(stamp), kind, year=year, timezone=timezone,
                          month_before=month_before).select("ts", "how").collect()  # fmt: skip
    return pl.lit(done.get_column("ts")), pl.lit(done.get_column("how"))


def with_utc(frame: pl.DataFrame, stamp: str, kind: pl.Expr, *, year: int | None, timezone: str | None,
             month_before: int | None = None, names: tuple[str, str] = ("ts", "ts_from")) -> pl.LazyFrame:  # fmt: skip
    """``frame`` with the two columns of :func:`to_utc_in` named ``names``, as a plan (the caller's next
    steps join it: one query for the whole)."""
    if frame.get_column(stamp).null_count() == frame.height:
        return frame.lazy().with_columns(pl.lit(None, pl.Datetime("us", "UTC")).alias(names[0]),
                                         pl.lit(None, pl.String).alias(names[1]))  # fmt: skip
    return _to_utc_staged(frame.lazy(), pl.col(stamp), kind, year=year, timezone=timezone, month_before=month_before,
                          names=names)  # fmt: skip


_STAGES = ("_s", "_k", "_iso", "_p", "_zoned", "_iso_local", "_month", "_year", "_wall", "_local")


def _to_utc_staged(frame: pl.LazyFrame, stamp: pl.Expr, kind: pl.Expr, *, year: int | None, timezone: str | None,
                   month_before: int | None, names: tuple[str, str] = ("ts", "how")) -> pl.LazyFrame:  # fmt: skip
    """``frame`` with :func:`to_utc`'s two columns (named ``names``), computed in stages."""
    tz = timezone or "UTC"
    s, k = pl.col("_s"), pl.col("_k")
    frame = frame.with_columns(_s=stamp, _k=kind).with_columns(
        _iso=s.str.replace(",", ".", literal=True).str.replace(r"Z$", "+0000").str.replace(r"([+-]\d\d):(\d\d)$", "$1$2"),
        _p=s.str.extract_groups(_WALL),
    )
    iso, parts = pl.col("_iso"), pl.col("_p")
    frame = frame.with_columns(
        _zoned=iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_unit="us"),
        _iso_local=iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us"),
        _month=parts.struct.field("mon").str.to_lowercase().str.strip_suffix(".")
        .replace_strict(month_numbers(), default=None, return_dtype=pl.Int32),
        _year=parts.struct.field("year").cast(pl.Int32, strict=False),
    )  # fmt: skip
    month, printed_year = pl.col("_month"), pl.col("_year")
    guessed_year = _guessed_year(month, printed_year, year=year, month_before=month_before)
    frame = frame.with_columns(_wall=pl.concat_str(
        pl.coalesce(printed_year, guessed_year).cast(pl.String), pl.lit("-"), month.cast(pl.String).str.zfill(2),
        pl.lit("-"), parts.struct.field("day").str.zfill(2), pl.lit(" "), parts.struct.field("hms"),
    ))  # fmt: skip
    wall = pl.col("_wall")
    frame = frame.with_columns(_wall=pl.coalesce(
        wall.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us"),
        wall.str.to_datetime("%Y-%m-%d %H:%M", strict=False, time_unit="us"),
    ))  # fmt: skip
    frame = frame.with_columns(_local=(
        pl.when(k == "iso").then(pl.col("_iso_local")).otherwise(pl.col("_wall"))
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    ))  # fmt: skip
    epoch = pl.from_epoch((s.cast(pl.Float64, strict=False) * 1e6).round().cast(pl.Int64, strict=False), time_unit="us")
    ts = pl.col(names[0])
    frame = frame.with_columns((
        pl.when(k == "iso").then(pl.coalesce("_zoned", "_local"))
        .when(k == "unix").then(epoch.dt.replace_time_zone("UTC"))
        .otherwise(pl.col("_local"))
    ).alias(names[0]))  # fmt: skip
    return frame.with_columns((
        pl.when(ts.is_null()).then(pl.lit(None, pl.String))
        .when((k == "iso") & pl.col("_zoned").is_not_null()).then(pl.lit("printed"))
        .when(k == "unix").then(pl.lit("printed"))
        .otherwise(pl.lit("local" if timezone else "assumed"))
    ).alias(names[1])).drop(*_STAGES)  # fmt: skip


def yearless_months(stamps: pl.Series) -> pl.Series:
    """The month of each year-less stamp (syslog's ``Jan  2 03:04:05``), null for other stamps."""
    parts = stamps.str.extract_groups(_WALL)
    month = (
        parts.struct.field("mon").str.to_lowercase().str.strip_suffix(".")
        .replace_strict(month_numbers(), default=None, return_dtype=pl.Int32)
    )  # fmt: skip
    return month.set(parts.struct.field("year").is_not_null(), None)  # type: ignore[arg-type]


def year_after(months: pl.Series, *, year: int, month_before: int | None = None) -> tuple[int, int | None]:
    """The year and month of the last of the year-less ``months`` (:func:`yearless_months`) of a log whose
    first is dated in ``year`` (or follows a stamp of ``month_before`` in that year): a New Year is
    crossed where the month goes back by more than six, as :func:`to_utc` reads it.

    >>> year_after(pl.Series([11, 12, 1, 2]), year=2023), year_after(pl.Series([1, None]), year=2023, month_before=12)
    ((2024, 2), (2024, 1))
    """
    seen = [m for m in months.to_list() if m is not None]
    if not seen:
        return year, month_before
    steps = zip([month_before, *seen[:-1]], seen, strict=True)
    return year + sum(1 for a, b in steps if a is not None and b - a < -6), seen[-1]


def after_headers(ts: pl.Expr, delta: pl.Expr) -> pl.Expr:
    """``ts`` with the rows of ``dmesg -H`` dated: a ``[May19 19:57]`` row has a wall-clock time, each
    ``[  +0.000127]`` row after it only the seconds since the row before; its time is the header's plus
    the deltas summed (as precise as the header: the minute). A row with neither ends a run."""
    run = (ts.is_not_null() | delta.is_null()).cast(pl.Int32).cum_sum()
    since = (delta.fill_null(0.0) * 1e6).round().cast(pl.Int64, strict=False).cum_sum().over(run)
    dated = ts.first().over(run) + pl.duration(microseconds=since)
    return pl.when(ts.is_null() & delta.is_not_null()).then(dated).otherwise(ts)


#: A wall-clock stamp with a month's name: ``Jan  2 03:04:05``, ``Tue Jan  2 03:04:05 2024``.
_WALL = (
    r"^(?:[^\s\d]\S* +)?(?P<mon>[^\s\d]\S*?|\d{1,2}[月월]) *(?P<day>\d{1,2}) "
    r"(?P<hms>\d\d:\d\d(?::\d\d(?:\.\d+)?)?)(?: (?P<year>\d{4}))?$"
)


def _guessed_year(month: pl.Expr, printed_year: pl.Expr, *, year: int | None, month_before: int | None) -> pl.Expr:
    """The year of each year-less stamp: ``year``, and one more at each New Year crossed (the month going
    back by more than six); ``month_before``: the month of the year-less stamp before the first."""
    if year is None:
        return pl.lit(None, pl.Int32)
    yearless_month = pl.when(printed_year.is_null()).then(month).forward_fill()
    step = yearless_month.diff()
    if month_before is not None:  # (the first year-less stamp follows the chunk before's last)
        step = step.fill_null(yearless_month - month_before)
    rollover = (step.fill_null(0) < -6).cast(pl.Int32).cum_sum()
    return pl.lit(year, pl.Int32) + rollover


def to_utc(
    stamp: pl.Expr, kind: pl.Expr, *, year: int | None, timezone: str | None, month_before: int | None = None
) -> tuple[pl.Expr, pl.Expr]:
    """Expressions for the absolute time of a printed stamp and how it was obtained.

    ISO stamps with an offset are exact (``printed``). Stamps without a zone (``dmesg -T``, syslog, ISO
    without offset) are wall-clock times of the machine: read in ``timezone`` (``local``), or in UTC when
    none is given (``assumed``). Year-less stamps (syslog, ``dmesg -H``) need ``year``; without it their
    time stays unknown (null), never today's year. A year-less log that crosses New Year is followed
    (the month going back by more than six means the next year); ``month_before``: the month of the
    year-less stamp before the first (a chunk's, in the chunk before), dated in ``year``.
    """
    tz = timezone or "UTC"
    iso = stamp.str.replace(",", ".", literal=True).str.replace(r"Z$", "+0000").str.replace(
        r"([+-]\d\d):(\d\d)$", "$1$2"
    )
    iso_zoned = iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_unit="us")
    iso_local = iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us")
    parts = stamp.str.extract_groups(_WALL)
    months = month_numbers()
    month = (
        parts.struct.field("mon").str.to_lowercase().str.strip_suffix(".")
        .replace_strict(months, default=None, return_dtype=pl.Int32)
    )  # fmt: skip
    printed_year = parts.struct.field("year").cast(pl.Int32, strict=False)
    guessed_year = _guessed_year(month, printed_year, year=year, month_before=month_before)
    wall = pl.concat_str(
        pl.coalesce(printed_year, guessed_year).cast(pl.String),
        pl.lit("-"),
        month.cast(pl.String).str.zfill(2),
        pl.lit("-"),
        parts.struct.field("day").str.zfill(2),
        pl.lit(" "),
        parts.struct.field("hms"),
    )
    wall = pl.coalesce(
        wall.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us"),
        wall.str.to_datetime("%Y-%m-%d %H:%M", strict=False, time_unit="us"),
    )
    local = (
        pl.when(kind == "iso").then(iso_local).otherwise(wall)
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )  # fmt: skip
    epoch = pl.from_epoch((stamp.cast(pl.Float64, strict=False) * 1e6).round().cast(pl.Int64, strict=False), time_unit="us")
    ts = (
        pl.when(kind == "iso").then(pl.coalesce(iso_zoned, local))
        .when(kind == "unix").then(epoch.dt.replace_time_zone("UTC"))
        .otherwise(local)
    )  # fmt: skip
    how = (
        pl.when(ts.is_null()).then(pl.lit(None, pl.String))
        .when((kind == "iso") & iso_zoned.is_not_null()).then(pl.lit("printed"))
        .when(kind == "unix").then(pl.lit("printed"))
        .otherwise(pl.lit("local" if timezone else "assumed"))
    )  # fmt: skip
    return ts, how
