"""Pseudo-relevance feedback in the channels (issue 39 item 1): RM3 for BM25, Rocchio for the
dense vector; RESTRICTED chunks never feed it; its terms are in the trace."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine.retrieval.chunking.chunking import Chunk
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.pipeline.feedback import Feedback, relevance_model, rocchio_vector
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend


def _chunk(i: int, text: str, sensitivity: str = "INTERNAL") -> Chunk:
    return Chunk(f"d{i}:0", f"d{i}", 0, text, f"d{i}#p1@0-{len(text)}", sensitivity=sensitivity)


CORPUS = [
    _chunk(0, "export orders fell sharply dividend cut"),
    _chunk(1, "export orders fell again dividend cut"),
    _chunk(2, "dividend cut announced by the board"),  # no query word: only feedback finds it
    _chunk(3, "salary plan unchanged"),
]


def test_rm3_brings_a_passage_that_shares_only_feedback_terms() -> None:
    plain = HybridRetriever(CORPUS)
    fed = HybridRetriever(CORPUS, feedback=Feedback("rm3", depth=2, terms=3))
    assert "d2:0" not in [r.chunk.chunk_id for r in plain.search("export orders")]
    trace = Trace()
    ids = [r.chunk.chunk_id for r in fed.search("export orders", trace=trace)]
    assert ids[:2] == ["d0:0", "d1:0"] and "d2:0" in ids
    channels = next(s for s in trace.steps if s.stage == "channels")
    terms = [t for t, _ in channels.decisions["feedback"]["rm3"]["terms"]]
    assert "dividend" in terms and "export" not in terms  # query terms are not expansion terms


def test_restricted_chunks_never_feed_the_feedback() -> None:
    secret = _chunk(9, "export orders codenameorchid codenameorchid", "RESTRICTED")
    leak = _chunk(8, "codenameorchid budget")
    fed = HybridRetriever([*CORPUS, secret, leak], feedback=Feedback("rm3", depth=5, terms=20))
    trace = Trace()
    ids = [r.chunk.chunk_id for r in fed.search("export orders", trace=trace)]
    channels = next(s for s in trace.steps if s.stage == "channels")
    terms = [t for t, _ in channels.decisions["feedback"]["rm3"]["terms"]]
    assert "d9:0" not in ids and "codenameorchid" not in terms and "d8:0" not in ids
    # ranked with the RESTRICTED chunk (never a caller path), it would feed the feedback
    exposed = HybridRetriever([*CORPUS, secret, leak], feedback=Feedback("rm3", depth=5, terms=20),
                              include_restricted=True)  # fmt: skip
    assert "d8:0" in [r.chunk.chunk_id for r in exposed.search("export orders")]


def test_rocchio_moves_the_dense_query_and_is_traced() -> None:
    backend = DeterministicEmbeddingBackend()
    fed = HybridRetriever(CORPUS, embedding_backend=backend, feedback=Feedback("both", depth=2))
    trace = Trace()
    results = fed.search("export orders", trace=trace)
    decisions = next(s for s in trace.steps if s.stage == "channels").decisions["feedback"]
    assert decisions["rocchio"] == {"passages": 2, "weight": 0.25} and decisions["rm3"]["terms"]
    assert results[0].chunk.chunk_id in {"d0:0", "d1:0"}
    # the moved vector ranks differently: the fused scores of the same passages change
    moved = {r.chunk.chunk_id: r.fused_score for r in HybridRetriever(
        CORPUS, embedding_backend=backend, feedback=Feedback("rocchio", depth=2)).search("export orders")}  # fmt: skip
    unmoved = {r.chunk.chunk_id: r.fused_score for r in HybridRetriever(CORPUS, embedding_backend=backend).search("export orders")}
    assert moved.keys() & unmoved.keys() and any(
        abs(moved[c] - unmoved[c]) > 1e-6 for c in moved.keys() & unmoved.keys()
    )  # fmt: skip
    assert "feedback" not in next(
        s for s in _trace_of(HybridRetriever(CORPUS, embedding_backend=backend)).steps if s.stage == "channels"
    ).decisions


def _trace_of(retriever: HybridRetriever) -> Trace:
    trace = Trace()
    retriever.search("export orders", trace=trace)
    return trace


def test_relevance_model_weights_terms_by_passage_score_and_frequency() -> None:
    terms = relevance_model(["a b b", "a c"], [3.0, 1.0], tokenize, ["a"], 2)
    assert [t for t, _ in terms] == ["b", "c"]
    assert terms[0][1] == pytest.approx(0.5 / (0.5 + 0.125))


def test_rocchio_vector_is_unit_and_leans_towards_the_passages() -> None:
    q = np.array([1.0, 0.0])
    moved = rocchio_vector(q, np.array([[0.0, 1.0], [0.0, 1.0]]), 1.0)
    assert np.linalg.norm(moved) == pytest.approx(1.0) and moved[1] == pytest.approx(moved[0])


def test_bad_feedback_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown feedback 'rm4'; valid: none, rm3, rocchio, both"):
        Feedback("rm4")


# -- the product path: settings -> ragspine.open (real SQLite store, vectors file) -> search ----------

OPEN_TEXTS = {
    "r1.md": "Export orders fell sharply; the dividend was cut.",
    "r2.md": "Export orders fell again and the dividend cut stands.",
    "r3.md": "The board announced a dividend cut.",
    "r4.md": "The salary plan is unchanged.",
}
HIDDEN_TEXTS = {  # RESTRICTED: nearest the query in both channels, with a word of their own
    "memo.md": "Export orders export orders codenameorchid codenameorchid.",
    "memo2.md": "Export orders fell: codenameorchid layoffs planned.",
}
FED = {"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RETRIEVAL_MODE": "hybrid", "RAGSPINE_CHUNKER": "paragraph",
       "RAGSPINE_FEEDBACK": "both", "RAGSPINE_FEEDBACK_DEPTH": "3", "RAGSPINE_FEEDBACK_TERMS": "20"}  # fmt: skip


def _fed_search(folder: Any, hidden: bool, **env: str) -> tuple[list[tuple[str, float]], dict[str, Any]]:
    """(each snippet's doc_id and fused score, the trace's feedback) through the workspace."""
    import ragspine

    with ragspine.open(folder, env={**FED, **env}) as ws:
        for doc_id, text in OPEN_TEXTS.items():
            ws.ingest(text, doc_id=doc_id, sensitivity="INTERNAL")
        for doc_id, text in HIDDEN_TEXTS.items() if hidden else ():
            ws.ingest(text, doc_id=doc_id, sensitivity="RESTRICTED")
        trace = Trace(detail=True)
        snippets = ws.search("export orders", top_k=4, trace=trace)
    channels = next(s for s in trace.steps if s.stage == "channels")
    return [(s["doc_id"], s["scores"]["fused"]) for s in snippets], channels.decisions.get("feedback", {})


def test_on_the_product_path_restricted_passages_never_feed_either_feedback(tmp_path: Any) -> None:
    """RAGSPINE_FEEDBACK=both through `ragspine.open`: with RESTRICTED documents that would top
    both channels in the store, the results, fused scores and the trace's feedback equal those
    of the same store without them; the trace shows the RM3 terms (from the two open passages BM25 finds) and the Rocchio passages."""
    without, fed_without = _fed_search(tmp_path / "a", hidden=False)
    with_hidden, fed_with = _fed_search(tmp_path / "b", hidden=True)
    assert with_hidden == without and fed_with == fed_without
    terms = [t for t, _ in fed_with["rm3"]["terms"]]
    assert "dividend" in terms and not {"codenameorchid", "layoffs"} & set(terms)
    assert fed_with["rm3"]["passages"] == 2 and fed_with["rocchio"] == {"passages": 3, "weight": 0.25}
    assert {d for d, _ in with_hidden} <= set(OPEN_TEXTS)
    # off, the same search traces no feedback at all
    assert _fed_search(tmp_path / "c", hidden=True, RAGSPINE_FEEDBACK="none")[1] == {}


def test_rocchio_averages_only_the_vectors_a_caller_may_see() -> None:
    """Rocchio alone (the dense channel): a RESTRICTED chunk nearest the query changes nothing
    (masked before ranking, so it is never among the passages averaged); ranked with it (never a
    caller path), the moved vector and the fused scores differ."""
    backend = DeterministicEmbeddingBackend()
    secret = _chunk(9, "export orders export orders codenameorchid", "RESTRICTED")
    fb = Feedback("rocchio", depth=2, dense_weight=1.0)

    def scores(chunks: list[Chunk], **kw: Any) -> list[tuple[str, float]]:
        found = HybridRetriever(chunks, embedding_backend=backend, feedback=fb, **kw).search("export orders", top_k=4)
        return [(r.chunk.chunk_id, round(r.fused_score, 9)) for r in found if r.chunk.chunk_id != "d9:0"]

    assert scores([*CORPUS, secret]) == scores(CORPUS)
    assert scores([*CORPUS, secret], include_restricted=True) != scores(CORPUS)
