"""Causal-chain rules as data: the TOML language, its validation, and the built-in library.

A rule file holds ``[[rule]]`` tables (causal chains) and ``[[follower]]`` tables (sympathetic events
that must never be blamed). The language, field by field (``forensics/mine/rules/README.md`` has it
with examples)::

    [[rule]]
    name = "aer-then-off-bus"        # unique in the library
    cause = "pcie_link"              # a root cause of DESIGN.md
    weight = 0.95                    # (0, 1]: how sure a match makes us; the best match wins
    doc = "why this chain means this cause"
    horizon = "2h"                   # the failure step lies at most this long before the job's end
    fallback = "incident"            # when a step has no ts: "file" (order within a file),
                                     # "incident" (file order, else co-occurrence), "none"

    [[rule.step]]                    # ordered; the first is matched alone
    kind = "pcie.aer"                # a kind, a glob ("disk.*") or a list of them
    code = [79, "144-150"]           # numbers and ranges
    severity = ["error", "critical"] # or min_severity = "error"
    detail = { aer_severity = ["fatal", "nonfatal"] }   # detail fields: a value or a list of values
    message = "(?i)fallen off"       # a regular expression on the message
    followers = false                # may this step match an event marked as a follower?

    [[rule.step]]
    kind = "gpu.xid"
    code = 79
    join = "gpu"                     # shared with the step before: gpu, host, rank or incident
    within = "10m"                   # after the step before, at most this much later
    order = "after"                  # "after", or "any" (anywhere in the incident: state snapshots)
    role = "failure"                 # the last step is the failure unless a step says so
    # same = "scale"                 # detail fields equal to those of the step before's event

    [[rule.unless]]                  # the rule does not fire if such an event exists
    kind = "pcie.*"
    join = "gpu"                     # shared with the failure step
    within = "30m"                   # before or after the failure (absent: anywhere in the incident)

    [[follower]]                     # an event of this shape after an `after` event is a follower
    name = "xid45-after-xid"
    kind = "gpu.xid"
    code = 45
    join = "gpu"
    within = "5m"
    after = { kind = "gpu.xid", code = [13, 31, 48, 63, 64, 74, 79, 94, 95] }

A file that does not validate raises :class:`RuleError` naming the file, the line and the field.

>>> lib = load_library()
>>> set(CAUSES) - {r.cause for r in lib.rules}  # unknown: what is left when no rule matches
{'unknown'}
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import InputError
from ..schema import KINDS, SEVERITIES

#: The root causes of DESIGN.md, the only words ``diagnose`` answers with.
CAUSES = (
    "pcie_link", "gpu_hardware", "gpu_memory", "nvlink", "thermal", "power", "network", "numerical",
    "code_bug", "gpu_oom", "host_oom", "host_memory", "storage", "driver", "container_runtime", "hang",
    "unknown",
)  # fmt: skip
JOINS = ("gpu", "host", "rank", "incident")
FALLBACKS = ("file", "incident", "none")
ORDERS = ("after", "any")
ROLES = ("precursor", "failure")
BUILTIN = Path(__file__).with_name("rules")  # the built-in library: forensics/mine/rules/*.toml
_UNITS = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}


class RuleError(InputError):
    """A rule file that does not validate: ``file:line: rule 'name': field: what is wrong``."""


def duration_us(text: str) -> int:
    """``"90s"``, ``"10m"``, ``"1h30m"``, ``"500ms"`` in microseconds.

    >>> duration_us("1h30m"), duration_us("500ms")
    (5400000000, 500000)
    """
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)", text.strip())
    if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)", "", text).strip():
        raise ValueError(f"expected a duration such as 30s, 10m, 2h, got {text!r}")
    return int(sum(float(n) * _UNITS[u] for n, u in parts))


def window_us(window: str | timedelta) -> int:
    """A window as the API takes it — a duration like the command line's (``"30m"``) or a timedelta — in
    microseconds; :class:`~forensics.errors.InputError` when it is neither or not positive.

    >>> window_us("30m"), window_us(timedelta(seconds=2))
    (1800000000, 2000000)
    """
    if isinstance(window, timedelta):
        us = int(window / timedelta(microseconds=1))
    elif isinstance(window, str):
        try:
            us = duration_us(window)
        except ValueError:
            raise InputError(f"window {window!r}: expected a duration such as 30s, 10m, 2h (or a timedelta)") from None
    else:
        raise InputError(f"window {window!r}: expected a duration such as '30m' or a timedelta")
    if us <= 0:
        raise InputError(f"window {window!r}: must be longer than zero")
    return us


def known_kinds(patterns: list[str], *, option: str) -> list[str]:
    """``patterns`` (kind names or globs) checked against the vocabulary: one that names no kind raises
    :class:`~forensics.errors.InputError` with the closest kinds.

    >>> known_kinds(["gpu.*", "host.oom_kill"], option="--kinds")
    ['gpu.*', 'host.oom_kill']
    """
    import difflib

    for pattern in patterns:
        if not _expand((pattern,)):
            close = difflib.get_close_matches(pattern, sorted(KINDS), n=3, cutoff=0.7)
            families = sorted({k.split(".")[0] + ".*" for k in KINDS if "." in k})
            hint = f"; did you mean {', '.join(close)}?" if close else f"; kinds are {', '.join(families)}, other, unparsed"
            raise InputError(f"{option} {pattern!r}: no such event kind{hint}")
    return patterns


@dataclass(frozen=True)
class Match:
    """The predicates of one step: which events it accepts."""

    kinds: tuple[str, ...]  # kinds and globs
    codes: tuple[tuple[int, int], ...] = ()  # inclusive ranges; empty: any code
    severities: tuple[str, ...] = ()
    detail: tuple[tuple[str, tuple[str, ...]], ...] = ()  # field, accepted values as JSON text
    message: str | None = None
    followers: bool = False

    def expanded(self) -> tuple[str, ...]:
        """The kinds of the vocabulary this step's kinds and globs name."""
        return _expand(self.kinds)


