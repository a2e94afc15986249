"""A chain of post-processors run in the order written, each checked never to add a result.

Invariant: the chain's output is a subset of its input (by chunk_id, no duplicates, each chunk
the very object it was given); a member that breaks this raises PostprocessorError naming it,
never silently passes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragspine.retrieval.postprocess.protocol import (
    Postprocessor,
    PostprocessorError,
    Selector,
    UsesChunkVectors,
    VectorLookup,
)
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

    def fetch_size(self, top_k: int) -> int:
        """How many candidates to retrieve for `top_k` results: more when a member selects."""
        return max([top_k, *(m.fetch_size(top_k) for m in self.members if isinstance(m, Selector))])

    def use_vectors(self, lookup: VectorLookup) -> None:
        """Give the stored chunk vectors to every member that can use them."""
        for member in self.members:
            if isinstance(member, UsesChunkVectors):
                member.use_vectors(lookup)

    def process(
        self, query: str, results: list[RetrievalResult], top_k: int | None = None
    ) -> list[RetrievalResult]:
        """Each member's output feeds the next; a `Selector` picks `top_k` when it is given."""
        for member in self.members:
            given = {r.chunk.chunk_id: r.chunk for r in results}
            if top_k is not None and isinstance(member, Selector):
                out = list(member.select(query, list(results), top_k))
            else:
                out = list(member.process(query, list(results)))
            ids = [r.chunk.chunk_id for r in out]
            foreign = [i for i in ids if i not in given]
            changed = [r.chunk.chunk_id for r in out if r.chunk.chunk_id in given and r.chunk != given[r.chunk.chunk_id]]
            if foreign or changed or len(set(ids)) != len(ids):
                raise PostprocessorError(
                    f"post-processor {type(member).__name__} returned "
                    + (
                        f"results it was not given ({', '.join(foreign[:3])})"
                        if foreign
                        else f"a changed chunk ({', '.join(changed[:3])})"
                        if changed
                        else "a result twice"
                    )
                    + "; a post-processor may only reorder or drop, and set prompt_text"
                )
            results = out
        return results

    def __repr__(self) -> str:
        return f"PostprocessorChain({[type(m).__name__ for m in self.members]})"
