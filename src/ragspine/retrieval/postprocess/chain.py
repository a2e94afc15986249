"""A chain of post-processors run in the order written, each checked never to add a result.

Invariant: the chain's output is a subset of its input (by chunk_id, no duplicates); a member
that breaks this raises PostprocessorError naming it, never silently passes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragspine.retrieval.postprocess.protocol import Postprocessor, PostprocessorError
from ragspine.retrieval.types import RetrievalResult


class PostprocessorChain:
    """Runs `members` in order.

    >>> class Reverse:
    ...     def process(self, query, results):
    ...         return results[::-1]
    >>> PostprocessorChain([Reverse()]).process("q", [])
    []
    """

    def __init__(self, members: Sequence[Postprocessor]) -> None:
        self.members = list(members)

    def process(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        for member in self.members:
            given = {r.chunk.chunk_id for r in results}
            out = list(member.process(query, list(results)))
            ids = [r.chunk.chunk_id for r in out]
            foreign = [i for i in ids if i not in given]
            if foreign or len(set(ids)) != len(ids):
                raise PostprocessorError(
                    f"post-processor {type(member).__name__} returned "
                    + (f"results it was not given ({', '.join(foreign[:3])})" if foreign else "a result twice")
                    + "; a post-processor may only reorder or drop"
                )
            results = out
        return results

    def __repr__(self) -> str:
        return f"PostprocessorChain({[type(m).__name__ for m in self.members]})"
