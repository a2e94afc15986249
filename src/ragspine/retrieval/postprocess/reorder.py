"""Lost-in-the-middle reordering: the best results at the start and the end of the prompt.

Invariant: a permutation of the input (nothing dropped, chunks untouched), a pure function of
the input order: ranks 1, 3, 5, … from the front, then …, 6, 4, 2 to the back, so rank 1 opens
the prompt and rank 2 closes it (Liu et al., 2023, "Lost in the Middle").
"""

from __future__ import annotations

from ragspine.retrieval.types import RetrievalResult


class LostInMiddle:
    """Reorders best-first results so the weakest sit in the middle.

    >>> from ragspine.testing.reranker import results
    >>> [r.chunk.chunk_id for r in LostInMiddle().process("q", results(["PUBLIC"] * 5))]
    ['c0', 'c2', 'c4', 'c3', 'c1']
    """

    def process(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        return results[0::2] + results[1::2][::-1]

    def __repr__(self) -> str:
        return "LostInMiddle()"
