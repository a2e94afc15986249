"""Glossary of entities and metrics with synonyms, and the rule-based multi-query rewriter.

File format (JSON, UTF-8): {"entities": {CANONICAL: [SYNONYM, ...]}, "metrics": {...}}; keys
starting with "_" are comments. The rewriter is deterministic, needs no LLM, keeps the original
query first and never returns duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

SECTIONS = ("entities", "metrics")


@dataclass(frozen=True)
class SynonymGroup:
    """One concept: its canonical name, its kind ("entities" or "metrics"), all its surface forms."""

    canonical: str
    kind: str
    terms: tuple[str, ...]


@dataclass(frozen=True)
class Glossary:
    """An ordered list of synonym groups."""

    groups: tuple[SynonymGroup, ...] = ()

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "glossary") -> Glossary:
        """Validate and build; errors name the source and the offending entry."""
        if not isinstance(data, dict):
            raise ValueError(f"{source}: expected a JSON object with 'entities' and/or 'metrics'")
        unknown = [k for k in data if not k.startswith("_") and k not in SECTIONS]
        if unknown:
            raise ValueError(f"{source}: unknown section(s) {unknown}; valid: {list(SECTIONS)}")
        groups: list[SynonymGroup] = []
        for kind in SECTIONS:
            section = data.get(kind, {})
            if not isinstance(section, dict):
                raise ValueError(f"{source}: '{kind}' must be an object of name -> [synonyms]")
            for canonical, synonyms in section.items():
                if not isinstance(synonyms, list) or not all(
                    isinstance(s, str) and s.strip() for s in synonyms
                ):
                    raise ValueError(
                        f"{source}: {kind}.{canonical} must be a list of non-empty strings"
                    )
                # one spelling per term, ignoring case (the first one given wins)
                by_case = {t.lower(): t for t in reversed([canonical, *synonyms])}
                terms = tuple(dict.fromkeys(by_case[t.lower()] for t in [canonical, *synonyms]))
                groups.append(SynonymGroup(canonical, kind, terms))
        return cls(tuple(groups))


def load_glossary(path: str | Path | None = None) -> Glossary:
    """The glossary at `path`, or the built-in default when `path` is None."""
    if path is None:
        text = resources.files("ragspine.data").joinpath("glossary.json").read_text("utf-8")
        return Glossary.from_dict(json.loads(text), source="built-in glossary")
    return Glossary.from_dict(read_json_file(path, "glossary"), source=str(path))


def read_json_file(path: str | Path, what: str) -> Any:
    """The UTF-8 JSON file at `path`; ValueError naming `what` and the path when it cannot be read."""
    try:
        return json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{what} file not found: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what} file {path} could not be read as UTF-8 JSON: {exc}") from exc


class GlossaryQueryRewriter:
    """Expands a query with glossary synonyms (zero LLM).

    For each group whose term occurs in the query (longest term first, case-insensitive), one
    variant per other term of the group replaces it. Original first, deduplicated, at most
    `max_queries` in all.

    >>> g = Glossary.from_dict({"metrics": {"revenue": ["营收", "收入"]}})
    >>> GlossaryQueryRewriter(g).rewrite("为什么营收下滑")
    ['为什么营收下滑', '为什么revenue下滑', '为什么收入下滑']
    """

    def __init__(self, glossary: Glossary | None = None, max_queries: int = 5) -> None:
        if max_queries < 1:
            raise ValueError(f"max_queries must be >= 1, got {max_queries}")
        if glossary is None:
            glossary = load_glossary()  # the built-in one; the assembly passes RAGSPINE_GLOSSARY's
        self.glossary = glossary
        self.max_queries = max_queries

    def rewrite(self, query: str) -> list[str]:
        variants = [query]
        for group in self.glossary.groups:
            found = _find_term(query, group.terms)
            if found is None:
                continue
            pattern = re.compile(re.escape(found), re.IGNORECASE)
            variants.extend(
                pattern.sub(_literal(term), query) for term in group.terms if term != found
            )
        return list(dict.fromkeys(variants))[: self.max_queries]


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement function inserting `text` as is (no backslash or group processing)."""
    return lambda _match: text


def _find_term(query: str, terms: tuple[str, ...]) -> str | None:
    lowered = query.lower()
    for term in sorted(terms, key=len, reverse=True):
        if term.lower() in lowered:
            return term
    return None