def glob_regex(kinds: tuple[str, ...] | list[str]) -> str:
    """One anchored regex for kind names and globs (``disk.*``)."""
    return "^(?:" + "|".join(re.escape(k).replace(r"\*", ".*") for k in kinds) + ")$"


@cache
def _expand(kinds: tuple[str, ...]) -> tuple[str, ...]:
    pattern = glob_regex(kinds)
    return tuple(sorted(k for k in KINDS if re.match(pattern, k)))


@dataclass(frozen=True)
class Step:
    match: Match
    join: str = "incident"  # the key shared with the step before (or, for `unless`, the failure step)
    within_us: int | None = None
    order: str = "after"
    role: str = "precursor"
    same: tuple[str, ...] = ()  # detail fields whose values equal those of the step before's event


@dataclass(frozen=True)
class Rule:
    name: str
    cause: str
    weight: float
    doc: str
    steps: tuple[Step, ...]
    unless: tuple[Step, ...] = ()
    horizon_us: int | None = 2 * 3_600_000_000
    fallback: str = "incident"
    origin: str = ""  # file:line
    yields: bool = False  # a generic rule: gives way where a catalog reads its failure as another cause

    @property
    def failure(self) -> int:
        """The index of the failure step."""
        roles = [i for i, s in enumerate(self.steps) if s.role == "failure"]
        return roles[0] if roles else len(self.steps) - 1


@dataclass(frozen=True)
class Follower:
    name: str
    doc: str
    match: Match
    after: Match
    join: str
    within_us: int | None
    origin: str = ""


@dataclass(frozen=True)
class Library:
    rules: tuple[Rule, ...]
    followers: tuple[Follower, ...] = ()
    files: tuple[str, ...] = field(default=())

    def kinds(self) -> set[str]:
        """Every kind any rule or follower mentions (globs expanded against the vocabulary)."""
        matches = [s.match for r in self.rules for s in (*r.steps, *r.unless)]
        matches += [m for f in self.followers for m in (f.match, f.after)]
        return {k for m in matches for k in m.expanded()}


_STEP_FIELDS = {"kind", "code", "severity", "min_severity", "detail", "message", "followers", "join", "within",
                "order", "role", "same"}  # fmt: skip
_RULE_FIELDS = {"name", "cause", "weight", "doc", "horizon", "fallback", "step", "unless", "yields"}
_FOLLOWER_FIELDS = {"name", "doc", "kind", "code", "severity", "min_severity", "detail", "message", "join",
                    "within", "after"}  # fmt: skip


