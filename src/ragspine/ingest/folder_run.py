"""One folder run of `ragspine ingest` over an open `IngestPipeline`: which files to write, skip,
record as duplicates or fail, and what `--prune` withdraws (`ingest_paths` drives it).

Invariants (besides those of `ingest.pipeline`):
- A file is known by its resolved path: one already registered under another doc_id (found before
  under another spelling of its folder: a parent, a sub-folder) keeps that doc_id and root, so it
  is never registered twice.
- A file whose bytes equal an active document's, with the same label and metadata (the title
  aside), is recorded as a duplicate of it (`IngestPipeline.store_document(duplicates=True)`),
  not stored again; `settle_duplicates` (the run's end) reads again every duplicate whose
  document no longer holds its bytes or its label and metadata (changed, relabelled, withdrawn,
  pruned): it is stored, or becomes a
  duplicate of another copy; one whose file is gone is left to `--prune` of its folder. A write
  outside a folder run (`IngestPipeline.settle_copies`: a workspace's replace or withdraw) runs
  the same step for one document's copies, reading only a copy whose file still holds its
  recorded bytes (the others: a warning, and the next folder run).
- `prune(folder)` withdraws the active and duplicate rows whose file lies in the folder or below
  (whatever root they were found under) and no longer exists; then, for files an older store
  registered twice (two doc_ids, one path) it withdraws all but the outermost doc_id, and active
  copies of one content with the same label and metadata become duplicates of the first.
- Every failure is recorded by the file's resolved path (`DocumentRegistry.record_failures`); a
  failure whose path and reason the previous run recorded is a known one (`report.known_failures`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ragspine.ingest.content import same_metadata
from ragspine.ingest.document import GARBLED, IngestSettings, PreparedDocument, content_hash
from ragspine.ingest.files import FileFailure, SourceFile
from ragspine.ingest.metadata import Sidecar, read_sidecar
from ragspine.ingest.origin import Origin, Written, file_origin, now
from ragspine.ingest.registry import ACTIVE, DUPLICATE, DocumentRecord, DocumentRegistry
from ragspine.ingest.report import IngestReport
from ragspine.retrieval.store.full import StorageFull, storage_full
from ragspine.retrieval.store.protocol import ChunkStoreProtocol

__all__ = ["FolderRun", "raise_if_full"]


class Writer(Protocol):
    """What a folder run needs of `ingest.pipeline.IngestPipeline` (declared here: the pipeline
    imports this module)."""

    registry: DocumentRegistry | None

    @property
    def store(self) -> ChunkStoreProtocol: ...

    def prepare_file(
        self, source: SourceFile, data: bytes, sidecar: Sidecar, settings: IngestSettings
    ) -> PreparedDocument: ...

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
    ) -> Written: ...

    def make_duplicate(self, record: DocumentRecord, original: DocumentRecord) -> None: ...

    def withdraw(self, doc_id: str) -> None: ...


class FolderRun:
    """One folder run over an open pipeline (with a registry); see the module docstring."""

    def __init__(
        self,
        pipeline: Writer,
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
        self.succeeded: list[str] = []  # resolved paths read without failure
        self.last_failures = self.registry.failures()  # the previous runs' failures, by path
        self.failed: set[str] = set()  # doc_ids whose file failed in this run (not read again)

    def ingest_one(self, source: SourceFile, *, force: bool = False) -> None:
        """Ingest, skip, record as a duplicate, or fail one file; never raises for a problem with
        the file. A full storage is not one: it is raised as `StorageFull` (the run stops)."""
        self.attempted += 1
        self.current = source.path
        source = self._known_as(source)
        taken = self.seen.setdefault(source.doc_id, source.path)
        if taken != source.path:
            self._fail(source.path, f"doc_id {source.doc_id!r} is already used by {taken} in this run")
            return
        try:
            self._ingest(source, force=force)
        except Exception as exc:  # a loader library's own bug must not stop the batch either
            raise_if_full(exc)
            self._fail(source.path, reason(exc))
            self.failed.add(source.doc_id)
        else:
            self.succeeded.append(_key(source.path))

    def prune(self, root: Path) -> None:
        """Withdraw the rows whose files under `root` are gone, then fold what an older store
        registered twice (module docstring)."""
        for record in self.registry.within(root):
            path = _file_of(record)
            if not path.exists():
                self._withdraw(record.doc_id, path)
        self._fold_twins(root)

    def settle_duplicates(self, of: Sequence[str] | None = None) -> None:
        """Read again each duplicate whose document no longer holds its bytes (module docstring).
        `of`: only the copies of those doc_ids, after a write outside a folder run (a replace or
        withdraw through `Workspace`/HTTP: `IngestPipeline.settle_copies`); a copy whose file is
        gone or no longer holds its recorded bytes is then left to the next folder run, with a
        warning (`report.warnings`)."""
        for record in self.registry.duplicates(of):
            if record.doc_id in self.failed or self._still_a_copy(record):
                continue  # failed in this run already (reported once), or its document holds it
            path = _file_of(record)
            if of is not None:
                why = _not_as_recorded(record, path)
                if why:
                    self.report.warnings.append(FileFailure(path, f"{why}; left to the next folder run"))
                    continue
            elif not record.source_path or not path.exists():
                continue  # its file is gone too: `--prune` of its folder withdraws it
            for done in (self.report.unchanged, self.report.duplicates):
                if record.doc_id in done:
                    done.remove(record.doc_id)
            self.report.duplicate_of.pop(record.doc_id, None)
            self.seen.pop(record.doc_id, None)
            self.attempted -= 1  # not one of the run's files: counted once, by the file loop
            self.ingest_one(SourceFile(path, record.doc_id, Path(record.root)), force=True)

    def _still_a_copy(self, record: DocumentRecord) -> bool:
        """Whether the duplicate `record`'s document is active and holds its bytes, label and metadata."""
        original = self.registry.get(record.duplicate_of)
        return (
            original is not None and original.status == ACTIVE and original.content_hash == record.content_hash
            and same_metadata(original.metadata_dict(), record.metadata_dict())
        )  # fmt: skip

    def record_failures(self) -> None:
        """Record this run's failures by resolved path, forget the paths read without one, and
        mark the failures the previous run recorded too (`report.known_failures`)."""
        failed = {_key(failure.path): failure.reason for failure in self.report.failures}
        self.report.known_failures = [
            failure for failure in self.report.failures
            if self.last_failures.get(_key(failure.path)) == failure.reason
        ]  # fmt: skip
        self.registry.record_failures(failed, self.succeeded, now())

    def stop(self, full: StorageFull, *, left: int) -> None:
        """The run stops on a full storage: one failure for the file it was writing, naming how
        many files it did not attempt."""
        self.report.not_attempted = left
        self._fail(self.current or Path(self.report.db), f"{full}; stopped: {left} file(s) not attempted")

    def _known_as(self, source: SourceFile) -> SourceFile:
        """`source` under the doc_id and root its file is already registered by, if another."""
        rows = self.registry.by_source_path(_key(source.path))
        if not rows or any(row.doc_id == source.doc_id for row in rows):
            return source
        row = min(rows, key=lambda r: (len(r.root), r.doc_id))
        return SourceFile(source.path, row.doc_id, Path(row.root))

    def _ingest(self, source: SourceFile, *, force: bool) -> None:
        data = source.path.read_bytes()
        self.report.bytes_read += len(data)
        sidecar = read_sidecar(source.path)
        origin = file_origin(source, data, sidecar, self.settings, root=str(source.root))
        previous = self.registry.get(source.doc_id)
        lower = source.doc_id in self.lower
        skip = not (force or self.force or lower) and previous is not None
        if skip and previous is not None and self._is_current(previous, origin.ingest_key):
            self._unchanged(previous)
            return
        prepared = self.pipeline.prepare_file(source, data, sidecar, self.settings)
        if self.skip_garbled and GARBLED in prepared.metadata:
            share = prepared.metadata[GARBLED]
            raise ValueError(f"skipped (--skip-garbled): {share:.0%} of the text looks garbled")
        written = self.pipeline.store_document(
            source.doc_id, prepared, self.settings, origin, lower=lower, detail=True, duplicates=True
        )
        self.report.warnings.extend(FileFailure(source.path, w) for w in written.warnings)
        if written.duplicate_of:
            self.report.duplicates.append(source.doc_id)
            self.report.duplicate_of[source.doc_id] = written.duplicate_of
            return
        self.report.ingested.append(source.doc_id)
        if previous is not None and previous.status != DUPLICATE:
            self.report.changed.append(source.doc_id)
        self.report.chunks += written.chunks

    def _unchanged(self, previous: DocumentRecord) -> None:
        if previous.status == DUPLICATE:
            self.report.duplicates.append(previous.doc_id)
            self.report.duplicate_of[previous.doc_id] = previous.duplicate_of
            return
        self.report.unchanged.append(previous.doc_id)
        self.report.unchanged_chunks += previous.chunks

    def _is_current(self, record: DocumentRecord, key: str) -> bool:
        if record.ingest_key != key:
            return False
        store = self.pipeline.store
        if record.status == DUPLICATE:
            original = self.registry.get(record.duplicate_of)
            return (
                original is not None and original.status == ACTIVE
                and original.content_hash == record.content_hash
                and store.active_version(original.doc_id) == original.version
                and same_metadata(original.metadata_dict(), record.metadata_dict())  # relabelled since: read again
            )  # fmt: skip
        return record.status == ACTIVE and store.active_version(record.doc_id) == record.version

    def _fold_twins(self, root: Path) -> None:
        """Withdraw the extra doc_ids of a file registered twice; record the later active copies
        of one content (same label and metadata) as duplicates of the first."""
        rows = [row for row in self.registry.within(root) if row.status == ACTIVE]
        by_path: defaultdict[str, list[DocumentRecord]] = defaultdict(list)
        for row in rows:
            if row.source_path:
                by_path[row.source_path].append(row)
        for twins in by_path.values():
            keep = min(twins, key=lambda r: (len(r.root), r.doc_id))
            for row in twins:
                if row is not keep:
                    self._withdraw(row.doc_id, _file_of(row))
        withdrawn = set(self.report.withdrawn)
        firsts: dict[str, list[DocumentRecord]] = defaultdict(list)
        for row in rows:
            if row.doc_id in withdrawn or not row.content_hash:
                continue
            same = (f for f in firsts[row.content_hash] if same_metadata(f.metadata_dict(), row.metadata_dict()))
            first = next(same, None)
            if first is None:
                firsts[row.content_hash].append(row)
                continue
            self.current = _file_of(row)
            self.pipeline.make_duplicate(row, first)
            if row.doc_id in self.report.unchanged:
                self.report.unchanged.remove(row.doc_id)
                self.report.unchanged_chunks -= row.chunks
            self.report.duplicates.append(row.doc_id)
            self.report.duplicate_of[row.doc_id] = first.doc_id

    def _withdraw(self, doc_id: str, path: Path) -> None:
        self.current = path
        try:
            self.pipeline.withdraw(doc_id)
        except Exception as exc:  # report, and keep pruning the others
            raise_if_full(exc)
            self._fail(path, f"cannot withdraw: {exc}")
        else:
            self.report.withdrawn.append(doc_id)

    def _fail(self, path: Path, why: str) -> None:
        self.report.failures.append(FileFailure(path, why))


