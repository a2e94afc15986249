"""Properties of the query stage over random corpora, labels and scripted LLM replies:
no prompt ever holds RESTRICTED text, nothing raises to the caller, and the default plan is
the pipeline it replaced."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_stub import LLMStubServer, StubLLM

from ragspine.llm.openai_compatible import OpenAICompatibleProvider
from ragspine.retrieval.link.guarded import QueryPlan
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever, _to_snippet, build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.relevance import rate
from ragspine.retrieval.query.adaptive import LLMComplexityClassifier
from ragspine.retrieval.query.corrective import LLMGrader, RuleGrader
from ragspine.retrieval.query.gate import GateRules, SecurityGate
from ragspine.retrieval.query.transforms import LLMDecomposer, LLMRewriter, make_query_transform
from ragspine.retrieval.sensitivity import is_restricted

WORDS = ["营收", "下滑", "出口", "成本", "revenue", "exports", "tariffs", "margin", "rival", "2024年", "利润"]
LABELS = ["PUBLIC", "INTERNAL", "RESTRICTED", "restricted", " Restricted ", "ＲＥＳＴＲＩＣＴＥＤ"]
_PHRASE = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
_DOCS = st.lists(st.tuples(_PHRASE, st.sampled_from(LABELS)), min_size=1, max_size=8)
# Replies the LLM might give: phrases, several lines, verdict words, empty, or HTTP failures.
_REPLY = st.one_of(
    _PHRASE,
    st.lists(_PHRASE, min_size=1, max_size=4).map("\n".join),
    st.sampled_from(["YES", "NO", "COMPLEX", "SIMPLE", "", "1. rival margin\n2. 对手 利润"]),
)
_BEHAVIOUR = st.sampled_from(["ok", "ok", "ok", "500", "garbage"])


def _corpus(retriever: NarrativeIndexRetriever, docs: list[tuple[str, str]]) -> list[str]:
    """Ingest `docs`; each RESTRICTED one carries a marker no query or reply contains."""
    markers = []
    for n, (text, label) in enumerate(docs):
        if is_restricted(label):
            markers.append(f"zzsecret{n}qq")
            text = f"{text} {markers[-1]} 机密内容{n}"
        retriever.index.ingest(text, DocumentMeta(f"doc{n}", sensitivity=label.strip() or "PUBLIC"))
    return markers


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=_DOCS,
    queries=st.lists(_PHRASE, min_size=1, max_size=2),
    replies=st.lists(st.tuples(_BEHAVIOUR, _REPLY), max_size=30),
    transform=st.sampled_from(["hyde", "rag_fusion", "step_back"]),
    deny=st.lists(st.sampled_from(["rival", "对手"]), max_size=2),
)
def test_no_prompt_holds_restricted_text_and_nothing_raises(
    docs: list[tuple[str, str]], queries: list[str], replies: list[tuple[str, str]], transform: str, deny: list[str]
) -> None:
    script = list(replies)

    def responder(body: dict[str, Any]) -> str:
        return script.pop(0)[1] if script else "YES"

    stub = StubLLM(responder=responder, script=[b for b, _ in replies])
    with LLMStubServer(stub), OpenAICompatibleProvider(stub.base_url, "m", timeout=2, max_retries=0) as provider:
        plan = QueryPlan(
            gate=SecurityGate(GateRules(deny_entities=tuple(deny))),
            transform=make_query_transform(transform, provider=provider),
            decomposer=LLMDecomposer(provider),
            classifier=LLMComplexityClassifier(provider),
            grader=LLMGrader(provider),
            rewriter=LLMRewriter(provider),
        )
        retriever, store = build_narrative_retriever(":memory:", provider, query_plan=plan)  # + the listwise judge
        try:
            markers = _corpus(retriever, docs)
            runs = [retriever.retrieve_run(query, top_k=5) for query in queries]
            for run in runs:
                assert all(not is_restricted(s["sensitivity"]) for s in run.snippets)
                assert (run.refusal is None) or run.snippets == [] or "decomposition" in run.lineage
        finally:
            store.close()
    prompts = stub.prompts()
    if not stub.requests:  # the layers call the LLM unless the gate refused the question first
        assert all(run.refusal and run.refusal.startswith("security gate") for run in runs)
    for marker in markers:
        assert marker not in prompts
    assert "机密内容" not in prompts


def _before(index: Any, query: str, filters: dict[str, str], top_k: int, mode: str) -> list[Any]:
    """What `NarrativeIndexRetriever.retrieve` returned before the query stage had a plan."""
    lineage: dict[str, Any] = {"filters": filters, "where": None, "extracted": None, "retried_without_filters": False}
    results = index.retrieve(query, top_k=top_k, **filters)
    if not results and filters:
        results = index.retrieve(query, top_k=top_k)
        lineage = {**lineage, "filters": {}, "where": None, "requested_filters": filters,
                   "requested_where": None, "retried_without_filters": True}  # fmt: skip
    snippets = [_to_snippet(r, lineage) for r in results if not is_restricted(r.chunk.sensitivity)]
    return rate(snippets, mode)  # the relevance the pipeline adds, from the same scores


@settings(max_examples=60, deadline=None)
@given(docs=_DOCS, query=_PHRASE, period=st.sampled_from([None, "2024", "1999"]), top_k=st.integers(1, 6))
def test_the_default_plan_returns_what_the_pipeline_returned_before(
    docs: list[tuple[str, str]], query: str, period: str | None, top_k: int
) -> None:
    retriever, store = build_narrative_retriever(":memory:")  # the default: glossary rewriter, gate budgets only
    try:
        for n, (text, label) in enumerate(docs):
            meta = DocumentMeta(f"doc{n}", period="2024" if n % 2 else "2023", sensitivity=label.strip())
            retriever.index.ingest(text, meta)
        filters = {"period": period} if period else {}
        assert retriever.retrieve(query, filters=filters or None, top_k=top_k) == _before(
            retriever.index, query, filters, top_k, retriever.relevance_mode
        )
    finally:
        store.close()


def test_rule_grading_needs_no_llm_and_degrades_nothing(tmp_path: Any) -> None:
    make: Callable[..., Any] = build_narrative_retriever
    retriever, store = make(":memory:", query_plan=QueryPlan(grader=RuleGrader()))
    try:
        retriever.index.ingest("营收 下滑 出口", DocumentMeta("a"))
        assert [s["doc_id"] for s in retriever.retrieve("营收 下滑 出口")] == ["a"]
        assert retriever.retrieve_run("营收 下滑 出口").lineage["corrective"]["grades"][0]["verdict"] == "correct"
    finally:
        store.close()
