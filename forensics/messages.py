"""Message catalogs: what each message of the programs whose output we read means for a postmortem.

Every program that prints into the logs (CUDA, NVML, NCCL, PyTorch, the container toolkit, kubelet, the
fabric manager, smartd, …) has a catalog in ``data/messages/<emitter>.toml``, taken from that
program's own source or documentation and cited row by row: the message's pattern (from its format
string), its event kind, the root causes it points at with a weight, and its role in a failure
(``initiating``: the fault reported first-hand; ``cascade``: the consequence of a fault elsewhere;
``teardown``: shutdown noise; ``context``: weak evidence). The numbers those programs print stand in
``data/messages/codes-*.csv``: every ``cudaError_t``, ``CUresult``, ``nvmlReturn_t``, ``ncclResult_t``,
errno, ``ibv_wc_status`` and Xid with its name and string, so ``error=35``, ``cuda runtime error (35)``,
``CUDA error 35`` and ``cudaErrorInsufficientDriver`` are one row.

A catalog row whose pattern captures a number in a group named for an enum (``cuda_code``, ``cu_code``,
``nvml_code``, ``nccl_code``, ``errno``, ``wc_status``, ``xid``) or a symbol in ``name`` takes the causes
of that code's row: ``THCudaCheck FAIL … error=35`` reads as the insufficient driver it names, and an
Xid that says ``caused by previous Xid 79`` as the GPU that fell off the bus. The names and the
strings of the codes are searched too (a string only when it is long enough to be unambiguous).

An emitter's error is evidence of its layer even when no row reads its wording: a catalog's
``[catalog.default]`` says how its emitter is recognised on a line (the kinds the sources give its lines,
and its own error envelope: the fabric manager's ``[ERROR] [tid N]``, klog's ``E0612 …  file.go:N]``,
NCCL's ``NCCL WARN``) and the cause such a line points at. :func:`default_frame` reads the lines no row
reads with it, as ``<emitter>.default`` in the role ``context`` (:data:`DEFAULT_ROLE`): a weak candidate that
any row's reading beats.

>>> c = load()
>>> hit = c.best("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version")
>>> hit.cause, hit.code.name
('driver', 'cudaErrorInsufficientDriver')
>>> c.best("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=50 error=35 : unknown").cause
'driver'
"""

from __future__ import annotations

import csv
import io
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import polars as pl

from .regex import ascii_classes, for_python

ROLES = ("initiating", "cascade", "teardown", "context")
#: What a row's weight is worth by its role when it stands alone as the evidence of a cause.
ROLE_FACTOR = {"initiating": 1.0, "context": 0.5, "cascade": 0.4, "teardown": 0.1}
#: The role of an emitter's default reading (:class:`Default`): weak evidence, worth half its weight.
DEFAULT_ROLE = "context"
#: The severities of a typed line that an emitter's default reads (its envelope pattern carries its own).
DEFAULT_SEVERITIES = ("warning", "error", "critical")
#: The named group that carries each enum's number in a message pattern.
ENUM_GROUPS = {"cuda_code": "cudaError_t", "cu_code": "CUresult", "nvml_code": "nvmlReturn_t",
               "nccl_code": "ncclResult_t", "errno": "errno", "wc_status": "ibv_wc_status", "xid": "xid",
               "ucs_status": "ucs_status_t"}  # fmt: skip
#: The enums in the order their strings are read when several print the same one.
STRING_ORDER = ("cudaError_t", "CUresult", "nvmlReturn_t", "ncclResult_t", "ibv_wc_status", "ucs_status_t", "errno")
#: A code's string is searched on its own only when it is at least this long (``out of memory`` is not).
MIN_STRING = 20
#: Patterns per alternation in the one pass over a column: Rust's regex keeps each within its size limit.
PER_PASS = 48
_FOLDER = "messages"
#: Words of trouble in a line no source gave a severity (an application's own log, a command's output):
#: such a line is kept from a file no source claims, and listed when nothing explains an incident.
TROUBLE = (r"(?i)\b(?:errors?|fail|failed|failure|fatal|exception|critical|warn|warning|panic|abort|aborted"
           r"|timed out|timeout|killed|denied|refused|unreachable)\b")