def _file_of(record: DocumentRecord) -> Path:
    """A registry row's file: its recorded path, else its root joined with its doc_id."""
    return Path(record.source_path) if record.source_path else Path(record.root) / record.doc_id


def _not_as_recorded(record: DocumentRecord, path: Path) -> str:
    """Why the duplicate `record`'s file cannot stand in for it now ('' when it can): gone, or changed."""
    try:
        data = path.read_bytes() if record.source_path else None
    except OSError as exc:
        return f"copy of {record.duplicate_of!r} not stored: cannot read: {exc.strerror or exc}"
    if data is None:
        return f"copy of {record.duplicate_of!r} not stored: no file recorded"
    if content_hash(data) != record.content_hash:
        return f"copy of {record.duplicate_of!r} not stored: its file changed since it was recorded"
    return ""


def _key(path: Path) -> str:
    """A file's identity across runs and folder spellings: its resolved path."""
    return str(path.resolve())


def raise_if_full(exc: Exception) -> None:
    """Raise `exc` as `StorageFull` when it is a full storage; return otherwise."""
    full = storage_full(exc)
    if full is exc:
        raise full
    if full is not None:
        raise full from exc


def reason(exc: Exception) -> str:
    """A failed file's reason, by the kind of error."""
    if isinstance(exc, OSError):
        return f"cannot read: {exc.strerror or exc}"
    if isinstance(exc, ValueError | ImportError):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"
