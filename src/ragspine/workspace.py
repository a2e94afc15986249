"""`ragspine.open`: a store, its retriever and the optional LLM, assembled from the settings.

Invariants:
- This is the one assembly path: `Workspace.from_settings` is what the CLI (`serve`, `ask`), the
  HTTP service and Python users all call, so one configuration gives one pipeline everywhere.
- Nothing RESTRICTED leaves a workspace: `search` and `ask` go through the link's exit #2 and
  `chunks` drops RESTRICTED rows; `stats` gives only counts.
- Each ingest or withdraw is one store transaction: a concurrent search sees the old version of a
  document or the new one, never a mix.
- The dense channel exists only when the settings resolve an embedding backend
  (`Settings.embedding_backend`; never in economy/bm25/lexical mode, which builds no backend
  and creates no vectors file). Then every ingest embeds the new document's chunks (vectors in
  `<db>.vectors.sqlite`, keyed by the backend's model_id), and `embed_pending` embeds whatever
  a bulk ingest left without a vector. A vectors file made by another model is refused at open
  (`VectorModelMismatch`, whose message says how to re-embed), never mixed.
- Local backends are shared by the workspaces of one process that use the same backend and
  options (a weak cache: a model is loaded once while any workspace uses it).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ragspine.agent.agent import LLMProvider
from ragspine.answer import DEFAULT_ASK_TOP_K, Answer, ask
from ragspine.settings.config import (
    LEXICAL_MODES,
    REMOTE_EMBEDDINGS,
    RETRIEVAL_MODES,
    SETTINGS,
    Settings,
    embedding_options,
    load_settings,
    fusion_from_settings,
)
from ragspine.llm import make_llm_provider
from ragspine.retrieval.store.sqlite import TABLE, ChunkStore
from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.query.filter_extraction import make_filter_extractor
from ragspine.retrieval.query.glossary import GlossaryQueryRewriter, load_glossary
from ragspine.retrieval.types import EmbeddingBackend
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever, build_narrative_retriever
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.vector.dense.chunk_vectors import EmbedReport

DEFAULT_SEARCH_TOP_K = 10
MAX_DOC_ID_CHARS = 512
STORE_FILE = "chunks.db"
_META_FIELDS = ("title", "topic", "entity", "geography", "period", "language", "sensitivity")


@dataclass(frozen=True)
class IngestResult:
    """What one ingest wrote: the document, its new version and its chunk count."""

    doc_id: str
    chunks: int
    version: int


class Workspace:
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
        store: ChunkStore,
        provider: LLMProvider | None,
    ) -> None:
        self.settings, self.retriever, self.store, self.provider = settings, retriever, store, provider
        index = retriever.index
        # What this workspace runs, from what was built (not re-resolved per request).
        self.retrieval_mode = (
            "bm25" if index.dense is None else ("vector" if index.channels == "vector" else "hybrid")
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Workspace:
        """The assembly: store → BM25 (+ the dense channel when the settings resolve an embedding
        backend, fused by RAGSPINE_FUSION) → glossary rewriter → listwise LLM judge (when an LLM
        is configured); the same LLM answers `ask`."""
        glossary = load_glossary(settings.glossary)
        backend = embedding_backend_for(settings)
        provider = None
        try:
            provider = make_llm_provider(settings)
            extractor = make_filter_extractor(settings.filter_extractor, provider=provider, glossary=glossary)
            retriever, store = build_narrative_retriever(
                settings.db, provider, query_rewriter=GlossaryQueryRewriter(glossary),
                filter_extractor=extractor, embedding_backend=backend,
                fusion=fusion_from_settings(settings),
                channels="vector" if settings.effective_retrieval_mode == "vector" else "hybrid",
            )  # fmt: skip
        except BaseException:
            _close(provider)
            _close_backend(backend)
            raise
        return cls(settings, retriever, store, provider)

    # -- writes -------------------------------------------------------------------------------
    def ingest(
        self, source: str | Path, *, doc_id: str | None = None, valid_as_of: str = "", **meta: str
    ) -> IngestResult:
        """Ingest a file (a `Path`, or a str naming an existing file) or a text (a str, with
        `doc_id`). `meta`: title, topic, entity, geography, period, language, sensitivity (for a
        file, its front matter wins over `meta`)."""
        if isinstance(source, Path) or _names_file(source):
            path = Path(source)
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from exc
            return self.ingest_bytes(path.name, data, doc_id=doc_id or path.name, valid_as_of=valid_as_of, **meta)
        if doc_id is None:
            raise ValueError("ingesting a text needs doc_id=...")
        return self.ingest_text(source, doc_id, valid_as_of=valid_as_of, **meta)

    def ingest_text(
        self,
        text: str,
        doc_id: str,
        *,
        valid_as_of: str = "",
        metadata: dict[str, Any] | None = None,
        pages: tuple[Sequence[tuple[int, int]], Sequence[int]] | None = None,
        **meta: str,
    ) -> IngestResult:
        """Make `text` the active version of `doc_id` (one transaction). `metadata`: user
        metadata (filterable); `pages`: (page spans, page numbers) of a paged document, carried
        into each chunk's locator."""
        unknown = sorted(set(meta) - set(_META_FIELDS))
        if unknown:
            raise ValueError(f"unknown metadata {', '.join(unknown)}; valid: {', '.join(_META_FIELDS)}")
        doc_id = _check_doc_id(doc_id)
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text is empty: nothing to ingest (use withdraw to remove a document)")
        if not meta.get("language"):
            from ragspine.retrieval.language import detect_language

            meta = {**meta, "language": detect_language(text)}
        fields = {k: v for k, v in meta.items() if v is not None}
        index = self.retriever.index
        document = DocumentMeta(doc_id, metadata=dict(metadata or {}), **fields)
        chunks = chunk_document(text, document, max_chars=index.max_chars, overlap_chars=index.overlap_chars)
        if pages is not None:
            from ragspine.ingest.pages import with_pages

            chunks = with_pages(chunks, *pages)
        count = index.replace_chunks(doc_id, chunks, valid_as_of=valid_as_of)
        return IngestResult(doc_id, count, self._version(doc_id))

    def ingest_bytes(self, filename: str, data: bytes, *, doc_id: str | None = None, **meta: str) -> IngestResult:
        """Ingest a file's bytes with the loader for its suffix. As with `ragspine ingest`, the
        file's own metadata (Markdown front matter) wins over `meta`, which fills the rest; its
        string/number free fields become filterable user metadata; PDF pages reach the locators."""
        from ragspine.ingest.loaders import load_document
        from ragspine.ingest.metadata import filterable, to_fields

        name = Path(filename).name
        loaded = load_document(Path(name), data)
        found = to_fields(loaded.metadata, name) if loaded.metadata else None
        known = found.known if found else {}
        merged = {"title": loaded.title, **{k: v for k, v in meta.items() if v}, **known}
        pages = (loaded.page_spans, loaded.page_numbers) if loaded.page_spans else None
        free = filterable(found.free) if found else {}
        return self.ingest_text(loaded.text, doc_id or name, metadata=free, pages=pages, **merged)

    def embed_pending(self, *, progress: bool | None = None, batch_size: int = 64) -> EmbedReport | None:
        """Embed every active chunk that has no vector yet (shortest first, in committed
        batches: an interrupted run resumes) and drop vectors of chunks no longer active; None
        without a dense channel. `progress`: a bar with ETA on stderr (None: on a terminal)."""
        return self.retriever.index.embed_pending(progress=progress, batch_size=batch_size)

    def withdraw(self, doc_id: str) -> int:
        """Remove `doc_id` from the active set; return how many active chunks it had (0: none)."""
        doc_id = _check_doc_id(doc_id)
        active = len(self.store.iter_chunks(doc_id=doc_id))
        if active:
            self.retriever.index.withdraw(doc_id)
        return active

    # -- reads --------------------------------------------------------------------------------
    def chunks(self, doc_id: str) -> list[dict[str, Any]]:
        """The active, non-RESTRICTED chunks of `doc_id` as dicts, in order."""
        rows = self.store.iter_chunks(doc_id=_check_doc_id(doc_id))
        return [_chunk_dict(asdict(c)) for c in rows if not is_restricted(c.sensitivity)]

    def search(
        self,
        query: str,
        *,
        where: Any = None,
        top_k: int = DEFAULT_SEARCH_TOP_K,
        mode: str | None = None,
    ) -> list[dict[str, Any]]:
        """Ranked, cited, RESTRICTED-free snippet dicts. `where`: exact matches on the five
        metadata fields ({"entity": "ACME_CN"}) or the typed filter language (docs/filters.md).
        `mode` must be one the workspace can run."""
        self.check_mode(mode)
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query is empty: give some words to search for")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        return self.retriever.retrieve(query, filters=where or None, top_k=top_k)

    def ask(self, question: str, *, where: Any = None, top_k: int = DEFAULT_ASK_TOP_K) -> Answer:
        """A cited answer: from the LLM when one is configured, else extractive."""
        return ask(self.retriever, question, provider=self.provider, filters=where, top_k=top_k)

    def stats(self) -> dict[str, Any]:
        """Counts (documents, chunks), the index state (retrieval mode, embedding model, dense
        coverage as of the last search) and the configured channels."""
        ((documents, chunks),) = self.store.execute_read(
            f"SELECT COUNT(DISTINCT doc_id), COUNT(*) FROM {TABLE} WHERE active = 1"
        )
        index: dict[str, Any] = {
            "data_version": self.store.data_version(),
            "retrieval": self.retrieval_mode,
            "embedding_model": None,
            "dense": None,
        }
        dense = self.retriever.index.dense
        if dense is not None:
            coverage = dense.coverage()
            index["embedding_model"] = dense.vectors.model_id
            index["dense"] = {
                "stored_vectors": dense.vectors.count(),
                # as of the last search (all zero before the first one)
                "active": coverage.active,
                "with_vector": coverage.with_vector,
                "lexical_only": coverage.lexical_only,
                "missing": coverage.missing,
            }
        return {"documents": documents, "chunks": chunks, "index": index, "channels": self.settings.channels()}

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
                f"({self.settings.embedding_resolution[1]}); use auto or bm25"
            )
        raise ValueError(
            f"this workspace runs {effective} retrieval (RAGSPINE_RETRIEVAL_MODE="
            f"{self.settings.retrieval_mode}); a request cannot switch to {mode!r}: use auto or "
            f"{effective}, or serve another workspace with RAGSPINE_RETRIEVAL_MODE={mode}"
        )

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        dense = self.retriever.index.dense
        self.store.close()
        if dense is not None:
            dense.vectors.close()
            _close_backend(dense.backend)
        _close(self.provider)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _version(self, doc_id: str) -> int:
        rows = self.store.execute_read(f"SELECT COALESCE(MAX(version), 0) FROM {TABLE} WHERE doc_id = ?", (doc_id,))
        return int(rows[0][0])


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