@dataclass(frozen=True)
class Code:
    """One value of an enum a program prints (``cudaError_t`` 35, errno 28, Xid 79)."""

    enum: str
    code: int
    name: str
    string: str
    kind: str
    causes: tuple[tuple[str, float], ...]
    role: str
    cite: str
    since: str = ""
    until: str = ""


@dataclass(frozen=True)
class Entry:
    """One message of one program: the row of its catalog."""

    id: str
    emitter: str
    pattern: str
    kind: str
    causes: tuple[tuple[str, float], ...]
    role: str
    cite: str
    format: str = ""
    example: str = ""
    since: str = ""
    until: str = ""
    file: str = ""
    #: the row only says what kind of line it is (the bare "<Type>Error: " of an exception): it names no cause
    #: and never hides a reading inside it
    typing: bool = False


@dataclass(frozen=True)
class Hit:
    """A message's reading: the catalog row that matched, and the code it names, if any."""

    id: str
    kind: str
    causes: tuple[tuple[str, float], ...]
    role: str
    code: Code | None = None
    span: tuple[int, int] = (0, 0)  # where the row's pattern matched the message
    holes: tuple[tuple[int, int], ...] = ()  # where its named groups matched (text it takes as it comes)
    typing: bool = False  # the row's ``typing``

    @property
    def cause(self) -> str | None:
        """The strongest cause candidate."""
        return max(self.causes, key=lambda c: c[1])[0] if self.causes else None

    @property
    def weight(self) -> float:
        """The strongest candidate's weight, worth what its role makes it worth."""
        return max((w for _, w in self.causes), default=0.0) * ROLE_FACTOR[self.role]


@dataclass(frozen=True)
class Default:
    """How an emitter is recognised on a line, and the cause its error and warning lines point at when
    no row of its catalog reads them (``[catalog.default]``)."""

    emitter: str
    causes: tuple[tuple[str, float], ...]
    cite: str
    #: the kinds the sources give the emitter's lines (a journal unit, NCCL's WARN records), read at
    #: the severities of ``severities``
    kinds: tuple[str, ...] = ()
    severities: tuple[str, ...] = DEFAULT_SEVERITIES
    #: the emitter's own error envelope on a line no source typed (Rust and Python syntax alike)
    pattern: str = ""
    example: str = ""

    @property
    def id(self) -> str:
        return f"{self.emitter}.default"

    @property
    def weight(self) -> float:
        return max((w for _, w in self.causes), default=0.0) * ROLE_FACTOR[DEFAULT_ROLE]

    def expr(self) -> pl.Expr:
        """The rows (``kind``, ``severity``, ``message``) this emitter's default reads."""
        parts = []
        if self.kinds:
            parts.append(pl.col("kind").is_in(list(self.kinds)) & pl.col("severity").is_in(list(self.severities)))
        if self.pattern:
            parts.append(pl.col("message").str.contains(ascii_classes(self.pattern)))
        return pl.any_horizontal(parts).fill_null(False) if parts else pl.lit(False)


