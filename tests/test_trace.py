"""The query pipeline's trace: one step per stage, in the order the stages run, no chunk text,
nothing RESTRICTED, and results identical with and without it; `ragspine search --explain`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragspine.cli import main
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.trace import STAGES, Trace
from ragspine.retrieval.query.gate import GateRules, SecurityGate
from ragspine.retrieval.link.guarded import QueryPlan
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

_DOCS = {
    "acme": ("营收下滑的原因是出口订单减少。Revenue fell because export orders dropped.", "PUBLIC"),
    "boreal": ("Borealis gross margin fell because of a battery recall.", "INTERNAL"),
    "memo": ("营收下滑 revenue fell: board only, the layoffs plan.", "RESTRICTED"),
    "steel": ("Steel prices rose in Europe; demand for motors was flat.", "PUBLIC"),
}


class _Reverse:
    name = "reverse"

    def rerank(self, query: str, candidates: list[str]) -> list[int]:
        return list(reversed(range(len(candidates))))


@pytest.fixture
def retriever(tmp_path: Path):  # type: ignore[no-untyped-def]
    retriever, store = build_narrative_retriever(
        str(tmp_path / "t.db"), embedding_backend=DeterministicEmbeddingBackend(dim=32), reranker=_Reverse()
    )
    for doc_id, (text, label) in _DOCS.items():
        retriever.index.ingest(text, DocumentMeta(doc_id, entity=doc_id.upper(), sensitivity=label))
    yield retriever
    retriever.index.close()
    store.close()


def test_every_stage_is_one_step_in_the_pipeline_s_order(retriever) -> None:  # type: ignore[no-untyped-def]
    trace = Trace()
    run = retriever.retrieve_run("营收下滑 revenue", top_k=3, trace=trace)
    names = [step.stage for step in trace.steps]
    assert names == ["gate", "variants", "filters", "channels", "fusion", "rerank", "exit", "snippets"]
    assert [STAGES.index(n) for n in names] == sorted(STAGES.index(n) for n in names)
    fusion, rerank, exit_, snippets = trace.of("fusion")[0], trace.of("rerank")[0], trace.of("exit")[0], trace.of("snippets")[0]
    assert fusion.went_out == rerank.came_in == min(fusion.came_in or 0, retriever.index.top_n)  # the reranker's head
    assert rerank.decisions["reranker"] == "reverse" and rerank.went_out == 3
    assert exit_.came_in == exit_.went_out == 3  # RESTRICTED was masked before scoring
    assert snippets.went_out == len(run.snippets) == 3
    assert [s["chunk_id"] for s in run.snippets][0] != fusion.decisions["top"][0]  # reversed by the reranker


def test_the_trace_holds_no_text_and_nothing_restricted(retriever) -> None:  # type: ignore[no-untyped-def]
    trace = Trace()
    retriever.retrieve_run("营收下滑 revenue fell", top_k=4, trace=trace)
    dumped = json.dumps(trace.to_dict(), ensure_ascii=False) + trace.render()
    for doc_id, (text, _) in _DOCS.items():
        assert text not in dumped and text[-16:] not in dumped, doc_id  # the query holds some of their words
    assert "memo" not in dumped and "layoffs" not in dumped and "board only" not in dumped


def test_tracing_changes_no_result(retriever) -> None:  # type: ignore[no-untyped-def]
    for query in ("营收下滑", "gross margin recall", "steel demand"):
        plain = _untimed(retriever.retrieve(query, top_k=3))
        traced = _untimed(retriever.retrieve_run(query, top_k=3, trace=Trace()).snippets)
        assert traced == plain and plain


def _untimed(snippets: list[dict]) -> list[dict]:  # type: ignore[type-arg]
    """The snippets without the reranker's wall time (the one value two runs may differ in)."""
    for snippet in snippets:
        snippet["lineage"]["rerank"].pop("ms", None)  # one dict shared by the run's snippets
    return snippets


