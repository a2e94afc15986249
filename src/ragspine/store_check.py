"""`check_store`: verify every file beside a SQLite chunk store and repair what can be rebuilt
(`ragspine check`; docs/operations.md).

Invariants:
- One `FileCheck` per file or folder `store_files.files_beside` finds, in that order, saying
  what was verified and what was done; nothing is skipped silently.
- A derived file (`.matrix`, `.align`, `.hnsw`, `.bm25/`) that fails its checks is removed and
  rebuilt from its source of truth (the vectors file, `chunks.db`): status "repaired". Damaged
  vector records are deleted and embedded again as `ragspine embed` does (a vectors file SQLite
  cannot read is moved aside first). A source of truth that fails (`chunks.db`, the graph, the
  RAPTOR tree, the page index) is never rewritten here: status "damaged", with the command that
  rebuilds it; `failed` is then true (the CLI exits 1).
- Files that are not ragspine's are listed as "unknown" and left alone.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.settings.config import Settings
from ragspine.store_files import classify, files_beside, vectors_model_id


@dataclass(frozen=True)
class FileCheck:
    """What `check_store` found about one file: status is ok, repaired, damaged (could not be
    repaired here), note (left for the user) or unknown (not ragspine's)."""

    path: str
    kind: str
    status: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<8} {self.kind:<18} {self.path}: {self.detail}"


@dataclass
class CheckReport:
    """Every file's `FileCheck`; `failed` when something could not be repaired."""

    db: str
    files: list[FileCheck] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(f.status == "damaged" for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"db": self.db, "failed": self.failed, "files": [asdict(f) for f in self.files]}


@dataclass
class _Work:
    """What the checks of one run found that needs the store opened afterwards."""

    rebuild: list[Path] = field(default_factory=list)  # derived files removed: rebuilt by a refresh
    matrix_ids: dict[Path, str] = field(default_factory=dict)  # vectors file -> its sound .matrix's cache id
    embed: list[Path] = field(default_factory=list)  # vectors files that lost records


def check_store(settings: Settings) -> CheckReport:
    """Verify the files beside `settings.db` (a SQLite file) and repair the derived ones; see
    the module docstring. ValueError for an in-memory or PostgreSQL store, or no store."""
    db = settings.db
    if db == ":memory:" or "://" in db:
        raise ValueError("ragspine check verifies the files beside a SQLite store; give its path with --db")
    if not Path(db).is_file():
        raise ValueError(f"no chunk store at {db}")
    report, work = CheckReport(db), _Work()
    for path in sorted(files_beside(db), key=lambda p: classify(db, p) == "alignment cache"):  # .matrix before its .align
        kind = classify(db, path)
        checker = _CHECKERS.get(kind, _unknown)
        status, detail = checker(path, work)
        report.files.append(FileCheck(str(path), kind, status, detail))
    if work.rebuild or work.embed:
        _rebuild(settings, report, work)
    return report


