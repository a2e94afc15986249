"""Automatic filter extraction from the query text: an opt-in stage that can only narrow.

Invariants: an extractor returns a filter or None and never raises out of `safe_extract`;
`combine` never lets an extracted predicate touch a field the user filtered explicitly; callers
fall back to the explicit filter alone when the combined one finds nothing, so extraction never
widens past the unfiltered set.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ragspine.agent.agent import LLMProvider
from ragspine.http_retry import public_error
from ragspine.secret import redact_text
from ragspine.retrieval.model import FILTER_FIELDS
from ragspine.retrieval.filters import And, Filter, Predicate, fields_of, parse_filter
from ragspine.retrieval.query.glossary import Glossary, load_glossary

_LOG = logging.getLogger(__name__)
_CN_DIGITS = str.maketrans("〇零一二三四五六七八九", "00123456789")
_YEAR_PATTERNS = (
    re.compile(r"(?<!\d)((?:19|20)\d{2})\s*年"),
    re.compile(r"([〇零一二三四五六七八九]{4})\s*年"),
    re.compile(r"\bFY\s?((?:19|20)\d{2})\b", re.IGNORECASE),
    re.compile(r"\b[QH][1-4]\s*((?:19|20)\d{2})\b", re.IGNORECASE),
    re.compile(r"\b((?:19|20)\d{2})\s*[-/ ]?[QH][1-4]\b", re.IGNORECASE),
    re.compile(r"\b(?:in|for|during|of|year|fiscal)\s+((?:19|20)\d{2})\b(?![.,]\d|%)", re.IGNORECASE),
)
GEOGRAPHIES: dict[str, str] = {
    "中国大陆": "CN", "中国": "CN", "china": "CN", "mainland china": "CN",
    "香港": "HK", "hong kong": "HK", "台湾": "TW", "taiwan": "TW", "挪威": "NO", "norway": "NO",
    "美国": "US", "united states": "US", "usa": "US", "日本": "JP", "japan": "JP",
    "英国": "GB", "united kingdom": "GB", "德国": "DE", "germany": "DE",
    "新加坡": "SG", "singapore": "SG",
}  # fmt: skip


@runtime_checkable
class FilterExtractor(Protocol):
    """Reads metadata constraints out of a query (None when there are none)."""

    def extract(self, query: str) -> Filter | None: ...


class RuleFilterExtractor:
    """Entities from the glossary, years (二〇二五年, 2025年上半年, FY2024, Q3 2024) and
    geography names. Periods narrow to the years mentioned (any sub-period of them matches).

    >>> g = Glossary.from_dict({"entities": {"ACME_CN": ["艾克美中国"]}})
    >>> RuleFilterExtractor(g).extract("艾克美中国2024年上半年营收")
    And(items=(Predicate(field='entity', op='eq', value='ACME_CN'), Predicate(field='period', op='between', value=('2024', '2024'))))
    """

    def __init__(self, glossary: Glossary, geographies: dict[str, str] | None = None) -> None:
        self._entities = sorted(
            ((term, group.canonical) for group in glossary.groups if group.kind == "entities"
             for term in group.terms),
            key=lambda item: -len(item[0]),
        )  # fmt: skip
        self._geographies = sorted((geographies or GEOGRAPHIES).items(), key=lambda kv: -len(kv[0]))

    def extract(self, query: str) -> Filter | None:
        text = query.lower()
        entities, text = _take_terms(text, self._entities)
        geographies, text = _take_terms(text, self._geographies)
        years = years_in(query)
        parts: list[Filter] = []
        if entities:
            parts.append(_one_or_in("entity", entities))
        if years:
            parts.append(Predicate("period", "between", [years[0], years[-1]]))
        if geographies:
            parts.append(_one_or_in("geography", geographies))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else And(tuple(parts))


class LLMFilterExtractor:
    """Asks an LLM for a JSON object of filters on the five metadata fields; keeps only those."""

    def __init__(self, provider: LLMProvider) -> None:
        self.provider = provider

    def extract(self, query: str) -> Filter | None:
        reply = self.provider.chat(
            [
                {"role": "system", "content": "You extract metadata filters from search queries."},
                {
                    "role": "user",
                    "content": f"Fields: {', '.join(FILTER_FIELDS)}. Query: {query}\n"
                    'Answer with one JSON object, e.g. {"entity": "ACME_CN", "period": '
                    '{"gte": "2024"}}, or {} when the query names none.',
                },
            ]
        )
        start, end = reply.find("{"), reply.rfind("}")
        data = json.loads(reply[start : end + 1]) if start != -1 and end > start else None
        if not isinstance(data, dict):
            raise ValueError(f"extractor reply is not a JSON object: {reply[:200]!r}")
        return parse_filter({k: v for k, v in data.items() if k in FILTER_FIELDS})


def safe_extract(extractor: FilterExtractor | None, query: str) -> tuple[Filter | None, str | None]:
    """(filter, error): an extractor failure is reported, never raised."""
    if extractor is None:
        return None, None
    try:
        return extractor.extract(query), None
    except Exception as exc:  # noqa: BLE001 - extraction failure means "no extracted filter"
        _LOG.warning("filter extraction failed (%s); using explicit filters only", redact_text(str(exc)))
        return None, public_error(exc)  # a caller sees a short code, never an upstream body


def narrowing(explicit: Filter | None, extracted: Filter | None) -> Filter | None:
    """The extracted predicates on fields the explicit filter does not mention (None: none)."""
    if extracted is None:
        return None
    taken = fields_of(explicit)
    members = extracted.items if isinstance(extracted, And) else (extracted,)
    kept = tuple(m for m in members if not (fields_of(m) & taken))
    return None if not kept else kept[0] if len(kept) == 1 else And(kept)


def combine(explicit: Filter | None, extracted: Filter | None) -> Filter | None:
    """explicit AND the extracted predicates on fields the user did not filter."""
    added = narrowing(explicit, extracted)
    parts = tuple(p for p in (explicit, added) if p is not None)
    return None if not parts else parts[0] if len(parts) == 1 else And(parts)


def make_filter_extractor(
    spec: str = "none",
    *,
    provider: LLMProvider | None = None,
    glossary: Glossary | None = None,
) -> FilterExtractor | None:
    """The extractor named by `spec`: none, rules (over `glossary`, default the built-in one) or
    llm (over `provider`). The assembly passes RAGSPINE_FILTER_EXTRACTOR and RAGSPINE_GLOSSARY."""
    name = spec.strip().lower()
    if name in ("", "none"):
        return None
    if name == "rules":
        return RuleFilterExtractor(glossary if glossary is not None else load_glossary())
    if name == "llm":
        if provider is None:
            raise ValueError("the llm filter extractor needs an LLM provider (RAGSPINE_LLM_BASE_URL)")
        return LLMFilterExtractor(provider)
    raise ValueError(f"unknown filter extractor {spec!r}; valid: none, rules, llm")


def _take_terms(text: str, terms: Sequence[tuple[str, str]]) -> tuple[list[str], str]:
    """Canonical values of the terms found (longest first); found spans are blanked out."""
    found: list[str] = []
    for term, canonical in terms:
        needle = term.lower()
        if needle and needle in text:
            text = text.replace(needle, " " * len(needle))
            if canonical not in found:
                found.append(canonical)
    return found, text


def years_in(query: str) -> list[str]:
    """The distinct years a query names (二〇二五年, 2025年上半年, FY2024, Q3 2024, in 2023), sorted.

    >>> years_in("2023年与二〇二四年上半年相比")
    ['2023', '2024']
    """
    return sorted({y for pattern in _YEAR_PATTERNS for y in _years(pattern, query)})


def _years(pattern: re.Pattern[str], query: str) -> list[str]:
    return [m.group(1).translate(_CN_DIGITS) for m in pattern.finditer(query)]


def _one_or_in(field: str, values: list[str]) -> Predicate:
    return Predicate(field, "eq", values[0]) if len(values) == 1 else Predicate(field, "in", values)
