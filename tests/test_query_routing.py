"""Adaptive-RAG's rule classifier and corrective retrieval's rule grader (no LLM)."""

from __future__ import annotations

import pytest

from ragspine.retrieval.model import Chunk
from ragspine.retrieval.query.adaptive import DECOMPOSE, SINGLE, RuleComplexityClassifier, make_complexity_classifier
from ragspine.retrieval.query.corrective import (
    AMBIGUOUS,
    CORRECT,
    INCORRECT,
    RuleGrader,
    channel_agreement,
    make_grader,
)
from ragspine.retrieval.query.glossary import Glossary
from ragspine.retrieval.types import RetrievalResult

GLOSSARY = Glossary.from_dict({"entities": {"ACME_CN": ["艾克美中国"], "RIVAL_CO": ["对手公司"]}})


@pytest.mark.parametrize(
    ("query", "route", "reason"),
    [
        ("为什么营收下滑", SINGLE, None),
        ("why did revenue fall in 2024", SINGLE, None),
        ("艾克美中国与对手公司的毛利率有何不同", DECOMPOSE, "comparison"),
        ("艾克美中国和对手公司的营收", DECOMPOSE, "several entities (ACME_CN, RIVAL_CO)"),
        ("2023年与2024年上半年营收", DECOMPOSE, "several periods (2023, 2024)"),
        ("营收为什么下滑？成本呢？", DECOMPOSE, "several questions"),
        ("营收下滑的原因以及管理层的应对", DECOMPOSE, "conjunction joining two asks"),
        ("compare revenue in FY2023 and FY2024", DECOMPOSE, "comparison"),
        ("is drug A better than drug B", DECOMPOSE, "comparison"),
        ("what caused the drop and what did management do", DECOMPOSE, "conjunction joining two asks"),
        ("salt and pepper", SINGLE, None),
    ],
)
def test_the_rule_classifier_routes_by_the_questions_shape(query: str, route: str, reason: str | None) -> None:
    decided = RuleComplexityClassifier(GLOSSARY).classify(query)
    assert decided.route == route
    assert (reason in decided.reasons) if reason else decided.reasons == ()


def test_the_classifier_registry() -> None:
    assert make_complexity_classifier("none") is None
    assert isinstance(make_complexity_classifier("rules", glossary=GLOSSARY), RuleComplexityClassifier)
    with pytest.raises(ValueError, match="unknown adaptive classifier 'smart'; valid: none, rules, llm"):
        make_complexity_classifier("smart")
    with pytest.raises(ValueError, match="needs an LLM provider"):
        make_complexity_classifier("llm", provider=None)


def _results(*rows: tuple[str, float, float | None]) -> list[RetrievalResult]:
    return [RetrievalResult(Chunk(cid, "d", 0, "t", "d"), bm25, vector, 0.0) for cid, bm25, vector in rows]


def test_the_rule_grader_reads_match_strength_and_channel_agreement() -> None:
    grader = RuleGrader(low=0.2, high=0.5)
    assert grader.grade("q", [], 0.9).verdict == INCORRECT
    lexical_only = _results(("a", 3.0, None), ("b", 1.0, None))
    assert grader.grade("q", lexical_only, 0.6).verdict == CORRECT
    assert grader.grade("q", lexical_only, 0.3).verdict == AMBIGUOUS
    assert grader.grade("q", lexical_only, 0.1).verdict == INCORRECT
    agree = _results(("a", 3.0, 0.9), ("b", 1.0, 0.1))
    disagree = _results(("a", 3.0, 0.1), ("b", 1.0, 0.2), ("c", 0.5, 0.7), ("d", 0.0, 0.9), ("e", 0.0, 0.8))
    assert grader.grade("q", agree, 0.1).verdict == AMBIGUOUS  # weak BM25, but the channels agree
    assert grader.grade("q", disagree, 0.1).verdict == INCORRECT
    assert grader.grade("q", disagree, 0.1).to_dict()["agreement"] == pytest.approx(0.2)


def test_channel_agreement_is_none_without_vectors_and_symmetric_in_order() -> None:
    assert channel_agreement(_results(("a", 1.0, None))) is None
    rows = _results(("a", 3.0, 0.9), ("b", 2.0, 0.8), ("c", 1.0, 0.7))
    assert channel_agreement(rows) == 1.0
    assert channel_agreement(list(reversed(rows))) == 1.0


def test_the_grader_registry_and_thresholds() -> None:
    assert make_grader("none") is None
    assert isinstance(make_grader("rules"), RuleGrader)
    with pytest.raises(ValueError, match="0 <= low <= high <= 1"):
        RuleGrader(low=0.6, high=0.5)