@dataclass(eq=False)
class Catalog:
    entries: tuple[Entry, ...]
    codes: tuple[Code, ...]
    defaults: tuple[Default, ...] = ()
    _by_number: dict[tuple[str, int], Code] = field(default_factory=dict, repr=False)
    _by_name: dict[str, Code] = field(default_factory=dict, repr=False)
    _by_string: dict[str, Code] = field(default_factory=dict, repr=False)
    _numbered: dict[tuple[str, int], list[Code]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for c in self.codes:
            self._numbered.setdefault((c.enum, c.code), []).append(c)
        for c in self.codes:  # a current row (no `until`) wins over the rows of older numberings and wordings
            for index, key in ((self._by_number, (c.enum, c.code)), (self._by_name, c.name)):
                if key not in index or not c.until:
                    index[key] = c  # type: ignore[index]
        # a string several enums print ("out of memory": CUDA, UCS; "invalid argument": CUDA, errno) is the one of
        # the enum nearest the GPU (:data:`STRING_ORDER`), and of its current row
        order = {e: n for n, e in enumerate(STRING_ORDER)}
        for c in sorted(self.codes, key=lambda c: (order.get(c.enum, len(order)), bool(c.until))):
            self._by_string.setdefault(_said(c.string), c)

    def code(self, enum: str, value: int | str) -> Code | None:
        """The row of ``value`` (a number, or a symbol) in ``enum``."""
        if isinstance(value, str) and not value.lstrip("-").isdigit():
            c = self._by_name.get(value)
            return c if c is not None and c.enum == enum else None
        return self._by_number.get((enum, int(value)))

    @property
    def all(self) -> tuple[Entry, ...]:
        """The catalogs' rows and the rows made from the codes' names and strings."""
        return self.entries + _code_entries(self.codes)

    def read(self, text: str) -> list[Hit]:
        """Every reading of ``text``: one per catalog row whose pattern it holds."""
        out = []
        for group, compiled in _compiled(self):
            if not group.search(text):
                continue
            for entry, rx in compiled:
                m = rx.search(text)
                if m is not None:
                    out.append(self._hit(entry, m))
        return out

    def best(self, text: str) -> Hit | None:
        """The reading of ``text`` that points most strongly at a cause, or None. A catalog's own row
        with causes is preferred to a code's bare name or string (NCCL's "posix_fallocate failed: No space
        left on device" is its shared memory, not a full disk); then the strongest weight wins."""
        hits = self.read(text)
        # A reading whose match holds another's, and that read more of the message in its own words, read that
        # message in its context: NCCL's "Failed to bind NVLink SHARP (NVLS) Multicast memory … : CUDA error 2
        # 'out of memory'" is the fabric's failure, not the "CUDA error 2" a generic row reads inside it. A
        # wrapper that takes the inner message as a group (PyTorch's "CUDA initialization: %s", the container
        # CLI's "<stage> error: %s") or reads a code there does not: the inner row says more.
        # A row that reads a message as harmless (no cause: NCCL's INFO that an optional plugin did not load, quoting
        # dlopen's error) does the same: the inner reading is not what the program said. A row that only types
        # a line (``typing``: the bare "<Type>Error: " of an exception line) quotes nothing and hides nothing.
        named = [h for h in hits if h.code is None and not h.typing and (h.weight > 0 or not h.causes)]
        hits = [h for h in hits if not any(_inside(h, o) for o in named)]
        # A wrapper that takes the inner message as a group (the container CLI's "<stage> error: %s") gives way to
        # a program's own row reading what it quotes ("nvml error: driver not loaded"): the inner row says more.
        own = [h for h in hits if h.code is None and not h.id.startswith("code.") and h.weight > 0]
        hits = [o for o in hits if not any(
            o.span[0] <= h.span[0] and h.span[1] <= o.span[1] and h.span[1] - h.span[0] < o.span[1] - o.span[0]
            and any(s <= h.span[0] < e for s, e in o.holes) for h in own)]  # fmt: skip
        return max(hits, key=lambda h: (h.weight > 0, not h.id.startswith("code."), h.weight)) if hits else None

    def anchors(self) -> list[str]:
        """Alternations of every pattern (Rust syntax, groups unnamed): a message holding none of them
        has no reading, so one pass of these over a column finds the rows worth reading."""
        return [p for p, _ in _passes(self)]

    def _numbered_in(self, enum: str, value: str, text: str) -> Code | None:
        """The row of number ``value``: where releases gave the number to two codes (CUDA 10.1 renumbered
        cudaError_t; 13.2 reused 10), the one whose string the message prints, else the current one."""
        rows = self._numbered.get((enum, int(value)), [])
        if len(rows) > 1:
            lowered = text.lower()
            named = [c for c in rows if c.string and c.string.lower() in lowered]
            if named:
                return named[-1]
        return self.code(enum, value)

    def _by_said(self, value: str) -> Code | None:
        """The code whose string ``value`` prints, whole or followed by where it was raised: lc0's "CUDA error:
        %s (%s:%d)", a wrapper's "%s at file.cu:42" or "%s; retrying" (the longest string that opens it)."""
        code = self._by_string.get(_said(value))
        for cut in reversed([m.start() for m in _AFTER_STRING.finditer(value)]) if code is None else ():
            code = self._by_string.get(_said(value[:cut]))
            if code is not None:
                break
        return code

    def _hit(self, entry: Entry, m: re.Match[str]) -> Hit:
        code = None
        for group, value in m.groupdict().items():
            if value is None:
                continue
            if group in ENUM_GROUPS:
                code = self._numbered_in(ENUM_GROUPS[group], value, m.string) if value.lstrip("-").isdigit() else None
            elif group == "name":
                code = self._by_name.get(value)
            elif group == "string":
                code = self._by_said(value)
            if code is not None:
                break
        if code is None:
            return Hit(entry.id, entry.kind, entry.causes, entry.role, span=m.span(), holes=_holes(m), typing=entry.typing)
        kind = code.kind if entry.kind in ("cuda.error", "other", "") and code.kind else entry.kind
        # the code names the cause when it knows one: a wrapper's own candidates are its guess without it
        return Hit(entry.id, kind, code.causes or entry.causes, _weaker(entry.role, code.role), code, m.span(), _holes(m))


def _holes(m: re.Match[str]) -> tuple[tuple[int, int], ...]:
    """The spans of a match's named groups, outermost only (a group inside another is not counted twice)."""
    spans = sorted((m.span(g) for g in m.groupdict() if m.group(g) is not None), key=lambda s: (s[0], -s[1]))
    out: list[tuple[int, int]] = []
    for s in spans:
        if not out or s[0] >= out[-1][1]:
            out.append(s)
    return tuple(out)


def _inside(a: Hit, b: Hit) -> bool:
    """Whether ``a``'s match lies within ``b``'s (as long or longer), and ``b`` read more of the message in its
    own words (the characters of its match outside its named groups) than ``a`` did: "Failed to initialize NVML:
    Unknown Error" read whole is more than its "Failed to initialize NVML: %s". Never when ``a`` opens in one of
    ``b``'s groups (``b`` took that text as it comes: the container CLI's "<stage> error: " around its
    "detection error: " row).

    >>> inner = Hit("x", "", (), "initiating", span=(60, 88), holes=((71, 72), (74, 87)))
    >>> outer = Hit("y", "", (), "initiating", span=(0, 90), holes=((30, 37), (71, 72), (74, 87)))
    >>> wrapper = Hit("z", "", (), "context", span=(40, 90), holes=((45, 90),))
    >>> stage = Hit("s", "", (), "initiating", span=(50, 90), holes=((58, 67),))
    >>> _inside(inner, outer), _inside(inner, wrapper), _inside(outer, inner), _inside(inner, stage)
    (True, False, False, False)
    """
    (start, end), (a0, a1) = b.span, a.span
    if any(s <= a0 < e for s, e in b.holes):  # ``b`` takes the text ``a`` opens with as it comes: not its own words
        return False
    return start <= a0 and a1 <= end and end - start >= a1 - a0 and _own_words(b) > _own_words(a)


def _own_words(h: Hit) -> int:
    """How many characters of ``h``'s match its pattern's literal text read (its named groups take the rest)."""
    return (h.span[1] - h.span[0]) - sum(e - s for s, e in h.holes)


#: Where a code's string may end inside a longer group: before a space, a parenthesis, a colon, a semicolon
#: or a comma that opens what the program printed after it.
_AFTER_STRING = re.compile(r"\s*[\s(:;,\[]")


def _said(text: str) -> str:
    """A code's string as a key: case and a closing period do not matter (cudaGetErrorString ends some
    strings with one, and PyTorch's "CUDA error: %s." may print it or not)."""
    return text.strip().rstrip(".").lower()


def _weaker(a: str, b: str) -> str:
    """The role worth less: an Xid 45 read through the generic Xid line stays the cascade it is."""
    return min(a, b, key=lambda r: ROLE_FACTOR[r])


#: The columns of a reading of a column of messages (``i``: the message's position).
READING = {"i": pl.UInt32, "catalog": pl.String, "cat_kind": pl.String, "cat_cause": pl.String,
           "cat_weight": pl.Float64, "cat_role": pl.String}  # fmt: skip


def frame(catalog: Catalog, messages: pl.Series) -> pl.DataFrame:
    """The best reading of each message: ``i`` (its position), ``catalog`` (the row's id), ``cat_kind``,
    ``cat_cause``, ``cat_weight`` (weight × role factor), ``cat_role``; messages with no reading are left
    out. One vectorized pass of :meth:`Catalog.anchors` finds the messages to read in Python."""
    schema = READING
    if messages.len() == 0:
        return pl.DataFrame(schema=schema)
    col = messages.cast(pl.String).fill_null("")
    hit = pl.select(pl.any_horizontal([col.str.contains(p) for p in catalog.anchors()])).to_series()
    found = pl.DataFrame({"i": hit.arg_true(), "message": col.filter(hit)})
    # a message repeats (every rank prints it, every retry): each distinct one is read once
    distinct = found.get_column("message").unique()
    readings = []
    for text in distinct.to_list():
        best = catalog.best(text)
        if best is not None:
            readings.append((text, best.id, best.kind, best.cause, round(best.weight, 4), best.role))
    read = pl.DataFrame(readings, schema={"message": pl.String, **{k: v for k, v in schema.items() if k != "i"}},
                        orient="row")  # fmt: skip
    return found.join(read, on="message", how="inner").sort("i").select(*schema).cast(schema)  # type: ignore[arg-type]


def default_frame(catalog: Catalog, rows: pl.DataFrame) -> pl.DataFrame:
    """The emitters' default readings of ``rows`` (``kind``, ``severity``, ``message``), in the schema of
    :func:`frame`: each row an emitter's default reads (the first catalog's, in file order), its
    ``cat_kind`` null (the line keeps the kind its source gave it). Give it only the rows no catalog row
    reads: a row's reading always beats the emitter's default."""
    schema = READING
    if rows.height == 0 or not catalog.defaults:
        return pl.DataFrame(schema=schema)
    which = pl.lit(None, dtype=pl.UInt32)
    for n, d in reversed(list(enumerate(catalog.defaults))):  # the first default that reads a row wins
        which = pl.when(d.expr()).then(pl.lit(n, dtype=pl.UInt32)).otherwise(which)
    found = rows.select(which.alias("d")).with_row_index("i").drop_nulls("d")
    table = pl.DataFrame(
        [(n, d.id, max(d.causes, key=lambda c: c[1])[0] if d.causes else None, round(d.weight, 4)) for n, d in
         enumerate(catalog.defaults)],
        schema={"d": pl.UInt32, "catalog": pl.String, "cat_cause": pl.String, "cat_weight": pl.Float64}, orient="row",
    )  # fmt: skip
    out = found.join(table, on="d").sort("i").with_columns(cat_kind=pl.lit(None, pl.String), cat_role=pl.lit(DEFAULT_ROLE))
    return out.select(*schema).cast(schema)  # type: ignore[arg-type]


def _causes(value: object) -> tuple[tuple[str, float], ...]:
    if isinstance(value, dict):
        return tuple((str(k), float(v)) for k, v in value.items())
    out = []
    for part in str(value or "").split(";"):
        if part.strip():
            cause, _, weight = part.partition("=")
            out.append((cause.strip(), float(weight)))
    return tuple(out)


def _data_files(suffix: str) -> list[tuple[str, str]]:
    folder = resources.files("forensics.data").joinpath(_FOLDER)
    return sorted((f.name, f.read_text("utf-8")) for f in folder.iterdir() if f.name.endswith(suffix))


@cache
def load() -> Catalog:
    """Every catalog and code table shipped in ``forensics/data/messages``."""
    entries, defaults = [], []
    for name, text in _data_files(".toml"):
        doc = tomllib.loads(text)
        emitter = doc.get("catalog", {}).get("emitter", name.removesuffix(".toml"))
        if (d := doc.get("catalog", {}).get("default")) is not None:
            defaults.append(Default(
                emitter=emitter, causes=_causes(d.get("causes", {})), cite=d.get("cite", ""),
                kinds=tuple(d.get("kinds", ())), severities=tuple(d.get("severities", DEFAULT_SEVERITIES)),
                pattern=d.get("pattern", ""), example=d.get("example", ""),
            ))  # fmt: skip
        for m in doc.get("message", []):
            entries.append(Entry(
                id=m["id"], emitter=emitter, pattern=_scoped(m["pattern"]), kind=m.get("kind", "other"),
                causes=_causes(m.get("causes", {})), role=m.get("role", "context"), cite=m.get("cite", ""),
                format=m.get("format", ""), example=m.get("example", ""), since=m.get("since", ""),
                until=m.get("until", ""), file=name, typing=bool(m.get("typing", False)),
            ))  # fmt: skip
    codes = []
    for _, text in _data_files(".csv"):
        body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
        for r in csv.DictReader(io.StringIO(body)):
            codes.append(Code(
                enum=r["enum"], code=int(r["code"]), name=r["name"], string=r["string"], kind=r.get("kind") or "",
                causes=_causes(r.get("causes")), role=r.get("role") or "initiating", cite=r.get("cite") or "",
                since=r.get("since") or "", until=r.get("until") or "",
            ))  # fmt: skip
    return Catalog(tuple(entries), tuple(codes), tuple(defaults))


def _code_entries(codes: tuple[Code, ...]) -> tuple[Entry, ...]:
    """Rows that read the codes' symbols (one per enum) and their strings (those with causes, long
    enough to stand alone)."""
    out = []
    names: dict[str, list[str]] = {}
    for c in codes:
        if c.enum != "xid" and c.name:
            names.setdefault(c.enum, []).append(c.name)
    for enum, symbols in names.items():
        alternation = "|".join(re.escape(s) for s in sorted(set(symbols), key=len, reverse=True))
        out.append(Entry(id=f"code.{enum}.name", emitter="codes", pattern=rf"\b(?P<name>{alternation})\b",
                         kind="other", causes=(), role="initiating", cite="codes-*.csv"))  # fmt: skip
    strings = sorted({c.string for c in codes if c.enum != "xid" and c.causes and len(c.string) >= MIN_STRING},
                     key=len, reverse=True)
    if strings:
        alternation = "|".join(re.escape(s) for s in strings)
        out.append(Entry(id="code.string", emitter="codes", pattern=f"(?i:(?P<string>{alternation}))",
                         kind="other", causes=(), role="initiating", cite="codes-*.csv"))  # fmt: skip
    return tuple(out)


_GROUP = re.compile(r"\(\?P<\w+>")


def _unnamed(pattern: str) -> str:
    return _GROUP.sub("(?:", pattern)


def _scoped(pattern: str) -> str:
    """A pattern's leading global flags (``(?i)``) scoped to it, so that it can stand in an alternation."""
    m = re.match(r"\(\?([aimsux]+)\)", pattern)
    return f"(?{m.group(1)}:{pattern[m.end():]})" if m else pattern


@cache
def _passes(catalog: Catalog) -> tuple[tuple[str, tuple[Entry, ...]], ...]:
    entries = catalog.all
    out = []
    for i in range(0, len(entries), PER_PASS):
        part = entries[i : i + PER_PASS]
        out.append(("|".join(f"(?:{ascii_classes(_unnamed(e.pattern))})" for e in part), part))
    return tuple(out)


@cache
def _compiled(catalog: Catalog) -> tuple[tuple[re.Pattern[str], tuple[tuple[Entry, re.Pattern[str]], ...]], ...]:
    return tuple(
        (re.compile(for_python(alternation)), tuple((e, re.compile(for_python(ascii_classes(e.pattern)))) for e in part))
        for alternation, part in _passes(catalog)
    )  # fmt: skip
