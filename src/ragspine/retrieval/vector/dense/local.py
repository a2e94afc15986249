"""`LocalVectors`: the dense channel's strategy when the vectors live in this process.

The vectors are a `ChunkVectors` file beside the store (or one in memory), read into a
`VectorMatrix` aligned to the lexical index's positions and kept up to date from the file's
change log; rankings come from that matrix (`DenseView`).

Invariants:
- A chunk's vector is computed once, at ingest or lazily, and never per query. Positions without
  a vector are embedded when a snapshot is attached, if there are at most the lazy limit of them
  (logged at INFO); more is the logged fallback (`pending.lazy_batch`: BM25 for them until
  `ragspine embed`). `view_over` embeds the allowed positions without a vector, whatever their
  number. A RESTRICTED chunk is never sent to a remote backend: its position is marked
  lexical-only.
- A vectors file that cannot be read is never an error here: BM25 ranks alone (logged once) and
  `coverage()` says why; the next attach tries again.
- Instant start (`matrix_cache`): from `cache_min_vectors` vectors on, a first load writes the
  matrix (`<vectors>.matrix`) and each attach the alignment and centring (`<vectors>.align`)
  beside the vectors file; a later process maps them instead of reading every record, only when
  they were made from this very file, model, dimension, version and `cache_meaning` (or an
  earlier version with only additions since: those are read and added). Otherwise the records
  are read as without a cache. Rankings and scores are the same either way. The vectors file
  stays the source of truth: a cache is used only while the file's size and modification time
  are those it was made from (at the same version) and a sample of its records equals the
  cache's rows; otherwise every record is read again, each checked by its checksum, so damage to
  the vectors file is reported (WARNING, `coverage().damaged`, /stats `healthy: false`).
- Language centring (`languages.language_centring`) is over the positions a caller may see
  (`IndexSnapshot.visible`: RESTRICTED chunks never shift another chunk's score); the ANN index
  (`AnnSync`) holds only their vectors too.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from ragspine.retrieval.chunking.protocol import IndexTextFn
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.types import ChunkSource, EmbeddingBackend
from ragspine.retrieval.vector.dense import matrix_cache
from ragspine.retrieval.vector.dense.ann import AnnConfig, ann_path
from ragspine.retrieval.vector.dense.ann_sync import AnnSync
from ragspine.retrieval.vector.dense.languages import CACHE_MEANING, language_centring, language_code
from ragspine.retrieval.vector.dense.matrix import VectorMatrix
from ragspine.retrieval.vector.dense.matrix_cache import Centring, MatrixKey, SegmentKey
from ragspine.retrieval.vector.dense.pending import TEXT_LANGUAGE, embed_into, lazy_batch, select_missing
from ragspine.retrieval.vector.dense.ranking import CHANNEL_LOGGER, DenseCoverage
from ragspine.retrieval.vector.dense.view import DenseView
from ragspine.retrieval.vector.errors import VectorStoreError
from ragspine.retrieval.vector.stores.sqlite import ChunkVectors

log = logging.getLogger(CHANNEL_LOGGER)

_NO_VECTOR = -1  # not embedded (yet)
_LEXICAL_ONLY = -2  # RESTRICTED on a remote backend: never embedded
_TEXT_BATCH = 5_000  # chunk texts read at a time to find their language
SOURCE_SAMPLE = 64  # vector records compared with a `.matrix` file's rows when it is opened
# (matrix, visible rows, their languages, rows, languages) → (centres, 1 / |v - centre|), or Nones
Centre = Callable[
    [np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray | None, np.ndarray | None]
]


class LocalVectors:
    """A dense channel's strategy over a `ChunkVectors` file read into memory (see the module)."""

    def __init__(
        self,
        backend: EmbeddingBackend,
        vectors: ChunkVectors,
        *,
        problem: str | None = None,
        index_text: IndexTextFn | None = None,
        ann: AnnConfig | None = None,
        cache_min_vectors: int | None = matrix_cache.DEFAULT_MIN_VECTORS,
        cache_meaning: str = CACHE_MEANING,
        centring: Centre = language_centring,
    ) -> None:
        self.backend, self.vectors, self.index_text = backend, vectors, index_text
        self._centring = centring
        # at and above this many vectors, the vectors file gets a memory-mapped matrix cache
        # beside it (`matrix_cache`; None: never); `cache_meaning` is part of the cache's key
        self.cache_min_vectors = cache_min_vectors
        self.cache_meaning = cache_meaning
        self._cache_id: str | None = None  # the `.matrix` file this state equals (None: none does)
        self._preset: dict[SegmentKey, tuple[np.ndarray, np.ndarray]] = {}  # from the `.align` file
        self._preset_centring: Centring | None = None
        self._align_looked = False  # the `.align` file is read at most once per channel
        self._preset_stale = False  # vectors were added to the matrix the presets were made for
        self._align_saved: tuple[Any, ...] | None = None  # what the `.align` file on disk holds
        self.cache_stats = {"matrix_loads": 0, "matrix_writes": 0, "align_loads": 0, "align_writes": 0, "records_read": 0}
        self._rows = VectorMatrix()
        self.ann = AnnSync(self._rows, ann if ann is not None else AnnConfig(), ann_path(vectors.path), str(vectors.model_id))
        self.ann_stats = self.ann.stats
        self._problem: str | None = None  # set while the vectors cannot be read
        self._damage: str | None = None  # damaged rows seen by a view, not yet read again (`_reread`)
        self._open_problem = problem  # why the persisted vectors could not be opened (given by the owner)
        self._version = -1
        # id(segment) → (segment, matrix row per position, language code per position)
        self._segment_rows: dict[int, tuple[Any, np.ndarray, np.ndarray]] = {}
        # bumped whenever rows join the matrix: a segment's positions without a row are looked up
        # again when the generation they were aligned at is older
        self._generation = 0
        self._aligned_at: dict[int, int] = {}  # id(segment) → generation its rows were looked up at
        self._coverage = DenseCoverage(0, 0, 0)

    def attach(self, snapshot: IndexSnapshot, source: ChunkSource, limit: int) -> DenseView:
        """Load vectors written since the last call, embed what is missing (within `limit`,
        decided by the chunks a caller may see), and map every position to its vector row."""
        readable = self._load_new()
        self._load_alignment()
        rows, groups = self._align(snapshot, source)
        active = snapshot.active_positions()
        missing = active[rows[active] == _NO_VECTOR]
        if len(missing) and readable:
            self._fill(source, missing, rows, limit=limit)
        on = rows[active]
        shown = snapshot.visible().active_positions()  # RESTRICTED never shapes the centring
        on_shown = rows[shown]
        self._coverage = DenseCoverage(
            int(len(active)), int(np.count_nonzero(on >= 0)), int(np.count_nonzero(on == _LEXICAL_ONLY)),
            len(self.vectors.damaged_ids()), self._open_problem or self._problem,
            visible=(int(np.count_nonzero(on_shown >= 0)), int(len(shown))),
        )  # fmt: skip
        centring = self._cached_centring(on_shown, groups[shown], rows, groups)
        self._save_alignment(snapshot, centring)
        return self._view(snapshot, rows, groups, centring.centres, centring.inverse_norms, on_shown)

    def view_over(self, snapshot: IndexSnapshot, source: ChunkSource, allowed: np.ndarray) -> DenseView:
        """Embed only the `allowed` positions that have no vector yet, with no limit; centring,
        when it applies, is over `allowed`."""
        readable = self._load_new()
        rows, groups = self._align(snapshot, source)
        missing = allowed[rows[allowed] == _NO_VECTOR]
        if len(missing) and readable:
            self._fill(source, missing, rows, limit=None)
        centres, inverse_norms = self._centring(self._rows.matrix, rows[allowed], groups[allowed], rows, groups)
        return self._view(snapshot, rows, groups, centres, inverse_norms, rows[snapshot.active_positions()])

    def coverage(self) -> DenseCoverage:
        return self._coverage

    def _view(
        self,
        snapshot: IndexSnapshot,
        rows: np.ndarray,
        groups: np.ndarray,
        centres: np.ndarray | None,
        inverse_norms: np.ndarray | None,
        live_rows: np.ndarray,
    ) -> DenseView:
        """The view of this state; `live_rows` decide what the ANN index holds."""
        matrix, count = self._rows.matrix, self._rows.count
        ann = self.ann.sync(live_rows)
        return DenseView(
            self.backend, snapshot, rows, matrix, count, groups, centres, inverse_norms, ann, self._rows.read_rows,
            self._damaged,
        )

    def _damaged(self, reason: str) -> None:
        """A view scored rows no cosine can give: the state is unhealthy (`coverage`) until the
        next attach reads every vector again (`_reread`) and writes a new `.matrix` file."""
        self._damage = reason
        self._coverage = dataclasses.replace(self._coverage, problem=f"damaged vector rows: {reason}")

    def _reread(self, vectors: ChunkVectors) -> None:
        """Rewrite every row from the vectors file (the source of truth; row numbers are kept,
        the ANN index re-adds them) and write a new `.matrix` file."""
        log.warning("re-reading every vector of %s after damaged rows (%s)", vectors.path, self._damage)
        version = vectors.version()
        ids, matrix, languages = vectors.load_all_with(TEXT_LANGUAGE)
        self.cache_stats["records_read"] += len(ids)
        self._add_rows(ids, matrix, languages)
        self._version, self._damage = version, None
        self._save_matrix()

    # -- keeping up with the vectors file ------------------------------------------------------------
    def _load_new(self) -> bool:
        """Read the vectors written since the last call; False (logged, BM25 only, `coverage()`
        says why) when the vectors file cannot be read: a damaged file is never an error here."""
        vectors = self.vectors
        try:
            if self._damage is not None and self._version >= 0:
                self._reread(vectors)
            elif self._version < 0:
                if not self._load_matrix_cache(vectors):
                    version = vectors.version()  # before reading: a write in between is re-read next time
                    ids, matrix, languages = vectors.load_all_with(TEXT_LANGUAGE)
                    self.cache_stats["records_read"] += len(ids)
                    self._version = version
                    self._add_rows(ids, matrix, languages)
                    self._save_matrix()
            else:
                version, added, _deleted = vectors.changed_since(self._version)
                if added:
                    matrix, present = vectors.get(added)
                    self._add_rows([i for i, ok in zip(added, present, strict=True) if ok], matrix[present])
                self._version = version  # deleted ids keep their rows: an id's text (so vector) never changes
        except (sqlite3.DatabaseError, VectorStoreError) as exc:
            if self._problem is None:
                log.warning(
                    "cannot read the chunk vectors in %s (%s): searching by BM25 only; run "
                    "`ragspine embed` to rebuild them", vectors.path, exc,
                )  # fmt: skip
            self._problem = f"vectors unreadable: {exc}"
            return False
        self._problem = None
        return True

    # -- the memory-mapped matrix cache (`matrix_cache`) -------------------------------------------
    def _load_matrix_cache(self, vectors: ChunkVectors) -> bool:
        """Adopt the `.matrix` file beside `vectors` when it is fresh: made from this file
        (`file_id`), model and dimension at its current version, or at an earlier version with
        only vectors added or rewritten since (those few are read and added, and a new cache
        written). False (the caller reads every record) when there is none or it is stale."""
        path = matrix_cache.matrix_path(vectors.path)
        if path is None or self.cache_min_vectors is None:
            return False
        cached = matrix_cache.read_matrix(path)
        if cached is None:
            return False
        file_id, version = vectors.identity()
        key = cached.key
        mine = (vectors.model_id, vectors.dim, file_id, self.cache_meaning)
        if (key.model_id, key.dim, key.file_id, key.meaning) != mine or key.version > version:
            log.info("matrix cache %s was made for other vectors (%s): rebuilding it", path, key)
            return False
        added: list[str] = []
        same = key.version == version
        rows = np.zeros((0, key.dim), dtype=np.float32)
        if key.version < version:
            version, added, deleted = vectors.changed_since(key.version)
            if deleted:
                log.info("matrix cache %s: %d vectors deleted since it was made: rebuilding it", path, len(deleted))
                return False
            rows, present = vectors.get(added)
            self.cache_stats["records_read"] += len(added)
            if not present.all():  # damaged since: the full read decides what is kept
                return False
        if not self._source_agrees(vectors, cached, same, set(added)):
            cached.read_rows.close()
            return False
        self._rows.adopt(cached.matrix, cached.ids, cached.languages, cached.read_rows)
        self._generation += 1
        vectors.note_damaged(set(cached.damaged) - set(added))  # a rewritten vector is whole again
        self._cache_id, self._version = cached.cache_id, version
        self.cache_stats["matrix_loads"] += 1
        if added:
            # the rows keep their numbers (new ones are appended): the alignment made for this
            # matrix still holds, once the positions of the added ids are looked up again
            self._load_alignment()
            self._preset_stale = True
            self._add_rows(added, rows)
            self._save_matrix()
        return True

    def _source_agrees(
        self, vectors: ChunkVectors, cached: matrix_cache.CachedMatrix, same_version: bool, rewritten: set[str]
    ) -> bool:
        """Whether the vectors file still holds what the cache was made from, checked cheaply:
        at the same version its `stamp()` (size, modification time) must be the cache's (else
        the records are read again, each checked by its checksum: damage done to the file is
        found and reported), and `SOURCE_SAMPLE` rows spread over the matrix (less those
        `rewritten` since) must be intact records equal to the cache's rows (else a WARNING,
        and the cache is not used)."""
        key = cached.key
        if same_version and key.stamp != vectors.stamp():
            log.info("the vectors file %s changed on disk since its matrix cache was made: reading every record", vectors.path)
            return False
        skip = set(cached.damaged) | rewritten
        picks = [i for i in np.linspace(0, len(cached.ids) - 1, min(SOURCE_SAMPLE, len(cached.ids)), dtype=np.int64).tolist()
                 if cached.ids[i] not in skip]  # fmt: skip
        if not picks:
            return True
        found, present = vectors.get([cached.ids[i] for i in picks])
        mine = cached.read_rows(np.asarray(picks, dtype=np.int64))
        if present.all() and np.array_equal(found, mine):
            return True
        log.warning(
            "the vectors file %s disagrees with its matrix cache (%d of %d sampled records damaged or different): "
            "the cache is not used; every record is read again", vectors.path,
            int(np.count_nonzero(~present | (found != mine).any(axis=1))), len(picks),
        )  # fmt: skip
        return False

    def _save_matrix(self) -> None:
        """Write the `.matrix` file of the current state (at `cache_min_vectors` vectors and
        above); a folder that cannot be written to is logged, never an error."""
        vectors = self.vectors
        if self.cache_min_vectors is None or self._rows.count < self.cache_min_vectors:
            return
        path = matrix_cache.matrix_path(vectors.path)
        if path is None:
            return
        started = time.perf_counter()
        try:
            key = MatrixKey(
                str(vectors.model_id), int(self._rows.matrix.shape[1]), vectors.identity()[0], self._version,
                self.cache_meaning, vectors.stamp(),
            )
            cache_id = matrix_cache.write_matrix(
                path, key, self._rows.ids, self._rows.matrix[: self._rows.count], self._rows.languages[: self._rows.count],
                vectors.damaged_ids(),
            )  # fmt: skip
        except OSError as exc:
            log.warning("cannot write the matrix cache %s (%s); the next process reads every vector again", path, exc)
            return
        if cache_id is not None:
            self._cache_id = cache_id
            self.cache_stats["matrix_writes"] += 1
            log.info("wrote the matrix cache %s (%d vectors) in %.2fs", path, self._rows.count, time.perf_counter() - started)

    def _load_alignment(self) -> None:
        """Once per channel, when its state is a `.matrix` file's: read the `.align` file made
        for that matrix (segments' rows and language codes, the centring), if any."""
        if self._align_looked or self._cache_id is None:
            return
        self._align_looked = True
        path = matrix_cache.align_path(self.vectors.path)
        found = matrix_cache.read_alignment(path, self._cache_id) if path else None
        if found is None:
            return
        self._preset, self._preset_centring = dict(found.segments), found.centring
        self._align_saved = (found.cache_id, tuple(found.segments), found.centring.key if found.centring else None)
        self.cache_stats["align_loads"] += 1

    def _cached_centring(
        self, active_rows: np.ndarray, active_groups: np.ndarray, rows: np.ndarray, groups: np.ndarray
    ) -> Centring:
        """`_centring`, or the `.align` file's result when it was computed from exactly these
        inputs over this very matrix (key "": the state is no cache file's, nothing to reuse)."""
        key = ""
        if self._cache_id is not None:
            key = matrix_cache.centring_key(self._cache_id, [active_rows, active_groups, rows, groups])
            preset = self._preset_centring
            if preset is not None and preset.key == key:
                return preset
        centres, inverse_norms = self._centring(self._rows.matrix, active_rows, active_groups, rows, groups)
        return Centring(key, centres, inverse_norms)

    def _save_alignment(self, snapshot: IndexSnapshot, centring: Centring) -> None:
        """Write the `.align` file for this attach (each written segment's rows and language
        codes, and `centring`) when the state is a `.matrix` file's and the file on disk holds
        something else. An index in memory (unnamed segments) is not written."""
        path = matrix_cache.align_path(self.vectors.path)
        if path is None or self._cache_id is None or not centring.key:
            return
        segments: list[tuple[SegmentKey, np.ndarray, np.ndarray]] = []
        for segment in snapshot.segments:
            if not segment.name:
                return
            _, rows, groups = self._segment_rows[id(segment)]
            segments.append(((segment.name, segment.first, segment.n_docs), rows, groups))
        state = (self._cache_id, tuple(k for k, _, _ in segments), centring.key)
        if state == self._align_saved:
            return
        try:
            matrix_cache.write_alignment(path, self._cache_id, segments, centring)
        except OSError as exc:
            log.warning("cannot write the alignment cache %s (%s)", path, exc)
            return
        self._align_saved = state
        self.cache_stats["align_writes"] += 1

    def _align(self, snapshot: IndexSnapshot, source: ChunkSource) -> tuple[np.ndarray, np.ndarray]:
        """(matrix row, language code) of every position; segments seen before (in this
        process, or in the `.align` file of the matrix in use) are reused."""
        parts, langs = [], []
        kept: dict[int, tuple[Any, np.ndarray, np.ndarray]] = {}
        aligned_at: dict[int, int] = {}
        for segment in snapshot.segments:
            cached = self._segment_rows.get(id(segment))
            # rows may have joined the matrix since these positions were looked up
            stale = self._aligned_at.get(id(segment), -1) != self._generation
            if (cached is None or cached[0] is not segment) and segment.name:
                preset = self._preset.pop((segment.name, segment.first, segment.n_docs), None)
                cached = None if preset is None else (segment, *preset)
                stale = self._preset_stale  # made for the matrix in use: stale once rows were added to it
            if cached is not None and cached[0] is segment:
                _, rows, groups = cached
                unknown = rows < 0
                if stale and unknown.any():
                    ids, row_of = segment.chunk_ids, self._rows.row_of
                    for i in np.flatnonzero(unknown).tolist():
                        rows[i] = row_of.get(ids[i], rows[i])
            else:
                ids, row_of = segment.chunk_ids.to_list(), self._rows.row_of
                rows = np.fromiter((row_of.get(c, _NO_VECTOR) for c in ids), dtype=np.int64, count=len(ids))
                groups = self._languages(source, segment.first, rows)
            kept[id(segment)] = (segment, rows, groups)
            aligned_at[id(segment)] = self._generation
            parts.append(rows)
            langs.append(groups)
        self._segment_rows, self._aligned_at = kept, aligned_at
        self._preset = {}  # what this snapshot did not use is not needed again
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(parts).copy(), np.concatenate(langs)

    def _languages(self, source: ChunkSource, first: int, rows: np.ndarray) -> np.ndarray:
        """Language code per position of a segment: the one stored with its vector, else
        detected from the chunk's text (no vector yet, or written before languages were stored)."""
        codes = np.full(len(rows), -1, dtype=np.int64)
        has = rows >= 0
        codes[has] = self._rows.languages[rows[has]]
        unknown = np.flatnonzero(codes < 0)
        for start in range(0, len(unknown), _TEXT_BATCH):
            part = unknown[start : start + _TEXT_BATCH]
            chunks = source.chunks_at((part + first).tolist())
            codes[part] = [language_code(chunk.text) for chunk in chunks]
        return codes


    def _add_rows(self, ids: Sequence[str], matrix: np.ndarray, languages: Sequence[Any] | None = None) -> None:
        """Store each id's vector (and its stored TEXT_LANGUAGE, when known) in the matrix."""
        if not len(ids):
            return
        self._cache_id = None  # the state is no longer any matrix cache file's
        self._generation += 1
        self.ann.forget(self._rows.add(ids, matrix, languages))

    def _fill(self, source: ChunkSource, missing: np.ndarray, rows: np.ndarray, *, limit: int | None) -> None:
        """Embed the `missing` positions; more than `limit` (None: no limit) is the logged fallback."""
        placed = list(zip(missing.tolist(), source.chunks_at(missing.tolist()), strict=True))
        found = select_missing(self.vectors, self.backend, placed, chunk_of=itemgetter(1), known_missing=True)
        for position, _ in found.lexical_only:
            rows[position] = _LEXICAL_ONLY
        todo = lazy_batch(found.sendable, limit)
        if not todo:
            return
        log.info("embedding %d chunks that have no vector yet (%s)", len(todo), self.vectors.model_id)
        for stored in embed_into(self.vectors, self.backend, [c for _, c in todo], index_text=self.index_text, unit=True):
            ids = [c.chunk_id for c in stored.chunks]
            # the version is left alone: other writers' rows still come
            self._add_rows(ids, stored.rows, [m[TEXT_LANGUAGE] for m in stored.metadata])
        for position, chunk in todo:
            rows[position] = self._rows.row_of[chunk.chunk_id]
