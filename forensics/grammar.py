"""One cached loader for every grammar in ``grammars/``, built with the project's options.

Grammars are LALR with the contextual lexer; a transformer passed in is applied while parsing (no tree).
Start rules are families: a start rule's name is its event kind with ``.`` spelled ``__``, and the
terminals named ``A_<FAMILY>…`` are that family's anchor phrases, from which the fast path builds its
prefilter.

>>> g = family_grammar("kernel")
>>> g.families[0]
'gpu.xid'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from pathlib import Path

from lark import Lark, Transformer
from lark.grammar import Rule
from lark.lark import PostLex

from .errors import ForensicsError
from .regex import ascii_classes, structure


def grammar_dir() -> Path:
    """The folder holding the ``.lark`` files (inside the wheel, or the source tree in development)."""
    return Path(str(resources.files("forensics.grammars")))


def kind_of(rule_name: str) -> str:
    """``gpu__xid`` → ``gpu.xid``."""
    return rule_name.replace("__", ".", 1)


def rule_of(kind: str) -> str:
    """``gpu.xid`` → ``gpu__xid``."""
    return kind.replace(".", "__", 1)


@dataclass(frozen=True)
class FamilyGrammar:
    """A grammar whose start rules are families, in file order, with their anchor regexes."""

    name: str
    families: tuple[str, ...]
    anchors: dict[str, tuple[str, ...]]
    source: str

    def anchor_regex(self, kind: str) -> str:
        """The family's anchors as one regex for an unanchored search (Rust's syntax; Python's ``re``
        takes it through :func:`.regex.for_python`)."""
        return self._search_regexes[kind]

    def prefilter_regex(self) -> str:
        """Every family's anchors as one regex: a record that no part matches belongs to no family."""
        return "|".join(self._search_regexes[k] for k in self.families)

    @cached_property
    def _search_regexes(self) -> dict[str, str]:
        # Computed once per grammar: every file's sniff and parse asks for them.
        return {k: "|".join(f"(?:{_for_search(a)})" for a in anchors) for k, anchors in self.anchors.items()}


def _for_search(pattern: str) -> str:
    # A leading lazy "anything" only positions the anchor for the parser; a search needs none of it,
    # and the Rust regex engine finds literal prefixes faster without it. Likewise a leading optional
    # group: an unanchored search for "(?:X)?R" or "(?:X)*R" matches exactly where one for "R" does.
    pattern = re.sub(r"^\[\^\\n\][*+]\?", "", pattern)
    while (end := _leading_optional_group(pattern)) is not None:
        pattern = pattern[end:]
    return ascii_classes(pattern.replace("\\/", "/"))


def _leading_optional_group(pattern: str) -> int | None:
    """The end of ``pattern``'s leading ``(…)?`` or ``(…)*`` group (greedy or lazy) when more follows it
    in the same branch, or None."""
    if not pattern.startswith("(") or pattern.startswith("(?P<") or pattern.startswith("(?="):
        return None
    for i, c, depth in structure(pattern):
        if c == ")" and depth == 0:
            rest = pattern[i + 1:]
            quantifier = next((q for q in ("??", "*?", "?", "*") if rest.startswith(q)), None)
            if quantifier is None or len(rest) == len(quantifier) or rest[len(quantifier)] in "|)":
                return None
            return i + 1 + len(quantifier)
    return None


@cache
def family_grammar(name: str) -> FamilyGrammar:
    """Read ``grammars/<name>.lark`` and list its families (start rules) and anchors."""
    path = grammar_dir() / f"{name}.lark"
    try:
        source = path.read_text("utf-8")
    except OSError as exc:
        raise ForensicsError(f"grammar {name!r} not found at {path}: {exc}") from exc
    families = tuple(
        kind_of(m.group(1)) for m in re.finditer(r"^([a-z]+__[a-z_]+)\s*:", source, flags=re.MULTILINE)
    )
    anchors: dict[str, tuple[str, ...]] = {}
    for kind in families:
        prefix = "A_" + rule_of(kind).upper()
        found = re.findall(rf"^{prefix}(?:_\d+)?\s*:\s*/(.*)/\s*$", source, flags=re.MULTILINE)
        anchors[kind] = tuple(found)
    return FamilyGrammar(name=name, families=families, anchors=anchors, source=source)


@cache
def parser(name: str, transformer: type[Transformer] | None = None, *, strict: bool = False,
           postlex: type[PostLex] | None = None) -> Lark:  # fmt: skip
    """The LALR parser for ``grammars/<name>.lark``: every family a start rule, or ``start`` when the
    grammar has no families (a nested format such as ``nvidia-smi -q``)."""
    grammar = family_grammar(name)
    return Lark.open(
        str(grammar_dir() / f"{name}.lark"),
        parser="lalr",
        lexer="contextual",
        start=[rule_of(k) for k in grammar.families] or ["start"],
        transformer=transformer() if transformer else None,
        postlex=postlex() if postlex else None,
        strict=strict,
        maybe_placeholders=False,
        # Lark keeps the analysed LALR tables in the temp folder, keyed by grammar text and options:
        # building them costs ~0.3 s per process. Strict builds (tests) always start from scratch.
        cache=not strict,
    )


def rule_aliases(lark: Lark) -> set[str]:
    """Every alias used by the grammar's rules (each must be an event kind)."""
    rules: list[Rule] = lark.rules
    return {r.alias for r in rules if r.alias}
