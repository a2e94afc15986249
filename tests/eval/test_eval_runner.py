"""Document ranking from chunk results: best chunk per document, chunk depth that grows."""

from __future__ import annotations

from ragspine.eval.runner import chunk_depth, documents_by_best_chunk, rank_documents


def result(doc: str, seq: int, score: float) -> tuple[str, float]:
    """A ranked chunk as the document ranking sees it: its document and fused score."""
    return doc, score


def test_each_document_takes_the_place_of_its_best_chunk() -> None:
    chunks = [result("a", 2, 0.9), result("b", 0, 0.8), result("a", 0, 0.7), result("c", 1, 0.6)]
    assert documents_by_best_chunk(chunks, 10) == [("a", 0.9), ("b", 0.8), ("c", 0.6)]
    assert documents_by_best_chunk(chunks, 2) == [("a", 0.9), ("b", 0.8)]


def test_chunk_depth_grows_until_enough_documents_or_no_more_chunks() -> None:
    # 10 documents of 5 chunks each, chunks of one document adjacent in the ranking
    ranked = [result(f"d{d}", s, 100.0 - 5 * d - s) for d in range(10) for s in range(5)]
    asked: list[int] = []

    def retrieve(k: int) -> list[tuple[str, float]]:
        asked.append(k)
        return ranked[:k]

    assert [d for d, _ in rank_documents(retrieve, 4, 6)] == ["d0", "d1", "d2", "d3"]
    assert asked == [6, 12, 24]
    asked.clear()
    assert len(rank_documents(retrieve, 20, 8)) == 10  # only 10 documents match at all
    assert asked == [20, 40, 80]  # never fewer chunks than top_k; stops when 50 < 80 came back
    assert chunk_depth(100, 0, 0) == 100 and chunk_depth(10, 21, 10) == 40
