"""RESTRICTED chunks never shape what a caller sees (issue 14, items 1 and 2).

The property: add RESTRICTED documents (random texts from the same words, rare words of their
own, their own metadata keys and values) to a corpus, and every caller-visible output is
unchanged: results, scores (BM25, vector, fused), the retry-without-filters fallback and its
lineage, and error texts (an unknown filter field), for BM25 and hybrid, through the Python API
(the link and the plain `HybridRetriever`), the CLI, HTTP and multi-library search.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragspine
from ragspine.cli import main
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.chunking.chunking import Chunk
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.service import running_server

WORDS = ["revenue", "fell", "export", "orders", "salary", "layoffs", "dividend", "plan",
         "营收", "下滑", "出口", "订单", "裁员", "薪酬", "利润", "增长"]  # fmt: skip
SECRET_WORDS = ["codenameorchid", "9876543", "绝密项目"]  # only RESTRICTED documents hold these
ENTITIES = ["ACME_CN", "ACME_HK", "BOREALIS"]
API_KEY = "restricted-invisible-key-0123456789"


def _text(draw: st.DrawFn, secret: bool) -> str:
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12))
    if secret:
        words += draw(st.lists(st.sampled_from(SECRET_WORDS), max_size=3))
        words = draw(st.permutations(words))
    return " ".join(words)


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[int, dict[str, Any]]]]:
    """(open documents, [(insert before open document i, RESTRICTED document)])."""
    n_open = draw(st.integers(2, 8))
    open_docs = [
        {"doc_id": f"open{i}", "text": _text(draw, False), "entity": draw(st.sampled_from(ENTITIES)),
         "period": draw(st.sampled_from(["2023", "2024"])), "sensitivity": draw(st.sampled_from(["PUBLIC", "INTERNAL"])),
         "metadata": {"pages": draw(st.integers(1, 20))}}
        for i in range(n_open)
    ]  # fmt: skip
    hidden = []
    for j in range(draw(st.integers(1, 5))):
        doc = {"doc_id": f"secret{j}", "text": _text(draw, True),
               "entity": draw(st.sampled_from([*ENTITIES, "HIDDEN_CO"])), "period": "2024",
               "sensitivity": draw(st.sampled_from(["RESTRICTED", "restricted", "ＲＥＳＴＲＩＣＴＥＤ"])),
               "metadata": draw(st.sampled_from([{}, {"pages": 3}, {"secret_key": "x"}]))}  # fmt: skip
        hidden.append((draw(st.integers(0, n_open)), doc))
    return open_docs, hidden


def _interleave(open_docs: list[dict[str, Any]], hidden: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(len(open_docs) + 1):
        out += [doc for at, doc in hidden if at == i]
        if i < len(open_docs):
            out.append(open_docs[i])
    return out


def _meta(doc: dict[str, Any]) -> DocumentMeta:
    return DocumentMeta(**{k: v for k, v in doc.items() if k != "text"})


QUERIES = ["revenue fell", "营收下滑 出口", "codenameorchid revenue", "9876543 orders", "绝密项目 利润", "salary"]
FILTERS: list[Any] = [
    None,
    {"entity": "HIDDEN_CO"},  # a value only a RESTRICTED document has: the exact-filter path
    {"doc_id": "secret0"},  # a RESTRICTED document's id: the typed-filter path
    {"secret_key": "x"},  # a metadata key only RESTRICTED documents carry: an error either way
    {"pages": {"gte": 3}},
    {"entity": "ACME_CN"},
]


def _outputs(docs: list[dict[str, Any]], backend: Any) -> list[Any]:
    """Every link output (snippets with scores and lineage, or the error text) per query and
    filter, and the plain HybridRetriever's results over the same chunks."""
    retriever, store = build_narrative_retriever(":memory:", embedding_backend=backend)
    try:
        for doc in docs:
            retriever.index.ingest(doc["text"], _meta(doc))
        out: list[Any] = []
        for query in QUERIES:
            for filters in FILTERS:
                for top_k in (1, 3):
                    try:
                        out.append(retriever.retrieve(query, filters=filters, top_k=top_k))
                    except ValueError as exc:
                        out.append(f"ValueError: {exc}")
        chunks = [Chunk(c.chunk_id, c.doc_id, c.seq, c.text, c.source_locator, entity=c.entity,
                        sensitivity=c.sensitivity, metadata=c.metadata)
                  for c in store.iter_chunks()]  # fmt: skip
    finally:
        if retriever.index.dense is not None:
            retriever.index.dense.vectors.close()
        store.close()
    plain = HybridRetriever(chunks, embedding_backend=backend)
    for query in QUERIES:
        results = plain.search(query, top_k=3)
        out.append([(r.chunk.chunk_id, r.bm25_score, r.vector_score, r.fused_score) for r in results])
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora(), st.booleans())
def test_restricted_documents_change_no_python_output(corpus: Any, hybrid: bool) -> None:
    open_docs, hidden = corpus
    backend = DeterministicEmbeddingBackend(dim=32) if hybrid else None
    without = _outputs(open_docs, backend)
    with_hidden = _outputs(_interleave(open_docs, hidden), backend)
    assert with_hidden == without
    assert all(w not in json.dumps(with_hidden, ensure_ascii=False) for w in SECRET_WORDS)


