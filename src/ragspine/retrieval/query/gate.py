"""The security gate: every query variant is screened, deterministically, before it is retrieved.

    from ragspine.retrieval.query.gate import GateRules, SecurityGate

    gate = SecurityGate(GateRules(deny_entities=("RIVAL_CO",), deny_patterns=(r"salary",)))
    screened = gate.screen(["ACME 营收", "RIVAL_CO 营收"], origins=["query", "rag_fusion"])
    screened.allowed          # ['ACME 营收']
    screened.refused[0].reason

Invariants:
- `screen` is a pure function of the rules and its input: no LLM, no I/O, no randomness.
- A variant is refused when it names a denied entity (any surface form of it, glossary synonyms
  included), matches a denied pattern, is blank, is a generated variant longer than `max_chars`,
  or comes after `max_variants` allowed ones. The caller's own query is never refused for its length (only generated text is budgeted).
- "Names a denied entity" has the lexical channel's word boundaries, not a second definition:
  the term's words occur contiguously among the variant's words (`lexical.words`: the tokenizer's
  tokens in text order, each CJK character one word), under the specification's `tokenize` and,
  when PyStemmer is installed, the en-stem analyzer (the default), each on the text as given and
  case-folded (`fold`). So every variant the tokenizer would match to the name is refused
  ("borealis_zzz", "_borealis_", "BOREALIS-ASA", "borealis.com", "ＢＯＲＥＡＬＩＳ", "Borealis's"),
  "borealisx" (one token) and "arrival" are not, and a CJK name is refused wherever its characters
  appear in order. A term with no words at all (only punctuation) is matched as a substring.
- Every refusal carries the variant, where it came from and why; a refused variant is never
  returned in `allowed`, so it never runs. Duplicates are dropped (not refused), order is kept.
This module imports the glossary and the lexical words; the graph's relation extractor reuses it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.retrieval.lexical.analyzers import EN_STEM, AnalyzerError, make_analyzer
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.lexical.words import first_mention, index_terms, words
from ragspine.retrieval.query.glossary import Glossary, read_json_file

DEFAULT_MAX_CHARS = 1000
DEFAULT_MAX_VARIANTS = 8
QUERY_ORIGIN = "query"  # the caller's own text: not held to the length budget
_BACKREF = re.compile(r"\\[1-9]|\(\?P=")
_RULE_KEYS = ("deny_entities", "deny_patterns", "max_chars", "max_variants")


def fold(text: str) -> str:
    """NFKC then case-fold: the form every rule is matched in."""
    return unicodedata.normalize("NFKC", text).casefold()


@dataclass(frozen=True)
class GateRules:
    """What the gate refuses. `deny_entities`: names the caller may not query (a glossary group
    containing one denies all its terms); `deny_patterns`: regular expressions (matched
    case-insensitively on the NFKC, case-folded text); `max_chars` / `max_variants`: the budgets."""

    deny_entities: tuple[str, ...] = ()
    deny_patterns: tuple[str, ...] = ()
    max_chars: int = DEFAULT_MAX_CHARS
    max_variants: int = DEFAULT_MAX_VARIANTS

    def __post_init__(self) -> None:
        if self.max_chars < 1 or self.max_variants < 1:
            raise ValueError(
                f"gate budgets must be >= 1, got max_chars={self.max_chars}, max_variants={self.max_variants}"
            )
        for pattern in self.deny_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"gate deny pattern {pattern!r} is not a valid regular expression: {exc}") from None
        if any(not isinstance(e, str) or not e.strip() for e in self.deny_entities):
            raise ValueError("gate deny_entities must be non-empty strings")

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "gate rules") -> GateRules:
        """Rules from a mapping with the keys deny_entities, deny_patterns, max_chars, max_variants."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{source}: expected a JSON object with keys {', '.join(_RULE_KEYS)}")
        unknown = sorted(k for k in data if not str(k).startswith("_") and k not in _RULE_KEYS)
        if unknown:
            raise ValueError(f"{source}: unknown key(s) {unknown}; valid: {', '.join(_RULE_KEYS)}")
        options: dict[str, Any] = {}
        for key in ("deny_entities", "deny_patterns"):
            value = data.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{source}: {key} must be a list of strings")
            options[key] = tuple(value)
        for key in ("max_chars", "max_variants"):
            if key in data:
                if not isinstance(data[key], int) or isinstance(data[key], bool):
                    raise ValueError(f"{source}: {key} must be an integer")
                options[key] = data[key]
        try:
            return cls(**options)
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None


def load_gate_rules(path: str | Path | None) -> GateRules:
    """The rules in the JSON file at `path` (RAGSPINE_QUERY_GATE); None: the default budgets only."""
    if path is None:
        return GateRules()
    return GateRules.from_dict(read_json_file(path, "gate rules"), source=str(path))


@dataclass(frozen=True)
class Refusal:
    """One variant the gate refused: its text, where it came from and why."""

    query: str
    origin: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"query": self.query, "origin": self.origin, "reason": self.reason}


