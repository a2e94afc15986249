"""The llm relation extractor and GraphRAG communities, driven by the stub OpenAI-compatible server
(tests/llm_stub.py, a mock of the user's endpoint) through the real HTTP provider and the workspace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_stub import LLMStubServer, StubLLM

import ragspine
from ragspine.graph.community import detect_communities
from ragspine.testing.graph_corpus import SECRET, graph_corpus
from ragspine.workspace import Workspace

RELATIONS = ("ACME_HK | supplier_of | BETA_CO\nRIVAL_CO | customer_of | ACME_HK\n"
             "ACME_HK | subsidiary_of | INVENTED_CO\nACME_HK | owns | BETA_CO\nnot a relation line")  # fmt: skip


def _reply(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    if "SOURCE | RELATION | TARGET" in prompt:
        return RELATIONS
    if "Summaries:" in prompt:
        return "The groups export parts."
    return "Summary: exports and parts."


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with LLMStubServer(StubLLM(responder=_reply)) as server:
        yield server


def _open(tmp_path: Path, stub: StubLLM, **env: str) -> Workspace:
    (tmp_path / "gate.json").write_text(json.dumps({"deny_entities": ["RIVAL_CO"]}))
    return ragspine.open(tmp_path / "ws", env={
        "RAGSPINE_EMBEDDING": "none", "RAGSPINE_LLM_BASE_URL": stub.base_url, "RAGSPINE_LLM_MODEL": "stub",
        "RAGSPINE_QUERY_GATE": str(tmp_path / "gate.json"), **env})  # fmt: skip


def test_llm_edges_are_model_derived_unverified_and_gate_screened(tmp_path: Path, stub: StubLLM) -> None:
    with _open(tmp_path, stub, RAGSPINE_RELATION_EXTRACTOR="llm") as ws:
        ws.ingest_text("ACME_HK supplies parts to BETA_CO. RIVAL_CO buys from ACME_HK.", "d1", entity="ACME_HK")
        ws.ingest_text(f"{SECRET} ACME_HK will acquire GAMMA_CO.", "d2", entity="ACME_HK", sensitivity="RESTRICTED")
        report = ws.graph.build()
        graph = ws.graph.graph.graph()
    assert SECRET not in stub.prompts() and "GAMMA_CO" not in stub.prompts()
    assert len(stub.requests) == 1  # one open chunk, one call
    edge = graph.edges[("entity:ACME_HK", "entity:BETA_CO", "supplier_of")]
    assert (edge.derivation, edge.verified) == ("model-derived", False)
    assert [c.doc_id for c in edge.chunk_refs()] == ["d1"] and edge.provenance[0].source == "llm"
    assert graph.nodes["entity:BETA_CO"].attrs == {"derivation": "model-derived"}
    text = graph.to_json().decode()
    assert "RIVAL_CO" not in text and "INVENTED_CO" not in text and SECRET not in text
    reasons = {d["text"]: d["reason"] for d in report.dropped}
    assert reasons["RIVAL_CO"] == "names the denied entity 'RIVAL_CO'"
    assert reasons["INVENTED_CO"] == "not in the passage"
    assert any("owns" in t for t in reasons)


def test_llm_extractor_without_an_llm_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="RAGSPINE_RELATION_EXTRACTOR='llm' needs an LLM"):
        ragspine.open(tmp_path / "ws", env={"RAGSPINE_EMBEDDING": "none", "RAGSPINE_RELATION_EXTRACTOR": "llm"})


def test_communities_are_a_deterministic_partition_with_synthesis_nodes(tmp_path: Path) -> None:
    corpus = graph_corpus(groups=3, subsidiaries=2, chunks_per_report=3)
    rel = corpus.relations_csv(tmp_path / "rel.csv")
    env = {"RAGSPINE_EMBEDDING": "none", "RAGSPINE_GRAPH_RELATIONS": str(rel), "RAGSPINE_RELATION_EXTRACTOR": "cooccurrence"}
    with ragspine.open(tmp_path / "ws", env=env) as ws:
        corpus.ingest_texts(ws)
        ws.graph.build(communities=True)
        graph = ws.graph.graph.graph()
        found = detect_communities(graph)
        assert found == detect_communities(graph)
        members = [m for c in found for m in c]
        assert len(members) == len(set(members)) and len(found) > 1  # a partition, not one blob
        home = {m: i for i, c in enumerate(found) for m in c}
        for child in ("G1_S1", "G1_S2", "G2_S1", "G3_S2"):  # a subsidiary and its only child stay together
            assert home[f"entity:{child}"] == home[f"entity:{child}_U"]
        nodes = ws.graph.graph.nodes("community")
        assert len(nodes) == len(found) and all(n.attrs["is_synthesis"] and not n.attrs["citable"] for n in nodes)
        assert SECRET not in graph.to_json().decode()
        answer = ws.graph.global_answer("Which groups report exports?")  # no LLM: the summaries as they are
        assert answer["mode"] == "summaries" and answer["citations"]
        for cite in answer["citations"]:
            assert ws.chunk(cite["chunk_id"])["source_locator"] == cite["source_locator"]


def test_global_answer_by_the_llm_cites_member_chunks_never_restricted(tmp_path: Path, stub: StubLLM) -> None:
    corpus = graph_corpus(groups=2, subsidiaries=1, chunks_per_report=3, restricted_every=2)
    rel = corpus.relations_csv(tmp_path / "rel.csv")
    with _open(tmp_path, stub, RAGSPINE_GRAPH_RELATIONS=str(rel), RAGSPINE_RELATION_EXTRACTOR="cooccurrence") as ws:
        corpus.ingest_texts(ws)
        ws.graph.build(communities=True)
        answer = ws.graph.global_answer("What do the groups export?")
        assert answer["mode"] == "llm" and answer["answer"] == "The groups export parts."
        assert all(c["doc_id"] not in corpus.restricted_docs for c in answer["citations"]) and answer["citations"]
        assert all(s["is_synthesis"] and not s["citable"] for s in answer["communities"])
    assert corpus.restricted_docs and SECRET not in stub.prompts()
