"""Typed filters inside the index (both channels), extraction that only narrows, libraries."""

from __future__ import annotations

import functools

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine.cli import main
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.query.filter_extraction import RuleFilterExtractor
from ragspine.retrieval.filters import matches, parse_filter
from ragspine.retrieval.query.glossary import Glossary
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever
from ragspine.retrieval.sensitivity import is_restricted

DOCS = [
    ("a", "2024-Q3", "ACME_CN", "PUBLIC", {"pages": 12, "region": "EMEA"}),
    ("b", "2023", "ACME_HK", "PUBLIC", {"pages": 200}),
    ("c", "2025-06", "ACME_CN", "INTERNAL", {}),
    ("d", "", "BOREALIS", "PUBLIC", {"region": "APAC"}),
    ("e", "FY2024", "BOREALIS", "RESTRICTED", {"pages": 7}),
]


@pytest.fixture
def index(store: ChunkStore) -> NarrativeIndex:
    idx = NarrativeIndex(store)
    for month, (doc_id, period, entity, sensitivity, metadata) in enumerate(DOCS, start=2):
        meta = DocumentMeta(doc_id, period=period, entity=entity, sensitivity=sensitivity, metadata=metadata)
        idx.ingest(f"revenue report {doc_id} revenue", meta, valid_as_of=f"2024-0{month}-15")
    return idx


def _records(index: NarrativeIndex) -> list[dict[str, Any]]:
    out = []
    for c in index.store.iter_chunks():
        out.append({"doc_id": c.doc_id, "period": c.period, "entity": c.entity, "sensitivity": c.sensitivity,
                    "valid_as_of": c.valid_as_of, "topic": c.topic, **c.metadata})  # fmt: skip
    return out


WHERES = [
    {"period": {"gte": "2024"}}, {"period": {"lt": "2024"}}, {"period": {"between": ["2024-07", "2024-12"]}},
    {"period": "2024"}, {"entity": {"in": ["ACME_CN", "BOREALIS"]}}, {"entity": {"nin": ["ACME_CN"]}},
    {"entity": {"ne": "ACME_HK"}}, {"pages": {"gt": 10}}, {"pages": {"lte": 12}}, {"region": "EMEA"},
    {"region": {"ne": "EMEA"}}, {"doc_id": {"in": ["a", "e"]}}, {"sensitivity": "PUBLIC"},
    {"valid_as_of": {"gte": "2024-03-01"}}, {"or": [{"pages": {"gt": 100}}, {"region": "APAC"}]},
    {"and": [{"entity": "ACME_CN"}, {"period": {"gte": "2025"}}]}, {"topic": {"ne": "x"}},
]  # fmt: skip


@pytest.mark.parametrize("where", WHERES, ids=[json.dumps(w) for w in WHERES])
def test_index_filter_equals_reference_semantics(index: NarrativeIndex, where: dict[str, Any]) -> None:
    expected = sorted({r["doc_id"] for r in _records(index)
                       if matches(parse_filter(where), r) and not is_restricted(r["sensitivity"])})  # fmt: skip
    got = sorted({r.chunk.doc_id for r in index.retrieve("revenue", where=where, top_k=50)})
    assert got == expected


def test_where_does_not_change_statistics(index: NarrativeIndex) -> None:
    unfiltered = {r.chunk.doc_id: r.bm25_score for r in index.retrieve("revenue report", top_k=50)}
    for r in index.retrieve("revenue report", where={"pages": {"gt": 0}}, top_k=50):
        assert r.bm25_score == pytest.approx(unfiltered[r.chunk.doc_id])


class _Backend:
    """Tiny test-only embedding (users plug a real model)."""

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [[1.0, float(len(t) % 3)] for t in texts]


def test_vector_channel_sees_the_same_filtered_set(store: ChunkStore) -> None:
    backend = _Backend()
    idx = NarrativeIndex(store, embedding_backend=backend)
    idx.ingest("alpha words", DocumentMeta("x", metadata={"pages": 3}))
    idx.ingest("beta other", DocumentMeta("y", metadata={"pages": 300}))
    results = idx.retrieve("gamma", where={"pages": {"lt": 10}})
    assert [r.chunk.doc_id for r in results] == ["x"], "the dense channel ranks only what the filter allows"
    assert results[0].vector_score is not None and results[0].bm25_score == 0.0


def test_retrieve_with_typed_filters_in_the_link(index: NarrativeIndex) -> None:
    retriever = NarrativeIndexRetriever(index)
    snippets = retriever.retrieve("revenue", filters={"pages": {"gte": 7}})
    assert {s["doc_id"] for s in snippets} == {"a", "b"}, "e matches but is RESTRICTED"
    assert snippets[0]["lineage"]["where"] == {"pages": {"gte": 7}}
    exact = retriever.retrieve("revenue", filters={"entity": "ACME_CN"}, where={"period": {"gte": "2025"}})
    assert [s["doc_id"] for s in exact] == ["c"]


GLOSSARY = Glossary.from_dict({"entities": {"ACME_CN": ["艾克美中国"], "ACME_HK": ["艾克美香港"]}})


