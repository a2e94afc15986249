"""Embedding the chunks that have no vector: written once, for every caller.

Four callers need "embed what has no vector": the ingest write (`NarrativeIndex`, the new
document's chunks), the bulk job `embed_chunks` (`ragspine embed`, `embed_pending`: every active
chunk, in batches, with progress), and the dense channel's two lazy paths (a local matrix and a
vector-store view, at attach or per query). Each one asks `select_missing` which chunks to embed
and `embed_into` to embed and store them; what differs between them is only how many at once
(`batch_size`, `embed_batches`), in which order, and the lazy paths' `lazy_batch` limit.

Invariants:
- A RESTRICTED chunk is never sent to a remote backend (`can_embed`): it is returned in
  `Missing.lexical_only` and stays lexical-only.
- A stored vector is never recomputed: only ids the store reports `missing` (or a caller knows
  to have no vector) are embedded.
- What is embedded for a chunk is `indexed_text(chunk, index_text)` (Contextual Retrieval's
  text, or the chunk's); what is stored with it is `vector_metadata(chunk)`.
- `embed_into` stores each batch (one `upsert`: one transaction for a `ChunkVectors` file) before
  embedding the next, so an interrupted run resumes where it stopped. A backend that returns
  another number of vectors than it was given texts raises `EmbeddingBackendError`.
- `embed_chunks`: for the active chunks of one run, embedded + present + lexical_only == number
  of active chunks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ragspine.retrieval.chunking.contextual import indexed_text
from ragspine.retrieval.chunking.protocol import IndexTextFn
from ragspine.retrieval.language import detect_language
from ragspine.retrieval.model import FILTER_FIELDS, Chunk
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.store.protocol import ChunkStoreProtocol, StoredChunk
from ragspine.retrieval.vector.arrays import as_matrix, unit_rows
from ragspine.retrieval.vector.dense.progress import embed_progress
from ragspine.retrieval.vector.embeddings.support import EmbeddingBackendError, can_embed, model_id_of
from ragspine.retrieval.vector.errors import VectorModelMismatch
from ragspine.retrieval.vector.stores.inprocess import ChunkVectorStore
from ragspine.retrieval.vector.stores.sqlite import ChunkVectors

TEXT_LANGUAGE = "text_language"  # metadata key: detect_language of the chunk's own text

# Embeds batches of texts: yields (batch index, that batch's vectors) as each batch finishes, in
# any order (a pool of workers: `ray_embed.RayBatchEmbedder`); None: the backend, one by one.
BatchEmbedder = Callable[[Sequence[list[str]]], Iterator[tuple[int, Any]]]


def vector_metadata(chunk: Chunk) -> dict[str, Any]:
    """What a vector store keeps with a chunk's vector: doc_id, sensitivity and the non-empty
    filter dimensions (so `where` and `delete_doc` work on the store alone), and under
    TEXT_LANGUAGE the language `detect_language` finds in the chunk's text (what the dense
    channel's language centring groups by: read back at start instead of re-detected; the
    `language` filter field is the document's, which may differ)."""
    meta: dict[str, Any] = {"doc_id": chunk.doc_id, "sensitivity": chunk.sensitivity}
    meta.update({name: value for name in FILTER_FIELDS if (value := getattr(chunk, name))})
    meta[TEXT_LANGUAGE] = detect_language(chunk.text)
    return meta


@dataclass(frozen=True)
class Missing:
    """What `select_missing` found among the chunks it was given."""

    sendable: list[Any]  # items without a vector that the backend may see (given order)
    lexical_only: list[Any]  # items without a vector, RESTRICTED on a remote backend: never embedded
    present: int  # already had a vector