@dataclass(frozen=True)
class Screened:
    """The variants that may run (in order, with their origins) and those refused."""

    allowed: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


class SecurityGate:
    """Screens query variants against `rules` (see the module docstring).

    >>> gate = SecurityGate(GateRules(deny_entities=("Rival",)))
    >>> gate.check("rival revenue 2024", origin="rag_fusion")
    "names the denied entity 'Rival'"
    >>> gate.check("arrival times") is None
    True
    """

    def __init__(self, rules: GateRules | None = None, glossary: Glossary | None = None) -> None:
        self.rules = rules if rules is not None else GateRules()
        self._entity_of = _entity_terms(self.rules.deny_entities, glossary)  # folded term -> denied name
        self._analyzers = _gate_analyzers() if self._entity_of else []
        # per analyzer: the terms' words by first word (at each position, one lookup)
        self._term_words = [index_terms((tuple(words(t, a)), t) for t in self._entity_of) for a in self._analyzers]
        self._wordless = [t for t in self._entity_of if not words(t)]  # only punctuation: substrings
        self._patterns = [(p, re.compile(p, re.IGNORECASE)) for p in self.rules.deny_patterns]
        # one pass over the text for all patterns; the one that matched is looked up on a hit only
        # (only without back-references, whose group numbers a combined pattern would shift)
        self._any_pattern = _combined(self.rules.deny_patterns)

    def check(self, variant: object, *, origin: str = QUERY_ORIGIN) -> str | None:
        """Why `variant` is refused, or None when it may run (the count budget is `screen`'s)."""
        if not isinstance(variant, str) or not variant.strip():
            return "blank or not text"
        if origin != QUERY_ORIGIN and len(variant) > self.rules.max_chars:
            return f"longer than the budget of {self.rules.max_chars} characters ({len(variant)})"
        folded = fold(variant)
        found = self._find_entity(variant, folded)
        if found is not None:
            return f"names the denied entity {self._entity_of[found]!r}"
        if self._any_pattern is None or self._any_pattern.search(folded):
            for pattern, compiled in self._patterns:
                if compiled.search(folded):
                    return f"matches the denied pattern {pattern!r}"
        return None

    def _find_entity(self, variant: str, folded: str) -> str | None:
        """The first denied term `variant` mentions (see the module docstring), or None."""
        for analyzer, terms in zip(self._analyzers, self._term_words, strict=True):
            for form in sorted({variant, folded}):
                found = first_mention(words(form, analyzer), terms)
                if found is not None:
                    return found
        return next((t for t in self._wordless if t in folded), None)

    def screen(self, variants: Sequence[str], *, origins: Sequence[str] | str = QUERY_ORIGIN) -> Screened:
        """Split `variants` into those allowed (deduplicated, in order, at most `max_variants`)
        and those refused, each with its reason. `origins`: one per variant, or one for all."""
        kinds = [origins] * len(variants) if isinstance(origins, str) else list(origins)
        if len(kinds) != len(variants):
            raise ValueError(f"screen got {len(variants)} variants but {len(kinds)} origins")
        out = Screened()
        seen: set[str] = set()
        for variant, origin in zip(variants, kinds, strict=True):
            if isinstance(variant, str) and variant in seen:
                continue
            reason = self.check(variant, origin=origin)
            if reason is None and len(out.allowed) >= self.rules.max_variants:
                reason = f"over the budget of {self.rules.max_variants} variants per query"
            if reason is not None:
                out.refused.append(Refusal(variant if isinstance(variant, str) else repr(variant), origin, reason))
                continue
            seen.add(variant)
            out.allowed.append(variant)
            out.origins.append(origin)
        return out


def _entity_terms(names: Sequence[str], glossary: Glossary | None) -> dict[str, str]:
    """Every folded surface form of each denied entity (its glossary group's terms too) -> the
    denied name (the first one given wins a term two names share)."""
    terms: dict[str, str] = {}
    for name in names:
        forms = {fold(name)}
        for group in glossary.groups if glossary is not None else ():
            if forms & {fold(t) for t in group.terms}:
                forms |= {fold(t) for t in group.terms}
        for form in sorted(forms):
            terms.setdefault(form, name)
    return terms


def _gate_analyzers() -> list[Callable[[str], list[str]]]:
    """The analyzers whose words a denied term is looked for in: the specification's `tokenize`,
    and en-stem (the default analyzer) unless PyStemmer is missing."""
    analyzers: list[Callable[[str], list[str]]] = [tokenize]
    try:
        analyzers.append(make_analyzer(EN_STEM))
    except AnalyzerError:
        pass
    return analyzers


def _combined(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """One alternation of `patterns`, or None when they cannot be combined safely (none given,
    a back-reference whose group number would shift, inline global flags)."""
    if not patterns or any(_BACKREF.search(p) for p in patterns):
        return None
    try:
        return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)
    except re.error:
        return None