def test_extraction_narrows_and_never_overrides_explicit(index: NarrativeIndex) -> None:
    retriever = NarrativeIndexRetriever(index, filter_extractor=RuleFilterExtractor(GLOSSARY))
    snippets = retriever.retrieve("艾克美中国 revenue 2024年")
    assert {s["doc_id"] for s in snippets} == {"a"}
    assert snippets[0]["lineage"]["extracted"] == {
        "and": [{"entity": {"eq": "ACME_CN"}}, {"period": {"between": ["2024", "2024"]}}]
    }
    explicit = retriever.retrieve("艾克美中国 revenue", filters={"entity": "ACME_HK"})
    assert {s["doc_id"] for s in explicit} == {"b"}
    assert explicit[0]["lineage"]["extracted"] is None
    nothing = retriever.retrieve("艾克美香港 revenue 2030年")
    # ACME_HK in 2030 matches nothing: the extracted filter is dropped, back to the plain results
    assert {s["doc_id"] for s in nothing} == {"a", "b", "c", "d"}
    assert nothing[0]["lineage"]["extracted_dropped"] is True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(["revenue", "report", "营收", "2024年", "艾克美中国", "艾克美香港", "FY2023",
                                    "in 2025", "Hong Kong", "margin"]), min_size=1, max_size=5),  # fmt: skip
    explicit=st.sampled_from([None, {"entity": "ACME_CN"}, {"period": {"gte": "2024"}}]),
)
def test_extraction_results_are_a_subset_of_results_without(
    index: NarrativeIndex, words: list[str], explicit: dict[str, Any] | None
) -> None:
    query = " ".join(words)
    plain = NarrativeIndexRetriever(index, retry_without_filters=False)
    extracting = NarrativeIndexRetriever(index, retry_without_filters=False,
                                         filter_extractor=RuleFilterExtractor(GLOSSARY))  # fmt: skip
    without = {s["chunk_id"] for s in plain.retrieve(query, filters=explicit, top_k=100)}
    with_extraction = {s["chunk_id"] for s in extracting.retrieve(query, filters=explicit, top_k=100)}
    assert with_extraction <= without


def _store(path: Path, docs: list[tuple[str, str, str]]) -> str:
    with ChunkStore(path) as store:
        store.init_schema()
        idx = NarrativeIndex(store)
        for doc_id, text, sensitivity in docs:
            idx.ingest(text, DocumentMeta(doc_id, sensitivity=sensitivity, metadata={"pages": len(text)}))
    return str(path)


def test_cli_where_and_libraries(tmp_path: Path) -> None:
    reports = _store(tmp_path / "reports.db", [("r1", "revenue fell in 2024", "PUBLIC")])
    memos = _store(tmp_path / "memos.db", [("m1", "revenue secret SECRETMARK", "RESTRICTED"),
                                           ("m2", "revenue memo", "INTERNAL")])  # fmt: skip
    spec_chunking = {"RAGSPINE_CHUNKER": "paragraph", "RAGSPINE_CHUNK_CHARS": "480", "RAGSPINE_CONTEXTUAL": "none"}
    run = functools.partial(CliRunner().invoke, env=spec_chunking)  # the stores were made by the library API
    result = run(main, ["search", "revenue", "--library", f"reports={reports}", "--library", f"memos={memos}", "--json"])
    assert result.exit_code == 0, result.output
    snippets = json.loads(result.stdout)["snippets"]
    assert {(s["library_id"], s["doc_id"]) for s in snippets} == {("reports", "r1"), ("memos", "m2")}
    assert "SECRETMARK" not in result.stdout
    assert snippets[0]["lineage"]["routing"]["fallback"] == "router selected nothing"
    libs = tmp_path / "libs.json"
    libs.write_text(json.dumps([{"id": "reports", "path": reports, "description": "annual revenue reports"},
                                {"id": "memos", "path": memos, "description": "internal memos"}]))  # fmt: skip
    routed = json.loads(run(main, ["search", "annual revenue", "--libraries", str(libs), "--json"]).stdout)["snippets"]
    assert {s["library_id"] for s in routed} == {"reports"}
    where = run(main, ["search", "revenue", "--db", memos, "--where", "pages<15", "--json"])
    assert [s["doc_id"] for s in json.loads(where.stdout)["snippets"]] == ["m2"]
    bad = run(main, ["search", "revenue", "--db", memos, "--where", "pages~3"])
    assert bad.exit_code == 1 and "expected FIELD OP VALUE" in bad.stderr
    bad = run(main, ["search", "revenue", "--library", "x"])
    assert bad.exit_code == 1 and "NAME=PATH" in bad.stderr


def test_sidecar_free_fields_become_filterable_metadata(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("revenue grew in the north", "utf-8")
    (folder / "a.md.meta.json").write_text(json.dumps({"owner": "finance", "pages": 12, "tags": ["x"]}), "utf-8")
    (folder / "b.md").write_text("revenue fell in the south", "utf-8")
    (folder / "b.md.meta.json").write_text(json.dumps({"owner": "legal", "pages": 40}), "utf-8")
    db = str(tmp_path / "s.db")
    run = CliRunner().invoke
    assert run(main, ["ingest", str(folder), "--db", db]).exit_code == 0
    found = run(main, ["search", "revenue", "--db", db, "--where", "owner=finance", "--json"])
    assert [s["doc_id"] for s in json.loads(found.stdout)["snippets"]] == ["a.md"]
    found = run(main, ["search", "revenue", "--db", db, "--where", "pages>20", "--json"])
    assert [s["doc_id"] for s in json.loads(found.stdout)["snippets"]] == ["b.md"]
    bad = run(main, ["search", "revenue", "--db", db, "--where", "tags=x"])
    assert bad.exit_code == 1 and "unknown filter field" in bad.stderr and "owner, pages" in bad.stderr
