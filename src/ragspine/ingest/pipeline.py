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
4. store: `NarrativeIndex.replace_chunks` makes the chunks the document's active version in one
   store transaction; then the document's `DocumentRegistry` row is written (content hash,
   ingest key, version, chunks, loader, metadata). A caller's own `DocumentMeta` (eval's whole
   entries) goes through `NarrativeIndex.ingest`, the specification's chunk-and-replace
   primitive, which this step calls: `ragspine.retrieval` never imports this package.
5. index: the lexical index follows the store: an index already loaded (a long-lived
   workspace) is updated by the write at once; one never loaded (a CLI run) catches up from
   the store's change log at the first search.
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
- `prune` withdraws only documents registered under a folder given in this run whose files no
  longer exist there; a path that does not exist prunes nothing.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from ragspine.closing import Closeable
from ragspine.ingest.document import (
    GARBLED,
    IngestSettings,
    PreparedDocument,
    content_hash,
    ingest_key,
    ingest_settings,
    keep_stricter,
    prepare,
    prepare_loaded,
)
from ragspine.ingest.files import FileFailure, SourceFile, discover
from ragspine.ingest.labels import (
    caller_label,
    field_labels,
    kept_label,
    kept_warning,
    label_rules,
    read_label,
    stored_labels,
)
from ragspine.ingest.loaders import SUPPORTED_SUFFIXES, LoadedDocument
from ragspine.ingest.metadata import DocumentFields, Sidecar, read_sidecar
from ragspine.ingest.registry import ACTIVE, DocumentRecord, DocumentRegistry
from ragspine.ingest.report import IngestReport
from ragspine.ingest.sensitivity_rules import SensitivityRules
from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
)
from ragspine.retrieval.chunking.protocol import Chunker, IndexTextFn
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.factory import open_chunk_store
from ragspine.retrieval.store.full import StorageFull, storage_full
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

    def headline(self) -> str:
        line = super().headline()
        if self.embedding is None:
            return line
        return f"{line}; embedded: {self.embedding.embedded} chunk(s)"


