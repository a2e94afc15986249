"""The visual stage: page hits become page pointers, fused with the text
snippets by RRF (`fusion.rrf.rrf_fuse`, the fusion every ranking shares).

Invariants:
- A page pointer (`is_visual: True`) is never a citable fact: it names a document and a page,
  its `text` is the page's extracted text ("" for a scan), and its `members` are the active,
  non-RESTRICTED text chunks on that page: what `ask` may cite instead (text, not pixels).
- A page whose record is RESTRICTED, or whose document version is no longer the active one
  (re-ingested, relabelled or withdrawn since the page index was built), gives no pointer and
  takes no place in the visual ranking (`VisualIndex.search`'s `accept`): the pointers are the
  best pages that may be shown.
- The text snippets keep their order relative to each other and every key they had; the fused
  list is cut to `top_k`; ties break text first, then by key. Lineage names the channel.

The pipeline (`pipeline.pipeline.Pipeline`) calls `fuse_visual` after the snippets stage, for a
query that was not refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ragspine.retrieval.filters import Filter
from ragspine.retrieval.fusion.rrf import DEFAULT_RRF_K, rrf_fuse
from ragspine.retrieval.model import FILTER_FIELDS, Chunk
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.snippet import Snippet
from ragspine.retrieval.store.protocol import ChunkStoreProtocol, StoredChunk
from ragspine.retrieval.visual.channel import CHANNEL, VisualChannel
from ragspine.retrieval.visual.protocol import PageRecord, locator_pages


def fuse_visual(
    snippets: list[Snippet],
    query: str,
    channel: VisualChannel,
    store: ChunkStoreProtocol,
    *,
    top_k: int,
    member: Callable[[Chunk], Snippet],
    filters: Filter | None = None,
    lineage: dict[str, Any] | None = None,
    k: int = DEFAULT_RRF_K,
) -> list[Snippet]:
    """The text `snippets` and the page pointers of the visual channel's ranking for `query`
    (among the pages `filters` allow), fused by RRF and cut to `top_k`. A page that gives no
    pointer (RESTRICTED, or of a document version no longer active) takes no place in that
    ranking. `member` builds a citable snippet for a chunk on a hit page."""
    active: dict[str, list[StoredChunk]] = {}  # doc_id → its active chunks, read once per document
    shown: dict[str, PageRecord] = {}

    def accept(record: PageRecord) -> bool:
        if is_restricted(record.sensitivity):
            return False
        if record.doc_id not in active:
            active[record.doc_id] = store.iter_chunks(doc_id=record.doc_id)
        chunks = active[record.doc_id]
        if not chunks or chunks[-1].version != record.version:
            return False  # the page index is behind the store: the next `ingest --visual` catches up
        shown[record.key] = record
        return True

    hits = channel.search(query, top_k, filters, accept=accept)
    if not hits:
        return snippets[:top_k]
    scores = dict(hits)
    text_keys = [f"text:{i}" for i in range(len(snippets))]
    fused = rrf_fuse([text_keys, [f"visual:{key}" for key, _ in hits]], k=k)
    order = sorted(fused, key=lambda key: (-fused[key], not key.startswith("text:"), key))
    pointer_lineage = {**(lineage or {}), "visual_model": channel.embedder.model_id}
    out: list[Snippet] = []
    for key in order[:top_k]:
        kind, _, name = key.partition(":")
        if kind == "text":
            out.append(snippets[int(name)])
        else:  # members are read only for the pointers that make the cut
            record = shown[name]
            members = _members(active[record.doc_id], record, member)
            out.append(_pointer(record, scores[name], fused[key], members, pointer_lineage))
    return out


def _pointer(
    record: PageRecord, score: float, fused: float, members: list[Snippet], lineage: dict[str, Any]
) -> Snippet:
    return cast(Snippet, {  # the five dimensions from the page record, in FILTER_FIELDS order
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
        "scores": {"visual": score, "bm25": None, "vector": None, "fused": fused},
        "relevance": 0.0,  # rated at the retriever's exit (`relevance.rate`)
        "lineage": {**lineage, "channel": CHANNEL},
    })


def _members(chunks: list[StoredChunk], record: PageRecord, member: Callable[[Chunk], Snippet]) -> list[Snippet]:
    out = []
    for chunk in chunks:
        pages = locator_pages(chunk.source_locator)
        if pages is not None and pages[0] <= record.page <= pages[1] and not is_restricted(chunk.sensitivity):
            out.append(member(chunk))
    return out
