"""Adaptive-RAG routing (RAGSPINE_ADAPTIVE): single-shot retrieval, or decomposition into sub-questions.

    from ragspine.retrieval.query.adaptive import RuleComplexityClassifier

    RuleComplexityClassifier().classify("2023年与2024年的营收相比如何？").route   # 'decompose'

Invariants: the rule classifier is deterministic and reads only the question (shape,
conjunctions joining two asks, comparisons, several glossary entities or several years, in
Chinese and English); every route carries the reasons for it. The LLM classifier sees only the
question, and falls back to the rules (saying so) when the LLM fails or answers neither.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ragspine.agent.agent import LLMProvider
from ragspine import catalog
from ragspine.registry import Registry
from ragspine.retrieval.query.filter_extraction import years_in
from ragspine.retrieval.query.gate import fold
from ragspine.retrieval.query.glossary import Glossary, load_glossary
from ragspine.retrieval.query.transforms import reply_word

SINGLE, DECOMPOSE = "single", "decompose"
_LOG = logging.getLogger(__name__)
_COMPARISON = re.compile(
    r"对比|比较|相比|相较|差异|区别|有何不同|高于|低于|多于|少于|孰|哪个更|谁更|"
    r"\bcompar(?:e|ed|es|ing|ison)\b|\bversus\b|\bvs\.?(?=\s)|\bdifference between\b|\bdiffer(?:s|ed)? from\b|"
    r"\b(?:more|less|higher|lower|better|worse|greater|larger|smaller) than\b",
    re.IGNORECASE,
)
_JOINED_ASKS = re.compile(
    r"以及|并且|同时|分别|另外|此外|"
    r"\b(?:and|also|as well as)\s+(?:what|why|how|when|where|which|who|whether)\b",
    re.IGNORECASE,
)
_QUESTION_MARKS = re.compile(r"[?？]")


@dataclass(frozen=True)
class Route:
    """Where a question goes ("single" or "decompose") and why."""

    route: str
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"route": self.route, "reasons": list(self.reasons)}


@runtime_checkable
class ComplexityClassifier(Protocol):
    """Routes a question: single-shot or decomposition."""

    def classify(self, query: str) -> Route: ...


class RuleComplexityClassifier:
    """The deterministic classifier: any of the signals routes to decomposition.

    >>> c = RuleComplexityClassifier()
    >>> c.classify("why did revenue fall").route, c.classify("compare revenue and costs").route
    ('single', 'decompose')
    """

    name = "rules"

    def __init__(self, glossary: Glossary | None = None) -> None:
        glossary = glossary if glossary is not None else load_glossary()
        self._entities = [
            (group.canonical, [fold(t) for t in group.terms]) for group in glossary.groups if group.kind == "entities"
        ]

    def classify(self, query: str) -> Route:
        reasons: list[str] = []
        if _COMPARISON.search(query):
            reasons.append("comparison")
        if _JOINED_ASKS.search(query):
            reasons.append("conjunction joining two asks")
        if len(_QUESTION_MARKS.findall(query)) >= 2:
            reasons.append("several questions")
        folded = fold(query)
        entities = [name for name, terms in self._entities if any(t in folded for t in terms)]
        if len(entities) >= 2:
            reasons.append(f"several entities ({', '.join(entities)})")
        years = years_in(query)
        if len(years) >= 2:
            reasons.append(f"several periods ({', '.join(years)})")
        return Route(DECOMPOSE if reasons else SINGLE, tuple(reasons))


class LLMComplexityClassifier:
    """Asks the LLM SIMPLE or COMPLEX about the question alone; the rules decide when it cannot."""

    name = "llm"

    def __init__(self, provider: LLMProvider, glossary: Glossary | None = None) -> None:
        if provider is None:
            raise ValueError("the llm complexity classifier needs an LLM provider (set RAGSPINE_LLM_BASE_URL)")
        self.provider = provider
        self.rules = RuleComplexityClassifier(glossary)

    def classify(self, query: str) -> Route:
        messages = [
            {"role": "system", "content": "You judge whether a question needs several separate searches."},
            {
                "role": "user",
                "content": "Answer COMPLEX if answering the question needs facts about several "
                "entities, periods or sub-questions found in different documents, else SIMPLE. "
                f"Answer with the one word.\n\nQuestion: {query.strip()}",
            },
        ]
        try:
            word = reply_word(self.provider.chat(messages, temperature=0), ("SIMPLE", "COMPLEX"))
            return Route(DECOMPOSE, ("llm: complex",)) if word == "COMPLEX" else Route(SINGLE, ("llm: simple",))
        except Exception as exc:  # noqa: BLE001 - the rules decide when the LLM cannot
            _LOG.warning("LLM complexity classifier failed (%s); using the rules", exc)
            route = self.rules.classify(query)
            return Route(route.route, (f"llm failed ({type(exc).__name__}); rules", *route.reasons))


COMPLEXITY_CLASSIFIERS: Registry[ComplexityClassifier] = catalog.COMPLEXITY_CLASSIFIERS.bind(ComplexityClassifier)


def make_complexity_classifier(spec: str = "none", **options: object) -> ComplexityClassifier | None:
    """The classifier RAGSPINE_ADAPTIVE names: none (no routing), rules (glossary=...), llm
    (provider=..., glossary=...), or a dotted path."""
    return COMPLEXITY_CLASSIFIERS.make(spec, **options)
