"""Roll-up, peers and trace on a generated corpus of groups, subsidiaries and reports, ingested
through a real workspace (SQLite, BM25): every expected document, every citation a real chunk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ragspine
from ragspine.testing.graph_corpus import SECRET, GraphCorpus, graph_corpus
from ragspine.workspace import Workspace

ENV = {"RAGSPINE_EMBEDDING": "none", "RAGSPINE_MIN_SCORE": "0"}


@pytest.fixture(scope="module")
def corpus() -> GraphCorpus:
    return graph_corpus(groups=3, subsidiaries=2, periods=("2023", "2024"), chunks_per_report=3)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory, corpus: GraphCorpus) -> Iterator[Workspace]:
    root: Path = tmp_path_factory.mktemp("graph")
    rel = corpus.relations_csv(root / "relations.csv")
    with ragspine.open(root / "ws", env={**ENV, "RAGSPINE_GRAPH_RELATIONS": str(rel),
                                          "RAGSPINE_RELATION_EXTRACTOR": "cooccurrence"}) as workspace:  # fmt: skip
        corpus.ingest_texts(workspace)
        workspace.graph.build()
        yield workspace


def _check_citations(ws: Workspace, cites: list[dict[str, Any]], doc_id: str | None = None) -> None:
    """Each citation names an active, open chunk of its document, with that chunk's locator."""
    assert cites
    for cite in cites:
        chunk = ws.chunk(cite["chunk_id"])  # raises for a missing or RESTRICTED chunk
        assert (chunk["doc_id"], chunk["source_locator"]) == (cite["doc_id"], cite["source_locator"])
        assert doc_id is None or cite["doc_id"] == doc_id


def test_rollup_returns_every_open_report_of_the_group_with_citations(ws: Workspace, corpus: GraphCorpus) -> None:
    for root in ("G1", "G2", "G3"):
        rolled = ws.graph.rollup(root)
        members = {m["entity"] for m in rolled["members"]}
        assert members == {root, f"{root}_S1", f"{root}_S2", f"{root}_S1_U", f"{root}_S2_U"}
        assert {d["doc_id"] for d in rolled["documents"]} == corpus.rollup_docs[root]
        for doc in rolled["documents"]:
            _check_citations(ws, doc["citations"], doc["doc_id"])
            assert all(ws.chunk(c["chunk_id"])["entity"] == doc["entity"] for c in doc["citations"])
    deep = {m["entity"]: m for m in ws.graph.rollup("G1")["members"]}["G1_S1_U"]
    assert deep["depth"] == 2 and [p["provenance"][0]["line"] > 1 for p in deep["path"]] == [True, True]


def test_rollup_for_one_period_and_an_alias(ws: Workspace, corpus: GraphCorpus) -> None:
    rolled = ws.graph.rollup("G2 Holdings", period="2024")  # the alias resolves to G2
    assert rolled["entity"] == "G2"
    expected = {d for (e, p), docs in corpus.open_docs.items() if e.startswith("G2") and p == "2024" for d in docs}
    assert {d["doc_id"] for d in rolled["documents"]} == expected


def test_rollup_search_is_restricted_to_the_group(ws: Workspace, corpus: GraphCorpus) -> None:
    found = ws.graph.rollup("G1_S1", query="revenue exports", top_k=50)
    assert found["filters"] == {"entity": {"in": ["G1_S1", "G1_S1_U"]}}
    assert found["snippets"] and {s["entity"] for s in found["snippets"]} <= {"G1_S1", "G1_S1_U"}
    assert {s["doc_id"] for s in found["snippets"]} == {d for d in corpus.rollup_docs["G1"] if "G1_S1" in d}
    assert SECRET not in str(found)


def test_peers_for_a_period_cite_each_peers_reports(ws: Workspace, corpus: GraphCorpus) -> None:
    compared = ws.graph.peers("G2", period="2023")
    rows = {r["entity"]: r for r in compared["rows"]}
    assert set(rows) == {"G1", "G2", "G3"}  # G1 declares G2, G2 declares G3
    for entity, row in rows.items():
        assert {d["doc_id"] for d in row["documents"]} == corpus.open_docs.get((entity, "2023"), set())
        for doc in row["documents"]:
            _check_citations(ws, doc["citations"], doc["doc_id"])
    assert rows["G3"]["relation"]["provenance"][0]["source"] == "relations_file"


def test_trace_gives_the_file_line_and_the_chunks_that_support_it(ws: Workspace) -> None:
    traced = ws.graph.trace("G1_S1", "G1", "subsidiary_of")
    (edge,) = traced["edges"]
    assert edge["provenance"][0]["file"].endswith("relations.csv") and edge["provenance"][0]["line"] > 1
    _check_citations(ws, edge["supporting"])
    assert all("G1" in ws.chunk(c["chunk_id"])["text"] for c in edge["supporting"])
    cooc = ws.graph.trace("G1_S1", "G1", "co_occurs_with")["edges"][0]
    _check_citations(ws, cooc["provenance"][0]["chunks"])
    with pytest.raises(ValueError, match="no peer_of edge"):
        ws.graph.trace("G1_S1", "G1", "peer_of")
    with pytest.raises(ValueError, match="ragspine graph show"):
        ws.graph.trace("G1", "NOBODY")


def test_neighbors_of_a_document_and_show(ws: Workspace) -> None:
    edges = ws.graph.neighbors("document:report-G1-2023")["edges"]
    assert {e["type"] for e in edges} == {"mentions", "in_period", "about_topic", "in_geography"}
    shown = ws.graph.show()
    assert shown["built"] and not shown["stale"] and shown["edges"]["subsidiary_of"] == 12


def test_a_stale_graph_hides_a_document_that_became_restricted(tmp_path: Path, corpus: GraphCorpus) -> None:
    rel = corpus.relations_csv(tmp_path / "relations.csv")
    with ragspine.open(tmp_path / "ws", env={**ENV, "RAGSPINE_GRAPH_RELATIONS": str(rel)}) as ws:
        corpus.ingest_texts(ws)
        ws.graph.build()
        doc = sorted(corpus.rollup_docs["G3"])[0]
        ws.ingest_text(f"{SECRET} now restricted", doc, entity=doc.split("-")[1], period=doc.split("-")[2],
                       sensitivity="RESTRICTED")  # fmt: skip
        assert ws.graph.show()["stale"]
        rolled = ws.graph.rollup("G3")
        assert doc not in {d["doc_id"] for d in rolled["documents"]}
        assert {d["doc_id"] for d in rolled["documents"]} == corpus.rollup_docs["G3"] - {doc}
        assert all(e["source"] != f"document:{doc}" for e in ws.graph.neighbors("period:2023")["edges"])


def test_queries_before_a_build_say_what_to_do(tmp_path: Path) -> None:
    with ragspine.open(tmp_path / "ws", env=ENV) as ws:
        with pytest.raises(ValueError, match="ragspine graph build"):
            ws.graph.rollup("G1")


def test_defaults_build_no_graph_and_leave_search_alone(tmp_path: Path, corpus: GraphCorpus) -> None:
    with ragspine.open(tmp_path / "ws", env=ENV) as ws:
        corpus.ingest_texts(ws)
        hits = ws.search("revenue exports", top_k=5)
        assert hits and "graph" not in ws.__dict__  # the graph service is never built unless asked
    assert not list(tmp_path.rglob("*.graph.json"))
