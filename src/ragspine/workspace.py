"""`ragspine.open`: a store, its retriever and the optional LLM, assembled from the settings.

Invariants:
- The pipeline comes from `ragspine.assembly`, the one Settings → components path that the CLI,
  the HTTP service, multi-library search, eval and Python users all share.
- Nothing RESTRICTED leaves a workspace: `search` and `ask` go through the link's exit #2 and
  `chunks` drops RESTRICTED rows; `stats(internals=False)` counts only what a caller may see.
- A new version never lowers the label of the active one implicitly: the stricter stored label is
  kept (`IngestResult.warnings` says so) unless the caller passes `lower_label=True`.
- Every write goes through `ingest.pipeline.IngestPipeline`, the path `ragspine ingest` and eval
  take: the same labels, chunks, warnings and a registry row per document (beside the store),
  whichever surface (Python, HTTP, CLI) wrote it. A workspace writes a new version unless the
  caller asks `existing="refuse"` (create only) or `"replace_visible"` (never over a document with
  a RESTRICTED chunk): then a taken doc_id is a `DocumentExists` whose message is the same
  whatever the stored label (the HTTP API's POST semantics, docs/security.md).
- Each ingest or withdraw is one store transaction: a concurrent search sees the old version of a
  document or the new one, never a mix. In the same call, copies a folder run recorded of the
  document's old content (duplicates) are settled as a folder run's end settles them: the first
  copy whose file still holds those bytes is read again and stored, the others point at it, so
  the copy's text stays searchable (`IngestPipeline.settle_copies`).
- The dense channel exists only when the settings resolve an embedding backend
  (`assembly.resolve_embedding`; never in economy/bm25/lexical mode, which builds no backend
  and creates no vectors file). Then every ingest embeds the new document's chunks (vectors in
  `<db>.vectors.sqlite`, keyed by the backend's model_id), and `embed_pending` embeds whatever
  a bulk ingest left without a vector. A search never makes the vectors file: a store ingested
  BM25-only stays BM25-only (its trace and `stats` say so) until an embed. A vectors file made by another model is refused at open
  (`VectorModelMismatch`, whose message says how to re-embed), never mixed.
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from ragspine.agent.agent import LLMProvider
from ragspine.answer import DEFAULT_ASK_TOP_K, Answer, ask
from ragspine.assembly import (
    build_retriever,
    channels,
    close_backend,
    load_settings,
    make_graph_service,
    make_provider,
    resolve_embedding,
)
from ragspine.closing import Closeable
from ragspine.errors import DocumentExists
from ragspine.model_slots import embedding_device
from ragspine.settings.config import LEXICAL_MODES, RETRIEVAL_MODES, SETTINGS, Settings
from ragspine.retrieval.store.protocol import ChunkStoreProtocol
from ragspine.retrieval.model import check_user_metadata, doc_id_of_chunk, offered_metadata
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever
from ragspine.retrieval.pipeline.otel import export_trace
from ragspine.retrieval.pipeline.request import SearchRequest, check_filter_fallback, check_top_k, check_where
from ragspine.retrieval.pipeline.snippets import SearchResults
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.retrieval.relevance import above
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.vector.dense.channel import DenseCoverage, vector_key
from ragspine.retrieval.vector.dense.chunk_vectors import BatchEmbedder, EmbedReport
from ragspine.retrieval.vector.errors import VectorStoreError
from ragspine.store_record import vector_store_of

if TYPE_CHECKING:
    from ragspine.graph import GraphService
    from ragspine.ingest.document import IngestSettings
    from ragspine.ingest.metadata import Sidecar
    from ragspine.ingest.pipeline import IngestPipeline, Written

_LOG = logging.getLogger(__name__)

DEFAULT_SEARCH_TOP_K = 10
MAX_DOC_ID_CHARS = 512
STORE_FILE = "chunks.db"
_META_FIELDS = ("title", "topic", "entity", "geography", "period", "language", "sensitivity")
#: The recorded fields a copy of a replaced or withdrawn document is read again with (defaults).
_COPY_FIELDS = ("entity", "period", "topic", "geography", "language")
#: What a write does to a doc_id that has an active version: replace it (Python, CLI: the owner),
#: refuse (create only), or replace it unless one of its chunks is RESTRICTED.
Existing = Literal["replace", "refuse", "replace_visible"]


@dataclass(frozen=True)
class IngestResult:
    """What one ingest wrote: the document, its new version and its chunk count."""

    doc_id: str
    chunks: int
    version: int
    warnings: tuple[str, ...] = ()


class Workspace(Closeable):
    """One chunk store with its retrieval pipeline; thread-safe; close it when done.

    >>> import ragspine
    >>> with ragspine.open(":memory:") as ws:
    ...     _ = ws.ingest("营收下滑的原因是出口减少。", doc_id="r1", entity="ACME_CN")
    ...     [s["doc_id"] for s in ws.search("营收", where={"entity": "ACME_CN"})]
    ['r1']
    """

    def __init__(
        self,
        settings: Settings,
        retriever: NarrativeIndexRetriever,
        store: ChunkStoreProtocol,
        provider: LLMProvider | None,
    ) -> None:
        self.settings, self.retriever, self.store, self.provider = settings, retriever, store, provider
        self._ingest: IngestPipeline | None = None  # made at the first write (`_pipeline`)
        self._ingest_lock = threading.Lock()
        from ragspine.ingest.copies import CopyLookup

        self._copies = CopyLookup(store)  # a result's recorded duplicates (read at a search)
        self._claim_lock = threading.Lock()  # a create-only write's check and write, together
        index = retriever.index
        # What this workspace runs, from what was built (not re-resolved per request).
        self.retrieval_mode = (
            "bm25" if index.embedding_backend is None else ("vector" if index.channels == "vector" else "hybrid")
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Workspace:
        """The pipeline `ragspine.assembly.build_retriever` builds from `settings`, with the
        configured LLM (when there is one) as the listwise judge and the voice of `ask`."""
        provider = make_provider(settings)
        try:
            retriever, store = build_retriever(settings, provider=provider)
        except BaseException:
            _close(provider)
            raise
        return cls(settings, retriever, store, provider)

    # -- writes -------------------------------------------------------------------------------
    def ingest(
        self,
        source: str | Path,
        *,
        doc_id: str | None = None,
        valid_as_of: str = "",
        lower_label: bool = False,
        **meta: str,
    ) -> IngestResult:
        """Ingest a file (a `Path`, or a str naming an existing file) or a text (a str, with
        `doc_id`). `meta`: title, topic, entity, geography, period, language, sensitivity (for a
        file, its sidecar `NAME.meta.json` and front matter win over `meta`, as in `ragspine
        ingest`, except that the strictest label wins).
        `lower_label`: this version's label may be lower than the stored one's."""
        if isinstance(source, Path) or _names_file(source):
            from ragspine.ingest.metadata import read_sidecar

            path = Path(source)
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from exc
            return self._ingest_file(
                path.name, data, read_sidecar(path), doc_id=doc_id or path.name, valid_as_of=valid_as_of,
                lower_label=lower_label, existing="replace", **meta,
            )  # fmt: skip
        if doc_id is None:
            raise ValueError("ingesting a text needs doc_id=...")
        fields: dict[str, Any] = dict(meta)
        return self.ingest_text(source, doc_id, valid_as_of=valid_as_of, lower_label=lower_label, **fields)

    def ingest_text(
        self,
        text: str,
        doc_id: str,
        *,
        valid_as_of: str = "",
        metadata: dict[str, Any] | None = None,
        pages: tuple[Sequence[tuple[int, int]], Sequence[int]] | None = None,
        lower_label: bool = False,
        existing: Existing = "replace",
        **meta: str,
    ) -> IngestResult:
        """Make `text` the active version of `doc_id` (one transaction). `metadata`: user
        metadata (filterable); `pages`: (page spans, page numbers) of a paged document, carried
        into each chunk's locator. Labelled, chunked, stored and registered by the one ingest
        path (`ingest.pipeline.IngestPipeline`): an unknown sensitivity label is a ValueError
        and nothing is written; a label lower than the stored version's is kept higher unless
        `lower_label`; front matter opening `text` is read as a file's (its labels count); a
        text whose content is stored under another doc_id at a stricter label is a ValueError
        unless `lower_label` (the label follows the content: `ingest.content`). `existing`: what
        to do when `doc_id` is taken (`Existing`)."""
        from ragspine.ingest.metadata import DocumentFields

        _check_meta(meta)
        doc_id = _check_doc_id(doc_id)
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text is empty: nothing to ingest (use withdraw to remove a document)")
        user = {} if metadata is None else metadata
        check_user_metadata(user)
        own = DocumentFields({k: v for k, v in meta.items() if v is not None}, user)
        with self._claimed(doc_id, existing):
            written = self._pipeline().ingest_text(
                doc_id, text, self._ingest_settings({}), own=own, user_metadata=user, pages=pages, lower=lower_label,
                valid_as_of=valid_as_of,
            )  # fmt: skip
        self._settle_copies(doc_id)
        return self._result(written)

    def ingest_bytes(
        self,
        filename: str,
        data: bytes,
        *,
        doc_id: str | None = None,
        valid_as_of: str = "",
        lower_label: bool = False,
        existing: Existing = "replace",
        **meta: str,
    ) -> IngestResult:
        """Ingest a file's bytes with the loader for its suffix, through the same pipeline as
        `ragspine ingest` (`ingest.pipeline.IngestPipeline`): the file's own metadata (Markdown
        front matter) wins over `meta`, which fills the rest as defaults; its string/number free
        fields become filterable user metadata; PDF pages reach the locators; the same file and
        metadata store the same chunks, labels and registry row either way. The label is the
        strictest of the file's own and `meta`'s, and never lower than the stored version's
        unless `lower_label`. `existing`: what to do when `doc_id` is taken (`Existing`)."""
        return self._ingest_file(
            filename, data, None, doc_id=doc_id, valid_as_of=valid_as_of, lower_label=lower_label, existing=existing,
            **meta,
        )  # fmt: skip

    def _ingest_file(
        self,
        filename: str,
        data: bytes,
        sidecar: Sidecar | None,
        *,
        doc_id: str | None,
        valid_as_of: str,
        lower_label: bool,
        existing: Existing = "replace",
        **meta: str,
    ) -> IngestResult:
        from ragspine.ingest.files import SourceFile

        _check_meta(meta)
        name = Path(filename).name
        doc_id = _check_doc_id(doc_id or name)
        defaults = {k: v for k, v in meta.items() if k != "sensitivity"}
        settings = self._ingest_settings(defaults, meta.get("sensitivity"))
        source = SourceFile(Path(name), doc_id, Path("."))
        with self._claimed(doc_id, existing):
            written = self._pipeline().ingest_file(
                source, data, settings, sidecar=sidecar, lower=lower_label, valid_as_of=valid_as_of
            )
        self._settle_copies(doc_id)
        return self._result(written)

    @contextmanager
    def _claimed(self, doc_id: str, existing: Existing) -> Iterator[None]:
        """Hold the claim lock while a write that must not replace (`existing`) checks `doc_id`
        and writes; a taken doc_id is a `DocumentExists` with one message whatever its label."""
        if existing == "replace":
            yield
            return
        with self._claim_lock:
            labels = [c.sensitivity for c in self.store.iter_chunks(doc_id=doc_id)] or self._copy_label(doc_id)
            if labels and (existing == "refuse" or any(is_restricted(label) for label in labels)):
                raise DocumentExists(
                    f"doc_id {doc_id!r} is taken: an existing document keeps its text unless the request sets "
                    "replace and the document may be replaced here (docs/security.md); pick another doc_id"
                )
            yield

    def _copy_label(self, doc_id: str) -> list[str]:
        """[its recorded label] when `doc_id` is a recorded duplicate (a registry row with no
        chunks of its own: still taken), else []."""
        from ragspine.ingest.registry import DUPLICATE

        registry = self._pipeline().registry
        record = registry.get(doc_id) if registry is not None else None
        if record is None or record.status != DUPLICATE:
            return []
        return [str(record.metadata_dict().get("sensitivity") or "RESTRICTED")]  # unknown: fail closed

    def _ingest_settings(self, defaults: Mapping[str, str | None], sensitivity: str | None = None) -> IngestSettings:
        """Step 1 of the pipeline (labels) for one request, with this workspace's chunking."""
        from ragspine.ingest.pipeline import resolve_labels

        return resolve_labels(
            defaults, sensitivity, levels=self.settings.sensitivity_levels, max_chars=self.settings.chunk_chars,
            overlap_chars=self.settings.chunk_overlap, sensitivity_from="the sensitivity argument",
            chunker=self.retriever.index.chunker,
        )  # fmt: skip

    def warm_lexical_index(self) -> bool:
        """Bring the lexical index (and its files beside the store) up to date now when no
        search has loaded it yet, so the next search does not build it (the HTTP ingest routes
        run this after answering); False when it was loaded already (a write then updates it at
        once). Safe beside searches: the index and its files are brought up to date under their
        locks, the manifest replaced atomically."""
        index = self.retriever.index
        if index.lexical_index.loaded:
            return False
        index.refresh()
        return True

    def _pipeline(self) -> IngestPipeline:
        """The ingest pipeline over this workspace's index, with the registry beside its store
        (opened at the first write: a workspace that only reads never creates it)."""
        with self._ingest_lock:
            if self._ingest is None:
                from ragspine.ingest.pipeline import IngestPipeline
                from ragspine.ingest.registry import DocumentRegistry

                self._ingest = IngestPipeline(self.retriever.index, registry=DocumentRegistry(self.settings.db))
            return self._ingest

    @staticmethod
    def _result(written: Written) -> IngestResult:
        for warning in written.warnings:
            _LOG.warning("ingest %s: %s", written.doc_id, warning)
        return IngestResult(written.doc_id, written.chunks, written.version, written.warnings)

    def embed_pending(
        self, *, progress: bool | None = None, batch_size: int = 64, embed_batches: BatchEmbedder | None = None
    ) -> EmbedReport | None:
        """Embed every active chunk that has no vector yet (shortest first, in committed
        batches: an interrupted run resumes) and drop vectors of chunks no longer active; None
        without a dense channel. `progress`: a bar with ETA on stderr (None: on a terminal).
        `embed_batches` (e.g. `ray_embed.RayBatchEmbedder`): who embeds; None: this process."""
        return self.retriever.index.embed_pending(progress=progress, batch_size=batch_size, embed_batches=embed_batches)

    def withdraw(self, doc_id: str, *, restricted: bool = True) -> int:
        """Remove `doc_id` from the active set; return how many active chunks it had (0: none).

        `restricted=False` (what the HTTP API passes) treats a document with any RESTRICTED
        active chunk as absent: nothing is withdrawn and 0 is returned, the answer for a
        document that does not exist, so a caller who cannot see it learns nothing of it. The
        owner (Python with the store, or `ragspine ingest --rebuild`) withdraws it."""
        doc_id = _check_doc_id(doc_id)
        rows = self.store.iter_chunks(doc_id=doc_id)
        if not restricted and any(is_restricted(c.sensitivity) for c in rows):
            return 0
        if rows:
            self._pipeline().withdraw(doc_id)
            self._settle_copies(doc_id)
        return len(rows)

    def _settle_copies(self, doc_id: str) -> None:
        """After a write or withdrawal of `doc_id`: the copies a folder run recorded of its old
        content are settled as a folder run's end settles them (`IngestPipeline.settle_copies`:
        the first one still on disk is stored, the others point at it), read with their recorded
        fields and label as defaults; what cannot be done now is logged as a WARNING."""
        pipeline = self._pipeline()
        copies = pipeline.copies_of(doc_id)
        if not copies:
            return
        recorded = copies[0].metadata_dict()  # copies share their label and metadata (the title aside)
        defaults = {k: v for k in _COPY_FIELDS if isinstance(v := recorded.get(k), str) and v}
        label = recorded.get("sensitivity")
        settings = self._ingest_settings(defaults, label if isinstance(label, str) and label else None)
        for problem in pipeline.settle_copies(doc_id, settings):
            _LOG.warning("copies of %s: %s: %s", doc_id, problem.path, problem.reason)

    # -- reads --------------------------------------------------------------------------------
    def chunks(self, doc_id: str) -> list[dict[str, Any]]:
        """The active, non-RESTRICTED chunks of `doc_id` as dicts, in order."""
        rows = self.store.iter_chunks(doc_id=_check_doc_id(doc_id))
        return [_chunk_dict(asdict(c)) for c in rows if not is_restricted(c.sensitivity)]

    @functools.cached_property
    def graph(self) -> GraphService:
        """The store's relation graph (docs/graph.md): build it, then roll-ups, peers, traces."""
        return make_graph_service(self.settings, self.store, self.retriever, self.provider)

    def metadata_fields(self) -> list[str]:
        """The user metadata fields a filter can name here: those of the active chunks a caller
        may see (a field only RESTRICTED documents carry is not listed, as in the unknown-field
        error), less the metadata RAGSpine writes itself (`model.offered_metadata`)."""
        return offered_metadata(self.retriever.index.retriever().index.metadata_keys())

    def chunk(self, chunk_id: str) -> dict[str, Any]:
        """One active chunk by its id (`doc_id:seq:digest`, as snippets cite it). A ValueError
        when no active chunk has that id, and the same ValueError when it is RESTRICTED: its text
        never leaves the workspace, and the answer does not say it exists."""
        doc_id = doc_id_of_chunk(chunk_id) if isinstance(chunk_id, str) else ""
        if not doc_id:
            raise ValueError(f"chunk id {chunk_id!r} is not of the form DOC_ID:SEQ:DIGEST (as in a snippet's chunk_id)")
        for row in self.store.iter_chunks(doc_id=_check_doc_id(doc_id)):
            if row.chunk_id == chunk_id and not is_restricted(row.sensitivity):
                return _chunk_dict(asdict(row))
        raise ValueError(f"no active chunk {chunk_id!r} (withdrawn, replaced by a new version, or never ingested)")

    def search(
        self,
        query: str,
        *,
        where: Any = None,
        top_k: int = DEFAULT_SEARCH_TOP_K,
        mode: str | None = None,
        trace: Trace | None = None,
        filter_fallback: str | None = None,
        min_score: float | None = None,
    ) -> SearchResults:
        """Ranked, cited, RESTRICTED-free snippet dicts (`ragspine.retrieval.snippet.Snippet`),
        as a list with `filters_dropped`: the filter fields that matched nothing and were
        dropped to find them (`filter_fallback` "retry"; [] when none was). `filter_fallback`:
        "strict" (nothing matches: no snippet) or "retry"; None: RAGSPINE_FILTER_FALLBACK.
        `where`: exact matches on the five metadata fields ({"entity": "ACME_CN"}), the typed
        filter language (docs/filters.md), or its string form ("period>=2024 and
        entity=ACME_CN"); `query`, `where` and `top_k` are checked as on every surface
        (`SearchRequest`). `mode` must be one the workspace can run. `trace`: receives one step
        per pipeline stage (`ragspine search --explain`). A result whose document has recorded
        copies (duplicates a folder run did not store again) names them all in
        `lineage["duplicates"]` (`ingest.copies`). `min_score`: the least `relevance` a snippet
        needs (None: RAGSPINE_MIN_SCORE); relevance never increases down the list, so this is
        the one place every surface's results are cut."""
        self.check_mode(mode)
        request, floor = self._request(query, where, top_k, filter_fallback, min_score)
        if trace is None and self.settings.otel == "on":
            trace = Trace()  # RAGSPINE_OTEL: recorded only to be exported
        run = self.retriever.retrieve_run(request.query, filters=request.where, top_k=request.top_k, trace=trace,
                                          filter_fallback=request.filter_fallback)  # fmt: skip
        if self.settings.otel == "on" and trace is not None:
            export_trace(trace)
        results = SearchResults(above(run.snippets, floor), filters_dropped=run.filters_dropped)
        self._copies.annotate(results)  # a copy of a document is stored once: lineage names them all
        return results

    def ask(
        self, question: str, *, where: Any = None, top_k: int = DEFAULT_ASK_TOP_K, filter_fallback: str | None = None,
        min_score: float | None = None,
    ) -> Answer:
        """A cited answer: from the LLM when one is configured, else extractive. `where`,
        `top_k`, `filter_fallback` and `min_score` are checked as `search` checks them (one
        `SearchRequest`), and `min_score` (None: RAGSPINE_MIN_SCORE) cuts the sources as it cuts
        search's snippets; the answer's `filters_dropped` says when its sources were found
        without the filters."""
        request, floor = self._request(question, where, top_k, filter_fallback, min_score)
        return ask(self.retriever, request.query, provider=self.provider, filters=request.where, top_k=request.top_k,
                   filter_fallback=request.filter_fallback, min_score=floor)  # fmt: skip

    def _request(
        self, query: str, where: Any, top_k: int, filter_fallback: str | None, min_score: float | None
    ) -> tuple[SearchRequest, float]:
        """The checked request (`SearchRequest`) and the relevance floor it gets: its own
        `min_score`, else RAGSPINE_MIN_SCORE (search and ask alike)."""
        request = SearchRequest(query, where=where, top_k=top_k, filter_fallback=filter_fallback, min_score=min_score)
        return request, self.settings.min_score if request.min_score is None else request.min_score

    def stats(self, *, internals: bool = True) -> dict[str, Any]:
        """The operator's view with `internals` (the CLI, Python, an admin key): the active
        documents and chunks of the whole store (RESTRICTED ones counted, never shown), the index
        state (data version, retrieval mode, embedding model, dense coverage as of the last
        search, vector store, visual page index, RAPTOR tree) and the configured channels.
        Without `internals` (a read or write key, MCP) only what a caller may see: the counts of
        the active chunks that are not RESTRICTED and the retrieval mode; the rest null or empty,
        since it holds paths and counts that move with RESTRICTED writes (docs/security.md)."""
        index: dict[str, Any] = {"data_version": None, "retrieval": self.retrieval_mode, "embedding_model": None,
                                 "embedding_device": None, "dense": None}  # fmt: skip
        if not internals:
            documents, chunks = self.retriever.index.retriever().index.active_counts()
            return {"documents": documents, "chunks": chunks, "index": index, "channels": {}}
        documents, chunks = self.store.counts()
        index["data_version"] = self.store.data_version()
        narrative = self.retriever.index
        dense = narrative.dense
        noted = narrative.vectors_note(include_restricted=True)  # chunks without a vector: what to do
        coverage = dense.coverage() if dense is not None else DenseCoverage(noted.active, 0, 0) if noted is not None else None
        if coverage is not None:  # None: no model; a BM25-only store (no vectors file) has none stored yet
            index["embedding_model"] = dense.vectors.model_id if dense is not None else vector_key(narrative.embedding_backend)
            index["embedding_device"] = embedding_device(getattr(dense, "backend", None))
            try:
                stored: int | None = dense.vectors.count() if dense is not None else 0
            except (sqlite3.DatabaseError, VectorStoreError):  # a damaged file: reported, not raised
                stored = None
            index["dense"] = {
                "stored_vectors": stored,
                # as of the last search (all zero before the first one)
                "active": coverage.active,
                "with_vector": coverage.with_vector,
                "lexical_only": coverage.lexical_only,
                "missing": coverage.missing,
                "damaged": coverage.damaged,
                "problem": coverage.problem,
                "healthy": coverage.problem is None and coverage.damaged == 0 and stored is not None,
                "note": noted.text if noted is not None else None,
            }
        index["vector_store"] = vector_store_of(self.settings)  # kind, location (masked), collection
        visual = getattr(self.retriever, "visual", None)  # the page index (RAGSPINE_VISUAL_EMBEDDER)
        index["visual"] = None if visual is None else visual.stats()
        out = {"documents": documents, "chunks": chunks, "index": index, "channels": channels(self.settings)}
        status = getattr(self.retriever, "status", None)  # a RAPTOR retriever (RAGSPINE_RAPTOR=on)
        return out | ({"raptor": status()} if callable(status) else {})

    def check_mode(self, mode: str | None) -> str:
        """The mode a search runs in: this workspace's mode (hybrid, vector or bm25) when `mode`
        is None, auto or a name of it; anything else is a ValueError saying what runs here."""
        effective = self.retrieval_mode
        if mode is None or mode == "auto":
            return effective
        if mode not in RETRIEVAL_MODES:
            raise ValueError(f"unknown mode {mode!r}; accepted: {', '.join(RETRIEVAL_MODES)}")
        asked = "bm25" if mode in LEXICAL_MODES else mode
        if asked == effective:
            return effective
        if effective == "bm25":
            raise ValueError(
                f"mode {mode!r} needs the dense channel, which is not configured here "
                f"({resolve_embedding(self.settings)[1]}); use auto or bm25"
            )
        raise ValueError(
            f"this workspace runs {effective} retrieval (RAGSPINE_RETRIEVAL_MODE="
            f"{self.settings.retrieval_mode}); a request cannot switch to {mode!r}: use auto or "
            f"{effective}, or serve another workspace with RAGSPINE_RETRIEVAL_MODE={mode}"
        )

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        dense = self.retriever.index.dense
        close_tree = getattr(self.retriever, "close", None)  # a RAPTOR retriever's tree file
        if callable(close_tree):
            close_tree()
        if self._ingest is not None:
            self._ingest.close()
        self.store.close()
        if dense is not None:
            dense.vectors.close()
        close_backend(self.retriever.index.embedding_backend)  # a BM25-only store has a backend, no channel
        _close(self.provider)
        _close(self.retriever.index.reranker)  # a rerank server's connection pool