@dataclass(frozen=True)
class Written:
    """What the store step wrote for one document: its new active version, how many chunks,
    and the warnings to show (a kept stricter label, garbled text, a near-miss sidecar name)."""

    doc_id: str
    chunks: int
    version: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Origin:
    """Where a document came from, for its registry row: the folder a run found it under ('' when
    it was given directly), its file ('' for a text or an upload), its content hash, its
    `ingest_key` and its size in bytes."""

    content_hash: str
    ingest_key: str
    size_bytes: int
    root: str = ""
    source_path: str = ""


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
        self._lock = threading.Lock()  # one registry write at a time (the HTTP service's threads)

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
        numbers) of a paged document."""
        own = own if own is not None else DocumentFields()
        user = dict(user_metadata or {})
        spans, numbers = pages if pages is not None else ((), ())
        loaded = LoadedDocument(text, loader=TEXT_LOADER, page_spans=tuple(spans), page_numbers=tuple(numbers))
        labels = [(label, f"the sensitivity argument for {doc_id!r}") for label in field_labels(own)]
        prepared = prepare_loaded(doc_id, loaded, own, settings, user_metadata=user, labels=labels)
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
        return self._registered(meta.doc_id, written, origin, TEXT_LOADER, "", 0, metadata, warnings)

    def store_document(
        self,
        doc_id: str,
        prepared: PreparedDocument,
        settings: IngestSettings,
        origin: Origin,
        *,
        lower: bool = False,
        valid_as_of: str = "",
    ) -> Written:
        """Step 4, store: keep a stricter stored label (unless `lower`), write the chunks as the
        document's active version (one transaction; the index follows, and an index that embeds
        on write embeds them), then its registry row."""
        prepared = keep_stricter(prepared, stored_labels(self.store, doc_id), settings.rules.levels, lower=lower)
        written = self.index.replace_chunks(doc_id, prepared.chunks, valid_as_of=valid_as_of)
        loaded = prepared.loaded
        return self._registered(
            doc_id, written, origin, loaded.loader, loaded.encoding, len(loaded.page_numbers), prepared.metadata,
            prepared.warnings,
        )  # fmt: skip

    def withdraw(self, doc_id: str) -> None:
        """Take `doc_id` out of the active set (its rows stay, inactive) and mark its registry
        row withdrawn."""
        self.index.withdraw(doc_id)
        if self.registry is not None:
            with self._lock:
                self.registry.mark_withdrawn(doc_id, now())

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
    ) -> Written:
        version = self.store.active_version(doc_id) or 0
        if self.registry is not None:
            record = DocumentRecord(
                doc_id=doc_id, root=origin.root, source_path=origin.source_path, content_hash=origin.content_hash,
                ingest_key=origin.ingest_key, version=version, chunks=written, status=ACTIVE, loader=loader,
                encoding=encoding, pages=pages, size_bytes=origin.size_bytes,
                metadata=json.dumps(metadata, ensure_ascii=False, sort_keys=True), ingested_at=now(),
            )  # fmt: skip
            with self._lock:
                self.registry.record(record)
        return Written(doc_id, written, version, warnings)


def file_origin(source: SourceFile, data: bytes, sidecar: Sidecar, settings: IngestSettings, root: str = "") -> Origin:
    """A file's registry origin: `root` the folder a run found it under ('' when given
    directly); its path only when it is a file on disk (not an upload's name)."""
    file_hash = content_hash(data)
    path = str(source.path.resolve()) if root else ""
    return Origin(file_hash, ingest_key(source.doc_id, file_hash, sidecar, settings), len(data), root, path)


def text_origin(
    doc_id: str,
    text: str,
    fields: Mapping[str, Any],
    settings: IngestSettings | None,
    *,
    chunker: Chunker | None = None,
) -> Origin:
    """A text's registry origin: its content hash, and an ingest key over it, its own `fields`
    and the settings (or, without settings, the `chunker` that cut it)."""
    data = text.encode("utf-8")
    digest = content_hash(json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
    if settings is None:
        settings = IngestSettings(chunker=chunker)
    text_hash = content_hash(data)
    return Origin(text_hash, ingest_key(doc_id, text_hash, Sidecar(DocumentFields(), digest), settings), len(data))


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
        # index files (the persisted index catches up from the store at the first search); the
        # chunks are cut by `settings`, so its own chunker is never used.
        index = NarrativeIndex(store, persist_index=False)
        with IngestPipeline(index, registry=DocumentRegistry(db), embedding=embedding) as pipeline:
            run = _FolderRun(
                pipeline, settings, report, force=force, lower=frozenset(lower_labels), skip_garbled=skip_garbled
            )
            hide = None if progress is None else not progress  # None: shown on a terminal only
            try:
                for source in tqdm(found.files, desc="ingest", unit="file", disable=hide):
                    run.ingest_one(source)
                for root in found.roots if prune else ():
                    run.prune(root)
            except StorageFull as full:
                run.stop(full, left=len(found.files) - run.attempted)
                return report
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
        assert index.dense is not None
        try:
            report = index.embed_pending(progress=progress, batch_size=batch_size)
        finally:
            index.dense.vectors.close()
    except VectorModelMismatch as exc:
        raise VectorModelMismatch(f"the documents were ingested but not embedded: {exc}") from exc
    assert report is not None
    return report


class _FolderRun:
    """One folder run over an open pipeline: which files to write, skip or fail, and prune."""

    def __init__(
        self,
        pipeline: IngestPipeline,
        settings: IngestSettings,
        report: IngestReport,
        *,
        force: bool,
        lower: frozenset[str] = frozenset(),
        skip_garbled: bool = False,
    ) -> None:
        assert pipeline.registry is not None
        self.pipeline, self.registry, self.settings = pipeline, pipeline.registry, settings
        self.report, self.force, self.lower, self.skip_garbled = report, force, lower, skip_garbled
        self.seen: dict[str, Path] = {}
        self.attempted = 0  # files ingest_one was called for
        self.current: Path | None = None  # the file (or pruned document) being written

    def ingest_one(self, source: SourceFile) -> None:
        """Ingest, skip or fail one file; never raises for a problem with the file. A full
        storage is not one: it is raised as `StorageFull` (the run stops)."""
        self.attempted += 1
        self.current = source.path
        taken = self.seen.setdefault(source.doc_id, source.path)
        if taken != source.path:
            self._fail(source.path, f"doc_id {source.doc_id!r} is already used by {taken} in this run")
            return
        try:
            self._ingest(source)
        except Exception as exc:  # a loader library's own bug must not stop the batch either
            _raise_if_full(exc)
            self._fail(source.path, _reason(exc))

    def prune(self, root: Path) -> None:
        """Withdraw the active documents registered under `root` whose files are gone."""
        for record in self.registry.active_under(str(root)):
            if (root / record.doc_id).exists():
                continue
            self.current = root / record.doc_id
            try:
                self.pipeline.withdraw(record.doc_id)
            except Exception as exc:  # report, and keep pruning the others
                _raise_if_full(exc)
                self._fail(root / record.doc_id, f"cannot withdraw: {exc}")
            else:
                self.report.withdrawn.append(record.doc_id)

    def stop(self, full: StorageFull, *, left: int) -> None:
        """The run stops on a full storage: one failure for the file it was writing, naming how
        many files it did not attempt."""
        self.report.not_attempted = left
        self._fail(self.current or Path(self.report.db), f"{full}; stopped: {left} file(s) not attempted")

    def _ingest(self, source: SourceFile) -> None:
        data = source.path.read_bytes()
        self.report.bytes_read += len(data)
        sidecar = read_sidecar(source.path)
        origin = file_origin(source, data, sidecar, self.settings, root=str(source.root))
        previous = self.registry.get(source.doc_id)
        lower = source.doc_id in self.lower
        if not (self.force or lower) and previous is not None and self._is_current(previous, origin.ingest_key):
            self.report.unchanged.append(source.doc_id)
            self.report.unchanged_chunks += previous.chunks
            return
        prepared = self.pipeline.prepare_file(source, data, sidecar, self.settings)
        if self.skip_garbled and GARBLED in prepared.metadata:
            share = prepared.metadata[GARBLED]
            raise ValueError(f"skipped (--skip-garbled): {share:.0%} of the text looks garbled")
        written = self.pipeline.store_document(source.doc_id, prepared, self.settings, origin, lower=lower)
        self.report.warnings.extend(FileFailure(source.path, w) for w in written.warnings)
        self.report.ingested.append(source.doc_id)
        if previous is not None:
            self.report.changed.append(source.doc_id)
        self.report.chunks += written.chunks

    def _is_current(self, record: DocumentRecord, key: str) -> bool:
        return (
            record.status == ACTIVE
            and record.ingest_key == key
            and self.pipeline.store.active_version(record.doc_id) == record.version
        )

    def _fail(self, path: Path, reason: str) -> None:
        self.report.failures.append(FileFailure(path, reason))


def _raise_if_full(exc: Exception) -> None:
    """Raise `exc` as `StorageFull` when it is a full storage; return otherwise."""
    full = storage_full(exc)
    if full is exc:
        raise full
    if full is not None:
        raise full from exc


def _reason(exc: Exception) -> str:
    """A failed file's reason, by the kind of error."""
    if isinstance(exc, OSError):
        return f"cannot read: {exc.strerror or exc}"
    if isinstance(exc, ValueError | ImportError):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


def now() -> str:
    """The registry's timestamp: UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
