"""One ingest path: `IngestPipeline` (resolve labels → load → chunk → store → index → embed),
which `ragspine ingest` (`ingest_paths`), `Workspace.ingest*` (Python and the HTTP service) and
`ragspine eval` all run, with the same side effects: the chunks, a registry row per document,
the same warnings, the same embedding policy.

The steps, in order:
1. labels: `resolve_labels` turns the caller's defaults, label, rule file and known levels into
   `IngestSettings`; each document's label is then read by `ingest.labels.read_label` (the one
   label reader) from every source, and `keep_stricter` keeps a stricter stored label.
2. load: a file's bytes by its loader (`ingest.loaders`), a text as it is.
3. chunk: `ingest.document` (the configured chunker, page locators, user metadata).
4. store: the label follows the content (`ingest.content`): a label lower than a stored copy of
   the same bytes or text holds is refused unless lowered explicitly (`lower`); a folder run
   records a copy of an active document as its duplicate instead of storing it again (see
   `ingest.folder_run`); otherwise `NarrativeIndex.replace_chunks` makes the chunks the document's active version in one
   store transaction; then the document's `DocumentRegistry` row is written (content hash,
   ingest key, version, chunks, loader, metadata). A caller's own `DocumentMeta` (eval's whole
   entries) goes through `NarrativeIndex.ingest`, the specification's chunk-and-replace
   primitive, which this step calls: `ragspine.retrieval` never imports this package.
5. index: the lexical index follows the store: an index already loaded (a long-lived
   workspace) is updated by the write at once; a folder run given the searches' analyzer
   (`ragspine ingest`) builds or catches up the index files beside the store once all files
   are written, before embedding, so its first search loads them; otherwise the first search
   catches up from the store's change log.
6. embed: an index that embeds on write (a workspace) embeds each document's chunks as they
   are written; otherwise (a folder run, eval) the closing `embed` step embeds, in one
   `embed_pending` pass, every active chunk that has no vector.

Invariants of a folder run (`ingest_paths`):
- a file that fails (unreadable, undecodable, corrupt, a missing extra) is reported with its
  reason and never stops the batch; a document is either fully written as a new version (one
  store transaction) or not at all, so a failed re-ingest leaves its previous version active;
- a full storage (`StorageFull`, as `store.full.storage_full` recognises it) stops the run at
  that file: one failure naming it and the count of files not attempted (`not_attempted`), no
  prune and no embed step; what was written before it stays, nothing of it is kept;
- a document whose `ingest_key` (content, sidecar, settings) is unchanged, and whose recorded
  version is still the active one, is skipped without any write: re-running on the same folder
  writes nothing (a single document given to a `Workspace` is always written as a new version);
- a re-ingest never lowers a document's stored label implicitly: a new version that would be
  less strict keeps the stored label, with a warning, unless its doc_id is in `lower_labels`
  (those documents are re-ingested even when unchanged);
- `prune` withdraws only documents whose files lie under a folder given in this run and no
  longer exist; a path that does not exist prunes nothing (`ingest.folder_run`: duplicates, a
  file registered under another folder spelling, failures known from the last run).
The registry row is written after the chunks; if a run dies between the two, the next run sees
no matching row and writes the document again (one extra version, never a half-written one).

With an embedding backend, a folder run writes documents without vectors and its embed step
embeds every active chunk that has none (all files' chunks sorted by length into batches, each
committed, with a progress bar); the report's `embedding` says what it did. A vectors file of
another model stops that step with `VectorModelMismatch` after the documents are written (they
stay; `ragspine embed --reembed` finishes the job): the vectors are opened only at that step.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from ragspine.closing import Closeable
from ragspine.ingest.content import check_content_label, duplicate_of, text_hash
from ragspine.ingest.document import (
    IngestSettings,
    PreparedDocument,
    ingest_settings,
    keep_stricter,
    prepare,
    prepare_loaded,
)
from ragspine.ingest.files import FileFailure, SourceFile, discover
from ragspine.ingest.folder_run import FolderRun
from ragspine.ingest.labels import (
    caller_label,
    field_labels,
    kept_label,
    kept_warning,
    label_rules,
    label_sources,
    read_label,
    stored_labels,
)
from ragspine.ingest.loaders import SUPPORTED_SUFFIXES, LoadedDocument
from ragspine.ingest.loaders.base import clean_text
from ragspine.ingest.metadata import DocumentFields, Sidecar, filterable, split_front_matter, to_fields
from ragspine.ingest.origin import Origin, Written, file_origin, now, text_origin
from ragspine.ingest.registry import ACTIVE, DUPLICATE, DocumentRecord, DocumentRegistry
from ragspine.ingest.report import IngestReport
from ragspine.ingest.sensitivity_rules import SensitivityRules
from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
)
from ragspine.retrieval.chunking.protocol import Chunker, IndexTextFn
from ragspine.retrieval.lexical.index.store_index import build_beside
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.factory import open_chunk_store
from ragspine.retrieval.store.full import StorageFull
from ragspine.retrieval.store.protocol import ChunkStoreProtocol
from ragspine.secret import redact_url

if TYPE_CHECKING:
    from ragspine.ingest.visual import VisualIngestReport
    from ragspine.retrieval.vector.dense.chunk_vectors import EmbedReport
    from ragspine.retrieval.vector.stores.inprocess import ChunkVectorStore

__all__ = [
    "DeferredEmbedding",
    "IngestPipeline",
    "IngestReport",
    "IngestRunReport",
    "Origin",
    "Written",
    "ingest_paths",
    "resolve_labels",
]

TEXT_LOADER = "text"  # the registry's `loader` of a document given as a text


@dataclass
class IngestRunReport(IngestReport):
    """An IngestReport plus the closing embedding pass (None: no embedding backend)."""

    embedding: EmbedReport | None = None
    visual: VisualIngestReport | None = None  # the page index pass (RAGSPINE_VISUAL_EMBEDDER)
    lexical_index: str = ""  # the index step: "built", "caught_up", "loaded"; "": not run here

    def headline(self) -> str:
        line = super().headline()
        if self.embedding is None:
            return line
        return f"{line}; embedded: {self.embedding.embedded} chunk(s)"


@dataclass(frozen=True)
class DeferredEmbedding:
    """The embed step of a run whose writing index has no dense channel (`ragspine ingest`): the
    backend, the vectors store (None: the file beside a SQLite store), the index text, and
    `embed_pending`'s batch size and progress bar. Opened only at that step."""

    backend: Any
    vectors: ChunkVectorStore | None = None
    index_text: IndexTextFn | None = None
    batch_size: int = 64
    progress: bool | None = None