def test_the_issues_reproduction_top_k_is_filled_and_a_filter_is_no_oracle() -> None:
    """`search "CEO salary codename layoffs revenue" --top-k 3` returned nothing although
    public documents match; a RESTRICTED document's id as a filter answered [] or a fallback
    depending on whether the word was in it."""
    retriever, store = build_narrative_retriever(":memory:")
    try:
        for i in range(4):
            retriever.index.ingest("CEO salary codename layoffs revenue memo", DocumentMeta(f"m{i}", sensitivity="RESTRICTED"))
        retriever.index.ingest("Salary 9,876,543 for the CEO", DocumentMeta("salary_ceo.txt", sensitivity="RESTRICTED"))
        for i in range(5):
            retriever.index.ingest(f"revenue grew in region {i}. Public report.", DocumentMeta(f"p{i}", sensitivity="PUBLIC"))
        top = retriever.retrieve("CEO salary codename layoffs revenue", top_k=3)
        assert [s["doc_id"] for s in top] and len(top) == 3
        assert [s["scores"]["fused"] for s in top] == [1 / 61, 1 / 62, 1 / 63], "no hidden rank above"
        inside = retriever.retrieve("9,876,543 Public", filters={"doc_id": "salary_ceo.txt"})
        outside = retriever.retrieve("nowhere Public", filters={"doc_id": "salary_ceo.txt"})
        assert inside and outside, "both fall back the same way"
        assert inside[0]["lineage"] == outside[0]["lineage"]
        assert inside[0]["lineage"]["retried_without_filters"]
    finally:
        store.close()


# -- the facades: CLI, HTTP, multi-library ----------------------------------------------------

OPEN_DOCS = [
    {"doc_id": "r1.md", "text": "Revenue fell because export orders dropped. 营收下滑。", "entity": "ACME_CN", "sensitivity": "PUBLIC"},
    {"doc_id": "r2.md", "text": "Revenue grew on new orders; the dividend plan stays.", "entity": "ACME_HK", "sensitivity": "INTERNAL"},
    {"doc_id": "r3.md", "text": "出口订单减少导致利润下滑。", "entity": "ACME_CN", "sensitivity": "PUBLIC"},
]  # fmt: skip
HIDDEN_DOCS = [
    {"doc_id": "salary_ceo.txt", "text": "CEO salary 9876543 codenameorchid layoffs revenue revenue.",
     "entity": "HIDDEN_CO", "sensitivity": "RESTRICTED"},
    {"doc_id": "memo.md", "text": "Revenue fell: layoffs planned, codenameorchid. 绝密项目 营收。",
     "entity": "ACME_CN", "sensitivity": "RESTRICTED"},
]  # fmt: skip
HTTP_BODIES: list[dict[str, Any]] = [
    {"query": "revenue fell", "top_k": 2},
    {"query": "codenameorchid revenue layoffs", "top_k": 3},
    {"query": "9876543 revenue", "where": {"doc_id": "salary_ceo.txt"}},
    {"query": "revenue", "filters": {"entity": "HIDDEN_CO"}},
    {"query": "revenue", "where": {"secret_key": "x"}},
    {"query": "营收 下滑", "where": {"entity": {"in": ["ACME_CN", "HIDDEN_CO"]}}},
]


