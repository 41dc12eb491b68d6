"""Families: the records of a grammar's start rules, found by anchors and read by Lark plus an enricher.

A :class:`Families` object ties one ``grammars/<name>.lark`` (start rules named after kinds, anchor
terminals ``A_<FAMILY>…``) to the Python enrichers that turn a parse into a row's fields. Every source
with free-text records uses one: the kernel source for kernel lines, the journal source for service
lines.

>>> from forensics.sources.kernel import KERNEL
>>> fields, error = KERNEL.parse_record("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
>>> fields["kind"], fields["code"], fields["gpu"]
('gpu.xid', 79, '0000:3b:00.0')
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property
from typing import Any

from lark import Lark, Token, Transformer, Tree
from lark.exceptions import LarkError

from .grammar import FamilyGrammar, family_grammar, kind_of, parser, rule_of
from .regex import for_python

Fields = dict[str, Any]
Enricher = Callable[[dict[str, Any], str], Fields]


class Parts(Transformer):
    """Lark callbacks: a family returns ``{"kind", "tokens", "parts"}``; other rules stay trees.

    Rules whose result is a ``(name, value)`` pair can be added by subclasses.
    """

    def __default__(self, data: str, children: list[Any], meta: Any) -> Any:
        if "__" in data and not data.startswith("_"):  # a family; Lark's own helpers are "__…"
            return {"kind": kind_of(data), "tokens": [c for c in children if isinstance(c, Token)],
                    "parts": [c for c in children if not isinstance(c, Token)]}  # fmt: skip
        return Tree(data, children, meta)


def row(kind: str, severity: str, fields: Fields | None = None, *, gpu: str | None = None,
        pid: int | None = None, code: int | None = None, **detail: Any) -> Fields:  # fmt: skip
    """A family row; ``fields`` and the keywords left over make its ``detail``."""
    return {"kind": kind, "severity": severity, "gpu": gpu, "pid": pid, "code": code,
            "detail": {**(fields or {}), **detail}}  # fmt: skip


class Families:
    """The families of one grammar and their enrichers (``generic`` for a family without one)."""

    def __init__(self, grammar: str, enrichers: dict[str, Enricher], *, generic: Enricher,
                 transformer: type[Transformer] = Parts) -> None:  # fmt: skip
        self.name = grammar
        self.enrichers = enrichers
        self.generic = generic
        self.transformer = transformer

    @cached_property
    def grammar(self) -> FamilyGrammar:
        return family_grammar(self.name)

    @cached_property
    def _anchors(self) -> tuple[tuple[str, re.Pattern[str]], ...]:
        return tuple((k, re.compile(for_python(self.grammar.anchor_regex(k)))) for k in self.grammar.families)

    def lark(self) -> Lark:
        return parser(self.name, self.transformer)

    def prefilter(self) -> str:
        """One regex: a record whose first line it does not match belongs to none of the families."""
        return self.grammar.prefilter_regex()

    def candidates(self, text: str) -> list[str]:
        """The families whose anchors appear on the first line of ``text``, in grammar order."""
        first = text.split("\n", 1)[0]
        return [k for k, rx in self._anchors if rx.search(first)]

    def parse_record(self, text: str, *, full: bool = False, candidates: list[str] | None = None,
                     from_anchor: bool = True) -> tuple[Fields | None, str | None]:  # fmt: skip
        """(fields, None) for a family, (None, None) for no family, (None, error) when every family
        whose anchors the record has rejected it.

        ``full=True`` tries every family, not only those whose anchors appear (the Lark-only path);
        ``candidates`` are the families whose anchors the first line has, when the caller knows them;
        ``from_anchor=False`` leaves out the second try from the anchor on (:meth:`from_anchor`), for a
        caller that tries other grammars first.
        """
        lark = self.lark()
        if candidates is None:
            candidates = self.candidates(text)
        kinds = list(self.grammar.families) if full else candidates
        error = None
        for kind in kinds:
            try:
                parts = lark.parse(text, start=rule_of(kind))
            except LarkError as exc:
                # A record is "unparsed" when it carries a family's anchor but the family rejects it.
                if error is None and kind in candidates:
                    error = f"{kind}: {short_error(exc, text)}"
                continue
            return self.enrichers.get(kind, self.generic)(parts, text), None
        if error is not None and from_anchor:
            return self.from_anchor(text, candidates) or (None, error)
        return None, error

    def from_anchor(self, text: str, candidates: list[str]) -> tuple[Fields, None] | None:
        """A record whose family anchor follows text the envelope did not take (an odd stamp such as
        ``[...]`` or ``[123]``, an empty level field, a paste's own label): the family read from its
        anchor on, so that one stray prefix does not lose the event.

        >>> from forensics.sources.kernel import KERNEL
        >>> fields, _ = KERNEL.parse_record("[...] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
        >>> fields["kind"], fields["code"]
        ('gpu.xid', 79)
        """
        first = text.split("\n", 1)[0]
        anchors = dict(self._anchors)
        for kind in candidates:
            m = anchors[kind].search(first)
            if m is None or m.start() == 0:
                continue
            rest = text[m.start():]
            try:
                parts = self.lark().parse(rest, start=rule_of(kind))
            except LarkError:
                continue
            return self.enrichers.get(kind, self.generic)(parts, rest), None
        return None


def short_error(exc: LarkError, text: str) -> str:
    """Lark's message, first line, with the text around the failing column."""
    lines = str(exc).strip().splitlines()
    where = ""
    if hasattr(exc, "get_context"):
        try:
            where = " near " + repr(exc.get_context(text, span=24).splitlines()[0].strip())  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - the context is a courtesy, never a second failure
            where = ""
    return (lines[0] if lines else type(exc).__name__) + where
