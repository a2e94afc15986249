"""The snippets stage: ranked results, already past RESTRICTED exit #2, as the agent's cited
snippets (`ragspine.retrieval.snippet.Snippet`, the one snippet type every surface returns).

Invariants: a snippet's `text` and every citation field are its chunk's own; `scores` holds the
channels' scores and the fused one; `lineage` is a copy of the run's lineage for that result.
Parent expansion: a chunk that carries a `window_text` (its parent section, or its sentence
window) gets a `prompt_text` — that text, for generation only — and its `heading`, `parent_id`
and `parent_locator`. When several results share one parent, the first carries it and the
others' `prompt_text` is their own text (`lineage["parent_in"]` names the chunk that carries
it), so a prompt never repeats a parent. A chunk without structure gives exactly the
specification's snippet (no added key).

`SearchResults` is what a search returns on the Python surface: the snippets as a list (it
compares, indexes and serialises as one), with `filters_dropped` beside them, never only in a
snippet's lineage: a filter that matched nothing and was dropped is said at the top level.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from ragspine.retrieval.model import Chunk
from ragspine.retrieval.snippet import Scores, Snippet
from ragspine.retrieval.types import RetrievalResult


@dataclass(frozen=True)
class SnippetRun:
    """What a query run returns: the snippets, the run's lineage, and why it refused (or None)."""

    snippets: list[Snippet]
    lineage: dict[str, Any]
    refusal: str | None = None

    @property
    def filters_dropped(self) -> list[str]:
        """The caller's filter fields dropped to find these snippets (the fallback "retry"
        after nothing matched them); [] when the snippets match every filter asked."""
        return list(self.lineage.get("filters_dropped") or [])

    def results(self) -> SearchResults:
        """The snippets as `SearchResults` (with `filters_dropped`)."""
        return SearchResults(self.snippets, filters_dropped=self.filters_dropped)


class SearchResults(list[Snippet]):
    """A search's snippets, best first, and `filters_dropped`: the filter fields that matched
    nothing and were dropped to find them (empty: every snippet matches every filter asked).

    >>> found = SearchResults([], filters_dropped=["entity"])
    >>> found == [], found.filters_dropped, found.to_dict()
    (True, ['entity'], {'filters_dropped': ['entity'], 'snippets': []})
    """

    def __init__(self, snippets: Iterable[Snippet] = (), *, filters_dropped: Iterable[str] = ()) -> None:
        super().__init__(snippets)
        self.filters_dropped: list[str] = list(filters_dropped)

    def to_dict(self) -> dict[str, Any]:
        """The JSON a surface answers with: `filters_dropped` at the top, then the snippets."""
        return {"filters_dropped": list(self.filters_dropped), "snippets": list(self)}


def to_snippets(ranked: list[tuple[RetrievalResult, dict[str, Any]]]) -> list[Snippet]:
    """Each (result, lineage) as a snippet dict, parents expanded (see the module docstring)."""
    return expand_parents([to_snippet(r, lineage) for r, lineage in ranked], [r.chunk for r, _ in ranked])


def expand_parents(snippets: list[Snippet], chunks: list[Chunk]) -> list[Snippet]:
    """Add each structured chunk's expansion to its snippet (see the module docstring)."""
    carried: dict[tuple[str, str], str] = {}
    for snippet, chunk in zip(snippets, chunks, strict=True):
        if chunk.heading:
            snippet["heading"] = chunk.heading
        if chunk.parent_id:
            snippet["parent_id"] = chunk.parent_id
        if chunk.parent_locator:
            snippet["parent_locator"] = chunk.parent_locator
        if not chunk.window_text:
            continue
        key = (chunk.doc_id, chunk.parent_id or chunk.parent_locator)
        first = carried.setdefault(key, chunk.chunk_id)
        if first == chunk.chunk_id:
            snippet["prompt_text"] = chunk.window_text
        else:
            snippet["prompt_text"] = chunk.text
            snippet["lineage"]["parent_in"] = first
    return snippets


def to_snippet(result: RetrievalResult, lineage: dict[str, Any]) -> Snippet:
    """One result as the specification's snippet (no parent expansion)."""
    chunk = result.chunk
    scores = cast(Scores, {  # the extra channels' scores ride along under their names
        "bm25": result.bm25_score,
        "vector": result.vector_score,
        "fused": result.fused_score,
        **dict(result.channel_scores),
    })
    snippet: Snippet = {
        "text": chunk.text,
        "doc_id": chunk.doc_id,
        "title": chunk.title,
        "source_locator": chunk.source_locator,
        "chunk_id": chunk.chunk_id,
        "topic": chunk.topic,
        "entity": chunk.entity,
        "geography": chunk.geography,
        "period": chunk.period,
        "language": chunk.language,
        "sensitivity": chunk.sensitivity,
        "version": getattr(chunk, "version", None),
        "valid_as_of": getattr(chunk, "valid_as_of", ""),
        "scores": scores,
        "relevance": 0.0,  # rated at the retriever's exit (`relevance.rate`)
        "lineage": dict(lineage),
    }
    if result.prompt_text is not None:  # what a prompt shows instead of `text`, and its spans into `text`
        snippet["prompt_text"] = result.prompt_text
        snippet["prompt_spans"] = [list(span) for span in result.prompt_spans]
    return snippet
