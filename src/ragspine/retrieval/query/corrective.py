"""Corrective retrieval (CRAG, RAGSPINE_CORRECTIVE): grade what was retrieved, then act or refuse.

    from ragspine.retrieval.query.corrective import RuleGrader

    RuleGrader().grade("revenue", results, match=0.08).verdict    # 'incorrect'

Invariants:
- The rule grader is deterministic and reads scores only: the best BM25 hit's match strength (its
  score over the query's Σ idf, `HybridRetriever.lexical_match`) and, with a dense channel, the
  agreement of the channels' top hits. It never sees text.
- The LLM grader sees the question and the texts of non-RESTRICTED results only (RESTRICTED
  ones are dropped here again, whatever the caller passed); when the LLM fails or answers
  neither YES nor NO, the rule grade stands, and says so.
- `MAX_ACTIONS` bounds the loop the link runs (drop filters → rewrite → refuse).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ragspine.agent.agent import LLMProvider
from ragspine import catalog
from ragspine.registry import Registry
from ragspine.retrieval.query.transforms import reply_word
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.types import RetrievalResult

MAX_ACTIONS = 2
CORRECT, AMBIGUOUS, INCORRECT = "correct", "ambiguous", "incorrect"
# Tuned on dev/train (`bench/query_stage_bench.py --split dev`): below 0.2 no answerable question of
# SciFact train, CMRC2018 dev or DRCD dev was refused, and 62% of zh_med_dialogue's questions were
# refused against the Chinese Wikipedia corpora they cannot be answered from.
DEFAULT_MATCH_LOW = 0.2
DEFAULT_MATCH_HIGH = 0.4
AGREEMENT_DEPTH = 3
AGREEMENT_MIN = 0.5  # two of the channels' top three shared
_GRADER_PASSAGES = 5
_GRADER_CHARS = 600
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Grade:
    """A verdict on one result list and what it rests on."""

    verdict: str
    match: float
    agreement: float | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"verdict": self.verdict, "match": round(self.match, 4),
                "agreement": None if self.agreement is None else round(self.agreement, 4),
                "reason": self.reason}  # fmt: skip


@runtime_checkable
class Grader(Protocol):
    """Grades a result list for a query, given the lexical match strength of its best hit."""

    def grade(self, query: str, results: Sequence[RetrievalResult], match: float) -> Grade: ...


def channel_agreement(results: Sequence[RetrievalResult], depth: int = AGREEMENT_DEPTH) -> float | None:
    """Overlap (Jaccard) of the top `depth` results by BM25 score and by vector score; None
    without vector scores.

    >>> from ragspine.retrieval.model import Chunk
    >>> rs = [RetrievalResult(Chunk(c, "d", 0, "t", "d"), b, v, 0.0) for c, b, v in
    ...       [("a", 3.0, 0.1), ("b", 2.0, 0.9), ("c", 0.0, 0.8)]]
    >>> channel_agreement(rs, depth=2)
    0.3333333333333333
    """
    scored = [r for r in results if r.vector_score is not None]
    if not scored:
        return None
    by_bm25 = {r.chunk.chunk_id for r in sorted(scored, key=lambda r: (-r.bm25_score, r.chunk.chunk_id))[:depth]}
    by_vector = {r.chunk.chunk_id for r in sorted(scored, key=lambda r: (-(r.vector_score or 0.0), r.chunk.chunk_id))[:depth]}
    return len(by_bm25 & by_vector) / len(by_bm25 | by_vector)


class RuleGrader:
    """correct: match >= `high`; incorrect: no result, or match < `low` with the channels not
    agreeing (overlap of their top three < AGREEMENT_MIN, or no dense channel); ambiguous otherwise.

    >>> RuleGrader().grade("q", [], 0.0).verdict
    'incorrect'
    """

    name = "rules"

    def __init__(self, low: float = DEFAULT_MATCH_LOW, high: float = DEFAULT_MATCH_HIGH) -> None:
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"grader thresholds need 0 <= low <= high <= 1, got low={low}, high={high}")
        self.low, self.high = low, high

    def grade(self, query: str, results: Sequence[RetrievalResult], match: float) -> Grade:
        if not results:
            return Grade(INCORRECT, 0.0, None, "no result")
        agreement = channel_agreement(results)
        if match >= self.high:
            return Grade(CORRECT, match, agreement, f"BM25 match {match:.2f} >= {self.high:g}")
        if match < self.low and (agreement is None or agreement < AGREEMENT_MIN):
            return Grade(INCORRECT, match, agreement, f"BM25 match {match:.2f} < {self.low:g}, channels disagree")
        return Grade(AMBIGUOUS, match, agreement, f"BM25 match {match:.2f} between {self.low:g} and {self.high:g}"
                     if match >= self.low else f"BM25 match {match:.2f} < {self.low:g} but channels agree")  # fmt: skip


class LLMGrader:
    """Asks the LLM whether the (non-RESTRICTED) passages can answer the question; the rule grade
    decides when the LLM cannot."""

    name = "llm"

    def __init__(self, provider: LLMProvider, low: float = DEFAULT_MATCH_LOW, high: float = DEFAULT_MATCH_HIGH) -> None:
        if provider is None:
            raise ValueError("the llm grader needs an LLM provider (set RAGSPINE_LLM_BASE_URL)")
        self.provider = provider
        self.rules = RuleGrader(low, high)

    def prompt(self, query: str, results: Sequence[RetrievalResult]) -> list[dict[str, str]]:
        """The messages: the question and at most five open passages (RESTRICTED never)."""
        open_results = [r for r in results if not is_restricted(r.chunk.sensitivity)][:_GRADER_PASSAGES]
        passages = "\n\n".join(f"[{n}] {r.chunk.text[:_GRADER_CHARS]}" for n, r in enumerate(open_results, 1))
        return [
            {"role": "system", "content": "You judge whether search results can answer a question."},
            {"role": "user", "content": f"Passages:\n\n{passages}\n\nQuestion: {query.strip()}\n\n"
             "Can these passages answer the question? Answer YES or NO."},
        ]  # fmt: skip

    def grade(self, query: str, results: Sequence[RetrievalResult], match: float) -> Grade:
        rule = self.rules.grade(query, results, match)
        if not any(not is_restricted(r.chunk.sensitivity) for r in results):
            return rule
        try:
            word = reply_word(self.provider.chat(self.prompt(query, results), temperature=0), ("YES", "NO"))
            if word == "YES":
                return Grade(CORRECT, match, rule.agreement, "llm: the passages answer it")
            return Grade(INCORRECT, match, rule.agreement, "llm: the passages do not answer it")
        except Exception as exc:  # noqa: BLE001 - the rule grade stands when the LLM cannot grade
            _LOG.warning("LLM grader failed (%s); using the rule grade", exc)
            return Grade(rule.verdict, match, rule.agreement, f"llm failed ({type(exc).__name__}); {rule.reason}")


GRADERS: Registry[Grader] = catalog.GRADERS.bind(Grader)


def make_grader(spec: str = "none", **options: object) -> Grader | None:
    """The grader RAGSPINE_CORRECTIVE names: none (today's single retry without filters), rules,
    llm (provider=...), or a dotted path."""
    return GRADERS.make(spec, **options)