# -- one checker per kind: (path, work) -> (status, detail) -------------------------------------
def _integrity(path: Path) -> str | None:
    """None when SQLite's `PRAGMA integrity_check` passes, else what it says (first 3 lines)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if rows == ["ok"] else "; ".join(rows[:3])


def _chunk_store(path: Path, _: _Work) -> tuple[str, str]:
    from ragspine.ingest.registry import DocumentRegistry

    problem = _integrity(path)
    if problem is None:
        try:
            with DocumentRegistry(path) as registry:
                documents = len(registry.all())
        except (sqlite3.DatabaseError, ValueError, KeyError) as exc:
            problem = f"the document registry cannot be read: {exc}"
    if problem is not None:
        return "damaged", (f"{problem}; it is the source of truth: restore it from a backup, or rebuild it "
                           "from the documents with `ragspine ingest --rebuild PATHS`")  # fmt: skip
    return "ok", f"SQLite integrity_check ok; document registry readable ({documents} documents)"


def _companion(path: Path, _: _Work) -> tuple[str, str]:
    return "ok", "SQLite's journal of the file beside it, checked with it"


def _vectors(path: Path, work: _Work) -> tuple[str, str]:
    from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors, quarantine_if_damaged

    moved = quarantine_if_damaged(path)
    if moved is not None:
        work.embed.append(path)
        return "repaired", f"SQLite cannot read it: moved aside to {moved}"
    model = vectors_model_id(path)
    if model is None:  # opening it with a made-up model id would write that id into the file
        return "damaged", "it records no embedding model: re-embed with `ragspine embed --reembed`"
    with ChunkVectors(path, model_id=model) as vectors:
        count = vectors.count()
        deleted = vectors.repair()
    if deleted:
        work.embed.append(path)
        return "repaired", f"{deleted} of {count} records failed their checksum: deleted"
    return "ok", f"SQLite quick_check ok; {count} records, each matches its checksum (model {model})"


def _vectors_of(path: Path, suffix: str) -> Path:
    return path.with_name(path.name[: -len(suffix)])


def _matrix(path: Path, work: _Work) -> tuple[str, str]:
    from ragspine.retrieval.vector.dense import matrix_cache
    from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors

    vectors_file = _vectors_of(path, matrix_cache.MATRIX_SUFFIX)
    cached = matrix_cache.read_matrix(str(path))  # every block checksum (a WARNING names a failure)
    problem = None if cached is not None else "it fails its checks (header, size or a block checksum)"
    if cached is not None:
        cached.read_rows.close()
        if not vectors_file.is_file():
            problem = "its vectors file is gone"
        elif vectors_model_id(vectors_file) is None:  # the vectors file's own line says what to do
            return "note", "not compared: its vectors file records no embedding model (see that line)"
        else:
            with ChunkVectors(vectors_file, model_id=cached.key.model_id) as vectors:
                rows, present = vectors.get(cached.ids)
            differ = int(np.count_nonzero(present & (rows != np.asarray(cached.matrix)).any(axis=1)))
            if differ:
                problem = f"{differ} of {len(cached.ids)} rows differ from the vectors file"
    if problem is None:
        assert cached is not None
        work.matrix_ids[vectors_file] = cached.cache_id
        return "ok", f"every block checksum ok; {len(cached.ids)} rows equal the vectors file's"
    for name in (path, Path(matrix_cache.align_path(str(vectors_file)) or "")):
        if name.is_file():
            name.unlink()
    work.rebuild.append(path)
    return "repaired", f"{problem}: removed (with its .align)"


def _alignment(path: Path, work: _Work) -> tuple[str, str]:
    """Checked after its .matrix (`check_store`'s order), against the cache id that check read."""
    from ragspine.retrieval.vector.dense import matrix_cache

    if not path.exists():
        return "repaired", "removed with its .matrix; recomputed at the next search"
    cache_id = work.matrix_ids.get(_vectors_of(path, matrix_cache.ALIGN_SUFFIX), "")
    if matrix_cache.read_alignment(str(path), cache_id) is not None:
        return "ok", "every section checksum ok; made for the .matrix beside it"
    path.unlink()
    return "repaired", "damaged or made for another .matrix: removed; recomputed at the next search"


def _ann(path: Path, work: _Work) -> tuple[str, str]:
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()  # every member's CRC-32
            header = json.loads(archive.read("header.json"))
        problem = None if bad is None else f"member {bad} fails its CRC-32"
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        problem, header = str(exc), {}
    if problem is None:
        return "ok", f"every member's CRC-32 ok; {header.get('count')} vectors of {header.get('model_id')}"
    path.unlink()
    work.rebuild.append(path)
    return "repaired", f"{problem}: removed"


def _lexical(path: Path, work: _Work) -> tuple[str, str]:
    from ragspine.retrieval.lexical.index.storage import IndexFolder

    checked, removed = [], []
    for folder in sorted(p for p in path.iterdir() if p.is_dir()):
        index = IndexFolder(folder)
        try:
            manifest = index.read_manifest()
            if manifest is None:
                raise ValueError("no readable manifest")
            for entry in manifest["segments"]:
                index.read_segment(entry)  # every file's size and CRC-32, every array's shape
            for entry in manifest["deletes"]:
                index.read_deletes(entry)
            checked.append(f"{folder.name}: {len(manifest['segments'])} segments")
        except (OSError, KeyError, TypeError, ValueError, RuntimeError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(f"{folder.name} ({exc})")
    if removed:
        work.rebuild.append(path)
        return "repaired", f"removed {'; '.join(removed)}" + (f"; ok: {', '.join(checked)}" if checked else "")
    return "ok", "every file's size and CRC-32 ok (" + ("; ".join(checked) or "empty") + ")"


def _graph(path: Path, _: _Work) -> tuple[str, str]:
    from ragspine.graph.stores import read_graph

    try:
        graph = read_graph(str(path))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return "damaged", f"cannot be read ({exc}); rebuild it with `ragspine graph build`"
    nodes = len(graph.nodes) if graph is not None else 0
    return "ok", f"parsed: {nodes} nodes"


def _raptor(path: Path, _: _Work) -> tuple[str, str]:
    if path.name.endswith(("-wal", "-shm", "-journal")):
        return _companion(path, _)
    problem = _integrity(path)
    if problem is not None:
        return "damaged", f"{problem}; delete it and run `ragspine raptor build --full`"
    return "ok", "SQLite integrity_check ok"


def _pages(path: Path, _: _Work) -> tuple[str, str]:
    try:
        manifest = json.loads((path / "manifest.json").read_text("utf-8"))
        rows = 0
        for name in manifest["segments"]:
            rows += int(np.load(path / name, mmap_mode="r", allow_pickle=False).shape[0])
        needed = max((int(p["offset"]) + int(p["count"]) for p in manifest["pages"]), default=0)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        return "damaged", f"cannot be read ({exc}); delete it and run `ragspine ingest --visual PATHS`"
    return "ok", f"manifest and {len(manifest['segments'])} segments read ({len(manifest['pages'])} pages, {rows} rows, {needed} needed)"


def _moved(path: Path, _: _Work) -> tuple[str, str]:
    return "note", "moved aside by an earlier repair; delete it once you no longer need it"


def _temporary(path: Path, _: _Work) -> tuple[str, str]:
    return "note", "a temporary file a crash left behind; safe to delete when no ragspine process runs"


def _marker(path: Path, _: _Work) -> tuple[str, str]:
    from ragspine.retrieval.vector.dense.embed_marker import MARKER_SUFFIX, embedding_in_progress

    if embedding_in_progress(str(_vectors_of(path, MARKER_SUFFIX))):
        return "ok", "an embed run is writing the vectors file now"
    return "note", "left by an embed run that was stopped; safe to delete"


def _unknown(path: Path, _: _Work) -> tuple[str, str]:
    return "unknown", "not a file ragspine writes; left alone"


_CHECKERS: dict[str, Callable[[Path, _Work], tuple[str, str]]] = {
    "chunk store": _chunk_store, "sqlite companion": _companion, "vectors": _vectors,
    "vectors companion": _companion, "matrix cache": _matrix, "alignment cache": _alignment,
    "ann index": _ann, "lexical index": _lexical, "relation graph": _graph, "raptor tree": _raptor,
    "page index": _pages, "moved aside": _moved, "temporary": _temporary, "embed marker": _marker,
}  # fmt: skip


# -- rebuilding what was removed -------------------------------------------------------------------
def _rebuild(settings: Settings, report: CheckReport, work: _Work) -> None:
    """Open the store as a search does: damaged vector records are embedded again, and the
    lexical index, the matrix and the ANN index are rebuilt from their sources. A failure turns
    the lines it concerns into "damaged"."""
    from ragspine.workspace import Workspace

    embedded = True
    try:
        with Workspace.from_settings(settings) as workspace:
            if work.embed:
                embedded = workspace.embed_pending(progress=False) is not None
            workspace.retriever.index.refresh()  # the lexical index, and the dense channel's files
    except Exception as exc:  # noqa: BLE001 - any failure is reported on the lines it concerns
        concerned = {str(p) for p in (*work.rebuild, *work.embed)}
        report.files[:] = [
            FileCheck(f.path, f.kind, "damaged", f"{f.detail}; but the rebuild failed: {exc}") if f.path in concerned else f
            for f in report.files
        ]
        return
    for i, found in enumerate(report.files):
        if Path(found.path) in work.embed:
            status, then = (found.status, "their chunks embedded again") if embedded else ("damaged", (
                "no embedding backend is configured here: run `ragspine embed` with the store's RAGSPINE_EMBEDDING"))
            report.files[i] = FileCheck(found.path, found.kind, status, f"{found.detail}; {then}")
        if Path(found.path) in work.rebuild:
            again = ("rebuilt from chunks.db" if found.kind == "lexical index" else "rebuilt from the vectors file") if Path(
                found.path).exists() else "not written again now (below its size threshold): searches read the vectors file"
            report.files[i] = FileCheck(found.path, found.kind, found.status, f"{found.detail}; {again}")