class _Locator:
    """Finds the line of a field in the text of a rule file (tomllib gives values, not positions)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def line(self, table: str, index: int, sub: str | None = None, sub_index: int = 0, key: str | None = None) -> int:
        start = self._nth(rf"^\s*\[\[\s*{table}\s*\]\]", index, 0)
        if start is None:
            return 1
        end = self._nth(rf"^\s*\[\[\s*{table}\s*\]\]", 0, start + 1) or len(self.lines)
        if sub is not None:
            found = self._nth(rf"^\s*\[\[\s*{table}\.{sub}\s*\]\]", sub_index, start + 1, end)
            if found is None:
                return start + 1
            start = found
            end = self._nth(r"^\s*\[", 0, start + 1, end) or end
        if key is not None:
            for n in range(start, end):
                if re.match(rf"^\s*{re.escape(key)}\s*=", self.lines[n]) or re.search(rf"[{{,]\s*{re.escape(key)}\s*=",
                                                                                     self.lines[n]):  # fmt: skip
                    return n + 1
        return start + 1

    def _nth(self, pattern: str, n: int, begin: int, end: int | None = None) -> int | None:
        seen = 0
        for i in range(begin, len(self.lines) if end is None else end):
            if re.match(pattern, self.lines[i]):
                if seen == n:
                    return i
                seen += 1
        return None


class _Checker:
    def __init__(self, path: str, text: str) -> None:
        self.path, self.where = path, _Locator(text)

    def fail(self, what: str, line: int, message: str) -> RuleError:
        return RuleError(f"{self.path}:{line}: {what}: {message}")

    def match(self, raw: dict[str, Any], what: str, line_of: Any) -> Match:
        kinds = raw.get("kind")
        if isinstance(kinds, str):
            kinds = [kinds]
        if not kinds or not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise self.fail(what, line_of("kind"), "field 'kind': expected a kind or a list of kinds")
        for k in kinds:
            if not _expand((k,)):
                raise self.fail(what, line_of("kind"), f"field 'kind': {k!r} is no event kind (see forensics.KINDS)")
        codes: list[tuple[int, int]] = []
        raw_codes = raw.get("code", [])
        for c in raw_codes if isinstance(raw_codes, list) else [raw_codes]:
            if isinstance(c, int) and not isinstance(c, bool):
                codes.append((c, c))
            elif isinstance(c, str) and (m := re.fullmatch(r"\s*(-?\d+)\s*-\s*(-?\d+)\s*", c)):
                codes.append((int(m[1]), int(m[2])))
            else:
                raise self.fail(what, line_of("code"), f"field 'code': expected numbers or ranges like \"144-150\", got {c!r}")
        sev = raw.get("severity", [])
        sev = [sev] if isinstance(sev, str) else sev
        if "min_severity" in raw:
            if raw["min_severity"] not in SEVERITIES:
                raise self.fail(what, line_of("min_severity"), f"field 'min_severity': one of {', '.join(SEVERITIES)}")
            sev = list(SEVERITIES[SEVERITIES.index(raw["min_severity"]):])
        if not isinstance(sev, list) or any(s not in SEVERITIES for s in sev):
            raise self.fail(what, line_of("severity"), f"field 'severity': values among {', '.join(SEVERITIES)}")
        detail: list[tuple[str, tuple[str, ...]]] = []
        raw_detail = raw.get("detail", {})
        if not isinstance(raw_detail, dict):
            raise self.fail(what, line_of("detail"), "field 'detail': expected a table of field = value(s)")
        for key, values in raw_detail.items():
            values = values if isinstance(values, list) else [values]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or not all(isinstance(v, (str, int, float, bool)) for v in values):
                raise self.fail(what, line_of(key), f"field 'detail.{key}': expected a value or a list of values")
            detail.append((key, tuple(_json_text(v) for v in values)))
        message = raw.get("message")
        if message is not None:
            try:  # the engine runs it in Polars (Rust regex: no look-around, no back-references)
                pl.Series([""]).str.contains(message)
            except (pl.exceptions.PolarsError, TypeError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise self.fail(what, line_of("message"), f"field 'message': not a regular expression ({first})") from None
        followers = raw.get("followers", False)
        if not isinstance(followers, bool):
            raise self.fail(what, line_of("followers"), "field 'followers': expected true or false")
        return Match(tuple(kinds), tuple(codes), tuple(sev), tuple(detail), message, followers)

    def step(self, raw: Any, what: str, line_of: Any, *, first: bool, unless: bool = False) -> Step:
        if not isinstance(raw, dict):
            raise self.fail(what, line_of(None), "expected a table")
        allowed = _STEP_FIELDS - ({"order", "role", "same"} if unless else set())
        for key in raw:
            if key not in allowed:
                raise self.fail(what, line_of(key), f"unknown field {key!r} (fields: {', '.join(sorted(allowed))})")
        join = raw.get("join", "incident")
        if join not in JOINS:
            raise self.fail(what, line_of("join"), f"field 'join': one of {', '.join(JOINS)}, got {join!r}")
        if first and not unless and ("join" in raw or "within" in raw or "same" in raw):
            key = next(k for k in ("join", "within", "same") if k in raw)
            raise self.fail(what, line_of(key), f"field '{key}': the first step has no step before it")
        within = self.duration(raw, "within", what, line_of)
        order = raw.get("order", "after")
        if order not in ORDERS:
            raise self.fail(what, line_of("order"), f"field 'order': one of {', '.join(ORDERS)}")
        role = raw.get("role", "precursor")
        if role not in ROLES:
            raise self.fail(what, line_of("role"), f"field 'role': one of {', '.join(ROLES)}")
        same = raw.get("same", [])
        same = [same] if isinstance(same, str) else same
        if not isinstance(same, list) or not all(isinstance(k, str) and re.fullmatch(r"[a-z_][a-z0-9_]*", k) for k in same):
            raise self.fail(what, line_of("same"), "field 'same': expected a detail field name or a list of them")
        return Step(self.match(raw, what, line_of), join, within, order, role, tuple(same))

    def duration(self, raw: dict[str, Any], key: str, what: str, line_of: Any) -> int | None:
        if key not in raw:
            return None
        try:
            if not isinstance(raw[key], str):
                raise ValueError(raw[key])
            return duration_us(raw[key])
        except ValueError:
            raise self.fail(what, line_of(key), f"field '{key}': expected a duration such as 30s, 10m, 2h") from None

    def header(self, raw: Any, index: int, table: str, fields: set[str]) -> tuple[str, str, Any]:
        """The name of a [[rule]] or [[follower]], how errors call it, and its line finder; checks its fields."""

        def at(key: str | None) -> int:
            return self.where.line(table, index, key=key)

        name = raw.get("name") if isinstance(raw, dict) else None
        what = f"{table} {name!r}" if isinstance(name, str) else f"{table} #{index + 1}"
        if not isinstance(raw, dict):
            raise self.fail(what, at(None), "expected a table")
        for key in raw:
            if key not in fields:
                raise self.fail(what, at(key), f"unknown field {key!r} (fields: {', '.join(sorted(fields))})")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name):
            raise self.fail(what, at("name"), "field 'name': expected a lower-case name like aer-then-off-bus")
        return name, what, at

    def rule(self, raw: Any, index: int) -> Rule:
        name, what, at = self.header(raw, index, "rule", _RULE_FIELDS)
        if raw.get("cause") not in CAUSES:
            raise self.fail(what, at("cause"), f"field 'cause': one of {', '.join(CAUSES)}, got {raw.get('cause')!r}")
        weight = raw.get("weight")
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not 0 < weight <= 1:
            raise self.fail(what, at("weight"), "field 'weight': expected a number in (0, 1]")
        if not isinstance(raw.get("doc", ""), str):
            raise self.fail(what, at("doc"), "field 'doc': expected a string")
        fallback = raw.get("fallback", "incident")
        if fallback not in FALLBACKS:
            raise self.fail(what, at("fallback"), f"field 'fallback': one of {', '.join(FALLBACKS)}")
        horizon = self.duration(raw, "horizon", what, at) if "horizon" in raw else 2 * 3_600_000_000
        if not isinstance(raw.get("yields", False), bool):
            raise self.fail(what, at("yields"), "field 'yields': expected true or false")
        raw_steps = raw.get("step")
        if not isinstance(raw_steps, list) or not raw_steps:
            raise self.fail(what, at("step"), "needs at least one [[rule.step]]")
        steps = tuple(
            self.step(s, f"{what} step {n + 1}", lambda k, n=n: self.where.line("rule", index, "step", n, k), first=n == 0)
            for n, s in enumerate(raw_steps)
        )  # fmt: skip
        if sum(s.role == "failure" for s in steps) > 1:
            raise self.fail(what, at(None), "field 'role': only one step can be the failure")
        for n, s in enumerate(steps[1:], 1):
            if s.order == "any" and s.within_us is not None:
                raise self.fail(f"{what} step {n + 1}", self.where.line("rule", index, "step", n, "within"),
                                "field 'within': a step in order \"any\" has no window")  # fmt: skip
        raw_unless = raw.get("unless", [])
        if not isinstance(raw_unless, list):
            raise self.fail(what, at("unless"), "field 'unless': expected [[rule.unless]] tables")
        unless = tuple(
            self.step(u, f"{what} unless {n + 1}", lambda k, n=n: self.where.line("rule", index, "unless", n, k),
                      first=False, unless=True)  # fmt: skip
            for n, u in enumerate(raw_unless)
        )
        return Rule(name, raw["cause"], float(weight), raw.get("doc", ""), steps, unless, horizon, fallback,
                    f"{self.path}:{at(None)}", raw.get("yields", False))  # fmt: skip

    def follower(self, raw: Any, index: int) -> Follower:
        name, what, at = self.header(raw, index, "follower", _FOLLOWER_FIELDS)
        join = raw.get("join", "incident")
        if join not in JOINS:
            raise self.fail(what, at("join"), f"field 'join': one of {', '.join(JOINS)}, got {join!r}")
        after = raw.get("after")
        if not isinstance(after, dict):
            raise self.fail(what, at("after"), "field 'after': expected a table of predicates, e.g. { kind = \"gpu.xid\" }")
        return Follower(name, raw.get("doc", ""), self.match(raw, what, at), self.match(after, f"{what} after", at), join,
                        self.duration(raw, "within", what, at), f"{self.path}:{at(None)}")  # fmt: skip


def _json_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return str(value)


def parse_rules(text: str, path: str = "<rules>") -> tuple[list[Rule], list[Follower]]:
    """The rules and followers of one file's text."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise RuleError(f"{path}:{line[1] if line else 1}: not valid TOML: {exc}") from None
    check = _Checker(path, text)
    for key in raw:
        if key not in ("rule", "follower"):
            raise RuleError(f"{path}:{check.where.line(key, 0)}: unknown table {key!r} (a rule file holds [[rule]] and [[follower]])")
    rules, followers = raw.get("rule", []), raw.get("follower", [])
    if not isinstance(rules, list) or not isinstance(followers, list):
        raise RuleError(f"{path}:1: 'rule' and 'follower' must be arrays of tables ([[rule]], [[follower]])")
    return [check.rule(r, i) for i, r in enumerate(rules)], [check.follower(f, i) for i, f in enumerate(followers)]


def load_library(paths: list[str | Path] | None = None) -> Library:
    """The rules of ``paths`` (files or folders of ``*.toml``); the built-in library when None."""
    if paths is None:
        return _builtin()
    return _load(tuple(str(p) for p in paths))


@cache
def _builtin() -> Library:
    return _load((str(BUILTIN),))


def _load(paths: tuple[str, ...]) -> Library:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.glob("*.toml"))
        elif p.is_file():
            files.append(p)
        else:
            raise RuleError(f"{p}: no such rule file or folder")
    rules: list[Rule] = []
    followers: list[Follower] = []
    for f in files:
        try:
            text = f.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RuleError(f"{f}: cannot read: {exc}") from None
        r, fo = parse_rules(text, str(f))
        rules += r
        followers += fo
    seen: dict[str, str] = {}
    for r in [*rules, *followers]:
        if r.name in seen:
            raise RuleError(f"{r.origin}: name {r.name!r} is used twice (also at {seen[r.name]})")
        seen[r.name] = r.origin
    if not rules:
        raise RuleError(f"{', '.join(paths)}: no [[rule]] found")
    return Library(tuple(rules), tuple(followers), tuple(map(str, files)))