def resolve_labels(
    defaults: Mapping[str, str | None],
    sensitivity: str | None = None,
    *,
    rules: SensitivityRules | str | Path | None = None,
    levels: str | Sequence[str] | None = None,
    sensitivity_from: str = "--sensitivity",
    max_chars: int = DEFAULT_CHUNK_CHARS,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
    chunker: Chunker | None = None,
) -> IngestSettings:
    """Step 1, labels: the `IngestSettings` a run or a request labels and chunks with: the
    caller's metadata `defaults`, its `sensitivity` (a label source when given; None: INTERNAL
    for documents nothing labels), the `rules` (a SensitivityRules or a rule file) over the known
    `levels` (None: the defaults; a rule file's own take precedence), and the chunking.
    `sensitivity_from` names the caller's label in the unknown-label error."""
    return ingest_settings(
        defaults, sensitivity, rules=label_rules(rules, levels), max_chars=max_chars, overlap_chars=overlap_chars,
        chunker=chunker, sensitivity_from=sensitivity_from,
    )  # fmt: skip


class IngestPipeline(Closeable):
    """The one ingest path over a `NarrativeIndex` (its store) and a `DocumentRegistry` (None:
    no registry rows, for callers that keep none); thread-safe; close it to close the registry.

    >>> from ragspine.retrieval.store.sqlite import ChunkStore
    >>> store = ChunkStore(":memory:"); store.init_schema()
    >>> with IngestPipeline(NarrativeIndex(store), registry=DocumentRegistry(":memory:")) as pipeline:
    ...     written = pipeline.ingest_text("d", "Exports fell.", resolve_labels({"entity": "ACME"}))
    ...     (written.chunks, written.version), pipeline.registry.get("d").loader
    ((1, 1), 'text')
    """

    def __init__(
        self,
        index: NarrativeIndex,
        *,
        registry: DocumentRegistry | None = None,
        embedding: DeferredEmbedding | None = None,
    ) -> None:
        self.index, self.registry, self.embedding = index, registry, embedding
        # One registry write at a time (the HTTP service's threads); re-entrant: `settle_copies`
        # holds it across the writes of the copies it stores.
        self._lock = threading.RLock()

    @property
    def store(self) -> ChunkStoreProtocol:
        return self.index.store

    # -- one document: load → chunk → store (→ index, → embed on write) -----------------------
    def prepare_file(
        self, source: SourceFile, data: bytes, sidecar: Sidecar, settings: IngestSettings
    ) -> PreparedDocument:
        """Steps 2-3 for a file: load its bytes with the loader for its suffix, read its labels,
        chunk it (`ingest.document.prepare`). ValueError (or MissingExtraError) with the reason."""
        return prepare(source, data, sidecar, settings)

    def ingest_file(
        self,
        source: SourceFile,
        data: bytes,
        settings: IngestSettings,
        *,
        sidecar: Sidecar | None = None,
        lower: bool = False,
        valid_as_of: str = "",
    ) -> Written:
        """A file's bytes as the new active version of `source.doc_id` (`sidecar`: its sidecar,
        None: none). The file's own metadata wins over `settings.defaults`; its label is the
        strictest of every source."""
        sidecar = sidecar if sidecar is not None else Sidecar(DocumentFields())
        prepared = self.prepare_file(source, data, sidecar, settings)
        return self.store_document(
            source.doc_id, prepared, settings, file_origin(source, data, sidecar, settings), lower=lower,
            valid_as_of=valid_as_of,
        )  # fmt: skip

    def ingest_text(
        self,
        doc_id: str,
        text: str,
        settings: IngestSettings,
        *,
        own: DocumentFields | None = None,
        user_metadata: Mapping[str, Any] | None = None,
        pages: tuple[Sequence[tuple[int, int]], Sequence[int]] | None = None,
        lower: bool = False,
        valid_as_of: str = "",
    ) -> Written:
        """A text as the new active version of `doc_id`: `own` its own fields (a label among them
        is a label source), `user_metadata` its filterable metadata, `pages` (page spans, page
        numbers) of a paged document. Front matter opening the text is read by the one reader
        (`ingest.front_matter`) as for a file: its labels count, its fields fill what `own` leaves
        unset, and it is not part of the stored text (page spans shift with it). Without `pages`
        the text is cleaned as a loaded file's is (`clean_text`: `\r\n` and `\r` line ends as `\n`,
        NUL removed), so front matter with Windows line ends is read, not refused."""
        own = own if own is not None else DocumentFields()
        text = clean_text(text) if pages is None else text  # spans index the text as given
        front_data, body = split_front_matter(text)
        front = to_fields(front_data, "front matter") if front_data else DocumentFields()
        user = {**filterable(front.free), **dict(user_metadata or {})}
        spans, numbers = pages if pages is not None else ((), ())
        cut = len(text) - len(body)
        spans = [(max(0, start - cut), max(0, end - cut)) for start, end in spans]
        loaded = LoadedDocument(body, loader=TEXT_LOADER, page_spans=tuple(spans), page_numbers=tuple(numbers))
        labels = [(label, f"the sensitivity argument for {doc_id!r}") for label in field_labels(own)]
        labels += label_sources(doc_id, (front, "front matter"))
        prepared = prepare_loaded(doc_id, loaded, own.over(front), settings, user_metadata=user, labels=labels)
        given = {name: value for name, value in own.known.items() if value}  # a blank field sets nothing
        origin = text_origin(doc_id, text, {"fields": given, "free": dict(own.free), "user": user}, settings)
        return self.store_document(doc_id, prepared, settings, origin, lower=lower, valid_as_of=valid_as_of)

    def ingest_document(
        self, text: str, meta: DocumentMeta, *, levels: str | Sequence[str] | None = None, valid_as_of: str = ""
    ) -> Written:
        """A text with the caller's own `DocumentMeta` (eval's corpus entries): its label (the
        meta's sensitivity, a label source) is read and checked against `levels` like any other,
        a stricter stored label is kept, and `NarrativeIndex.ingest` chunks it with the index's
        chunker and writes it: exactly the chunks `NarrativeIndex.ingest(text, meta)` makes."""
        rules = label_rules(None, levels)
        given = caller_label(meta.sensitivity, rules.levels, given=True, source=f"the sensitivity of {meta.doc_id!r}")
        label, kind = read_label(meta.doc_id, text, meta.title, [], rules=rules, caller=given, default=given)
        warnings: tuple[str, ...] = ()
        kept = kept_label(label, stored_labels(self.store, meta.doc_id), rules.levels)
        if kept is not None:
            warnings = (kept_warning(kept, label),)
            label, kind = kept, "kept"
        meta = replace(meta, sensitivity=label)
        written = self.index.ingest(text, meta, valid_as_of=valid_as_of)
        fields = {name: getattr(meta, name) for name in ("title", "topic", "entity", "geography", "period", "language")}
        metadata = {**fields, "sensitivity": label, "sensitivity_from": kind, "free": dict(meta.metadata)}
        origin = text_origin(meta.doc_id, text, metadata, None, chunker=self.index.chunker)
        return self._registered(meta.doc_id, written, origin, TEXT_LOADER, "", 0, metadata, warnings, text_hash(text))

    def store_document(
        self,
        doc_id: str,
        prepared: PreparedDocument,
        settings: IngestSettings,
        origin: Origin,
        *,
        lower: bool = False,
        valid_as_of: str = "",
        detail: bool = False,
        duplicates: bool = False,
    ) -> Written:
        """Step 4, store: keep a stricter stored label (unless `lower`); refuse a label lower
        than a stored copy of the same content holds (`content.check_content_label`, unless
        `lower`; `detail`: the error names that copy, for the owner's folder run); with
        `duplicates` (a folder run), record a copy of an active document (`content.duplicate_of`)
        as its duplicate instead of storing it (`Written.duplicate_of`); else write the chunks
        as the document's active version (one transaction; the index follows, and an index that
        embeds on write embeds them), then its registry row."""
        prepared = keep_stricter(prepared, stored_labels(self.store, doc_id), settings.rules.levels, lower=lower)
        loaded = prepared.loaded
        hashed = text_hash(loaded.text)
        if self.registry is not None:
            with self._lock:  # the registry's one connection: one thread at a time
                check_content_label(
                    self.registry, self.store, doc_id, prepared.meta.sensitivity, (origin.content_hash, hashed),
                    settings.rules.levels, lower=lower, detail=detail,
                )  # fmt: skip
                original = None
                if duplicates:
                    original = duplicate_of(
                        self.registry, doc_id, origin.content_hash, prepared.metadata, origin.source_path
                    )
            if original is not None:
                return self._duplicate(doc_id, origin, loaded, prepared, hashed, original.doc_id)
        written = self.index.replace_chunks(doc_id, prepared.chunks, valid_as_of=valid_as_of)
        return self._registered(
            doc_id, written, origin, loaded.loader, loaded.encoding, len(loaded.page_numbers), prepared.metadata,
            prepared.warnings, hashed,
        )  # fmt: skip

    def make_duplicate(self, record: DocumentRecord, original: DocumentRecord) -> None:
        """Turn the active document `record` into a duplicate of `original` (same bytes, label
        and metadata: `--prune` folding an older store's copies): its chunks withdrawn, its row
        kept with status duplicate."""
        self.index.withdraw(record.doc_id)
        if self.registry is not None:
            entry = replace(record, status=DUPLICATE, duplicate_of=original.doc_id, chunks=0, ingested_at=now())
            with self._lock:
                self.registry.record(entry)

    def withdraw(self, doc_id: str) -> None:
        """Take `doc_id` out of the active set (its rows stay, inactive) and mark its registry
        row withdrawn (a duplicate has no chunks: only its row is marked)."""
        with self._lock:
            record = self.registry.get(doc_id) if self.registry is not None else None
        if record is None or record.status != DUPLICATE:
            self.index.withdraw(doc_id)
        if self.registry is not None:
            with self._lock:
                self.registry.mark_withdrawn(doc_id, now())

    def copies_of(self, doc_id: str) -> list[DocumentRecord]:
        """The duplicate rows recorded as copies of `doc_id`, by doc_id ([] without a registry)."""
        if self.registry is None:
            return []
        with self._lock:
            return self.registry.duplicates([doc_id])

    def settle_copies(self, doc_id: str, settings: IngestSettings) -> list[FileFailure]:
        """After `doc_id` was replaced or withdrawn outside a folder run (`Workspace`, HTTP), do
        what the end of a folder run does (`FolderRun.settle_duplicates`, for its copies only):
        its first copy whose file still holds its recorded bytes is read again from its path and
        stored as an active document, its other copies become duplicates of it; a copy whose file
        is gone or changed is left to the next folder run. `settings`: how the copies are read
        (their recorded fields and label as defaults). Returns what to warn about: failures and
        warnings, by file. One step: the registry lock is held throughout."""
        if self.registry is None:
            return []
        report = IngestReport(db="")
        with self._lock:
            FolderRun(self, settings, report, force=True).settle_duplicates([doc_id])
        return [*report.failures, *report.warnings]

    # -- the run's closing step ---------------------------------------------------------------
    def embed(self, *, progress: bool | None = None, batch_size: int = 64) -> EmbedReport | None:
        """Step 6, embed, at the end of a run: every active chunk without a vector, in one
        `embed_pending` pass (`DeferredEmbedding`'s options when given). None when nothing
        embeds here (no backend); an index that embeds on write has only what an earlier bulk
        ingest left."""
        if self.embedding is not None:
            deferred = self.embedding
            return _embed_pending(
                self.store, deferred.backend, deferred.progress, deferred.batch_size, deferred.index_text,
                deferred.vectors,
            )  # fmt: skip
        return self.index.embed_pending(progress=progress, batch_size=batch_size)

    def close(self) -> None:
        """Close the registry (the index and its store stay the caller's)."""
        if self.registry is not None:
            self.registry.close()

    def _registered(
        self,
        doc_id: str,
        written: int,
        origin: Origin,
        loader: str,
        encoding: str,
        pages: int,
        metadata: Mapping[str, Any],
        warnings: tuple[str, ...],
        hashed: str = "",
        *,
        status: str = ACTIVE,
        copy_of: str = "",
    ) -> Written:
        version = (self.store.active_version(doc_id) or 0) if status == ACTIVE else 0
        if self.registry is not None:
            record = DocumentRecord(
                doc_id=doc_id, root=origin.root, source_path=origin.source_path, content_hash=origin.content_hash,
                ingest_key=origin.ingest_key, version=version, chunks=written, status=status, loader=loader,
                encoding=encoding, pages=pages, size_bytes=origin.size_bytes,
                metadata=json.dumps(metadata, ensure_ascii=False, sort_keys=True), ingested_at=now(),
                text_hash=hashed, duplicate_of=copy_of,
            )  # fmt: skip
            with self._lock:
                self.registry.record(record)
        return Written(doc_id, written, version, warnings, copy_of)

    def _duplicate(
        self, doc_id: str, origin: Origin, loaded: LoadedDocument, prepared: PreparedDocument, hashed: str, of: str
    ) -> Written:
        """Record `doc_id` as a copy of the active document `of`: no chunks of its own (any it
        had are withdrawn), a registry row with status duplicate."""
        if self.store.active_version(doc_id) is not None:
            self.index.withdraw(doc_id)
        return self._registered(
            doc_id, 0, origin, loaded.loader, loaded.encoding, len(loaded.page_numbers), prepared.metadata,
            prepared.warnings, hashed, status=DUPLICATE, copy_of=of,
        )  # fmt: skip


