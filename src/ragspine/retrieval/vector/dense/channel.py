"""`DenseChannel`: the cosine ranking of a lexical index's positions, from persisted chunk vectors.

The lexical index (`IndexSnapshot`) decides which positions exist, which are active and which a
filter allows; this channel only adds a vector row to each position, so both channels always
rank the same candidate set.

Invariants:
- A chunk's vector comes from `ChunkVectors` (keyed by chunk_id and model): it is computed once,
  at ingest or lazily, and never per query. Only the query is embedded: all of a query's
  variants in one backend call (`DenseView.embed_queries`), each distinct text once.
- Positions without a vector are embedded lazily when the snapshot changes, if there are at most
  `lazy_limit` of them (logged at INFO). More than that is an explicit, logged fallback (WARNING
  with the count and the command that embeds them): those chunks are ranked by BM25 only until
  embedded. `coverage()` reports how many active positions have a vector.
- `view_over` (a retriever over a fixed list of chunks) instead embeds, per query, only the
  positions that query's filter allows and that have no vector yet, whatever their number;
  vectors are kept by chunk_id, so no chunk is embedded twice.
- A RESTRICTED chunk is never sent to a remote backend (`can_embed`): it stays lexical-only.
- `rank` returns positions by (-cosine rounded to SCORE_DECIMALS, chunk_id): exact cosine over
  every allowed position that has a vector. Once the channel holds `AnnConfig.min_vectors`
  vectors (RAGSPINE_ANN_MIN_VECTORS), an HNSW index (`ann.AnnIndex`, persisted beside the
  vectors file, kept up to date as vectors arrive) proposes candidates that are re-scored exactly
  and ranked the same way, so scores are exact and only recall can differ; a selective filter,
  a depth near the allowed count, or too few allowed candidates fall back to the exact scan.
  Below the threshold no index exists and the results are the exact scan's.
- Instant start (`matrix_cache`): from `cache_min_vectors` vectors on, a process's first load
  writes the matrix (`<vectors>.matrix`) and each attach the alignment and centring
  (`<vectors>.align`) beside the vectors file; a later process maps them instead of reading
  every record, only when they were made from this very file, model, dimension and version
  (or an earlier version with only additions since: those are read and added). Otherwise the
  records are read as without a cache. Rankings and scores are the same either way.
- Language centring: small multilingual encoders place texts of one language near each other
  whatever they say, so in a mixed corpus a Chinese question prefers any Chinese passage to the
  English passage that answers it. When at least two languages (`detect_language` on the chunk
  text) each hold >= MIN_LANGUAGE_SHARE of the vectors, every vector is compared after
  subtracting its language's mean passage vector (the query: the mean of its own language;
  Libovický et al. 2020, "On the language neutrality of pre-trained multilingual
  representations"), then re-normalised. The means are over the positions a caller may see
  (`IndexSnapshot.visible`: RESTRICTED chunks never shift another chunk's score). A corpus in one language is ranked by plain cosine
  (centring measured slightly worse there: CMRC2018 dev dense nDCG@10 0.9365 → 0.9316).
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ragspine.retrieval.chunking.contextual import indexed_text
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.chunking.protocol import IndexTextFn
from ragspine.retrieval.language import detect_language
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.types import ChunkSource, EmbeddingBackend
from ragspine.retrieval.vector.embeddings.support import can_embed, embed_queries
from ragspine.extras import MissingExtraError
from ragspine.retrieval.vector.dense.ann import DEAD_SHARE, AnnConfig, AnnIndex, ann_path
from ragspine.retrieval.vector.dense.chunk_vectors import TEXT_LANGUAGE, ChunkVectors, vector_metadata
from ragspine.retrieval.vector.dense import matrix_cache
from ragspine.retrieval.vector.dense.matrix_cache import Centring, MatrixKey, SegmentKey
from ragspine.retrieval.vector.errors import VectorModelMismatch, VectorStoreError
from ragspine.retrieval.vector.stores.inprocess import SCORE_DECIMALS, ChunkVectorStore, top_k_rows
from ragspine.retrieval.vector.arrays import as_matrix, unit_rows

log = logging.getLogger(__name__)

EXACT_IDS_MAX = 1_024  # a store view ranks up to this many allowed chunks by id lookup (exact)
# Vectors a store view has read by id, kept per channel (an id's text, so its vector, never
# changes for one model): about 75 MB of 384-d float32 at most, cleared when full.
VECTOR_CACHE_MAX = 50_000
DEFAULT_LAZY_LIMIT = 64  # chunks a query may embed on the spot (seconds with e5 on a CPU); more: logged fallback
_NO_VECTOR = -1  # not embedded (yet)
_LEXICAL_ONLY = -2  # RESTRICTED on a remote backend: never embedded
LANGUAGES = ("zh", "en", "other", "")  # detect_language's answers; the index is the group code
MIN_LANGUAGE_SHARE = 0.05  # of the active vectors, for a language to count towards centring
MIN_LANGUAGE_VECTORS = 10
# how a matrix cache written by this code encodes rows' languages and decides centring (part of
# its key: a cache of other code is rebuilt, never read with another meaning)
CACHE_MEANING = f"languages={','.join(LANGUAGES)};share={MIN_LANGUAGE_SHARE};min={MIN_LANGUAGE_VECTORS};centring-r1"
_TEXT_BATCH = 5_000  # chunk texts read at a time to find their language


def vector_key(backend: Any) -> str | None:
    """The backend's `model_id` (the key of its persisted vectors), or None when it has none."""
    model_id = getattr(backend, "model_id", None)
    return model_id if isinstance(model_id, str) and model_id else None