def open_workspace(
    target: str | Path | None = None,
    *,
    config: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: object,
) -> Workspace:
    """Open (creating if needed) the workspace at `target`: a folder (its store is
    `FOLDER/chunks.db`), a store file, or ":memory:"; None: RAGSPINE_DB. `overrides` are settings
    by field name (e.g. `llm_model="qwen2.5"`) and win over the environment and the config file.

    Exposed as `ragspine.open`.
    """
    by_field = {s.field_name: s.env for s in SETTINGS}
    unknown = sorted(set(overrides) - set(by_field))
    if unknown:
        raise TypeError(f"unknown setting(s) {', '.join(unknown)}; valid: {', '.join(sorted(by_field))}")
    flags: dict[str, object] = {by_field[k]: _flag(v) for k, v in overrides.items() if v is not None}
    if target is not None:
        flags["RAGSPINE_DB"] = store_path(target)
    return Workspace.from_settings(load_settings(env, config_file=config, flags=flags))


def store_path(target: str | Path) -> str:
    """The store file for a workspace target: a folder (existing, or a new path without a
    suffix) holds `chunks.db`; anything else is the store file itself."""
    text = str(target)
    if text == ":memory:" or "://" in text:
        return text
    path = Path(text)
    return str(path / STORE_FILE) if path.is_dir() or (not path.suffix and not path.exists()) else text


def _flag(value: object) -> object:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return value


def _names_file(source: str) -> bool:
    return len(source) < 4096 and "\n" not in source and os.path.isfile(source)


def _check_meta(meta: Mapping[str, object]) -> None:
    unknown = sorted(set(meta) - set(_META_FIELDS))
    if unknown:
        raise ValueError(f"unknown metadata {', '.join(unknown)}; valid: {', '.join(_META_FIELDS)}")


def _check_doc_id(doc_id: str) -> str:
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise ValueError("doc_id must be a non-empty string")
    if len(doc_id) > MAX_DOC_ID_CHARS or any(ord(c) < 32 for c in doc_id):
        raise ValueError(f"doc_id must be at most {MAX_DOC_ID_CHARS} characters, without control characters")
    return doc_id


def _chunk_dict(row: dict[str, Any]) -> dict[str, Any]:
    row.pop("active", None)
    return row


def _close(provider: object) -> None:
    close = getattr(provider, "close", None)
    if callable(close):
        close()