def select_missing(
    vectors: ChunkVectorStore,
    backend: Any,
    items: Iterable[Any],
    *,
    chunk_of: Callable[[Any], Any] | None = None,
    known_missing: bool = False,
) -> Missing:
    """Split `items` into those whose chunk has no vector and may be embedded and those that must
    stay lexical-only (given order kept). An item is a chunk (with chunk_id, text, sensitivity, …)
    or, with `chunk_of`, anything that names one (a (position, chunk) pair). `known_missing`: the
    caller already knows none of them has a vector (the store is not asked)."""
    given = list(items)
    of = chunk_of or (lambda item: item)
    if known_missing:
        todo = given
    else:
        absent = set(vectors.missing([of(item).chunk_id for item in given]))
        todo = [item for item in given if of(item).chunk_id in absent]
    sendable = [item for item in todo if can_embed(backend, of(item).sensitivity)]
    lexical_only = [item for item in todo if not can_embed(backend, of(item).sensitivity)]
    return Missing(sendable, lexical_only, len(given) - len(todo))


@dataclass(frozen=True)
class StoredBatch:
    """One batch `embed_into` embedded and stored: its chunks, the rows given to `upsert` and the
    metadata stored with them."""

    chunks: list[Any]
    rows: Any  # as the backend returned them; float32 unit rows with `unit`
    metadata: list[dict[str, Any]]


def embed_into(
    vectors: ChunkVectorStore,
    backend: Any,
    chunks: Sequence[Any],
    *,
    index_text: IndexTextFn | None = None,
    batch_size: int | None = None,
    embed_batches: BatchEmbedder | None = None,
    unit: bool = False,
) -> Iterator[StoredBatch]:
    """Embed `chunks` (`batch_size` at a time; None: in one backend call) and upsert each batch
    into `vectors` with its metadata as it comes back, yielding it. `embed_batches`: who embeds
    the batches (e.g. Ray workers); None: `backend.embed_texts`, one batch after another.
    `unit`: the rows are L2-normalised before they are stored (a local matrix keeps these very
    rows). Nothing is embedded for no chunks."""
    if not chunks:
        return
    size = batch_size or len(chunks)
    batches = [list(chunks[start : start + size]) for start in range(0, len(chunks), size)]
    texts = [[indexed_text(c, index_text) for c in batch] for batch in batches]
    run = embed_batches or (lambda items: ((i, backend.embed_texts(t)) for i, t in enumerate(items)))
    for i, result in run(texts):
        batch = batches[i]
        if len(result) != len(batch):
            raise EmbeddingBackendError(
                f"{type(backend).__name__} returned {len(result)} vectors for {len(batch)} texts"
            )
        # the store checks and converts the backend's answer (`check_upsert`); a local matrix
        # gets the unit rows it keeps
        rows = unit_rows(as_matrix(result, what="chunk vectors")) if unit else result
        metas = [vector_metadata(c) for c in batch]
        vectors.upsert([c.chunk_id for c in batch], rows, metas)
        yield StoredBatch(batch, rows, metas)


def embed_missing(
    vectors: ChunkVectorStore, backend: Any, chunks: Iterable[Any], *, index_text: IndexTextFn | None = None
) -> int:
    """Embed and store, in one backend call, those of `chunks` that have no vector and may be
    sent to `backend` (what an ingest write does for a new document's chunks); returns how many."""
    missing = select_missing(vectors, backend, chunks)
    return sum(len(b.chunks) for b in embed_into(vectors, backend, missing.sendable, index_text=index_text))


def lazy_batch(todo: list[tuple[int, Any]], limit: int | None) -> list[tuple[int, Any]]:
    """Which of `todo` ((position, chunk) without a vector) to embed now: none when more than
    `limit` of the chunks a caller may see are missing (the fallback: BM25 for them until
    `ragspine embed`; the search says so once, `NarrativeIndex._note_vectors`, not here on every
    attach), else all of those plus RESTRICTED ones within what is left of `limit`.
    RESTRICTED chunks never count against the limit, so they never decide what visible chunks
    get (None: no limit)."""
    shown = [item for item in todo if not is_restricted(item[1].sensitivity)]
    hidden = [item for item in todo if is_restricted(item[1].sensitivity)]
    if limit is None:
        return shown + hidden
    if len(shown) > limit:
        return []
    return shown + hidden[: limit - len(shown)]


