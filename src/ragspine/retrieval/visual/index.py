"""`VisualIndex`: page multi-vectors beside the chunk store, scored by MaxSim.

Layout: the folder `<db>.visual/` holds `manifest.json` (format, model, dimension, the segment
files and one entry per page: its record, its segment, first row and row count) and segments
`seg-NNNNNN.npy` (float16 rows, memory-mapped when read). `VisualIndex(None)` keeps the same in
memory (for a `:memory:` store).

Invariants:
- A RESTRICTED page is never stored: `write` drops it (`sensitivity.is_restricted`, the one
  check) before anything is written, and the search skips any such record it might meet.
- Writes are crash-safe: a new segment is written (`atomic.write_atomic`), then the manifest
  that names it; a crash leaves the old manifest and an unreferenced segment, removed by the next
  write. `write` replaces every page of each document it is given (a document's pages are one
  unit); segments no page refers to are deleted; past MAX_SEGMENTS they are merged into one.
- One model per index: vectors of another `model_id` or dimension are refused with
  `VisualModelMismatch` (the way out: delete the folder and index again).
- `search` applies the filter to the page records before any scoring and scores the rest with
  `late_interaction.maxsim_packed`; ties break by page key. A reader sees the manifest current
  at its last `refresh` (each search checks whether it changed on disk).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.atomic import write_atomic
from ragspine.retrieval.filters import Filter, matches
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.vector.late_interaction import maxsim_packed
from ragspine.retrieval.visual.protocol import PageRecord

FORMAT = 1
MANIFEST = "manifest.json"
MAX_SEGMENTS = 32
BLOCK_ROWS = 1 << 18  # rows scored per matrix product (bounds the (query, rows) float32 matrix)
STORED_DTYPE = np.float16


class VisualModelMismatch(ValueError):
    """The page index holds vectors of another model (or dimension) than the one configured."""


@dataclass(frozen=True)
class _Entry:
    record: PageRecord
    segment: str
    offset: int
    count: int


def index_folder(db: str | Path) -> Path | None:
    """Where the page index of the store at `db` lives: `<db>.visual`; None for `:memory:`."""
    text = str(db)
    if "://" in text:
        raise ValueError(
            "the visual page index lives beside a SQLite store; with a PostgreSQL store "
            "(RAGSPINE_DB=postgresql://...) set RAGSPINE_VISUAL_EMBEDDER=none"
        )
    return None if text == ":memory:" else Path(f"{text}.visual")


class VisualIndex:
    """Page vectors and records; see the module docstring.

    >>> index = VisualIndex(None, model_id="m", dim=2)
    >>> page = PageRecord("report.pdf", 1, "PUBLIC", text="revenue fell")
    >>> index.write([(page, np.array([[1.0, 0.0], [0.0, 1.0]]))])
    1
    >>> index.search(np.array([[1.0, 0.0]]), k=5)
    [('report.pdf#page=1', 1.0)]
    """

    def __init__(self, folder: Path | None, *, model_id: str, dim: int) -> None:
        self.folder, self.model_id, self.dim = folder, model_id, dim
        self._entries: dict[str, _Entry] = {}
        self._segments: dict[str, np.ndarray] = {}
        self._next = 1
        self._stamp: tuple[int, int, int] | None = None
        if folder is not None:
            self.refresh()

    # -- reading ------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Reload the manifest when it changed on disk since it was read."""
        if self.folder is None:
            return
        path = self.folder / MANIFEST
        try:
            info = path.stat()
        except FileNotFoundError:
            self._entries, self._segments, self._stamp = {}, {}, None
            return
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        if stamp == self._stamp:
            return
        manifest = json.loads(path.read_text("utf-8"))
        if manifest.get("format") != FORMAT:
            raise ValueError(f"{path}: page index format {manifest.get('format')!r}, expected {FORMAT}")
        if manifest["pages"] and (manifest["model_id"], manifest["dim"]) != (self.model_id, self.dim):
            raise VisualModelMismatch(
                f"the page index at {self.folder} holds vectors of {manifest['model_id']!r} "
                f"(dim {manifest['dim']}), but the configured visual embedder is {self.model_id!r} "
                f"(dim {self.dim}); delete {self.folder} and run `ragspine ingest --visual` again"
            )
        self._segments = {name: np.load(self.folder / name, mmap_mode="r") for name in manifest["segments"]}
        self._entries = {}
        for item in manifest["pages"]:
            record = PageRecord(**item["record"])
            self._entries[record.key] = _Entry(record, item["segment"], item["offset"], item["count"])
        self._next, self._stamp = manifest["next_segment"], stamp

    def __len__(self) -> int:
        return len(self._entries)

    def record(self, key: str) -> PageRecord | None:
        """The record of the page `key` (`doc_id#page=N`), or None."""
        entry = self._entries.get(key)
        return None if entry is None else entry.record

    def doc_versions(self) -> dict[str, int]:
        """doc_id → the document version its indexed pages belong to."""
        return {e.record.doc_id: e.record.version for e in self._entries.values()}

    def search(self, query: np.ndarray, k: int, where: Filter | None = None) -> list[tuple[str, float]]:
        """The `k` best pages for the (tokens, dim) query vectors: (page key, MaxSim), best first."""
        self.refresh()
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        candidates = [e for e in self._entries.values()
                      if not is_restricted(e.record.sensitivity) and matches(where, e.record.filter_record())]  # fmt: skip
        if not candidates or not len(query):
            return []
        keys: list[str] = []
        scores: list[np.ndarray] = []
        for segment, entries in _by_segment(candidates).items():
            for block in _blocks(entries):
                rows, offsets = self._gather(segment, block)
                scores.append(maxsim_packed(query, rows, offsets))
                keys.extend(e.record.key for e in block)
        flat = np.concatenate(scores)
        order = sorted(range(len(keys)), key=lambda i: (-float(flat[i]), keys[i]))[:k]
        return [(keys[i], float(flat[i])) for i in order]

    def _gather(self, segment: str, block: Sequence[_Entry]) -> tuple[np.ndarray, np.ndarray]:
        array = self._segments[segment]
        offsets = np.zeros(len(block) + 1, dtype=np.int64)
        np.cumsum([e.count for e in block], out=offsets[1:])
        first, last = block[0], block[-1]
        if offsets[-1] == last.offset + last.count - first.offset:  # contiguous: one slice of the map
            return array[first.offset : last.offset + last.count], offsets
        return np.concatenate([array[e.offset : e.offset + e.count] for e in block]), offsets

    def stats(self) -> dict[str, Any]:
        """Pages, documents, vectors, bytes on disk, segments and the model, for /stats."""
        self.refresh()
        stored = sum(int(a.nbytes) for a in self._segments.values())
        pages = len(self._entries)
        return {
            "model": self.model_id,
            "dim": self.dim,
            "pages": pages,
            "documents": len({e.record.doc_id for e in self._entries.values()}),
            "vectors": sum(e.count for e in self._entries.values()),
            "segments": len(self._segments),
            "bytes": stored,
            "bytes_per_page": round(stored / pages) if pages else 0,
            "path": None if self.folder is None else str(self.folder),
        }

    # -- writing ------------------------------------------------------------------------------
    def write(self, pages: Iterable[tuple[PageRecord, np.ndarray]], *, remove: Iterable[str] = ()) -> int:
        """Store `pages` ((record, (patches, dim) vectors) pairs), replacing every earlier page
        of their documents, and drop the documents in `remove`; RESTRICTED pages are dropped
        unseen. Returns the pages stored."""
        kept = [(r, np.asarray(v, dtype=np.float32)) for r, v in pages if not is_restricted(r.sensitivity)]
        for record, vectors in kept:
            if vectors.ndim != 2 or vectors.shape[1] != self.dim or not len(vectors):
                raise ValueError(f"{record.key}: expected (patches >= 1, {self.dim}) vectors, got {vectors.shape}")
        gone = {r.doc_id for r, _ in kept} | set(remove)
        entries = {k: e for k, e in self._entries.items() if e.record.doc_id not in gone}
        segments = dict(self._segments)
        if kept:
            name = f"seg-{self._next:06d}.npy"
            self._next += 1
            segments[name] = self._save(name, np.concatenate([v for _, v in kept]).astype(STORED_DTYPE))
            offset = 0
            for record, vectors in kept:
                entries[record.key] = _Entry(record, name, offset, len(vectors))
                offset += len(vectors)
        live = {e.segment for e in entries.values()}
        segments = {name: array for name, array in segments.items() if name in live}
        if len(segments) > MAX_SEGMENTS:
            entries, segments = self._merge(entries, segments)
        self._commit(entries, segments)
        return len(kept)

    def clear(self) -> None:
        """Remove every page (and the folder's files)."""
        self._commit({}, {})
        if self.folder is not None and self.folder.exists():
            shutil.rmtree(self.folder)
            self._stamp = None

    def _merge(self, entries: dict[str, _Entry], segments: dict[str, np.ndarray]) -> tuple[dict[str, _Entry], dict[str, np.ndarray]]:
        name = f"seg-{self._next:06d}.npy"
        self._next += 1
        ordered = sorted(entries.values(), key=lambda e: (e.segment, e.offset))
        rows = np.concatenate([segments[e.segment][e.offset : e.offset + e.count] for e in ordered])
        merged = self._save(name, rows.astype(STORED_DTYPE))
        out: dict[str, _Entry] = {}
        offset = 0
        for e in ordered:
            out[e.record.key] = _Entry(e.record, name, offset, e.count)
            offset += e.count
        return out, {name: merged}

    def _save(self, name: str, rows: np.ndarray) -> np.ndarray:
        if self.folder is None:
            return rows
        self.folder.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.save(buffer, rows, allow_pickle=False)
        write_atomic(self.folder / name, buffer.getvalue())
        return np.load(self.folder / name, mmap_mode="r")

    def _commit(self, entries: dict[str, _Entry], segments: dict[str, np.ndarray]) -> None:
        self._entries, self._segments = entries, segments
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        manifest = {
            "format": FORMAT, "model_id": self.model_id, "dim": self.dim, "next_segment": self._next,
            "segments": sorted(segments),
            "pages": [{"record": asdict(e.record), "segment": e.segment, "offset": e.offset, "count": e.count}
                      for e in sorted(entries.values(), key=lambda e: e.record.key)],
        }  # fmt: skip
        write_atomic(self.folder / MANIFEST, json.dumps(manifest, ensure_ascii=False).encode("utf-8"))
        info = (self.folder / MANIFEST).stat()
        self._stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        for path in self.folder.glob("seg-*.npy"):  # unreferenced: replaced, merged, or left by a crash
            if path.name not in segments:
                os.unlink(path)


def _by_segment(entries: Sequence[_Entry]) -> dict[str, list[_Entry]]:
    out: dict[str, list[_Entry]] = {}
    for entry in sorted(entries, key=lambda e: (e.segment, e.offset)):
        out.setdefault(entry.segment, []).append(entry)
    return out


def _blocks(entries: list[_Entry]) -> Iterable[list[_Entry]]:
    block: list[_Entry] = []
    rows = 0
    for entry in entries:
        if block and rows + entry.count > BLOCK_ROWS:
            yield block
            block, rows = [], 0
        block.append(entry)
        rows += entry.count
    if block:
        yield block

