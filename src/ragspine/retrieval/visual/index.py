"""`VisualIndex`: page multi-vectors beside the chunk store, scored by MaxSim.

Layout: the folder `<db>.visual/` holds `manifest.json` (format, model, dimension, the segment
files and one entry per page: its record, its segment, first row and row count) and segments
`seg-NNNNNN.npy` (float32 rows, memory-mapped and scored in place). `VisualIndex(None)` keeps the same in
memory (for a `:memory:` store).

Invariants:
- A RESTRICTED page is never stored: `write` drops it (`sensitivity.is_restricted`, the one
  check) before anything is written, and the search skips any such record it might meet.
- Writes are crash-safe: a new segment is written (`atomic.write_atomic`), then the manifest
  that names it; a crash leaves the old manifest and an unreferenced segment, removed by the next
  write. `write` replaces every page of each document it is given (a document's pages are one
  unit); segments no page refers to are deleted; past MAX_SEGMENTS they are merged into one.
- One model per index: vectors of another `model_id` or dimension are refused with
  `VisualModelMismatch` (= `ragspine.errors.ModelMismatch`; the way out: delete the folder and index again).
- `search` applies the filter to the page records before any scoring and scores the rest with
  `late_interaction.maxsim_packed`; ties break by page key. A reader sees the manifest current
  at its last `refresh` (each search checks whether it changed on disk).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.atomic import write_atomic
from ragspine.errors import ModelMismatch
from ragspine.retrieval.filters import Filter, fields_of, matches
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.vector.late_interaction import maxsim_packed
from ragspine.retrieval.visual.protocol import PageRecord

FORMAT = 1
MANIFEST = "manifest.json"
MAX_SEGMENTS = 32
BLOCK_ROWS = 1 << 18  # rows scored per matrix product (bounds the (query, rows) float32 matrix)
STORED_DTYPE = np.float32  # float16 halves the disk but costs a conversion on every CPU search (measured: docs/benchmarks.md)


# The page index holds vectors of another model (or dimension) than the one configured: the
# package's one "built with another model" error (the name is kept for existing callers).
VisualModelMismatch = ModelMismatch


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
        self._cached: _View | None = None
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

    def search(
        self, query: np.ndarray, k: int, where: Filter | None = None, *, accept: Callable[[PageRecord], bool] | None = None
    ) -> list[tuple[str, float]]:
        """The `k` best pages for the (tokens, dim) query vectors: (page key, MaxSim), best first.
        `accept`: a check on a scored page's record (the link's: is its document version still
        the active one?); the answer is then the `k` best pages it accepts, so a page it refuses
        takes no place in the ranking."""
        self.refresh()
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        view = self._view()
        keep = view.open if where is None else view.open & view.matching(where)
        if not keep.any() or not len(query):
            return []
        scores = np.full(len(view.entries), -np.inf, dtype=np.float32)
        for segment, (first, last) in view.segments.items():
            chosen = first + np.flatnonzero(keep[first:last])
            for block in _blocks(chosen, view.counts):
                rows, offsets = self._gather(segment, block, view)
                scores[block] = maxsim_packed(query, rows, offsets)
        chosen = np.flatnonzero(keep)
        if accept is None:
            return _best(scores, chosen, k, view.keys)
        want = k
        while True:  # scored once; the cut widens only while `accept` refuses pages
            ranked = _best(scores, chosen, want, view.keys)
            taken = [(key, score) for key, score in ranked if accept(view.entries[key].record)]
            if len(taken) >= k or len(ranked) < want:
                return taken[:k]
            want *= 2

    def _view(self) -> _View:
        if self._cached is None or self._cached.entries is not self._entries:
            self._cached = _View.of(self._entries)
        return self._cached

    def _gather(self, segment: str, block: np.ndarray, view: _View) -> tuple[np.ndarray, np.ndarray]:
        array = self._segments[segment]
        counts = view.counts[block]
        offsets = np.zeros(len(block) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        starts = view.offsets[block]
        first, end = int(starts[0]), int(starts[-1] + counts[-1])
        if offsets[-1] == end - first:  # contiguous pages: one slice of the map
            return array[first:end], offsets
        rows = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])  # each page's rows, in order
        return array[rows], offsets

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
            "pages": [{"record": _as_json(e.record), "segment": e.segment, "offset": e.offset, "count": e.count}
                      for e in sorted(entries.values(), key=lambda e: e.record.key)],
        }  # fmt: skip
        write_atomic(self.folder / MANIFEST, json.dumps(manifest, ensure_ascii=False).encode("utf-8"))
        info = (self.folder / MANIFEST).stat()
        self._stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        for path in self.folder.glob("seg-*.npy"):  # unreferenced: replaced, merged, or left by a crash
            if path.name not in segments:
                os.unlink(path)


@dataclass(frozen=True)
class _View:
    """The entries as arrays in (segment, offset) order, what a search walks: built once per
    manifest, so a query pays no per-page Python work unless it has a filter."""

    entries: dict[str, _Entry]
    keys: list[str]
    records: list[dict[str, Any]]
    open: np.ndarray  # bool: not RESTRICTED (the index never stores one; checked again)
    offsets: np.ndarray
    counts: np.ndarray
    segments: dict[str, tuple[int, int]]  # segment → [first, last) positions
    docs: np.ndarray  # position → its group in `doc_records`
    doc_records: list[dict[str, Any]]  # one record per group of pages equal in every field but `page`

    def matching(self, where: Filter) -> np.ndarray:
        """Which positions `where` keeps: evaluated once per group (the pages of a document share
        their fields) unless it names `page`."""
        if "page" in fields_of(where):
            return np.fromiter((matches(where, r) for r in self.records), dtype=bool, count=len(self.records))
        per_doc = np.fromiter((matches(where, r) for r in self.doc_records), dtype=bool, count=len(self.doc_records))
        return per_doc[self.docs]

    @classmethod
    def of(cls, entries: dict[str, _Entry]) -> _View:
        ordered = sorted(entries.values(), key=lambda e: (e.segment, e.offset))
        segments: dict[str, tuple[int, int]] = {}
        for i, e in enumerate(ordered):
            segments[e.segment] = (segments.get(e.segment, (i, i))[0], i + 1)
        records = [e.record.filter_record() for e in ordered]
        groups: dict[str, int] = {}  # the record without `page` → its group
        doc_records: list[dict[str, Any]] = []
        docs = np.zeros(len(ordered), dtype=np.int64)
        for i, record in enumerate(records):
            shared = json.dumps({k: v for k, v in record.items() if k != "page"}, sort_keys=True, ensure_ascii=False)
            if shared not in groups:
                groups[shared] = len(doc_records)
                doc_records.append(record)
            docs[i] = groups[shared]
        return cls(
            entries,
            [e.record.key for e in ordered],
            records,
            np.array([not is_restricted(e.record.sensitivity) for e in ordered], dtype=bool),
            np.array([e.offset for e in ordered], dtype=np.int64),
            np.array([e.count for e in ordered], dtype=np.int64),
            segments,
            docs,
            doc_records,
        )


_RECORD_FIELDS = tuple(f.name for f in fields(PageRecord))


def _as_json(record: PageRecord) -> dict[str, Any]:
    """A record as the manifest keeps it (dataclasses.asdict, without its deep copies)."""
    out = {name: getattr(record, name) for name in _RECORD_FIELDS}
    out["fields"] = dict(record.fields)
    return out


def _best(scores: np.ndarray, chosen: np.ndarray, k: int, keys: list[str]) -> list[tuple[str, float]]:
    """The `k` best of the `chosen` positions: (key, score), best first, ties by key."""
    if len(chosen) > k:
        top = np.argpartition(-scores[chosen], k - 1)[:k]
        cut = scores[chosen[top]].min()
        chosen = chosen[scores[chosen] >= cut]  # every page tied with the k-th stays for the tie-break
    order = sorted(chosen.tolist(), key=lambda i: (-float(scores[i]), keys[i]))[:k]
    return [(keys[i], float(scores[i])) for i in order]


def _blocks(chosen: np.ndarray, counts: np.ndarray) -> Iterable[np.ndarray]:
    """`chosen` positions cut into runs of about BLOCK_ROWS rows (a page is never split, so a run
    may pass it by less than one page)."""
    if not len(chosen):
        return
    ends = np.cumsum(counts[chosen])
    cut = np.flatnonzero(np.diff((ends - 1) // BLOCK_ROWS)) + 1
    yield from np.split(chosen, cut)