@dataclass(frozen=True)
class EmbedReport:
    """What one `embed_chunks` run did."""

    embedded: int  # vectors computed now
    present: int  # active chunks that already had a vector (skipped: never recomputed)
    lexical_only: int  # RESTRICTED chunks not sent to a remote backend
    removed: int  # vectors of chunks no longer active, deleted
    seconds: float
    repaired: int = 0  # damaged records deleted before the run (their chunks embedded again)


def embed_chunks(
    store: ChunkStoreProtocol,
    vectors: ChunkVectorStore,
    backend: Any,
    *,
    batch_size: int = 64,
    progress: bool | None = None,
    prune: bool = True,
    index_text: IndexTextFn | None = None,
    embed_batches: BatchEmbedder | None = None,
) -> EmbedReport:
    """Embed every active chunk of `store` that has no vector yet in `vectors` (`ChunkVectors`
    beside a SQLite store, or pgvector / Qdrant), in batches; each batch is committed as soon
    as it is embedded, so an interrupted run resumes without redoing finished batches.

    Damaged records (`ChunkVectors.repair`) are deleted first, so their chunks are embedded
    again. Chunks are embedded shortest text first (less padding for transformer backends). A
    RESTRICTED chunk is never sent to a remote backend (counted in `lexical_only`). `prune`
    deletes the vectors of chunks that are no longer active. `progress`: a bar on stderr; None
    shows it on a terminal only; True off a terminal: a plain line per 10% with chunks/s and ETA
    (`embed_progress`). Backend errors propagate; the batches done so far stay committed.
    `index_text`: what is embedded for a chunk (Contextual Retrieval); None: its text.
    `embed_batches`: who embeds the batches (e.g. Ray workers, each with its own copy of
    `backend`'s model); None: `backend.embed_texts`, one batch after another.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    started = time.perf_counter()
    check_vectors_for(vectors, backend)
    repair = getattr(vectors, "repair", None)
    repaired = int(repair()) if callable(repair) else 0
    active: dict[str, StoredChunk] = {c.chunk_id: c for c in store.iter_chunks()}
    removed = vectors.delete([cid for cid in vectors.ids() if cid not in active]) if prune else 0
    missing = select_missing(vectors, backend, active.values())
    sendable = sorted(missing.sendable, key=lambda c: len(c.text))  # stable: equal lengths keep store order
    embedded = 0
    with embed_progress(len(sendable), progress) as bar:
        for batch in embed_into(
            vectors, backend, sendable, index_text=index_text, batch_size=batch_size, embed_batches=embed_batches
        ):
            embedded += len(batch.chunks)
            bar.update(len(batch.chunks))
    return EmbedReport(
        embedded=embedded,
        present=missing.present,
        lexical_only=len(missing.lexical_only),
        removed=removed,
        seconds=time.perf_counter() - started,
        repaired=repaired,
    )


def check_vectors_for(vectors: ChunkVectorStore, backend: Any) -> None:
    """VectorModelMismatch unless `vectors` hold vectors of `backend`'s model and dimension."""
    model_id = model_id_of(backend)
    where = getattr(vectors, "path", None) or repr(vectors)
    hint = vectors._reembed_hint() if isinstance(vectors, ChunkVectors) else (
        "Re-embed every chunk with the backend in use into a new table or collection "
        "(`ragspine embed --reembed`)"
    )
    if vectors.model_id is not None and model_id != vectors.model_id:
        raise VectorModelMismatch(
            f"the vectors in {where!r} are for model {vectors.model_id!r} (dim "
            f"{vectors.dim}), but the embedding backend is {model_id!r} (dim "
            f"{getattr(backend, 'dim', None)}); open them with the backend's model_id. {hint}"
        )
    backend_dim = getattr(backend, "dim", None)
    if isinstance(backend_dim, int) and vectors.dim is not None and backend_dim != vectors.dim:
        raise VectorModelMismatch(
            f"the vectors in {where!r} (model {vectors.model_id!r}) have dimension "
            f"{vectors.dim}, but the embedding backend makes {backend_dim}. {hint}"
        )
