"""The shipped post-processors (mmr, lost_in_middle, compress): conformance, properties over any
input, the retriever path (RESTRICTED never surfaces, MMR fetches a wider pool and uses the dense
channel's vectors), settings, and the specification's second example."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.assembly import build_retriever, load_settings, make_postprocessor_for
from ragspine.retrieval.fusion.rrf import Fusion
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.postprocess import make_postprocessor
from ragspine.retrieval.postprocess.compress import SEPARATOR, Compress
from ragspine.retrieval.postprocess.mmr import MMR
from ragspine.retrieval.postprocess.reorder import LostInMiddle
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.types import RetrievalResult
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.testing.postprocessor import PostprocessorSuite


class TestMMR(PostprocessorSuite):
    @pytest.fixture
    def postprocessor(self) -> Any:
        return MMR(top_n=4)


class TestLostInMiddle(PostprocessorSuite):
    @pytest.fixture
    def postprocessor(self) -> Any:
        return LostInMiddle()


class TestCompress(PostprocessorSuite):
    @pytest.fixture
    def postprocessor(self) -> Any:
        return Compress(max_sentences=1)


class TestTheWholeChain(PostprocessorSuite):
    @pytest.fixture
    def postprocessor(self) -> Any:
        return make_postprocessor("mmr,compress,lost_in_middle")


def _result(i: int, text: str, fused: float) -> RetrievalResult:
    return RetrievalResult(Chunk(f"c{i:02d}", f"d{i}", 0, text, f"d{i}#p1@0-{len(text)}"), 1.0, None, fused)


WORDS = ["revenue", "fell", "export", "orders", "营收", "下滑", "出口", "weather", "sunny", "3.5%", "订单"]
SENTENCE = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
END = st.sampled_from([". ", "。", "! ", "；", " "])
TEXT = st.lists(st.tuples(SENTENCE, END), min_size=1, max_size=5).map(lambda parts: "".join(s + e for s, e in parts))


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(TEXT, min_size=0, max_size=12),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    chain=st.permutations(["mmr", "lost_in_middle", "compress"]).flatmap(
        lambda names: st.integers(1, 3).map(lambda n: ",".join(names[:n]))
    ),
    top_k=st.integers(1, 12),
    lambda_mult=st.floats(0.0, 1.0),
)
def test_any_chain_only_reorders_drops_and_sets_honest_prompt_text(
    texts: list[str], query: str, chain: str, top_k: int, lambda_mult: float
) -> None:
    options = {"mmr": {"lambda_mult": lambda_mult}} if "mmr" in chain else {}
    post = make_postprocessor(chain, **options)
    assert post is not None
    given_results = [_result(i, t, 1.0 / (61 + i)) for i, t in enumerate(texts)]
    snapshot = [(r.chunk.chunk_id, r.chunk.text, r.chunk.source_locator, r.chunk.doc_id) for r in given_results]
    out = post.process(query, list(given_results), top_k=top_k)
    ids = [r.chunk.chunk_id for r in out]
    assert len(ids) == len(set(ids)) and set(ids) <= {r.chunk.chunk_id for r in given_results}
    assert len(out) == (min(top_k, len(texts)) if "mmr" in chain else len(texts))
    originals = {r.chunk.chunk_id: r.chunk for r in given_results}
    for r in out:
        assert r.chunk is originals[r.chunk.chunk_id]  # text, locator, every citation field
        if r.prompt_text is not None:
            assert r.prompt_text == SEPARATOR.join(r.chunk.text[s:e] for s, e in r.prompt_spans)
            starts = [s for s, _ in r.prompt_spans]
            assert starts == sorted(starts) and all(0 <= s < e <= len(r.chunk.text) for s, e in r.prompt_spans)
            assert len(r.prompt_text) < len(r.chunk.text) + len(SEPARATOR) * len(r.prompt_spans)
    assert snapshot == [(r.chunk.chunk_id, r.chunk.text, r.chunk.source_locator, r.chunk.doc_id) for r in given_results]
    assert [r.chunk.chunk_id for r in post.process(query, list(given_results), top_k=top_k)] == ids


# -- the pieces ------------------------------------------------------------------------------
def test_lost_in_middle_puts_the_best_two_at_the_ends() -> None:
    out = LostInMiddle().process("q", [_result(i, f"t{i}", 1.0 / (1 + i)) for i in range(6)])
    assert [r.chunk.chunk_id for r in out] == ["c00", "c02", "c04", "c05", "c03", "c01"]


def test_mmr_demotes_near_duplicates_by_token_overlap() -> None:
    texts = [
        "Revenue fell 8% because export orders to Europe dropped sharply in 2024.",
        "Revenue fell 8% because export orders to Europe dropped sharply in 2024!",  # a copy
        "Revenue fell 8% as export orders to Europe dropped sharply in 2024.",  # a near copy
        "Domestic revenue fell as consumers delayed purchases.",
    ]
    ranked = [_result(i, t, 1.0 / (61 + i)) for i, t in enumerate(texts)]
    assert [r.chunk.chunk_id for r in MMR(lambda_mult=1.0).select("revenue fell", ranked, 2)] == ["c00", "c01"]
    assert [r.chunk.chunk_id for r in MMR(lambda_mult=0.5).select("revenue fell", ranked, 2)] == ["c00", "c03"]


def test_mmr_uses_the_vectors_it_is_given_over_token_overlap() -> None:
    ranked = [_result(i, t, 1.0 / (61 + i)) for i, t in enumerate(["alpha beta", "gamma delta", "epsilon"])]
    same = {"c00": [1.0, 0.0], "c01": [1.0, 0.0], "c02": [0.0, 1.0]}  # c01 means what c00 means

    def lookup(ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return np.array([same[i] for i in ids], dtype=np.float32), np.ones(len(ids), dtype=bool)

    assert [r.chunk.chunk_id for r in MMR(lambda_mult=0.6).select("q", ranked, 2)] == ["c00", "c01"]
    assert [r.chunk.chunk_id for r in MMR(lambda_mult=0.6, vectors=lookup).select("q", ranked, 2)] == ["c00", "c02"]


def test_mmr_falls_back_to_token_overlap_when_a_vector_is_missing() -> None:
    ranked = [_result(i, t, 1.0 / (61 + i)) for i, t in enumerate(["alpha beta", "alpha beta", "zeta"])]

    def lookup(ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return np.eye(len(ids), dtype=np.float32), np.array([True, False, True])

    assert MMR(vectors=lookup).similarity(ranked)(0)[1] == 1.0  # token overlap of identical texts


def test_compress_keeps_answer_sentences_in_cjk_and_leaves_unrelated_chunks_whole() -> None:
    text = "公司概况如下。2024年营收下滑8%，主要因为出口订单减少。董事会成员未变。天气晴朗。"
    other = "No sentence here shares a word."
    out = Compress(max_sentences=1).process("为什么营收下滑", [_result(0, text, 1.0), _result(1, other, 0.5)])
    assert out[0].prompt_text == "2024年营收下滑8%，主要因为出口订单减少。"
    assert text[slice(*out[0].prompt_spans[0])] == out[0].prompt_text
    assert out[1].prompt_text is None and out[1] is not None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mmr": {"lambda_mult": 1.5}}, "lambda_mult must be in"),
        ({"mmr": {"top_n": 0}}, "top_n must be a positive integer"),
        ({"compress": {"max_sentences": 0}}, "max_sentences must be a positive integer"),
        ({"lost_in_middle": {"x": 1}}, "x"),
        ({"compress": {}}, "does not name"),
    ],
)
def test_bad_options_are_clear_errors(options: dict[str, dict[str, Any]], message: str) -> None:
    spec = ",".join(k for k in options if k != "compress") or "mmr"
    if "compress" in options and options["compress"]:
        spec = "compress"
    with pytest.raises(ValueError, match=message):
        make_postprocessor(spec, **options)


# -- through the retriever ---------------------------------------------------------------------
DOCS = {
    "a1": ("Revenue fell because export orders to Europe dropped. Costs were flat.", "PUBLIC"),
    "a2": ("Revenue fell because export orders to Europe dropped! Costs were flat.", "PUBLIC"),
    "a3": ("Revenue fell because export orders to Europe dropped; costs were flat.", "INTERNAL"),
    "b1": ("Revenue fell in the domestic market as consumers waited. Margins held.", "PUBLIC"),
    "s1": ("Revenue fell: layoffs of the CEO office are planned. Secret revenue fell memo.", "RESTRICTED"),
    "s2": ("revenue fell revenue fell export orders Europe dropped (board only).", " restricted "),
    "c1": ("Sunny weather helped tourism revenue in the spring.", "PUBLIC"),
}


def _ingest(retriever: Any) -> None:
    for doc_id, (text, label) in DOCS.items():
        retriever.index.ingest(text, DocumentMeta(doc_id, sensitivity=label))


@pytest.mark.parametrize("chain", ["mmr", "lost_in_middle", "compress", "mmr,lost_in_middle", "compress,mmr,lost_in_middle"])
@pytest.mark.parametrize("vectors", [False, True])
def test_restricted_never_surfaces_and_citations_stay_whole(chain: str, vectors: bool) -> None:
    backend = DeterministicEmbeddingBackend(dim=64) if vectors else None
    retriever, store = build_narrative_retriever(":memory:", embedding_backend=backend, postprocessor=make_postprocessor(chain))
    plain, plain_store = build_narrative_retriever(":memory:", embedding_backend=backend)
    try:
        _ingest(retriever)
        _ingest(plain)
        for top_k in (1, 3, 10):
            snippets = retriever.retrieve("why did revenue fall", top_k=top_k)
            assert len(snippets) <= top_k and (top_k < 10 or snippets)  # top_k=1 is a RESTRICTED chunk
            for s in snippets:
                assert s["sensitivity"].strip().upper() != "RESTRICTED"
                assert s["text"] == DOCS[s["doc_id"]][0]
                assert "layoffs" not in s.get("prompt_text", "") and "board only" not in s.get("prompt_text", "")
            if "mmr" not in chain:  # reorders only: the same set as without the chain
                assert {s["chunk_id"] for s in snippets} == {s["chunk_id"] for s in plain.retrieve("why did revenue fall", top_k=top_k)}
    finally:
        store.close()
        plain_store.close()


def test_mmr_in_the_retriever_fetches_a_wider_pool_and_brings_other_documents() -> None:
    backend = DeterministicEmbeddingBackend(dim=256)
    # RRF: MMR's relevance is the fused scores min-max scaled over its pool, and under score
    # fusion the three copies stand so far above the rest that lambda 0.5 keeps a second copy
    rrf = Fusion(method="rrf")
    retriever, store = build_narrative_retriever(":memory:", embedding_backend=backend, fusion=rrf, postprocessor=make_postprocessor("mmr", mmr={"lambda_mult": 0.5, "fetch_k": 6}))
    plain, plain_store = build_narrative_retriever(":memory:", embedding_backend=backend, fusion=rrf)
    try:
        _ingest(retriever)
        _ingest(plain)
        mmr = retriever.postprocessor.members[0]  # type: ignore[union-attr]
        assert mmr.vectors == retriever.index.vector_lookup  # resolved at each call (review 5 finding 5)
        query = "revenue fell export orders Europe"
        without = [s["doc_id"] for s in plain.retrieve(query, top_k=2)]
        with_mmr = [s["doc_id"] for s in retriever.retrieve(query, top_k=2)]
        assert set(without) <= {"a1", "a2", "a3"}  # two copies of one passage
        assert with_mmr[0] == without[0] and with_mmr[1] not in {"a1", "a2", "a3"}
    finally:
        store.close()
        plain_store.close()


def test_compressed_snippets_carry_prompt_text_and_spans_and_ask_prefers_it() -> None:
    from ragspine.answer import build_answer_prompt

    retriever, store = build_narrative_retriever(":memory:", postprocessor=make_postprocessor("compress"))
    try:
        retriever.index.ingest("Intro text here. Revenue fell 8% on exports. Weather was fine.", DocumentMeta("d1"))
        (snippet,) = retriever.retrieve("revenue fell", top_k=1)
        assert snippet["prompt_text"] == "Revenue fell 8% on exports."
        (s, e), = snippet["prompt_spans"]
        assert snippet["text"][s:e] == snippet["prompt_text"]
        prompt = build_answer_prompt("revenue fell", [snippet])
        assert "Revenue fell 8% on exports." in prompt and "Weather was fine" not in prompt
    finally:
        store.close()


def test_settings_build_the_chain_with_its_options() -> None:
    chain = make_postprocessor_for(load_settings({
        "RAGSPINE_POSTPROCESSOR": "mmr, compress", "RAGSPINE_MMR_LAMBDA": "0.4",
        "RAGSPINE_MMR_FETCH_K": "30", "RAGSPINE_COMPRESS_MAX_SENTENCES": "2"}))  # fmt: skip
    assert chain is not None
    mmr, compress = chain.members
    assert (mmr.lambda_mult, mmr.fetch_k, compress.max_sentences) == (0.4, 30, 2)  # type: ignore[attr-defined]
    retriever, store = build_retriever(load_settings({"RAGSPINE_DB": ":memory:", "RAGSPINE_RETRIEVAL_MODE": "bm25",
                                                      "RAGSPINE_POSTPROCESSOR": "mmr,lost_in_middle"}))  # fmt: skip
    try:
        assert repr(retriever.postprocessor) == "PostprocessorChain(['MMR', 'LostInMiddle'])"
    finally:
        store.close()


def test_the_specifications_second_example_runs_with_mmr_and_lost_in_middle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    os.makedirs("data")
    with ChunkStore("data/chunks.db") as setup:
        setup.init_schema()
        from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex

        index = NarrativeIndex(setup)
        for doc_id, (text, label) in DOCS.items():
            index.ingest(text, DocumentMeta(doc_id, sensitivity=label))

    from ragspine.retrieval.link.narrative_link import build_narrative_retriever
    from ragspine.retrieval.postprocess import make_postprocessor

    # The specification's second example, with no reranker on this branch (cross_encoder is issue 17).
    retriever, store = build_narrative_retriever(
        "data/chunks.db",
        postprocessor=make_postprocessor("mmr,lost_in_middle"),   # or RAGSPINE_POSTPROCESSOR="mmr,lost_in_middle"
    )
    try:
        snippets = retriever.retrieve("why did revenue fall", top_k=4)
    finally:
        store.close()
    assert len(snippets) == 4 and not {"s1", "s2"} & {s["doc_id"] for s in snippets}
    assert len({s["doc_id"][0] for s in snippets}) >= 2  # not four copies of one passage


@settings(max_examples=30, deadline=None)
@given(
    labels=st.lists(st.sampled_from(["PUBLIC", "INTERNAL", "RESTRICTED", " restricted ", "Restricted"]),
                    min_size=len(DOCS), max_size=len(DOCS)),
    chain=st.permutations(["mmr", "lost_in_middle", "compress"]).flatmap(
        lambda names: st.integers(1, 3).map(lambda n: ",".join(names[:n]))
    ),
    top_k=st.integers(1, 10),
    vectors=st.booleans(),
    query=st.sampled_from(["why did revenue fall", "export orders Europe", "board only layoffs", "营收 下滑"]),
)  # fmt: skip
def test_whatever_is_labelled_restricted_no_chain_surfaces_it(
    labels: list[str], chain: str, top_k: int, vectors: bool, query: str
) -> None:
    backend = DeterministicEmbeddingBackend(dim=64) if vectors else None
    retriever, store = build_narrative_retriever(":memory:", embedding_backend=backend, postprocessor=make_postprocessor(chain))
    try:
        for (doc_id, (text, _)), label in zip(DOCS.items(), labels, strict=True):
            retriever.index.ingest(text, DocumentMeta(doc_id, sensitivity=label))
        secret = {d for d, label in zip(DOCS, labels, strict=True) if label.strip().upper() == "RESTRICTED"}
        for s in retriever.retrieve(query, top_k=top_k):
            assert s["doc_id"] not in secret and s["sensitivity"].strip().upper() != "RESTRICTED"
            assert s["text"] == DOCS[s["doc_id"]][0] and s["source_locator"].startswith(f"{s['doc_id']}#")
            if s.get("prompt_text") is not None:  # compressed: pieces of this very text, at their offsets
                assert s["prompt_text"] == SEPARATOR.join(s["text"][a:b] for a, b in s["prompt_spans"])
    finally:
        store.close()
