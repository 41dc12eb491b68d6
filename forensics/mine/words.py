"""The words of each cause: the last reading before ``unknown``.

A catalog row reads a program's own message; a rule reads a chain of typed events. An incident from a
program no catalog covers (a board's firmware, a vendor's tool, an in-house trainer) still speaks the
domain's words: "overheated", "No space left on device", "connection refused", "loss: nan". When no rule
matches an incident and no catalog row gives any of its rows a cause, its trouble lines are read with the
vocabulary of ``forensics/data/cause_words.toml``, and the cause whose words weigh most is the answer,
as a match named ``words:<cause>``, scored below every catalog reading (at most :data:`CEILING`).

A row is read when it is a program's trouble (a record at warning or above that no hardware, telemetry or
training kind types: :data:`TYPED`, or an untyped line with trouble words: :data:`forensics.messages.TROUBLE`), or, for the phrases marked ``alone`` (trouble by themselves:
"AutoState(Overheated)"), when it is any untyped line; never when a catalog row already read it (a row
that names no cause says what the line is) or when it states a healthy value ("Not Active", "| ok").
Per row a cause counts once, at its heaviest word × the row's severity factor (:data:`SEVERITY_FACTOR`);
per incident the causes' sums compete.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

import polars as pl

from .. import messages
from ..regex import ascii_classes

#: A reading by words never scores above this: any catalog reading or rule outweighs it.
CEILING = 0.2
#: The factor of a row's severity (``sev``: the index in :data:`forensics.schema.SEVERITIES`).
SEVERITY_FACTOR = {"critical": 1.0, "error": 1.0, "warning": 0.7}
#: The factor of a row below warning (an untyped line read for its trouble words or an ``alone`` phrase).
PLAIN_FACTOR = 0.5
#: An untyped line that states its own level ("ERROR: ...", "[FATAL]", "E1207 ...", a "| ERROR |" column) is an error.
LEVEL = r"^\W{0,3}(?:ERROR|FATAL|CRITICAL|CRIT|EMERG|PANIC)\b|\b(?:ERROR|FATAL|CRITICAL)\b[:\]|]"
#: A cause's words must weigh at least this much in an incident to answer: one phrase that names it on an
#: untyped line (1 × 0.5) or on a warning; a word of its layer (0.4) on one error (a udev probe that "failed"
#: on "sdb") is too little, on two it is enough.
MINIMUM = 0.5
#: Rows kept as a reading's evidence, heaviest and earliest first.
EVIDENCE = 5
#: The kinds an ``alone`` phrase is read on whatever their severity: what no source typed.
UNTYPED = ("other", "unparsed", "py.traceback", "fs.error")
#: Kinds that are trouble whatever their severity: an exception raised, a program aborting.
RAISED = ("py.exception", "py.traceback", "cpp.abort")
#: Kinds never read by words: a hardware, telemetry or training event says what it is, and the rules
#: weigh it (a corrected AER alone is no cause); a kernel's warning is only a warning.
TYPED = r"^(?:bmc|gpu|pcie|net|host|disk|train|env)\."


@dataclass(frozen=True)
class Word:
    """One row of the vocabulary: a pattern, the cause it points at and how strongly."""

    id: str
    cause: str
    pattern: str
    weight: float
    alone: bool
    example: str
    doc: str
    anchors: tuple[str, ...] = ()
    anchor: str = ""

    @property
    def regex(self) -> str:
        return "(?i)" + self.pattern


@dataclass(frozen=True)
class Vocabulary:
    words: tuple[Word, ...]
    healthy: str

    def anchors(self) -> list[str]:
        """The literals of every ``alone`` phrase (lower case)."""
        return sorted({a.lower() for w in self.words if w.alone for a in w.anchors})

    def anchor_patterns(self) -> list[str]:
        return sorted({"(?i)" + w.anchor for w in self.words if w.alone and w.anchor})


@cache
def load() -> Vocabulary:
    """The vocabulary shipped in ``forensics/data/cause_words.toml``."""
    doc = tomllib.loads(resources.files("forensics.data").joinpath("cause_words.toml").read_text("utf-8"))
    words = tuple(
        Word(id=w["id"], cause=w["cause"], pattern=w["pattern"], weight=float(w["weight"]),
             alone=bool(w.get("alone", False)), example=w.get("example", ""), doc=w.get("doc", ""),
             anchors=tuple(w.get("anchors", ())), anchor=w.get("anchor", ""))  # fmt: skip
        for w in doc["word"]
    )
    return Vocabulary(words, doc["healthy"])


def candidates(vocabulary: Vocabulary | None = None) -> pl.Expr:
    """The events an ``alone`` phrase may read beyond those already kept as trouble, found in one
    multi-pattern pass over the messages: untyped lines holding one of its anchors (``kind``, ``message``).
    A superset: :func:`alone` reads them."""
    vocabulary = vocabulary or load()
    message = pl.col("message")
    found = message.str.contains_any(vocabulary.anchors(), ascii_case_insensitive=True)
    for pattern in vocabulary.anchor_patterns():
        found = found | message.str.contains(pattern)
    return (pl.col("kind").is_in(UNTYPED) & found).fill_null(False)


def alone(rows: pl.DataFrame, vocabulary: Vocabulary | None = None) -> pl.Series:
    """Which of ``rows`` (``kind``, ``message``; :func:`candidates`' rows) an ``alone`` phrase reads, as a
    boolean Series: each phrase's pattern runs only on the untyped rows holding one of its own anchors."""
    vocabulary = vocabulary or load()
    rows = rows.select("kind", "message").with_row_index("_n")
    untyped = rows.filter(pl.col("kind").is_in(UNTYPED) & pl.col("message").is_not_null())
    hits = []
    for w in (w for w in vocabulary.words if w.alone):
        found = pl.col("message").str.contains_any([a.lower() for a in w.anchors], ascii_case_insensitive=True)
        if w.anchor:
            found = found | pl.col("message").str.contains("(?i)" + w.anchor)
        sub = untyped.filter(found)
        hits.append(sub.filter(pl.col("message").str.contains(ascii_classes(w.regex))).get_column("_n"))
    read = untyped.filter(pl.col("_n").is_in(pl.concat(hits).implode()))
    read = read.filter(~pl.col("message").str.contains(ascii_classes("(?i)" + vocabulary.healthy))).get_column("_n")
    return rows.get_column("_n").is_in(read.implode())


def readings(p: pl.DataFrame, vocabulary: Vocabulary | None = None, *, catalogued: bool = False) -> pl.DataFrame:
    """Per row of ``p`` (prepared rows: ``incident``, ``row``, ``kind``, ``severity``, ``message``,
    ``catalog``, ``follower``) and cause: the weight its words give (columns ``incident``, ``row``, ``cause``,
    ``weight``, ``word``), for the rows no catalog read (with ``catalogued``, also those a catalog row read
    without naming a cause: a bare exception line) and no follower."""
    vocabulary = vocabulary or load()
    schema = {"incident": pl.String, "row": pl.UInt32, "cause": pl.String, "weight": pl.Float64, "word": pl.String}
    trouble = (pl.col("severity").is_in(list(SEVERITY_FACTOR)) | pl.col("kind").is_in(RAISED)
               | pl.col("message").str.contains(messages.TROUBLE))
    # A row a catalog read names no cause when it only typed it: an exception line stays readable.
    unread = pl.col("catalog").is_null() | (pl.col("cat_cause").is_null() & pl.col("kind").is_in(RAISED))
    if catalogued:
        unread = unread | pl.col("cat_cause").is_null()
    rows = p.filter(
        unread & ~pl.col("follower") & pl.col("message").is_not_null()
        & ~pl.col("kind").str.contains(TYPED)
        & (trouble | pl.col("kind").is_in(UNTYPED))
        & ~pl.col("message").str.contains(ascii_classes("(?i)" + vocabulary.healthy))
    ).select("incident", pl.col("row").cast(pl.UInt32), "message",
             _trouble=trouble.fill_null(False),
             _factor=pl.when(pl.col("kind").is_in(UNTYPED) & pl.col("message").str.contains(LEVEL)).then(1.0)
             .otherwise(pl.col("severity").replace_strict(SEVERITY_FACTOR, default=PLAIN_FACTOR, return_dtype=pl.Float64)))  # fmt: skip
    if rows.is_empty():
        return pl.DataFrame(schema=schema)
    found = []
    for w in vocabulary.words:
        hit = pl.col("message").str.contains(ascii_classes(w.regex)) & (pl.col("_trouble") | pl.lit(w.alone))
        found.append(rows.filter(hit).select("incident", "row", cause=pl.lit(w.cause),
                                             weight=pl.col("_factor") * w.weight, word=pl.lit(w.id)))  # fmt: skip
    out = pl.concat(found).cast(schema)  # type: ignore[arg-type]
    # A row counts once per cause: its heaviest word.
    return out.sort("weight", descending=True).unique(["row", "cause"], keep="first", maintain_order=True).select(list(schema))


def phrases(p: pl.DataFrame, vocabulary: Vocabulary | None = None) -> pl.DataFrame:
    """The rows of ``p`` a phrase names a cause in (a word of weight 1: "Training has diverged", "No space
    left on device"), whether or not a catalog row typed them: ``row`` and ``cause``."""
    vocabulary = vocabulary or load()
    named = [w.id for w in vocabulary.words if w.weight >= 1]
    read = readings(p, vocabulary, catalogued=True).filter(pl.col("word").is_in(named))
    return read.select("row", "cause").unique()


def matches(p: pl.DataFrame, explained: pl.DataFrame, vocabulary: Vocabulary | None = None) -> pl.DataFrame:
    """The ``words:<cause>`` matches of the incidents of ``p`` not in ``explained`` (a frame with
    ``incident``), in the engine's match columns: per cause, its words' weight summed over rows (at least
    :data:`MINIMUM`) gives a score below :data:`CEILING` (``CEILING × s / (s + 1)``); the rows are its heaviest, the failure its
    earliest."""
    read = readings(p.join(explained.select("incident").unique(), on="incident", how="anti"), vocabulary)
    if read.is_empty():
        return pl.DataFrame(schema={"incident": pl.String, "rule": pl.String, "cause": pl.String,
                                    "score": pl.Float64, "rows": pl.List(pl.UInt32), "hows": pl.List(pl.String),
                                    "failure": pl.UInt32, "t_fail": pl.Int64})  # fmt: skip
    read = read.join(p.select(pl.col("row").cast(pl.UInt32), "t"), on="row", how="left")
    per_cause = (
        read.sort(["incident", "cause", "weight", "t"], descending=[False, False, True, False], nulls_last=True)
        .group_by("incident", "cause", maintain_order=True)
        .agg(total=pl.col("weight").sum(), rows=pl.col("row").head(EVIDENCE))
        .filter(pl.col("total") >= MINIMUM - 1e-9)
    )
    first = read.sort("t", "row", nulls_last=True).unique(["incident", "cause"], keep="first").select(
        "incident", "cause", failure="row", t_fail="t")
    return per_cause.join(first, on=["incident", "cause"]).select(
        "incident", rule=pl.lit("words:") + pl.col("cause"), cause="cause",
        score=(CEILING * pl.col("total") / (pl.col("total") + 1)).round(4), rows="rows",
        hows=pl.col("rows").list.eval(pl.lit("words")), failure="failure", t_fail="t_fail",
    )  # fmt: skip