def ingest_paths(
    paths: Sequence[Path],
    db: str,
    *,
    entity: str | None = None,
    period: str | None = None,
    topic: str | None = None,
    geography: str | None = None,
    language: str | None = None,
    sensitivity: str | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    rules: SensitivityRules | str | Path | None = None,
    prune: bool = False,
    force: bool = False,
    max_chars: int = DEFAULT_CHUNK_CHARS,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
    progress: bool | None = None,
    embedding_backend: Any = None,
    embed_batch_size: int = 64,
    chunker: Chunker | None = None,
    lower_labels: Sequence[str] = (),
    skip_garbled: bool = False,
    levels: Sequence[str] | None = None,
    index_text: IndexTextFn | None = None,
    vectors: ChunkVectorStore | None = None,
    lexical_analyzer: Callable[[str], list[str]] | None = None,
) -> IngestRunReport:
    """Ingest every supported file under `paths` into the store at `db` (a SQLite path or a
    `postgresql://` URL: the registry lives in the same database); see the module docstring.

    The metadata arguments are defaults for documents that do not set the field themselves
    (sidecar or front matter). `rules` is a SensitivityRules or a rule-file path; `force`
    re-ingests unchanged files; `progress` None shows a bar only on a terminal.
    `embedding_backend` (e.g. `ragspine.assembly.make_embedding(settings)`): embed the
    chunks that lack a vector once all files are written, `embed_batch_size` per call.
    `chunker` (e.g. `ragspine.assembly.make_chunker_for(settings)`) cuts the documents; None:
    the paragraph packer with `max_chars` / `overlap_chars`. `sensitivity`: a label source
    (the strictest of all sources wins), None: INTERNAL for documents nothing labels.
    `lower_labels`: doc_ids whose label may go down to what this run gives them;
    `skip_garbled`: fail documents whose text looks garbled (see `ingest.quality`) instead of
    ingesting them with a warning. `levels`: the known labels, least strict first (None: the
    defaults); a rule file's own `levels` take precedence.
    `index_text` (e.g.
    `ragspine.assembly.make_index_text_for(settings)`) is what the embedding pass embeds.
    `vectors` (e.g. `ragspine.assembly.make_vector_store_for(settings, backend)`: pgvector,
    Qdrant) is where it writes them; None: the vectors file beside a SQLite store.
    `lexical_analyzer` (e.g. `make_analyzer(settings.analyzer)`, the one searches use): once
    the files are written, and before the embed step, the lexical index files beside the store
    are built (or brought up to date) with it and `index_text`, so the store is BM25-searchable
    without a build at the first search (`report.lexical_index`); None: the first search does it.
    """
    given = {
        "entity": entity, "period": period, "topic": topic, "geography": geography, "language": language
    }  # fmt: skip
    settings = resolve_labels(
        given, sensitivity, rules=rules, levels=levels, max_chars=max_chars, overlap_chars=overlap_chars,
        chunker=chunker,
    )  # fmt: skip
    found = discover(paths, include=include, exclude=exclude)
    report = IngestRunReport(db=redact_url(db), failures=list(found.failures), warnings=list(found.warnings))
    if not found.files and not (prune and found.roots):
        if found.failures:
            return report
        raise ValueError(
            f"no {', '.join(SUPPORTED_SUFFIXES)} files found under {', '.join(map(str, paths))}"
        )
    embedding = None
    if embedding_backend is not None:
        embedding = DeferredEmbedding(embedding_backend, vectors, index_text, embed_batch_size, progress)
    with open_chunk_store(db) as store:
        store.init_schema()
        # The writing index: no dense channel (the embed step opens the vectors) and no lexical
        # index files (the index step below, or else the first search, builds them from the
        # store); the chunks are cut by `settings`, so its own chunker is never used.
        index = NarrativeIndex(store, persist_index=False)
        with IngestPipeline(index, registry=DocumentRegistry(db), embedding=embedding) as pipeline:
            run = FolderRun(
                pipeline, settings, report, force=force, lower=frozenset(lower_labels), skip_garbled=skip_garbled
            )
            hide = None if progress is None else not progress  # None: shown on a terminal only
            try:
                for source in tqdm(found.files, desc="ingest", unit="file", disable=hide):
                    run.ingest_one(source)
                for root in found.roots if prune else ():
                    run.prune(root)
                run.settle_duplicates()
            except StorageFull as full:
                run.stop(full, left=len(found.files) - run.attempted)
                return report
            run.record_failures()
            if lexical_analyzer is not None:  # BM25-searchable now, before the embed step
                report.lexical_index = build_beside(store, lexical_analyzer, index_text=index_text)
            report.embedding = pipeline.embed() if embedding is not None else None
    return report


def _embed_pending(
    store: ChunkStoreProtocol,
    backend: Any,
    progress: bool | None,
    batch_size: int,
    index_text: IndexTextFn | None = None,
    vectors: ChunkVectorStore | None = None,
) -> EmbedReport:
    """One embedding pass over the store's active chunks lacking a vector (the same vectors file
    or store, and model key, the retrieval side opens)."""
    from ragspine.retrieval.vector.dense.chunk_vectors import VectorModelMismatch

    try:
        index = NarrativeIndex(
            store, embedding_backend=backend, embed_on_write=False, index_text=index_text, vectors=vectors
        )
        try:  # the vectors file is made by this pass if the store had none (`embed_pending`)
            report = index.embed_pending(progress=progress, batch_size=batch_size)
        finally:
            index.close()
    except VectorModelMismatch as exc:
        raise VectorModelMismatch(f"the documents were ingested but not embedded: {exc}") from exc
    assert report is not None
    return report
