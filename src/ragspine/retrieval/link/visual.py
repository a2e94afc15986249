"""The visual channel's hook into the link: page hits become page pointers, fused with the text
snippets by RRF (`fusion.rrf.rrf_fuse`, the fusion every ranking shares).

Invariants:
- A page pointer (`is_visual: True`) is never a citable fact: it names a document and a page,
  its `text` is the page's extracted text ("" for a scan), and its `members` are the active,
  non-RESTRICTED text chunks on that page: what `ask` may cite instead (text, not pixels).
- A hit whose record is RESTRICTED, or whose document version is no longer the active one
  (re-ingested or withdrawn since the page index was built), gives no pointer.
- The text snippets keep their order relative to each other and every key they had; the fused
  list is cut to `top_k`; ties break text first, then by key. Lineage names the channel.

This is a local hook (NarrativeIndexRetriever calls `fuse_visual` after its text run); it moves
into the pipeline's channel slot when that exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ragspine.retrieval.fusion.rrf import DEFAULT_RRF_K, rrf_fuse
from ragspine.retrieval.model import FILTER_FIELDS, Chunk
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.store.protocol import ChunkStoreProtocol
from ragspine.retrieval.visual.channel import CHANNEL, VisualChannel
from ragspine.retrieval.visual.protocol import PageRecord, locator_pages


def fuse_visual(
    snippets: list[dict[str, Any]],
    hits: Sequence[tuple[str, float]],
    channel: VisualChannel,
    store: ChunkStoreProtocol,
    *,
    top_k: int,
    member: Callable[[Chunk], dict[str, Any]],
    lineage: dict[str, Any] | None = None,
    k: int = DEFAULT_RRF_K,
) -> list[dict[str, Any]]:
    """The text `snippets` and the page pointers of `hits` (the visual channel's ranking), fused
    by RRF and cut to `top_k`. `member` builds a citable snippet for a chunk on a hit page."""
    pointers: dict[str, dict[str, Any]] = {}
    versions: dict[str, int | None] = {}
    for key, score in hits:
        record = channel.record(key)
        if record is None or is_restricted(record.sensitivity):
            continue
        if record.doc_id not in versions:
            versions[record.doc_id] = store.active_version(record.doc_id)
        if versions[record.doc_id] != record.version:
            continue  # the page index is behind the store: the next `ingest --visual` catches up
        pointers[key] = _pointer(record, score, _members(store, record, member), {**(lineage or {}), "visual_model": channel.embedder.model_id})
    if not pointers:
        return snippets[:top_k]
    text_keys = [f"text:{i}" for i in range(len(snippets))]
    fused = rrf_fuse([text_keys, [f"visual:{key}" for key in pointers]], k=k)
    order = sorted(fused, key=lambda key: (-fused[key], not key.startswith("text:"), key))
    out: list[dict[str, Any]] = []
    for key in order[:top_k]:
        kind, _, name = key.partition(":")
        if kind == "text":
            out.append(snippets[int(name)])
        else:
            pointer = pointers[name]
            pointer["scores"]["fused"] = fused[key]
            out.append(pointer)
    return out


def _pointer(record: PageRecord, score: float, members: list[dict[str, Any]], lineage: dict[str, Any]) -> dict[str, Any]:
    return {
        "is_visual": True,
        "doc_id": record.doc_id,
        "page": record.page,
        "title": record.title,
        "text": record.text,
        "source_locator": f"{record.doc_id}#page={record.page}",
        "chunk_id": None,
        "sensitivity": record.sensitivity,
        "version": record.version,
        **{name: record.fields.get(name, "") for name in FILTER_FIELDS},
        "members": members,
        "scores": {"visual": score, "bm25": None, "vector": None, "fused": None},
        "lineage": {**lineage, "channel": CHANNEL},
    }


def _members(store: ChunkStoreProtocol, record: PageRecord, member: Callable[[Chunk], dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for chunk in store.iter_chunks(doc_id=record.doc_id):
        pages = locator_pages(chunk.source_locator)
        if pages is not None and pages[0] <= record.page <= pages[1] and not is_restricted(chunk.sensitivity):
            out.append(member(chunk))
    return out
