"""`AnnSync`: the HNSW index over a local dense channel's matrix, kept up to date as vectors arrive.

Invariants:
- Below `AnnConfig.min_vectors` live vectors (RAGSPINE_ANN_MIN_VECTORS) there is no index and
  `sync` returns None: the exact scan answers. At and above it, the index is loaded from its file
  beside the vectors file (`ann.ann_path`), else built, then brought up to date: rows added since
  are added, rewritten rows (`forget`) re-added, and it is rebuilt when dead labels pass
  DEAD_SHARE. Only the rows of positions a caller may see are live, so RESTRICTED vectors never
  enter the index.
- Without the `ann` extra the index is off for the life of the channel (logged once).
- A saved index is never required: a folder that cannot be written to is logged, and the next
  process rebuilds it.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ragspine.extras import MissingExtraError
from ragspine.retrieval.vector.dense.ann import DEAD_SHARE, AnnConfig, AnnIndex
from ragspine.retrieval.vector.dense.matrix import VectorMatrix
from ragspine.retrieval.vector.dense.ranking import CHANNEL_LOGGER
from ragspine.retrieval.vector.dense.view import AnnCandidates

log = logging.getLogger(CHANNEL_LOGGER)


class AnnSync:
    """The ANN index of the `VectorMatrix` `rows` (see the module). `path`: where it is saved
    (None: in memory only); `model_id`: the model of the vectors it indexes."""

    def __init__(self, rows: VectorMatrix, config: AnnConfig, path: str | None, model_id: str) -> None:
        self.config, self.path, self.model_id = config, path, model_id
        self.stats = {"builds": 0, "loads": 0, "added": 0, "saves": 0}
        self._rows = rows
        self._index: AnnIndex | None = None
        self._label_rows = np.zeros(0, dtype=np.int64)  # matrix row of each ANN label (-1: none)
        self._covered = np.zeros(0, dtype=bool)  # per matrix row: its current vector is in the index
        self._off: str | None = None  # why the index cannot be used (logged once)

    @property
    def index(self) -> AnnIndex | None:
        """The index (None until the threshold is reached, or without the `ann` extra)."""
        return self._index

    def forget(self, rows: list[int]) -> None:
        """These rows' vectors were rewritten: the index holds the old ones until caught up."""
        for row in rows:
            if row < len(self._covered):
                self._covered[row] = False

    def sync(self, active_rows: np.ndarray) -> AnnCandidates | None:
        """The ANN index over the matrix, brought up to date (loaded from its file, else built;
        rows added since, added; rebuilt when dead labels pass DEAD_SHARE), or None below the
        threshold or without the `ann` extra (logged once: the exact scan answers).
        `active_rows`: the rows of the positions a caller may see, so RESTRICTED vectors neither
        count towards the threshold nor enter the index (nor take its candidate slots)."""
        if self._off is not None:
            return None
        live = np.zeros(self._rows.count, dtype=bool)  # rows of active, visible positions
        live[active_rows[active_rows >= 0]] = True
        if not self.config.applies(int(np.count_nonzero(live))):
            return None
        try:
            if self._index is None:
                self._open(live)
            else:
                self._catch_up(live)
            assert self._index is not None
            if len(self._index) - np.count_nonzero(live) > DEAD_SHARE * len(self._index):
                self._build(np.flatnonzero(live))
        except MissingExtraError as exc:
            self._off = str(exc)
            log.warning("%d vectors are ranked by exact scan: %s", self._rows.count, exc)
            return None
        return AnnCandidates(self._index, self._label_rows, self.config)

    def _open(self, live: np.ndarray) -> None:
        """Load the saved index (labels mapped to this process's rows) and add what it lacks,
        else build one over the live rows."""
        dim = int(self._rows.matrix.shape[1])
        loaded = AnnIndex.load(self.path, model_id=self.model_id, dim=dim, config=self.config) if self.path else None
        if loaded is None:
            self._build(np.flatnonzero(live))
            return
        self.stats["loads"] += 1
        self._index = loaded
        labels = len(loaded.ids)
        if labels <= self._rows.count and loaded.ids == self._rows.ids[:labels]:  # built in row order: label = row
            self._label_rows = np.arange(labels, dtype=np.int64)
        else:
            self._label_rows = np.fromiter((self._rows.row_of.get(i, -1) for i in loaded.ids), dtype=np.int64, count=labels)
        self._covered = np.zeros(self._rows.count, dtype=bool)
        self._covered[self._label_rows[self._label_rows >= 0]] = True
        self._catch_up(live)

    def _build(self, rows: np.ndarray) -> None:
        """A new index over these matrix rows (saved beside the vectors file)."""
        started = time.perf_counter()
        ids = self._rows.ids_of(rows)
        self._index = AnnIndex.build(ids, self._rows.matrix[rows], model_id=self.model_id, config=self.config)
        self._label_rows = np.asarray(rows, dtype=np.int64).copy()
        self._covered = np.zeros(self._rows.count, dtype=bool)
        self._covered[rows] = True
        self.stats["builds"] += 1
        log.info("built the ANN index over %d vectors in %.1fs", len(rows), time.perf_counter() - started)
        self._save()

    def _catch_up(self, live: np.ndarray) -> None:
        """Add the live rows whose current vector the index lacks: new vectors, rewritten ones
        (`forget` clears their mark), and ones left out of a rebuild while inactive."""
        assert self._index is not None
        if len(self._covered) < self._rows.count:
            grown = np.zeros(self._rows.count, dtype=bool)
            grown[: len(self._covered)] = self._covered
            self._covered = grown
        todo = np.flatnonzero(live & ~self._covered)
        if not len(todo):
            return
        self._index.add(self._rows.ids_of(todo), self._rows.matrix[todo])
        self._label_rows = np.concatenate([self._label_rows, todo])  # a new array: views keep theirs
        self._covered[todo] = True
        self.stats["added"] += len(todo)
        if len(self._index) - self._index.saved >= max(1_000, len(self._index) // 20):
            self._save()

    def _save(self) -> None:
        path = self.path
        if path is None or self._index is None:
            return
        try:
            self._index.save(path)
            self.stats["saves"] += 1
        except OSError as exc:  # a read-only folder: the index lives in memory for this process
            log.warning("cannot save the ANN index to %s (%s); it is rebuilt by the next process", path, exc)