def test_a_refused_query_stops_at_the_gate(retriever) -> None:  # type: ignore[no-untyped-def]
    retriever.plan = QueryPlan(gate=SecurityGate(GateRules(deny_entities=("BOREALIS",))))
    trace = Trace()
    run = retriever.retrieve_run("Borealis margin", trace=trace)
    assert run.refusal is not None and run.snippets == []
    assert [s.stage for s in trace.steps] == ["gate", "snippets"]
    assert trace.steps[0].decisions["allowed"] is False and trace.steps[0].decisions["reason"]


def test_the_filter_retry_is_a_step_before_the_second_ranking(retriever) -> None:  # type: ignore[no-untyped-def]
    trace = Trace()
    run = retriever.retrieve_run("revenue", filters={"entity": "NOBODY"}, top_k=2, trace=trace)
    assert run.snippets and run.snippets[0]["lineage"]["retried_without_filters"] is True
    names = [s.stage for s in trace.steps]
    assert names.count("channels") == 2
    retry = [i for i, s in enumerate(trace.steps) if s.stage == "filters" and "retry" in s.decisions]
    assert len(retry) == 1 and names[retry[0] + 1] == "channels"
    assert trace.of("filters")[0].decisions["filters"] == {"entity": "NOBODY"}


def test_search_explain_prints_the_trace(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 年报\n\n营收下滑的原因是出口订单减少。\n", "utf-8")
    db = str(tmp_path / "s.db")
    env = {"RAGSPINE_EMBEDDING": "none"}
    result = CliRunner().invoke(main, ["ingest", str(docs), "--db", db], env=env)
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["search", "营收下滑", "--db", db, "--explain"], env=env)
    assert result.exit_code == 0, result.output
    assert "a.md" in result.stdout and "gate" not in result.stdout
    for stage in ("gate", "variants", "filters", "channels", "fusion", "exit", "snippets"):
        assert f". {stage}" in result.stderr, stage
    result = CliRunner().invoke(main, ["search", "营收下滑", "--db", db, "--explain", "--json"], env=env)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["snippets"][0]["doc_id"] == "a.md"
    steps = json.loads(result.stderr)["steps"]
    assert [s["stage"] for s in steps][0] == "gate" and steps[-1]["stage"] == "snippets"
    result = CliRunner().invoke(main, ["search", "营收", "--library", f"a={db}", "--explain"], env=env)
    assert result.exit_code != 0 and "--explain traces one store" in result.output


def test_otel_exports_one_span_per_stage(tmp_path: Path) -> None:
    from opentelemetry import trace as otel
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import ragspine

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.set_tracer_provider(provider)  # once per process: no other test sets one
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 年报\n\n营收下滑的原因是出口订单减少。\n", "utf-8")
    db = str(tmp_path / "s.db")
    env = {"RAGSPINE_EMBEDDING": "none"}
    assert CliRunner().invoke(main, ["ingest", str(docs), "--db", db], env=env).exit_code == 0
    with ragspine.open(db, embedding="none", otel="off") as workspace:
        workspace.search("营收下滑")
    assert exporter.get_finished_spans() == ()  # off: nothing recorded or sent
    with ragspine.open(db, embedding="none", otel="on") as workspace:
        snippets = workspace.search("营收下滑")
    spans = exporter.get_finished_spans()
    names = [s.name for s in spans]
    assert names[-1] == "ragspine.search" and names[:3] == ["ragspine.gate", "ragspine.variants", "ragspine.filters"]
    root = spans[-1]
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in spans[:-1])
    snippet_span = next(s for s in spans if s.name == "ragspine.snippets")
    assert snippet_span.attributes["ragspine.out"] == len(snippets) == 1
    assert root.start_time <= spans[0].start_time and spans[-2].end_time <= root.end_time
    assert not any("出口订单减少" in str(v) for s in spans for v in s.attributes.values())


def test_retrieve_run_refuses_an_unknown_argument(retriever) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="unexpected keyword argument 'fliters'"):
        retriever.retrieve_run("revenue", fliters={"entity": "ACME"})
    assert len(retriever.retrieve_run("revenue", top_k=1).snippets) == 1