def _fill(ws: Any, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        fields = {k: v for k, v in doc.items() if k not in ("doc_id", "text")}
        ws.ingest(doc["text"], doc_id=doc["doc_id"], **fields)
    if docs is not OPEN_DOCS:  # a key only a RESTRICTED document carries
        ws.retriever.index.replace_chunks("k", [Chunk("k:0", "k", 0, "revenue", "k#p1@0-7",
                                          sensitivity="RESTRICTED", metadata={"secret_key": "x"})])  # fmt: skip


def _facade_outputs(folder: Path, docs: list[dict[str, Any]]) -> list[Any]:
    env = {"RAGSPINE_EMBEDDING": "none"}
    out: list[Any] = []
    with ragspine.open(folder / "a", env=env, api_keys=[API_KEY]) as ws:
        _fill(ws, docs)
        with running_server(ws) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {API_KEY}"}) as client:
            for body in HTTP_BODIES:
                for route, key in (("/search", "query"), ("/ask", "question")):
                    sent = {("question" if k == "query" and key == "question" else k): v for k, v in body.items()}
                    response = client.post(route, json=sent)
                    out.append((route, response.status_code, response.json()))
            for doc_id in ("salary_ceo.txt", "memo.md", "nothing.md"):
                response = client.get(f"/documents/{doc_id}/chunks")
                out.append((doc_id, response.status_code, response.json()))
            fields = client.get("/fields")  # the search page's field list
            out.append(("fields", fields.status_code, fields.json()))
    with ragspine.open(folder / "b", env=env) as ws:
        _fill(ws, docs)
    runner = CliRunner()
    db_a, db_b = str(folder / "a" / "chunks.db"), str(folder / "b" / "chunks.db")
    for args in (["revenue fell layoffs", "--top-k", "2"], ["9876543 codenameorchid", "--where", "doc_id=salary_ceo.txt"],
                 ["revenue", "--where", "secret_key=x"]):  # fmt: skip
        single = runner.invoke(main, ["search", *args, "--db", db_a, "--json"], env=env)
        multi = runner.invoke(main, ["search", *args, "--library", f"a={db_a}", "--library", f"b={db_b}", "--json"], env=env)
        out += [(single.exit_code, single.output), (multi.exit_code, multi.output)]
    return out


def test_restricted_documents_change_no_cli_http_or_multi_library_output(tmp_path: Path) -> None:
    without = _facade_outputs(tmp_path / "without", OPEN_DOCS)
    with_hidden = _facade_outputs(tmp_path / "with", OPEN_DOCS + HIDDEN_DOCS)
    assert [o[:2] for o in with_hidden[:12]] == [o[:2] for o in without[:12]]
    assert with_hidden == without
    assert any(status == 400 and "secret_key" in json.dumps(body) for _, status, body in with_hidden[:12])


@pytest.mark.parametrize("label", ["RESTRICTED", "restricted"])
def test_the_unknown_field_error_names_no_restricted_metadata_key(label: str) -> None:
    retriever, store = build_narrative_retriever(":memory:")
    try:
        retriever.index.ingest("revenue", DocumentMeta("open", metadata={"pages": 2}))
        retriever.index.ingest("revenue", DocumentMeta("hidden", sensitivity=label, metadata={"salary_band": "x"}))
        with pytest.raises(ValueError) as caught:
            retriever.retrieve("revenue", filters={"nothing_here": 1})
        assert "pages" in str(caught.value) and "salary_band" not in str(caught.value)
    finally:
        store.close()


def test_an_in_memory_retriever_lists_only_the_chunks_it_ranks() -> None:
    """`HybridRetriever(chunks).chunks` is what it ranks: the RESTRICTED chunk it was given is
    masked before scoring, so it is not listed (it was, from the list it was built on)."""
    open_chunk = Chunk("a:0", "a", 0, "revenue fell", "a#p1@0-12")
    hidden = Chunk("s:0", "s", 0, "revenue secret", "s#p1@0-14", sensitivity="RESTRICTED")
    assert [c.chunk_id for c in HybridRetriever([open_chunk, hidden]).chunks] == ["a:0"]
    assert [c.chunk_id for c in HybridRetriever([open_chunk, hidden], include_restricted=True).chunks] == ["a:0", "s:0"]
