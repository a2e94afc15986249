"""Query transforms, decomposition, Adaptive routing and corrective retrieval behind the security gate,
driven by the stub OpenAI-compatible server (tests/llm_stub.py) through the real HTTP provider."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_stub import LLMStubServer, StubLLM

from ragspine.answer import NO_SOURCES, ask
from ragspine.llm.openai_compatible import OpenAICompatibleProvider
from ragspine.retrieval.filters import parse_filter, to_dict
from ragspine.retrieval.fusion.rrf import rrf_fuse
from ragspine.retrieval.link.guarded import QueryPlan
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever, build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.query.adaptive import LLMComplexityClassifier, RuleComplexityClassifier
from ragspine.retrieval.query.corrective import LLMGrader, RuleGrader
from ragspine.retrieval.query.gate import GateRules, SecurityGate
from ragspine.retrieval.query.glossary import Glossary
from ragspine.retrieval.query.transforms import (
    HydeTransform,
    LLMDecomposer,
    LLMRewriter,
    RagFusionTransform,
    StepBackTransform,
    make_query_transform,
)

GLOSSARY = Glossary.from_dict({"entities": {"ACME_CN": ["艾克美中国"], "RIVAL_CO": ["对手公司"]}})
SECRET = "SECRET-MARKER-7731"
DOCS = [
    ("d1", "艾克美中国2024年营收下滑，主要原因是出口减少。", "ACME_CN", "2024", "INTERNAL"),
    ("d2", "艾克美中国2023年毛利率提升至百分之三十。", "ACME_CN", "2023", "INTERNAL"),
    ("d3", "对手公司2024年营收增长百分之十五。", "RIVAL_CO", "2024", "PUBLIC"),
    ("d4", f"机密 {SECRET} exports tariffs 艾克美中国营收 裁员计划", "ACME_CN", "2024", "RESTRICTED"),
    ("d5", "Exports to Norway fell sharply because of new tariffs.", "ACME_CN", "2024", "PUBLIC"),
]
# What the stub answers, by the instruction each prompt carries.
REPLIES = {
    "hyde": "Exports fell because new tariffs were imposed.",
    "rag_fusion": "1. exports tariffs\n2. RIVAL_CO revenue 2024\n3. 对手公司营收\n4. Norway exports",
    "step_back": "Why do exports fall?",
    "sub_question": "艾克美中国2024年营收为何下滑\n艾克美中国2023年毛利率\n对手公司2024年营收",
    "classifier": "COMPLEX",
    "grader": "YES",
    "rewrite": "exports tariffs",
}
_MARKERS = {  # the classifier first: its prompt mentions sub-questions too
    "classifier": "SIMPLE",
    "hyde": "Write one passage",
    "rag_fusion": "different search queries",
    "step_back": "step-back question",
    "sub_question": "sub-questions",
    "grader": "YES or NO",
    "rewrite": "found no good documents",
}


def respond(replies: dict[str, str]) -> Callable[[dict[str, Any]], str]:
    def reply(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        for name, marker in _MARKERS.items():
            if marker in prompt:
                return replies[name]
        raise AssertionError(f"unexpected prompt {prompt!r}")

    return reply


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with LLMStubServer(StubLLM(responder=respond(REPLIES))) as served:
        yield served


@pytest.fixture
def provider(stub: StubLLM) -> Iterator[OpenAICompatibleProvider]:
    with OpenAICompatibleProvider(stub.base_url, "stub-model", timeout=0.5, max_retries=0) as made:
        yield made


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Callable[..., NarrativeIndexRetriever]]:
    """`pipeline(**plan)`: a store with DOCS and a link running QueryPlan(**plan) (gate denying
    RIVAL_CO unless given), no listwise judge; all closed at teardown."""
    stores = []

    def make(**plan: Any) -> NarrativeIndexRetriever:
        plan.setdefault("gate", SecurityGate(GateRules(deny_entities=("RIVAL_CO",)), GLOSSARY))
        retriever, store = build_narrative_retriever(
            tmp_path / f"s{len(stores)}" / "chunks.db", query_plan=QueryPlan(**plan), query_rewriter=None
        )
        stores.append(store)
        for doc_id, text, entity, period, sensitivity in DOCS:
            retriever.index.ingest(text, DocumentMeta(doc_id, entity=entity, period=period, sensitivity=sensitivity))
        return retriever

    yield make
    for store in stores:
        store.close()


def _ids(snippets: list[dict[str, Any]]) -> list[str]:
    return [s["doc_id"] for s in snippets]


# -- transforms -------------------------------------------------------------------------------
def test_hyde_probe_finds_what_the_question_cannot_and_is_never_returned(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider, stub: StubLLM
) -> None:
    assert pipeline().retrieve("why did shipments abroad drop") == []
    snippets = pipeline(transform=HydeTransform(provider)).retrieve("why did shipments abroad drop")
    assert _ids(snippets) == ["d5"]
    assert all(s["text"] != REPLIES["hyde"] and s["sensitivity"] != "RESTRICTED" for s in snippets)
    assert snippets[0]["lineage"]["transform"] == {"name": "hyde", "generated": 1}
    assert stub.prompts().count("Question: why did shipments abroad drop") == 1


def test_rag_fusion_fuses_the_screened_reformulations_with_rrf(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider
) -> None:
    retriever = pipeline(transform=RagFusionTransform(provider))
    run = retriever.retrieve_run("why did shipments abroad drop", top_k=10)
    lineage = run.snippets[0]["lineage"]
    assert lineage["transform"] == {"name": "rag_fusion", "generated": 4}
    assert [(r["query"], r["origin"]) for r in lineage["gate_refused"]] == [
        ("RIVAL_CO revenue 2024", "rag_fusion"), ("对手公司营收", "rag_fusion")
    ]  # fmt: skip
    # the order is rrf_fuse over the rankings of the variants that passed the gate
    allowed = ["why did shipments abroad drop", "exports tariffs", "Norway exports"]
    hybrid = retriever.index.retriever()
    rankings = [[r.chunk.chunk_id for r in hybrid.search(v, top_k=100)] for v in allowed]
    fused = rrf_fuse(rankings)
    expected = sorted(fused, key=lambda c: (-fused[c], c))
    open_ids = [c for c in expected if not c.startswith("d4")]
    assert [s["chunk_id"] for s in run.snippets] == open_ids
    assert "d5" in _ids(run.snippets) and "d4" not in _ids(run.snippets)


def test_step_back_searches_a_general_question_beside_the_original(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider
) -> None:
    snippets = pipeline(transform=StepBackTransform(provider)).retrieve("why did shipments abroad drop")
    assert _ids(snippets) == ["d5"]
    assert snippets[0]["lineage"]["transform"] == {"name": "step_back", "generated": 1}


@pytest.mark.parametrize(("behaviour", "reply"), [("500", None), ("garbage", None), ("slow", None), ("ok", "")])
def test_a_failing_llm_degrades_to_the_untransformed_query(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider, stub: StubLLM,
    behaviour: str, reply: str | None,
) -> None:  # fmt: skip
    stub.default, stub.slow_s = behaviour, 1.0
    if reply is not None:
        stub.responder = lambda body: reply
    query = "艾克美中国营收"
    expected = pipeline().retrieve(query)
    for transform in (HydeTransform(provider), RagFusionTransform(provider), StepBackTransform(provider)):
        snippets = pipeline(transform=transform).retrieve(query)
        assert [s["chunk_id"] for s in snippets] == [s["chunk_id"] for s in expected]
        assert snippets[0]["lineage"]["transform"]["generated"] == 0
        assert snippets[0]["lineage"]["transform"]["error"]


# -- the gate ---------------------------------------------------------------------------------
def test_a_query_naming_a_denied_entity_reaches_no_llm_and_is_refused_explicitly(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider, stub: StubLLM
) -> None:
    retriever = pipeline(transform=HydeTransform(provider), decomposer=LLMDecomposer(provider),
                         grader=LLMGrader(provider), rewriter=LLMRewriter(provider))  # fmt: skip
    run = retriever.retrieve_run("对手公司2024年营收")
    assert run.snippets == [] and stub.requests == []
    assert run.refusal == "security gate: the query names the denied entity 'RIVAL_CO'"
    answer = ask(retriever, "对手公司2024年营收", provider=provider)
    assert answer.text == NO_SOURCES and "security gate" in answer.note and stub.requests == []


def test_glossary_variants_pass_the_gate_too(tmp_path: Path) -> None:
    glossary = Glossary.from_dict({"entities": {"ACME_CN": ["艾克美中国"]}, "metrics": {"营收": ["RIVAL_CO"]}})
    from ragspine.retrieval.query.glossary import GlossaryQueryRewriter

    gate = SecurityGate(GateRules(deny_entities=("RIVAL_CO",)))
    retriever, store = build_narrative_retriever(
        tmp_path / "c.db", query_rewriter=GlossaryQueryRewriter(glossary), query_plan=QueryPlan(gate=gate)
    )
    try:
        retriever.index.ingest("RIVAL_CO 增长", DocumentMeta("r"))
        retriever.index.ingest("营收 下滑", DocumentMeta("a"))
        run = retriever.retrieve_run("营收")
        assert _ids(run.snippets) == ["a"]
        assert run.snippets[0]["lineage"]["gate_refused"] == [
            {"query": "RIVAL_CO", "origin": "rewriter", "reason": "names the denied entity 'RIVAL_CO'"}
        ]
    finally:
        store.close()


# -- decomposition and Adaptive routing --------------------------------------------------------
def test_decomposition_runs_each_screened_sub_question_and_merges_round_robin(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider
) -> None:
    run = pipeline(decomposer=LLMDecomposer(provider)).retrieve_run("艾克美中国2024年营收和2023年毛利率", top_k=10)
    subs = ["艾克美中国2024年营收为何下滑", "艾克美中国2023年毛利率"]
    assert run.lineage["decomposition"]["sub_questions"] == subs
    assert run.lineage["decomposition"]["gate_refused"][0]["query"] == "对手公司2024年营收"
    ids = [s["chunk_id"] for s in run.snippets]
    assert len(ids) == len(set(ids)) and "d4:0" not in ids
    assert [s["lineage"]["sub_question"] for s in run.snippets[:2]] == subs
    assert {"d1", "d2"} <= set(_ids(run.snippets))


def test_adaptive_rules_send_simple_questions_single_shot_without_an_llm_call(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider, stub: StubLLM
) -> None:
    retriever = pipeline(decomposer=LLMDecomposer(provider), classifier=RuleComplexityClassifier(GLOSSARY))
    simple = retriever.retrieve_run("艾克美中国营收")
    assert simple.lineage["route"] == {"route": "single", "reasons": []} and stub.requests == []
    assert "sub_question" not in simple.snippets[0]["lineage"]
    complex_ = retriever.retrieve_run("2023年与2024年的艾克美中国营收")
    assert complex_.lineage["route"]["route"] == "decompose" and len(stub.requests) == 1
    assert complex_.snippets[0]["lineage"]["sub_question"] == "艾克美中国2024年营收为何下滑"


def test_the_llm_classifier_falls_back_to_the_rules(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider, stub: StubLLM
) -> None:
    classifier = LLMComplexityClassifier(provider, GLOSSARY)
    assert classifier.classify("艾克美中国营收").route == "decompose"  # the stub says COMPLEX
    stub.default = "500"
    route = classifier.classify("艾克美中国营收")
    assert route.route == "single" and route.reasons[0].startswith("llm failed")


# -- corrective retrieval ---------------------------------------------------------------------
def test_corrective_refuses_weak_context_explicitly(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider
) -> None:
    retriever = pipeline(grader=RuleGrader())
    run = retriever.retrieve_run("quantum chromodynamics lattice gauge exports")
    assert run.snippets == [] and run.refusal is not None and run.refusal.startswith("corrective retrieval")
    corrective = run.lineage["corrective"]
    assert corrective["refused"] and corrective["actions"] == [] and corrective["grades"][0]["verdict"] == "incorrect"
    answer = ask(retriever, "quantum chromodynamics lattice gauge exports")
    assert answer.text == NO_SOURCES and answer.note.startswith("no grounded answer: corrective retrieval")


def test_corrective_drops_filters_then_rewrites_at_most_two_actions(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider, stub: StubLLM
) -> None:
    dropped = pipeline(grader=RuleGrader()).retrieve_run("exports tariffs Norway", filters={"period": "1999"})
    assert _ids(dropped.snippets) == ["d5"]
    lineage = dropped.snippets[0]["lineage"]
    assert lineage["corrective"]["actions"] == [{"action": "drop_filters"}]
    assert lineage["retried_without_filters"] and lineage["requested_filters"] == {"period": "1999"}
    assert dropped.filters_dropped == ["period"]
    strict = pipeline(grader=RuleGrader()).retrieve_run("exports tariffs Norway", filters={"period": "1999"},
                                                        filter_fallback="strict")  # fmt: skip
    assert strict.snippets == [] and strict.filters_dropped == [] and strict.lineage["corrective"]["actions"] == []
    rewritten = pipeline(grader=RuleGrader(), rewriter=LLMRewriter(provider)).retrieve_run(
        "why did shipments abroad drop", filters={"period": "1999"}
    )
    actions = rewritten.snippets[0]["lineage"]["corrective"]["actions"]
    assert [a["action"] for a in actions] == ["drop_filters", "rewrite"] and actions[1]["query"] == "exports tariffs"
    assert _ids(rewritten.snippets)[0] == "d5"
    stub.responder = respond({**REPLIES, "rewrite": "对手公司 exports"})
    refused = pipeline(grader=RuleGrader(), rewriter=LLMRewriter(provider)).retrieve_run("why did shipments abroad drop")
    assert refused.refusal is not None
    assert refused.lineage["corrective"]["actions"][0]["gate_refused"][0]["origin"] == "corrective_rewrite"


def test_the_corrective_loop_extracts_filters_once_per_query(
    pipeline: Callable[..., NarrativeIndexRetriever],
) -> None:
    asked: list[str] = []

    class Extractor:
        def extract(self, query: str) -> Any:
            asked.append(query)
            return parse_filter({"entity": "ACME_CN"})

    retriever = pipeline(grader=RuleGrader())
    retriever.filter_extractor = Extractor()
    run = retriever.retrieve_run("exports tariffs Norway", filters={"period": "1999"})
    assert run.lineage["corrective"]["actions"] == [{"action": "drop_filters"}]
    assert run.snippets[0]["lineage"]["requested_extracted"] == to_dict(parse_filter({"entity": "ACME_CN"}))
    assert asked == ["exports tariffs Norway"]


def test_the_llm_grader_never_sees_restricted_text(
    pipeline: Callable[..., NarrativeIndexRetriever], provider: OpenAICompatibleProvider, stub: StubLLM
) -> None:
    stub.responder = respond({**REPLIES, "grader": "NO"})
    run = pipeline(grader=LLMGrader(provider)).retrieve_run("艾克美中国营收 exports tariffs")
    assert run.refusal is not None and stub.requests
    assert SECRET not in stub.prompts() and "裁员计划" not in stub.prompts()


def test_the_transform_registry_names_its_choices_and_needs_a_provider() -> None:
    assert make_query_transform("none") is None
    with pytest.raises(ValueError, match="valid: none, hyde, rag_fusion, step_back"):
        make_query_transform("hype")
    with pytest.raises(ValueError, match="needs an LLM provider"):
        make_query_transform("hyde", provider=None)


def test_reply_lines_strip_numbering_and_quotes() -> None:
    from ragspine.retrieval.query.transforms import reply_lines

    assert reply_lines("1) 「营收」\n2、 成本\n- cost\n* 营收", 3) == ["营收", "成本", "cost"]
    with pytest.raises(ValueError, match="not text"):
        reply_lines(None, 3)
