"""Ingest files into a chunk store: one document per file, incremental by content.

Invariants:
- a file that fails (unreadable, undecodable, corrupt, a missing extra) is reported with its
  reason and never stops the batch; a document is either fully written as a new version (one
  store transaction) or not at all, so a failed re-ingest leaves its previous version active;
- a document whose `ingest_key` (content, sidecar, settings) is unchanged, and whose recorded
  version is still the active one, is skipped without any write: re-running on the same folder
  writes nothing;
- a re-ingest never lowers a document's stored label implicitly: a new version that would be
  less strict keeps the stored label, with a warning, unless its doc_id is in `lower_labels`
  (those documents are re-ingested even when unchanged);
- `prune` withdraws only documents registered under a folder given in this run whose files no
  longer exist there; a path that does not exist prunes nothing.
The registry row is written after the chunks; if a run dies between the two, the next run sees
no matching row and writes the document again (one extra version, never a half-written one).

With an embedding backend, documents are written without vectors and one `embed_pending` pass
at the end embeds every active chunk that has none (all files' chunks sorted by length into
batches, each committed, with a progress bar); the report's `embedding` says what it did. A
vectors file of another model stops that pass with `VectorModelMismatch` after the documents
are written (they stay; `ragspine embed --reembed` finishes the job).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from ragspine.ingest.document import (
    IngestSettings,
    content_hash,
    ingest_key,
    ingest_settings,
    GARBLED,
    keep_stricter,
    prepare,
    stored_labels,
)
from ragspine.ingest.files import FileFailure, SourceFile, discover
from ragspine.ingest.loaders import SUPPORTED_SUFFIXES
from ragspine.ingest.metadata import read_sidecar
from ragspine.ingest.registry import ACTIVE, DocumentRecord, DocumentRegistry
from ragspine.ingest.report import IngestReport
from ragspine.ingest.sensitivity_rules import DEFAULT_LEVELS, SensitivityRules
from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
)
from ragspine.retrieval.chunking.protocol import Chunker, IndexTextFn
from ragspine.retrieval.store.factory import open_chunk_store
from ragspine.secret import redact_url
from ragspine.retrieval.store.protocol import ChunkStoreProtocol

if TYPE_CHECKING:
    from ragspine.ingest.visual import VisualIngestReport
    from ragspine.retrieval.vector.dense.chunk_vectors import EmbedReport
    from ragspine.retrieval.vector.stores.inprocess import ChunkVectorStore

__all__ = ["IngestReport", "IngestRunReport", "ingest_paths"]


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
    settings = ingest_settings(
        given, sensitivity, rules=_rules(rules, levels), max_chars=max_chars, overlap_chars=overlap_chars,
        chunker=chunker,
    )
    found = discover(paths, include=include, exclude=exclude)
    report = IngestRunReport(db=redact_url(db), failures=list(found.failures), warnings=list(found.warnings))
    if not found.files and not (prune and found.roots):
        if found.failures:
            return report
        raise ValueError(
            f"no {', '.join(SUPPORTED_SUFFIXES)} files found under {', '.join(map(str, paths))}"
        )
    with open_chunk_store(db) as store:
        store.init_schema()
        with DocumentRegistry(db) as registry:
            run = _Run(
                store, registry, settings, report, force=force, lower=frozenset(lower_labels),
                skip_garbled=skip_garbled,
            )  # fmt: skip
            hide = None if progress is None else not progress  # None: shown on a terminal only
            for source in tqdm(found.files, desc="ingest", unit="file", disable=hide):
                run.ingest_one(source)
            if prune:
                for root in found.roots:
                    run.prune(root)
        if embedding_backend is not None:
            report.embedding = _embed_pending(
                store, embedding_backend, progress, embed_batch_size, index_text, vectors
            )
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
    from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
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


class _Run:
    """One ingest run over an open store and registry."""

    def __init__(
        self,
        store: ChunkStoreProtocol,
        registry: DocumentRegistry,
        settings: IngestSettings,
        report: IngestReport,
        *,
        force: bool,
        lower: frozenset[str] = frozenset(),
        skip_garbled: bool = False,
    ) -> None:
        self.store, self.registry, self.settings = store, registry, settings
        self.report, self.force, self.lower, self.skip_garbled = report, force, lower, skip_garbled
        self.seen: dict[str, Path] = {}

    def ingest_one(self, source: SourceFile) -> None:
        """Ingest, skip or fail one file; never raises for a problem with the file."""
        taken = self.seen.setdefault(source.doc_id, source.path)
        if taken != source.path:
            self._fail(source.path, f"doc_id {source.doc_id!r} is already used by {taken} in this run")
            return
        try:
            self._ingest(source)
        except OSError as exc:
            self._fail(source.path, f"cannot read: {exc.strerror or exc}")
        except (ValueError, ImportError) as exc:
            self._fail(source.path, str(exc) or type(exc).__name__)
        except Exception as exc:  # a loader library's own bug must not stop the batch either
            self._fail(source.path, f"{type(exc).__name__}: {exc}")

    def prune(self, root: Path) -> None:
        """Withdraw the active documents registered under `root` whose files are gone."""
        for record in self.registry.active_under(str(root)):
            if (root / record.doc_id).exists():
                continue
            try:
                self.store.replace_doc_chunks(record.doc_id, [])
                self.registry.mark_withdrawn(record.doc_id, _now())
            except Exception as exc:  # report, and keep pruning the others
                self._fail(root / record.doc_id, f"cannot withdraw: {exc}")
            else:
                self.report.withdrawn.append(record.doc_id)

    def _ingest(self, source: SourceFile) -> None:
        data = source.path.read_bytes()
        self.report.bytes_read += len(data)
        sidecar = read_sidecar(source.path)
        file_hash = content_hash(data)
        key = ingest_key(source.doc_id, file_hash, sidecar, self.settings)
        previous = self.registry.get(source.doc_id)
        lower = source.doc_id in self.lower
        if not (self.force or lower) and previous is not None and self._is_current(previous, key):
            self.report.unchanged.append(source.doc_id)
            self.report.unchanged_chunks += previous.chunks
            return
        prepared = prepare(source, data, sidecar, self.settings)
        if self.skip_garbled and GARBLED in prepared.metadata:
            share = prepared.metadata[GARBLED]
            raise ValueError(f"skipped (--skip-garbled): {share:.0%} of the text looks garbled")
        stored = stored_labels(self.store, source.doc_id)
        prepared = keep_stricter(prepared, stored, self.settings.rules.levels, lower=lower)
        self.report.warnings.extend(FileFailure(source.path, w) for w in prepared.warnings)
        written = self.store.replace_doc_chunks(source.doc_id, prepared.chunks)
        self.registry.record(
            DocumentRecord(
                doc_id=source.doc_id,
                root=str(source.root),
                source_path=str(source.path.resolve()),
                content_hash=file_hash,
                ingest_key=key,
                version=self._active_version(source.doc_id) or 0,
                chunks=written,
                status=ACTIVE,
                loader=prepared.loaded.loader,
                encoding=prepared.loaded.encoding,
                pages=len(prepared.loaded.page_numbers),
                size_bytes=len(data),
                metadata=json.dumps(prepared.metadata, ensure_ascii=False, sort_keys=True),
                ingested_at=_now(),
            )
        )
        self.report.ingested.append(source.doc_id)
        if previous is not None:
            self.report.changed.append(source.doc_id)
        self.report.chunks += written

    def _is_current(self, record: DocumentRecord, key: str) -> bool:
        return (
            record.status == ACTIVE
            and record.ingest_key == key
            and self._active_version(record.doc_id) == record.version
        )

    def _active_version(self, doc_id: str) -> int | None:
        return self.store.active_version(doc_id)

    def _fail(self, path: Path, reason: str) -> None:
        self.report.failures.append(FileFailure(path, reason))


def _rules(rules: SensitivityRules | str | Path | None, levels: Sequence[str] | None) -> SensitivityRules:
    known = tuple(levels) if levels else DEFAULT_LEVELS
    if rules is None:
        return SensitivityRules(levels=known)
    return rules if isinstance(rules, SensitivityRules) else SensitivityRules.from_file(rules, levels=known)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