# (registry name, its registry entry, options) → a live local backend
_SHARED_BACKENDS: weakref.WeakValueDictionary[tuple[Any, ...], Any] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def embedding_backend_for(settings: Settings) -> EmbeddingBackend | None:
    """The embedding backend `settings` select (`Settings.embedding_backend`, auto resolved),
    built with the options from RAGSPINE_EMBEDDING_MODEL / _BASE_URL / _API_KEY; None in
    economy/bm25/lexical mode or when none resolves. A local backend is shared with the other
    workspaces of this process that use the same one (built once while any holds it)."""
    name = settings.embedding_backend
    if name is None:
        return None
    from ragspine.retrieval.vector.embeddings.factory import EMBEDDING_BACKENDS, make_embedding_backend

    options = embedding_options(settings, name)
    if name in REMOTE_EMBEDDINGS:  # one HTTP client per workspace, closed with it
        return make_embedding_backend(name, **options)
    key = (name, EMBEDDING_BACKENDS.get(name), tuple(sorted((k, str(v)) for k, v in options.items())))
    with _SHARED_LOCK:
        backend = _SHARED_BACKENDS.get(key)
        if backend is None:
            backend = make_embedding_backend(name, **options)
            with contextlib.suppress(TypeError):  # not weak-referenceable: this workspace keeps its own
                _SHARED_BACKENDS[key] = backend
    return backend


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


def _check_doc_id(doc_id: str) -> str:
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise ValueError("doc_id must be a non-empty string")
    if len(doc_id) > MAX_DOC_ID_CHARS or any(ord(c) < 32 for c in doc_id):
        raise ValueError(f"doc_id must be at most {MAX_DOC_ID_CHARS} characters, without control characters")
    return doc_id


def _chunk_dict(row: dict[str, Any]) -> dict[str, Any]:
    row.pop("active", None)
    return row


def _close_backend(backend: object) -> None:
    """Close a remote backend (its HTTP client: one per workspace); local backends may be shared
    and hold nothing to close."""
    if backend is not None and getattr(backend, "is_remote", False):
        _close(backend)


def _close(provider: object) -> None:
    close = getattr(provider, "close", None)
    if callable(close):
        close()