@dataclass(frozen=True)
class DenseCoverage:
    """How many active positions the dense channel can rank."""

    active: int
    with_vector: int
    lexical_only: int  # RESTRICTED chunks a remote backend may not see
    damaged: int = 0  # stored records that failed their checksum (ranked by BM25 until re-embedded)
    problem: str | None = None  # why the vectors could not be read at all (BM25 only), if so

    @property
    def missing(self) -> int:
        return self.active - self.with_vector - self.lexical_only


class DenseRanking(Protocol):
    """What the pipeline asks of the dense channel for one snapshot (`DenseView`, `StoreDenseView`)."""

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]: ...

    def rank(self, query: np.ndarray, allowed: np.ndarray, depth: int) -> tuple[list[int], dict[int, float]]: ...

    def scores_at(self, query: np.ndarray, positions: Sequence[int]) -> dict[int, float]: ...

    def languages_crossed(self, text: str, positions: Sequence[int]) -> list[bool]: ...


class DenseChannel:
    """Vectors aligned to an `IndexSnapshot`'s positions; exact cosine ranking.

    `vectors` is the `ChunkVectorStore` the vectors live in: `ChunkVectors` (the default; in
    memory when not given) is read into a matrix aligned to the positions and kept up to date
    from its change log; any other store (pgvector, Qdrant) is asked per query (`StoreDenseView`:
    the store ranks, this channel keeps the positions the query may see; plain cosine, no
    language centring).

    >>> from ragspine.retrieval.lexical.index.segment import SegmentBuilder
    >>> from ragspine.retrieval.chunking.chunking import Chunk
    >>> from ragspine.retrieval.pipeline.hybrid import ListChunks
    >>> from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
    >>> chunks = [Chunk("a:0", "a", 0, "cat food", "a#p1@0-8"), Chunk("b:0", "b", 0, "dog", "b#p1@0-3")]
    >>> builder = SegmentBuilder(first=0); builder.add([["cat", "food"], ["dog"]], chunk_ids=["a:0", "b:0"])
    >>> snapshot = IndexSnapshot([builder.finish()])
    >>> channel = DenseChannel(DeterministicEmbeddingBackend(dim=16))
    >>> view = channel.attach(snapshot, ListChunks(chunks))
    >>> ranked, _ = view.rank(view.embed_query("cat food"), snapshot.active_positions(), 2)
    >>> [snapshot.chunk_id(p) for p in ranked]
    ['a:0', 'b:0']
    """

    def __init__(
        self,
        backend: EmbeddingBackend,
        vectors: ChunkVectorStore | None = None,
        *,
        lazy_limit: int = DEFAULT_LAZY_LIMIT,
        problem: str | None = None,
        index_text: IndexTextFn | None = None,
        ann: AnnConfig | None = None,
        cache_min_vectors: int | None = matrix_cache.DEFAULT_MIN_VECTORS,
    ) -> None:
        self.backend = backend
        # at and above this many vectors, a vectors file gets a memory-mapped matrix cache
        # beside it (`matrix_cache`; None: never)
        self.cache_min_vectors = cache_min_vectors
        self._cache_id: str | None = None  # the `.matrix` file this state equals (None: none does)
        self._read_rows: Callable[[np.ndarray], np.ndarray] | None = None  # while the matrix is that file's mmap
        self._preset: dict[SegmentKey, tuple[np.ndarray, np.ndarray]] = {}  # from the `.align` file
        self._preset_centring: Centring | None = None
        self._align_looked = False  # the `.align` file is read at most once per channel
        self._preset_stale = False  # vectors were added to the matrix the presets were made for
        self._align_saved: tuple[Any, ...] | None = None  # what the `.align` file on disk holds
        self.cache_stats = {"matrix_loads": 0, "matrix_writes": 0, "align_loads": 0, "align_writes": 0, "records_read": 0}
        self.ann_config = ann if ann is not None else AnnConfig()
        self._ann: AnnIndex | None = None
        self._ann_rows = np.zeros(0, dtype=np.int64)  # matrix row of each ANN label (-1: none)
        self._ann_covered = np.zeros(0, dtype=bool)  # per matrix row: its current vector is in the index
        self._ann_off: str | None = None  # why the index cannot be used (logged once)
        self.ann_stats = {"builds": 0, "loads": 0, "added": 0, "saves": 0}
        self.index_text = index_text  # what a chunk's vector embeds (None: its text)
        key = vector_key(backend)
        if vectors is None:
            vectors = ChunkVectors(None, model_id=key or f"unnamed:{type(backend).__qualname__}")
        elif key is not None and vectors.model_id is not None and vectors.model_id != key:
            raise VectorModelMismatch(
                f"vectors of model {vectors.model_id!r} cannot serve backend model {key!r}; "
                "re-embed with the backend in use (`ragspine embed --reembed`)"
            )
        self.vectors: ChunkVectorStore = vectors
        self.lazy_limit = lazy_limit
        self._problem: str | None = None  # set while the vectors cannot be read
        self._open_problem = problem  # why the persisted vectors could not be opened (given by the owner)
        self._present: set[str] = set()  # ids a (non-ChunkVectors) store is known to hold
        self._lexical_only: set[str] = set()  # ids a remote backend may not see (RESTRICTED)
        self._fetched: dict[str, np.ndarray] = {}  # vectors a store view read by id (VECTOR_CACHE_MAX)
        self._position_of: dict[str, int] = {}  # active chunk id → position, for `_positions_segments`
        self._id_at: list[str] = []  # chunk id of every position of `_positions_segments`
        self._positions_segments: list[Any] = []
        self._lock = threading.Lock()
        self._row_of_map: dict[str, int] | None = {}  # chunk id → matrix row; None: build from `_row_ids`
        self._row_ids: list[str] = []  # chunk id of each matrix row
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._row_language = np.zeros(0, dtype=np.int8)  # language code per matrix row; -1 unknown
        self._count = 0
        self._version = -1
        # id(segment) → (segment, matrix row per position, language code per position)
        self._segment_rows: dict[int, tuple[Any, np.ndarray, np.ndarray]] = {}
        # bumped whenever rows join the matrix: a segment's positions without a row are looked up
        # again when the generation they were aligned at is older
        self._generation = 0
        self._aligned_at: dict[int, int] = {}  # id(segment) → generation its rows were looked up at
        self._coverage = DenseCoverage(0, 0, 0)

    # -- keeping up with the store ---------------------------------------------------------------
    def attach(self, snapshot: IndexSnapshot, source: ChunkSource) -> DenseRanking:
        """Align to `snapshot`: load vectors written since the last call, embed what is missing
        (`lazy_batch`: within `lazy_limit`, decided by the chunks a caller may see), and map every
        position to its vector row. The returned view ranks
        that snapshot's positions and is not changed by later attaches."""
        with self._lock:
            if not isinstance(self.vectors, ChunkVectors):
                return self._store_view(snapshot, source, snapshot.active_positions(), self.lazy_limit)
            readable = self._load_new()
            self._load_alignment()
            rows, groups = self._align(snapshot, source)
            active = snapshot.active_positions()
            missing = active[rows[active] == _NO_VECTOR]
            if len(missing) and readable:
                self._fill(snapshot, source, missing, rows, limit=self.lazy_limit)
            on = rows[active]
            self._coverage = DenseCoverage(
                int(len(active)), int(np.count_nonzero(on >= 0)), int(np.count_nonzero(on == _LEXICAL_ONLY)),
                len(self.vectors.damaged_ids()), self._open_problem or self._problem,
            )  # fmt: skip
            shown = snapshot.visible().active_positions()  # RESTRICTED never shapes the centring
            centring = self._cached_centring(rows[shown], groups[shown], rows, groups)
            centres, inverse_norms = centring.centres, centring.inverse_norms
            self._save_alignment(snapshot, centring)
            return DenseView(
                self.backend, snapshot, rows, self._matrix, self._count, groups, centres, inverse_norms,
                self._sync_ann(rows[shown]), self._read_rows,
            )

    def view_over(self, snapshot: IndexSnapshot, source: ChunkSource, allowed: np.ndarray) -> DenseRanking:
        """The lazy form of `attach`, for a retriever over a fixed list of chunks: embed only
        the `allowed` positions (one query's filter survivors) that have no vector yet, with
        no `lazy_limit`, and keep them (by chunk_id) for later queries. Language centring, when
        it applies, is computed over `allowed` (with no filter: every active position, as
        `attach` does)."""
        with self._lock:
            if not isinstance(self.vectors, ChunkVectors):
                return self._store_view(snapshot, source, allowed, None)
            readable = self._load_new()
            rows, groups = self._align(snapshot, source)
            missing = allowed[rows[allowed] == _NO_VECTOR]
            if len(missing) and readable:
                self._fill(snapshot, source, missing, rows, limit=None)
            centres, inverse_norms = self._centring(rows[allowed], groups[allowed], rows, groups)
            return DenseView(
                self.backend, snapshot, rows, self._matrix, self._count, groups, centres, inverse_norms,
                self._sync_ann(rows[snapshot.active_positions()]), self._read_rows,
            )

    def _centring(
        self, active_rows: np.ndarray, active_groups: np.ndarray, rows: np.ndarray, groups: np.ndarray
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Per-language mean vectors (row g: language code g; the overall mean for a language
        too small to count) and 1 / |v - mean| per position, or (None, None) for plain cosine."""
        has = active_rows >= 0
        counted = [
            g for g in range(len(LANGUAGES) - 1)  # "" (no letters) never counts
            if (n := int(np.count_nonzero(has & (active_groups == g)))) >= MIN_LANGUAGE_VECTORS
            and n >= MIN_LANGUAGE_SHARE * max(1, int(np.count_nonzero(has)))
        ]  # fmt: skip
        if len(counted) < 2:
            return None, None
        dim = self._matrix.shape[1]
        sums = np.zeros((len(LANGUAGES), dim), dtype=np.float64)
        counts = np.zeros(len(LANGUAGES), dtype=np.int64)
        for start in range(0, len(active_rows), 8192):
            part_rows, part_groups = active_rows[start : start + 8192], active_groups[start : start + 8192]
            for g in np.unique(part_groups[part_rows >= 0]).tolist():
                chosen = part_rows[(part_groups == g) & (part_rows >= 0)]
                sums[g] += self._matrix[chosen].sum(axis=0, dtype=np.float64)
                counts[g] += len(chosen)
        overall = sums.sum(axis=0) / max(1, int(counts.sum()))
        centres = np.tile(overall, (len(LANGUAGES), 1))
        for g in counted:
            centres[g] = sums[g] / counts[g]
        centres = centres.astype(np.float32)
        # |v - c| per position, computed directly (1 - 2 v·c + |c|² loses precision near c).
        inverse = np.zeros(len(rows), dtype=np.float32)
        ok = np.flatnonzero(rows >= 0)
        for start in range(0, len(ok), 8192):
            part = ok[start : start + 8192]
            norms = np.linalg.norm(self._matrix[rows[part]] - centres[groups[part]], axis=1)
            inverse[part] = 1.0 / np.maximum(norms, 1e-6)
        return centres, inverse

    def coverage(self) -> DenseCoverage:
        return self._coverage

    @property
    def _row_of(self) -> dict[str, int]:
        """Chunk id → matrix row (built from `_row_ids` when first asked after a cache load)."""
        if self._row_of_map is None:
            self._row_of_map = dict(zip(self._row_ids, range(len(self._row_ids)), strict=True))
        return self._row_of_map

    # -- the HNSW index above the size threshold -----------------------------------------------
    def _sync_ann(self, active_rows: np.ndarray) -> AnnCandidates | None:
        """The ANN index over the matrix, brought up to date (loaded from its file, else built;
        rows added since, added; rebuilt when dead labels pass DEAD_SHARE), or None below the
        threshold or without the `ann` extra (logged once: the exact scan answers).
        `active_rows`: the rows of the positions a caller may see, so RESTRICTED vectors neither
        count towards the threshold nor enter the index (nor take its candidate slots)."""
        if self._ann_off is not None:
            return None
        live = np.zeros(self._count, dtype=bool)  # rows of active, visible positions
        live[active_rows[active_rows >= 0]] = True
        if not self.ann_config.applies(int(np.count_nonzero(live))):
            return None
        try:
            if self._ann is None:
                self._open_ann(live)
            else:
                self._ann_catch_up(live)
            assert self._ann is not None
            if len(self._ann) - np.count_nonzero(live) > DEAD_SHARE * len(self._ann):
                self._build_ann(np.flatnonzero(live))
        except MissingExtraError as exc:
            self._ann_off = str(exc)
            log.warning("%d vectors are ranked by exact scan: %s", self._count, exc)
            return None
        return AnnCandidates(self._ann, self._ann_rows, self.ann_config)

    def _ann_file(self) -> str | None:
        return ann_path(self.vectors.path) if isinstance(self.vectors, ChunkVectors) else None

    def _open_ann(self, live: np.ndarray) -> None:
        """Load the saved index (labels mapped to this process's rows) and add what it lacks,
        else build one over the live rows."""
        path, model_id = self._ann_file(), str(self.vectors.model_id)
        dim = int(self._matrix.shape[1])
        loaded = AnnIndex.load(path, model_id=model_id, dim=dim, config=self.ann_config) if path else None
        if loaded is None:
            self._build_ann(np.flatnonzero(live))
            return
        self.ann_stats["loads"] += 1
        self._ann = loaded
        labels = len(loaded.ids)
        if labels <= self._count and loaded.ids == self._row_ids[:labels]:  # built in row order: label = row
            self._ann_rows = np.arange(labels, dtype=np.int64)
        else:
            self._ann_rows = np.fromiter((self._row_of.get(i, -1) for i in loaded.ids), dtype=np.int64, count=labels)
        self._ann_covered = np.zeros(self._count, dtype=bool)
        self._ann_covered[self._ann_rows[self._ann_rows >= 0]] = True
        self._ann_catch_up(live)

    def _build_ann(self, rows: np.ndarray) -> None:
        """A new index over these matrix rows (saved beside the vectors file)."""
        started = time.perf_counter()
        ids = self._ids_of(rows)
        self._ann = AnnIndex.build(ids, self._matrix[rows], model_id=str(self.vectors.model_id), config=self.ann_config)
        self._ann_rows = np.asarray(rows, dtype=np.int64).copy()
        self._ann_covered = np.zeros(self._count, dtype=bool)
        self._ann_covered[rows] = True
        self.ann_stats["builds"] += 1
        log.info("built the ANN index over %d vectors in %.1fs", len(rows), time.perf_counter() - started)
        self._save_ann()

    def _ann_catch_up(self, live: np.ndarray) -> None:
        """Add the live rows whose current vector the index lacks: new vectors, rewritten ones
        (`_add_rows` clears their mark), and ones left out of a rebuild while inactive."""
        assert self._ann is not None
        if len(self._ann_covered) < self._count:
            grown = np.zeros(self._count, dtype=bool)
            grown[: len(self._ann_covered)] = self._ann_covered
            self._ann_covered = grown
        todo = np.flatnonzero(live & ~self._ann_covered)
        if not len(todo):
            return
        self._ann.add(self._ids_of(todo), self._matrix[todo])
        self._ann_rows = np.concatenate([self._ann_rows, todo])  # a new array: views keep theirs
        self._ann_covered[todo] = True
        self.ann_stats["added"] += len(todo)
        if len(self._ann) - self._ann.saved >= max(1_000, len(self._ann) // 20):
            self._save_ann()

    def _save_ann(self) -> None:
        path = self._ann_file()
        if path is None or self._ann is None:
            return
        try:
            self._ann.save(path)
            self.ann_stats["saves"] += 1
        except OSError as exc:  # a read-only folder: the index lives in memory for this process
            log.warning("cannot save the ANN index to %s (%s); it is rebuilt by the next process", path, exc)

    def _ids_of(self, rows: np.ndarray) -> list[str]:
        """The chunk id of each matrix row."""
        return [self._row_ids[r] for r in rows.tolist()]

    def _load_new(self) -> bool:
        """Read the vectors written since the last call; False (logged, BM25 only, `coverage()`
        says why) when the vectors file cannot be read: a damaged file is never an error here."""
        vectors = self.vectors
        assert isinstance(vectors, ChunkVectors)
        try:
            if self._version < 0:
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
        mine = (vectors.model_id, vectors.dim, file_id, CACHE_MEANING)
        if (key.model_id, key.dim, key.file_id, key.meaning) != mine or key.version > version:
            log.info("matrix cache %s was made for other vectors (%s): rebuilding it", path, key)
            return False
        added: list[str] = []
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
        self._matrix, self._row_ids, self._count = cached.matrix, cached.ids, len(cached.ids)
        self._generation += 1
        self._row_of_map = None  # 100k ids: built on first need (a fresh alignment needs none)
        self._row_language = np.array(cached.languages)
        self._read_rows = cached.read_rows
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

    def _save_matrix(self) -> None:
        """Write the `.matrix` file of the current state (at `cache_min_vectors` vectors and
        above); a folder that cannot be written to is logged, never an error."""
        vectors = self.vectors
        if not isinstance(vectors, ChunkVectors) or self.cache_min_vectors is None or self._count < self.cache_min_vectors:
            return
        path = matrix_cache.matrix_path(vectors.path)
        if path is None:
            return
        started = time.perf_counter()
        try:
            key = MatrixKey(
                str(vectors.model_id), int(self._matrix.shape[1]), vectors.identity()[0], self._version, CACHE_MEANING
            )
            cache_id = matrix_cache.write_matrix(
                path, key, self._row_ids, self._matrix[: self._count], self._row_language[: self._count],
                vectors.damaged_ids(),
            )  # fmt: skip
        except OSError as exc:
            log.warning("cannot write the matrix cache %s (%s); the next process reads every vector again", path, exc)
            return
        if cache_id is not None:
            self._cache_id = cache_id
            self.cache_stats["matrix_writes"] += 1
            log.info("wrote the matrix cache %s (%d vectors) in %.2fs", path, self._count, time.perf_counter() - started)

    def _load_alignment(self) -> None:
        """Once per channel, when its state is a `.matrix` file's: read the `.align` file made
        for that matrix (segments' rows and language codes, the centring), if any."""
        if self._align_looked or self._cache_id is None:
            return
        self._align_looked = True
        path = matrix_cache.align_path(self.vectors.path) if isinstance(self.vectors, ChunkVectors) else None
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
        centres, inverse_norms = self._centring(active_rows, active_groups, rows, groups)
        return Centring(key, centres, inverse_norms)

    def _save_alignment(self, snapshot: IndexSnapshot, centring: Centring) -> None:
        """Write the `.align` file for this attach (each written segment's rows and language
        codes, and `centring`) when the state is a `.matrix` file's and the file on disk holds
        something else. An index in memory (unnamed segments) is not written."""
        path = matrix_cache.align_path(self.vectors.path) if isinstance(self.vectors, ChunkVectors) else None
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

    # -- a store that ranks for us (pgvector, Qdrant, …) -------------------------------------------
    def _store_view(
        self, snapshot: IndexSnapshot, source: ChunkSource, positions: np.ndarray, limit: int | None
    ) -> StoreDenseView:
        """Map the snapshot's chunk ids to positions, find which of `positions` have no vector in
        the store (only ids not seen before are asked), embed them within `limit`, and return the
        view that lets the store rank."""
        segments = list(snapshot.segments)
        if len(segments) != len(self._positions_segments) or any(
            a is not b for a, b in zip(segments, self._positions_segments, strict=True)
        ):
            self._id_at = [cid for segment in segments for cid in segment.chunk_ids.to_list()]
            self._position_of = {self._id_at[p]: p for p in snapshot.active_positions().tolist()}
            self._positions_segments = segments
        ids = [self._id_at[p] for p in positions.tolist()]
        unknown = [i for i in ids if i not in self._present and i not in self._lexical_only]
        if unknown:
            absent = set(self.vectors.missing(unknown))
            self._present.update(i for i in unknown if i not in absent)
            todo = [p for p, i in zip(positions.tolist(), ids, strict=True) if i in absent]
            chunks = source.chunks_at(todo)
            self._lexical_only.update(c.chunk_id for c in chunks if not can_embed(self.backend, c.sensitivity))
            batch = lazy_batch([(0, c) for c in chunks if can_embed(self.backend, c.sensitivity)], limit, self.vectors)
            sendable = [c for _, c in batch]
            if sendable:
                texts = [indexed_text(c, self.index_text) for c in sendable]  # what embed_chunks embeds
                vectors = as_matrix(self.backend.embed_texts(texts), what="chunk vectors")
                self.vectors.upsert([c.chunk_id for c in sendable], vectors, [vector_metadata(c) for c in sendable])
                self._present.update(c.chunk_id for c in sendable)
        with_vector = sum(1 for i in ids if i in self._present)
        self._coverage = DenseCoverage(len(ids), with_vector, sum(1 for i in ids if i in self._lexical_only))
        return StoreDenseView(self.backend, snapshot, source, self.vectors, self._position_of, self._fetched)

    def _add_rows(self, ids: Sequence[str], matrix: np.ndarray, languages: Sequence[Any] | None = None) -> None:
        """Store each id's vector (and its stored TEXT_LANGUAGE, when known) in the matrix."""
        if not len(ids):
            return
        self._cache_id = None  # the state is no longer any matrix cache file's
        self._generation += 1
        if not self._matrix.flags.writeable:  # memory-mapped from the cache: copied once, with room to grow
            self._grow(max(2 * self._count, self._count + len(ids)))
        matrix = np.asarray(matrix, dtype=np.float32)
        codes = language_codes(languages) if languages is not None else np.full(len(ids), -1, dtype=np.int8)
        row_of = self._row_of
        if self._matrix.shape[1] == 0:
            if len(ids) >= 1024 and matrix.flags.c_contiguous and matrix.flags.writeable:
                # first load of a large file: keep the loaded matrix (its rows are ids' order)
                # instead of copying it into a new one of the same size
                self._matrix, self._row_language = matrix, codes.copy()
                row_of.update(zip(ids, range(len(ids)), strict=True))
                self._row_ids, self._count = list(ids), len(ids)
                return
            self._matrix = np.zeros((max(1024, len(ids)), matrix.shape[1]), dtype=np.float32)
            self._row_language = np.full(len(self._matrix), -1, dtype=np.int8)
        if not row_of and len(ids) <= len(self._matrix):  # first load: every id is new, set in bulk
            self._matrix[: len(ids)] = matrix
            self._row_language[: len(ids)] = codes
            row_of.update(zip(ids, range(len(ids)), strict=True))
            self._row_ids = list(ids)
            self._count = len(ids)
            return
        for chunk_id, vector, code in zip(ids, matrix, codes.tolist(), strict=True):
            row = row_of.get(chunk_id)
            if row is None:
                if self._count == len(self._matrix):
                    self._grow(2 * len(self._matrix))
                row = row_of[chunk_id] = self._count
                self._row_ids.append(chunk_id)
                self._count += 1
            self._matrix[row] = vector
            if row < len(self._ann_covered):
                self._ann_covered[row] = False  # a rewritten vector: the index holds the old one
            if code >= 0:
                self._row_language[row] = code

    def _grow(self, capacity: int) -> None:
        """A new writable matrix (and language codes) of `capacity` rows holding the current ones."""
        grown = np.zeros((capacity, self._matrix.shape[1]), dtype=np.float32)
        grown[: self._count] = self._matrix[: self._count]
        grown_codes = np.full(capacity, -1, dtype=np.int8)
        grown_codes[: self._count] = self._row_language[: self._count]
        self._matrix, self._row_language, self._read_rows = grown, grown_codes, None

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
                    ids, row_of = segment.chunk_ids, self._row_of
                    for i in np.flatnonzero(unknown).tolist():
                        rows[i] = row_of.get(ids[i], rows[i])
            else:
                ids, row_of = segment.chunk_ids.to_list(), self._row_of
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
        codes[has] = self._row_language[rows[has]]
        unknown = np.flatnonzero(codes < 0)
        for start in range(0, len(unknown), _TEXT_BATCH):
            part = unknown[start : start + _TEXT_BATCH]
            chunks = source.chunks_at((part + first).tolist())
            codes[part] = [language_code(chunk.text) for chunk in chunks]
        return codes

    def _fill(
        self,
        snapshot: IndexSnapshot,
        source: ChunkSource,
        missing: np.ndarray,
        rows: np.ndarray,
        *,
        limit: int | None,
    ) -> None:
        """Embed the `missing` positions; more than `limit` (None: no limit) is the logged fallback."""
        chunks = source.chunks_at(missing.tolist())
        allowed = [can_embed(self.backend, c.sensitivity) for c in chunks]
        for position, ok in zip(missing.tolist(), allowed, strict=True):
            if not ok:
                rows[position] = _LEXICAL_ONLY
        todo = lazy_batch(
            [(p, c) for p, c, ok in zip(missing.tolist(), chunks, allowed, strict=True) if ok], limit, self.vectors
        )
        if not todo:
            return
        log.info("embedding %d chunks that have no vector yet (%s)", len(todo), self.vectors.model_id)
        ids = [c.chunk_id for _, c in todo]
        vectors = unit_rows(as_matrix(self.backend.embed_texts([indexed_text(c, self.index_text) for _, c in todo]), what="chunk vectors"))
        metas = [vector_metadata(c) for _, c in todo]
        self.vectors.upsert(ids, vectors, metas)
        self._add_rows(ids, vectors, [m[TEXT_LANGUAGE] for m in metas])  # the version is left alone: other writers' rows still come
        for (position, _), chunk_id in zip(todo, ids, strict=True):
            rows[position] = self._row_of[chunk_id]


@dataclass(frozen=True)
class DenseView:
    """One snapshot's positions mapped to rows of the vector matrix (rows < 0: no vector)."""

    backend: EmbeddingBackend
    snapshot: IndexSnapshot
    rows: np.ndarray
    matrix: np.ndarray
    count: int
    groups: np.ndarray  # language code per position
    centres: np.ndarray | None = None  # per-language mean vectors; None: plain cosine
    inverse_norms: np.ndarray | None = None  # 1 / |v - centre| per position
    ann: AnnCandidates | None = None  # the HNSW index at and above the size threshold
    # reads chosen rows of `matrix` when it is a memory-mapped cache file (`matrix_cache`):
    # scoring a few candidates then maps none of the file's pages; None: index `matrix`
    read_rows: Callable[[np.ndarray], np.ndarray] | None = None
    _position_of_row: list[np.ndarray] = field(default_factory=list, compare=False, repr=False)
    _has_vector: list[np.ndarray] = field(default_factory=list, compare=False, repr=False)

    def embed_query(self, text: str) -> np.ndarray:
        """The unit query vector (the backend's query side when it has one), centred on its
        language's mean when the view centres."""
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """`embed_query` of each text, from one backend call (one forward pass for a local
        model); a text given twice is embedded once."""
        return unit_query_vectors(self.backend, texts, self.centre_query)

    def centre_query(self, vector: np.ndarray, text: str) -> np.ndarray:
        """`vector` (unit) minus the mean of `text`'s language, re-normalised; unchanged when
        the view does not centre."""
        if self.centres is None:
            return vector
        centred = vector - self.centres[language_code(text)]
        norm = float(np.linalg.norm(centred))
        return centred / norm if norm > 0 else vector

    def languages_crossed(self, text: str, positions: Sequence[int]) -> list[bool]:
        """Per position: whether `text` and that chunk are in different languages (both known);
        `text`'s language is detected once."""
        return crossed(language_code(text), [int(self.groups[p]) for p in positions])

    def _scores(self, query: np.ndarray, positions: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Cosines (centred or plain) of positions whose matrix rows are `rows`."""
        if len(rows) * 2 >= self.count:
            raw = (self.matrix[: self.count] @ query)[rows]
        else:
            raw = (self.matrix[rows] if self.read_rows is None else self.read_rows(rows)) @ query
        if self.centres is not None and self.inverse_norms is not None:
            offsets = self.centres @ query
            raw = (raw - offsets[self.groups[positions]]) * self.inverse_norms[positions]
        return np.round(raw.astype(np.float64), SCORE_DECIMALS)

    def rank(self, query: np.ndarray, allowed: np.ndarray, depth: int) -> tuple[list[int], dict[int, float]]:
        """The best `depth` allowed positions with a vector, and their cosines."""
        found = None
        if self.ann is not None:  # the allowed positions with a vector are only counted here
            if not self._has_vector:
                self._has_vector.append(self.rows >= 0)
            with_vector = int(np.count_nonzero(self._has_vector[0][allowed]))
            if not with_vector or depth <= 0:
                return [], {}
            self._check_dimension(query)
            found = self._ann_candidates(query, allowed, with_vector, depth)
        if found is not None:
            positions, rows = found
        else:
            rows = self.rows[allowed]
            has = rows >= 0
            positions, rows = allowed[has], rows[has]
            if not len(rows) or depth <= 0:
                return [], {}
            self._check_dimension(query)
        scores = self._scores(query, positions, rows)
        best = top_k_rows(positions, scores, depth, _ChunkIds(self.snapshot))
        return [p for p, _ in best], dict(best)

    def _check_dimension(self, query: np.ndarray) -> None:
        if self.matrix.shape[1] != len(query):
            raise ValueError(f"query vector has dimension {len(query)}, stored vectors {self.matrix.shape[1]}")

    def _ann_candidates(
        self, query: np.ndarray, allowed: np.ndarray, with_vector: int, depth: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(positions, rows) of the ANN candidates among the `allowed` positions (sorted
        ascending, as every mask gives them; `with_vector` of them have a vector), or None when
        the exact scan should answer: a selective filter, a depth near the allowed count, or
        fewer than `depth` candidates left after dropping the ones not allowed. Every candidate
        has a vector (it comes from a matrix row), so the allowed positions are never gathered
        whole: at a million positions that gather cost more than the graph search."""
        ann = self.ann
        assert ann is not None
        labelled = len(ann.label_rows)
        config = ann.config
        if not labelled or with_vector < config.min_fraction * labelled:
            return None
        # the search beam finds ef_search candidates whatever k is: ask for all of them
        want = max(depth * config.oversample, config.ef_search) * (2 if self.centres is not None else 1)
        if want * 2 >= with_vector:
            return None
        k = min(labelled, math.ceil(want * labelled / with_vector))
        labels = ann.index.search(query, k)
        rows = np.unique(ann.label_rows[labels[labels < labelled]])
        rows = rows[rows >= 0]
        candidates = self._positions_of(rows)
        at = np.minimum(np.searchsorted(allowed, candidates), len(allowed) - 1)
        keep = (candidates >= 0) & (allowed[at] == candidates)
        if np.count_nonzero(keep) < depth:
            return None
        return candidates[keep], rows[keep]

    def _positions_of(self, rows: np.ndarray) -> np.ndarray:
        """The snapshot position of each matrix row (-1: none); an active position wins over an
        inactive one holding the same chunk."""
        if not self._position_of_row:
            table = np.full(self.count, -1, dtype=np.int64)
            has = np.flatnonzero(self.rows >= 0)
            table[self.rows[has]] = has
            active = self.snapshot.active_positions()
            active = active[self.rows[active] >= 0]
            table[self.rows[active]] = active
            self._position_of_row.append(table)
        found: np.ndarray = self._position_of_row[0][rows]
        return found

    def scores_at(self, query: np.ndarray, positions: Sequence[int]) -> dict[int, float]:
        """Cosine of each given position that has a vector (rounded like `rank`)."""
        pos = np.asarray(positions, dtype=np.int64)
        rows = self.rows[pos] if len(pos) else pos
        has = rows >= 0
        if not has.any():
            return {}
        scores = self._scores(query, pos[has], rows[has])
        return dict(zip(pos[has].tolist(), scores.tolist(), strict=True))


def lazy_batch(todo: list[tuple[int, Any]], limit: int | None, where: object) -> list[tuple[int, Any]]:
    """Which of `todo` ((position, chunk) without a vector) to embed now: none when more than
    `limit` of the chunks a caller may see are missing (the logged fallback: BM25 for them until
    `ragspine embed`), else all of those plus RESTRICTED ones within what is left of `limit`.
    RESTRICTED chunks never count against the limit, so they never decide what visible chunks
    get (None: no limit)."""
    shown = [item for item in todo if not is_restricted(item[1].sensitivity)]
    hidden = [item for item in todo if is_restricted(item[1].sensitivity)]
    if limit is None:
        return shown + hidden
    if len(shown) > limit:
        log.warning(
            "%d chunks have no vector in %s: they are ranked by BM25 only until embedded; "
            "run `ragspine embed` to embed them", len(shown), where,
        )  # fmt: skip
        return []
    return shown + hidden[: limit - len(shown)]


@dataclass(frozen=True)
class AnnCandidates:
    """What a `DenseView` asks for ANN candidates: the index and the matrix row of each of its
    labels as they were when the view was made (later labels are ignored)."""

    index: AnnIndex
    label_rows: np.ndarray
    config: AnnConfig


class StoreDenseView:
    """One snapshot's positions ranked by a vector store (pgvector, Qdrant, …): the store returns
    its best ids; the ones the query may not see (another filter, inactive, not in this snapshot)
    are dropped, asking for more until `depth` remain or the store has no more. When at most
    EXACT_IDS_MAX positions are allowed (a selective filter), the filter goes down to the store
    as those chunks' ids instead: their vectors are fetched by id (kept in the channel's
    `fetched` cache, VECTOR_CACHE_MAX of them) and scored exactly. Order and
    scores are the store's exact re-ranked cosine, ties by chunk_id, as `DenseView` ranks
    without language centring."""

    def __init__(
        self,
        backend: EmbeddingBackend,
        snapshot: IndexSnapshot,
        source: ChunkSource,
        store: ChunkVectorStore,
        position_of: dict[str, int],
        fetched: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.backend, self.snapshot, self.source, self.store = backend, snapshot, source, store
        self.position_of = position_of
        self.fetched = {} if fetched is None else fetched

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        return unit_query_vectors(self.backend, texts, lambda vector, _text: vector)

    def rank(self, query: np.ndarray, allowed: np.ndarray, depth: int) -> tuple[list[int], dict[int, float]]:
        if depth <= 0 or not len(allowed):
            return [], {}
        if len(allowed) <= EXACT_IDS_MAX:
            # A selective filter (or a small store): fetch exactly the allowed chunks' vectors by
            # id and score them here, the store's own exact rank, instead of over-fetching.
            scores = self.scores_at(query, allowed.tolist())
            if not scores:
                return [], {}
            rows = np.fromiter(scores, dtype=np.int64, count=len(scores))
            values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
            best = top_k_rows(rows, values, depth, _ChunkIds(self.snapshot))
            return [p for p, _ in best], dict(best)
        mask = np.zeros(int(allowed.max()) + 1, dtype=bool)
        mask[allowed] = True
        k = max(2 * depth, depth + 32)
        total: int | None = None  # the store's size: asked only when one round is not enough
        while True:
            kept: list[tuple[int, float]] = []
            for chunk_id, score in self.store.query(query, k=k):
                p = self.position_of.get(chunk_id)
                if p is not None and p < len(mask) and mask[p]:
                    kept.append((p, score))
            if len(kept) >= depth:
                break
            if total is None:
                total = self.store.count()
            if k >= total:
                break
            k = min(total, 4 * k)
        kept = kept[:depth]
        return [p for p, _ in kept], dict(kept)

    def scores_at(self, query: np.ndarray, positions: Sequence[int]) -> dict[int, float]:
        positions = [int(p) for p in positions]
        if not positions:
            return {}
        ids = [self.snapshot.chunk_id(p) for p in positions]
        fetched = self.fetched
        wanted = [i for i in ids if i not in fetched]
        if wanted:
            rows, present = self.store.get(wanted)
            if len(fetched) + len(wanted) > VECTOR_CACHE_MAX:
                fetched.clear()
            fetched.update((i, row) for i, row, ok in zip(wanted, rows, present.tolist(), strict=True) if ok)
        chosen = [(p, v) for p, i in zip(positions, ids, strict=True) if (v := fetched.get(i)) is not None]
        if not chosen:
            return {}
        matrix = np.stack([v for _, v in chosen])
        scores = np.round((matrix @ query).astype(np.float64), SCORE_DECIMALS)
        return dict(zip([p for p, _ in chosen], scores.tolist(), strict=True))

    def languages_crossed(self, text: str, positions: Sequence[int]) -> list[bool]:
        """As `DenseView.languages_crossed`; the chunks are read in one call."""
        if not positions:
            return []
        chunks = self.source.chunks_at(list(positions))
        return crossed(language_code(text), [language_code(c.text) for c in chunks])


class _ChunkIds:
    """A snapshot's chunk ids indexed by position (what `top_k_rows` breaks ties by)."""

    def __init__(self, snapshot: IndexSnapshot) -> None:
        self.snapshot = snapshot

    def __getitem__(self, position: int) -> str:
        return self.snapshot.chunk_id(int(position))


def unit_query_vectors(backend: EmbeddingBackend, texts: Sequence[str], centre: Any) -> list[np.ndarray]:
    """Unit query vectors of `texts` from one backend call (each distinct text once), each
    passed through `centre(vector, text)`."""
    distinct = list(dict.fromkeys(texts))
    if not distinct:
        return []
    matrix = unit_rows(as_matrix(embed_queries(backend, distinct), what="query vectors"))
    if len(matrix) != len(distinct):
        raise ValueError(f"the embedding backend returned {len(matrix)} vectors for {len(distinct)} queries")
    _RECENT.last = (backend, dict(zip(distinct, matrix, strict=True)))
    vectors = {text: centre(row, text) for text, row in zip(distinct, matrix, strict=True)}
    return [vectors[text] for text in texts]


_RECENT = threading.local()  # this thread's latest `unit_query_vectors` call: (backend, text → unit vector)


def recent_query_vector(backend: EmbeddingBackend, text: str) -> np.ndarray | None:
    """The unit (uncentred) vector this thread's latest `unit_query_vectors` call computed for
    `text` with this very `backend`, or None: a second consumer of one query (RAPTOR ranking its
    nodes after the dense channel ranked the chunks) need not embed it again."""
    last = getattr(_RECENT, "last", None)
    if last is None or last[0] is not backend:
        return None
    vector = last[1].get(text)
    return None if vector is None else np.array(vector)


def crossed(query: int, chunks: Sequence[int]) -> list[bool]:
    """Per chunk language code: whether it and the query's are both known and differ."""
    unknown = LANGUAGES.index("")
    return [query != unknown and chunk != unknown and query != chunk for chunk in chunks]


def language_code(text: str) -> int:
    """The index in LANGUAGES of `detect_language(text)`."""
    return LANGUAGES.index(detect_language(text))


_CODE_OF = {name: code for code, name in enumerate(LANGUAGES)}


def language_codes(languages: Sequence[Any]) -> np.ndarray:
    """int8 index in LANGUAGES of each stored language; -1 where absent or not one of them."""
    return np.fromiter((_CODE_OF.get(x, -1) if isinstance(x, str) else -1 for x in languages), np.int8, len(languages))
