"""The conformance suite every Reranker runs, and the guard every reranker runs behind.

Subclass `RerankerSuite` in a `Test*` class and give it a `reranker` fixture. A reranker answers
a permutation for one candidate or many (Chinese, long texts), the same one every time, and
behind `guard.rerank_head` never sees a RESTRICTED text (tests/rerank also checks every
built-in backend at its model input or request body).
"""

from __future__ import annotations

from typing import Any

from ragspine.retrieval.model import Chunk
from ragspine.retrieval.rerank.guard import rerank_head
from ragspine.retrieval.rerank.protocol import Reranker
from ragspine.retrieval.types import RetrievalResult
from ragspine.testing.suite import required_fixture

CANDIDATES = [
    "Revenue fell because overseas demand weakened.",
    "营收下滑的主要原因是海外需求减弱。",
    "The weather was sunny all week.",
]


def results(labels: list[str]) -> list[RetrievalResult]:
    """One result per label (its sensitivity), text i+1 of a numbered list, fused in order."""
    return [
        RetrievalResult(Chunk(f"c{i}", "d", i, f"passage {i} " + CANDIDATES[i % 3], f"d#{i}", sensitivity=label),
                        1.0, None, 1.0 / (61 + i))  # fmt: skip
        for i, label in enumerate(labels)
    ]


class RerankerSuite:
    """Tests every reranker must pass."""

    reranker = required_fixture("reranker", "RerankerSuite")

    def test_satisfies_the_protocol(self, reranker: Any) -> None:
        assert isinstance(reranker, Reranker)

    def test_answers_a_permutation(self, reranker: Any) -> None:
        order = reranker.rerank("why did revenue fall", list(CANDIDATES))
        assert sorted(order) == list(range(len(CANDIDATES)))

    def test_orders_one_and_many_candidates(self, reranker: Any) -> None:
        assert list(reranker.rerank("revenue", ["only one passage"])) == [0]
        many = [f"{CANDIDATES[i % 3]} {'更多文字 ' * (i % 4)}{i}" for i in range(23)] + ["x" * 3000]
        assert sorted(reranker.rerank("why did revenue fall 营收", many)) == list(range(len(many)))

    def test_is_deterministic(self, reranker: Any) -> None:
        query = "why did revenue fall"
        assert reranker.rerank(query, list(CANDIDATES)) == reranker.rerank(query, list(CANDIDATES))

    def test_never_sees_restricted_text_behind_the_guard(self, reranker: Any) -> None:
        seen: list[str] = []

        def spy(query: str, texts: list[str]) -> list[int]:
            seen.extend(texts)
            return list(reranker.rerank(query, texts))

        ranked = results(["PUBLIC", "RESTRICTED", "INTERNAL", " restricted ", "PUBLIC"])
        out = rerank_head("revenue", ranked, spy, top_n=10)
        assert all("passage 1 " not in t and "passage 3 " not in t for t in seen)
        assert [r.chunk.chunk_id for r in out][1] == "c1" and [r.chunk.chunk_id for r in out][3] == "c3"
        assert sorted(r.chunk.chunk_id for r in out) == sorted(r.chunk.chunk_id for r in ranked)
