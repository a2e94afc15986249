"""What the search page browses besides results: facets (GET /facets) and a cited passage in its
document (GET /documents/{doc_id}/context).

Invariants: both read only active, non-RESTRICTED chunks (a RESTRICTED chunk's values never
count in a facet, and its text never comes back: a passage that is RESTRICTED, or a document
with no visible chunk, is answered as absent, 404, as for a document that does not exist);
internal metadata (how a document was chunked) is never offered as a facet; facets are counted
once per document and value, and recomputed only when the store's data version moves.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from typing import Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel

from ragspine.retrieval.model import offered_metadata
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.workspace import Workspace

FACET_FIELDS = ("entity", "period", "topic", "geography", "language", "sensitivity")
MAX_FACET_VALUES = 50
MAX_AROUND = 20


class FacetValue(BaseModel):
    value: str
    count: int


class FacetsOut(BaseModel):
    documents: int
    facets: dict[str, list[FacetValue]]
    truncated: list[str]
    max_top_k: int
    levels: list[str]


class ContextChunk(BaseModel):
    chunk_id: str
    seq: int
    text: str
    source_locator: str
    heading: str
    cited: bool


class ContextOut(BaseModel):
    doc_id: str
    title: str
    chunk_id: str
    chunks: list[ContextChunk]
    before: int
    after: int


def facet_counts(rows: list[Any]) -> dict[str, Any]:
    """{"documents": n, "facets": {field: [{"value", "count"}...]}} over the stored chunk `rows`
    (RESTRICTED ones skipped): each value counted once per document, most frequent first, at
    most MAX_FACET_VALUES per field (`truncated` names the fields cut)."""
    seen: dict[str, set[tuple[str, str]]] = defaultdict(set)
    documents: set[str] = set()
    for row in rows:
        if is_restricted(row.sensitivity):
            continue
        documents.add(row.doc_id)
        values = {name: getattr(row, name) for name in FACET_FIELDS}
        metadata = row.metadata or {}
        values.update(metadata)
        for name, value in values.items():
            if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value) != "":
                seen[name].add((row.doc_id, str(value)))
    facets: dict[str, list[dict[str, Any]]] = {}
    truncated = []
    for name in [*FACET_FIELDS, *offered_metadata(set(seen) - set(FACET_FIELDS))]:  # system keys never offered
        counts = Counter(value for _, value in seen.get(name, ()))
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        if len(ranked) > MAX_FACET_VALUES:
            truncated.append(name)
        if ranked:
            facets[name] = [{"value": v, "count": c} for v, c in ranked[:MAX_FACET_VALUES]]
    return {"documents": len(documents), "facets": facets, "truncated": truncated}


def passage_context(chunks: list[dict[str, Any]], chunk_id: str, around: int) -> dict[str, Any] | None:
    """The visible `chunks` of one document (in order) within `around` chunks of `chunk_id`, that
    one flagged `cited`; None when `chunk_id` is not among them."""
    index = next((i for i, c in enumerate(chunks) if c["chunk_id"] == chunk_id), None)
    if index is None:
        return None
    first, last = max(0, index - around), min(len(chunks), index + around + 1)
    keep = ("chunk_id", "seq", "text", "source_locator", "heading")
    shown = [{**{k: c.get(k, "") for k in keep}, "cited": i == index} for i, c in enumerate(chunks)
             if first <= i < last]  # fmt: skip
    cited = chunks[index]
    return {
        "doc_id": cited["doc_id"], "title": cited.get("title", ""), "chunk_id": chunk_id,
        "chunks": shown, "before": first, "after": len(chunks) - last,
    }  # fmt: skip


def browse_routes(ws: Workspace) -> APIRouter:
    """GET /facets and GET /documents/{doc_id}/context (mounted behind the API keys)."""
    router = APIRouter()
    cache: dict[str, Any] = {}
    lock = threading.Lock()

    @router.get("/facets", response_model=FacetsOut, tags=["retrieval"])
    def facets() -> dict[str, Any]:
        """Filter values with document counts, from visible (non-RESTRICTED) documents only; the
        largest `top_k` a search may ask for; the sensitivity levels an upload may carry."""
        version = ws.store.data_version()
        with lock:
            if cache.get("version") != version:
                cache["body"] = facet_counts(ws.store.iter_chunks())
                cache["version"] = version
            body = dict(cache["body"])
        levels = [level.strip() for level in ws.settings.sensitivity_levels.split(",") if level.strip()]
        return {**body, "max_top_k": ws.settings.max_top_k, "levels": levels}

    @router.get("/documents/{doc_id:path}/context", response_model=ContextOut, tags=["documents"],
                responses={404: {"description": "No such visible passage"}})  # fmt: skip
    def context(
        doc_id: str,
        chunk_id: str = Query(..., max_length=2048, description="The cited chunk (a snippet's chunk_id)"),
        around: int = Query(3, ge=0, le=MAX_AROUND, description="How many chunks to show on each side"),
    ) -> dict[str, Any]:
        """The cited passage in its document: the visible chunks around `chunk_id`, in order
        (RESTRICTED chunks are never returned; a RESTRICTED passage is answered as absent)."""
        found = passage_context(ws.chunks(doc_id), chunk_id, around)
        if found is None:
            raise HTTPException(404, f"no active passage {chunk_id!r} in document {doc_id!r}")
        return found

    return router


__all__ = ["browse_routes", "facet_counts", "passage_context"]
