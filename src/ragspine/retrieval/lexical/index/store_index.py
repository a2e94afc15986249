"""StoreIndex: the persistent, incremental BM25 index of one ChunkStore.

Invariants: `snapshot()` returns an index of exactly the store's active chunks at the store's
current data_version (it never serves another version); files beside the store
(`<db>.bm25/<analyzer>/`) are used only when their manifest names this store (its uid), this
analyzer, a version the store has reached and the store's epoch at that version (a restored or
diverged copy of the store has another, however alike its counts), and every file checks out;
otherwise, or when the store's change log cannot bridge the gap, the index is rebuilt from the
store. Every rebuild and catch-up reads the store through one `read_snapshot` (one read
transaction), so it never mixes two versions of a document. Catching up applies, per changed
document, "tombstone the indexed rows that are no longer active, add the active rows not yet
indexed", reading only those documents' active rows and indexed positions, so its cost follows
the change, not the documents' version history. After every load (and every catch-up of a store
up to VERIFY_MAX_ROWS active rows) the active row count and row-id sum are compared with the
store's.

A snapshot loaded from the files reads some of them through memory maps; before a snapshot is
handed out, those files are checked (one fstat each) to be the size and mtime they were when
mapped. One that changed (truncated or rewritten in place under this process) is never read
again: the snapshot is dropped, one WARNING logged, and the index rebuilt from the store.

With an `index_text` function (Contextual Retrieval), each row is tokenized as
`index_text(chunk)` instead of its text, and the function's identity is part of the index's
identity: files made with another index text (or none) are never loaded, the index is rebuilt.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.retrieval.chunking.protocol import IndexTextFn
from ragspine.retrieval.lexical.index.identity import analyzer_identity, identity_key, index_text_identity
from ragspine.retrieval.lexical.index.segment import SegmentBuilder
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.lexical.index.storage import IndexFileError, IndexFolder
from ragspine.retrieval.store.protocol import ChangeLog, IndexRow

_LOG = logging.getLogger(__name__)

PAGE_ROWS = 20_000  # rows per read when rebuilding
REBUILD_SHARE = 0.5  # rebuild instead of catching up when more rows than this share changed
COMPACT_SHARE = 0.25  # compact when tombstones, or positions after the base, pass this share
MAX_SEGMENTS = 8  # merge the segments after the base when there are more
VERIFY_MAX_ROWS = 200_000  # after a catch-up, compare with the whole store up to this size


class StoreIndex:
    """Keeps an `IndexSnapshot` in step with a ChunkStore, persisted beside it.

    `stats` counts what happened ("loads", "builds", "catch_ups", "compactions", "merges",
    "writes", "tokenized"); `last_action` names the last way the index was brought up to date.
    """

    def __init__(
        self,
        store: ChangeLog,
        analyzer: Callable[[str], list[str]],
        *,
        persist: bool = True,
        index_text: IndexTextFn | None = None,
    ) -> None:
        self.store = store
        self.analyzer = analyzer
        self.index_text = index_text
        self.stats: Counter[str] = Counter()
        self.last_action = ""
        self._snap: IndexSnapshot | None = None
        self._deletes: list[dict[str, Any]] = []  # tombstone records on disk for _snap
        self._pending: list[tuple[np.ndarray, dict[str, int]]] = []  # not yet written
        self._lock = threading.RLock()
        self._identity: dict[str, Any] | None = analyzer_identity(analyzer)
        if index_text is not None and self._identity is not None:
            text_identity = index_text_identity(index_text)
            self._identity = None if text_identity is None else {**self._identity, "index_text": text_identity}
        self.folder: IndexFolder | None = None
        self._uid = ""
        self._epoch = ""  # the store's epoch at _snap.version
        self._distrust_files = False  # rebuild without loading: files changed under us
        if persist and store.db_path != ":memory:" and self._identity is not None:
            self.folder = IndexFolder(
                Path(store.db_path + ".bm25") / identity_key(self._identity)
            )

    @property
    def loaded(self) -> bool:
        return self._snap is not None

    def snapshot(self) -> IndexSnapshot:
        """The index of the store's active chunks at its current data_version."""
        cached = self._snap
        if cached is not None and cached.changed_files():
            self._forget_changed(cached)
            cached = None
        if cached is not None and cached.version == self.store.data_version():
            return cached
        with self._lock:
            for _ in range(5):  # a writer may move the store while we catch up
                snap = self._sync()
                if snap.version == self.store.data_version():
                    break
            return snap

    def _forget_changed(self, snap: IndexSnapshot) -> None:
        """Drop `snap`, whose mapped files changed: its maps are never read again, and the
        next sync rebuilds from the store (the files beside it are not trusted this time)."""
        with self._lock:
            if self._snap is not snap:
                return  # another thread already dropped it
            changed = snap.changed_files()
            _LOG.warning("lexical index files at %s changed under this process (%s); no longer "
                         "reading them, rebuilding from the store", self.folder, ", ".join(changed))  # fmt: skip
            self.stats["changed_files"] += 1
            self._snap, self._deletes, self._pending = None, [], []
            self._distrust_files = True

    # -- synchronisation --------------------------------------------------------------------
    def _sync(self) -> IndexSnapshot:
        target = self.store.data_version()
        if self._snap is not None and self._snap.version == target:
            return self._snap
        with self._files(), self.store.read_snapshot() as view:  # one consistent state
            target = view.data_version()
            snap = self._snap
            if snap is not None and view.epoch_at(snap.version) != self._epoch:
                _LOG.warning("the store at %s is not the history this index followed (restored "
                             "or replaced); rebuilding the lexical index", self.store.db_path)  # fmt: skip
                self.stats["diverged"] += 1
                snap = self._snap = None
            snap = self._adopt_disk(view, target)
            changed = snap is None or snap.version < target
            if snap is not None and snap.version < target:
                snap = self._catch_up(view, snap)
            if snap is None:
                snap = self._rebuild(view)
            maintained = self._maintain(snap)
            epoch = view.epoch_at(maintained.version)
            if changed or maintained is not snap:  # a snapshot just loaded is already on disk
                maintained = self._persist(maintained, epoch)
        self._snap, self._epoch = maintained, epoch
        return maintained

    def _adopt_disk(self, view: ChangeLog, target: int) -> IndexSnapshot | None:
        """The in-memory snapshot, or the one on disk when that is newer and usable."""
        snap = self._snap
        if self._distrust_files:
            self._distrust_files = False
            return snap
        manifest = self._manifest()
        if manifest is None or int(manifest["data_version"]) > target:
            return snap
        if snap is not None and int(manifest["data_version"]) <= snap.version:
            return snap
        if manifest.get("epoch", "") != view.epoch_at(int(manifest["data_version"])):
            _LOG.warning("lexical index at %s was built from another history of this store (a "
                         "restored or diverged copy); rebuilding", self.folder)  # fmt: skip
            self.stats["diverged"] += 1
            return snap
        try:
            loaded = self._load(manifest)
        except IndexFileError as exc:
            _LOG.warning("lexical index at %s is damaged (%s); rebuilding", self.folder, exc)
            self.stats["damaged"] += 1
            return snap
        if not self._matches_store(view, loaded):
            _LOG.warning("lexical index at %s disagrees with the store; rebuilding", self.folder)
            self.stats["inconsistent"] += 1
            return snap
        self._deletes, self._pending = list(manifest["deletes"]), []
        self.stats["loads"] += 1
        self.last_action = "loaded"
        return loaded

    def _load(self, manifest: dict[str, Any]) -> IndexSnapshot:
        assert self.folder is not None
        known = {s.name: s for s in (self._snap.segments if self._snap else ()) if s.name}
        segments = [known.get(e["name"]) or self.folder.read_segment(e) for e in manifest["segments"]]
        n_positions = sum(s.n_docs for s in segments)
        active = np.ones(n_positions, dtype=bool)
        dead: Counter[str] = Counter()
        for entry in manifest["deletes"]:
            positions, removed = self.folder.read_deletes(entry)
            if len(positions) and (positions.min() < 0 or positions.max() >= n_positions):
                raise IndexFileError(f"tombstone record {entry['name']} is out of range")
            active[positions] = False
            dead.update(removed)
        snap = IndexSnapshot(
            segments, active=active, dead_df=dead, version=int(manifest["data_version"])
        )
        if snap.n_positions != manifest.get("n_positions") or snap.n_active != manifest.get(
            "n_active"
        ):
            raise IndexFileError("segments and tombstones do not add up to the manifest's counts")
        return snap

    def _rebuild(self, view: ChangeLog) -> IndexSnapshot:
        version = view.data_version()
        builder = SegmentBuilder(first=0)
        n = 0
        for rows in self._active_pages(view):
            self._add_rows(builder, rows)
            n += len(rows)
        snap = IndexSnapshot([builder.finish()], version=version)
        self._deletes, self._pending = [], []
        self.stats["builds"] += 1
        self.stats["tokenized"] += n
        self.last_action = "built"
        return snap

    def _catch_up(self, view: ChangeLog, snap: IndexSnapshot) -> IndexSnapshot | None:
        changes = view.changes_since(snap.version)
        if changes is None:
            return None
        version, doc_ids = changes
        # Only the changed documents' active rows and indexed positions: older versions of
        # them (however many) cost nothing.
        wanted = {row_id for row_id, _ in view.row_states(doc_ids, active_only=True)}
        positions = snap.active_positions_of_docs(doc_ids)
        indexed = snap.row_ids()[positions]
        removed = positions[~np.isin(indexed, np.fromiter(wanted, dtype=np.int64, count=len(wanted)))]
        added = sorted(wanted - set(indexed.tolist()))
        changed = len(added) + len(removed)
        if changed > 1000 and changed > REBUILD_SHARE * max(snap.n_active, 1):
            return None
        gone = snap.row_ids()[removed].tolist()
        content = {row[0]: row for row in view.index_rows(added + gone)}
        if any(r not in content for r in added + gone):
            return None  # rows vanished from the store: only a rebuild can be trusted
        segment = None
        if added:
            builder = SegmentBuilder(first=snap.n_positions)
            self._add_rows(builder, [content[r] for r in added])
            segment = builder.finish()
        dead: Counter[str] = Counter()
        for row_id, text in zip(gone, self._texts([content[r] for r in gone]), strict=True):
            dead.update(set(self.analyzer(text)))
        new = snap.with_changes(segment, removed.astype(np.int64), dead, version=version)
        if len(removed):
            self._pending.append((removed.astype(np.int64), dict(dead)))
        self.stats["catch_ups"] += 1
        self.stats["tokenized"] += len(added) + len(gone)
        self.last_action = "caught_up"
        # The changed documents match the store by construction; the whole-store check (a scan
        # of the active rows) runs on every load, and after a catch-up on smaller stores.
        if new.n_active <= VERIFY_MAX_ROWS and not self._matches_store(view, new):
            self.stats["inconsistent"] += 1
            return None
        return new

    def _maintain(self, snap: IndexSnapshot) -> IndexSnapshot:
        if not snap.segments:
            return snap
        base = snap.segments[0].n_docs
        tail = snap.n_positions - base
        if snap.n_tombstones > COMPACT_SHARE * snap.n_positions or tail > COMPACT_SHARE * base:
            self.stats["compactions"] += 1
            self._deletes, self._pending = [], []
            return snap.compacted()
        if len(snap.segments) > MAX_SEGMENTS:
            self.stats["merges"] += 1
            return snap.with_merged_tail()
        return snap

    # -- files ------------------------------------------------------------------------------
    def _files(self) -> Any:
        if self.folder is None:
            return nullcontext()
        return self._locked_or_memory()

    @contextmanager
    def _locked_or_memory(self) -> Iterator[None]:
        assert self.folder is not None
        try:
            lock = self.folder.locked(exclusive=True)
            lock.__enter__()
        except OSError as exc:
            self._give_up_files(exc)
            yield
            return
        try:
            yield
        finally:
            lock.__exit__(None, None, None)

    def _manifest(self) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        manifest = self.folder.read_manifest()
        if manifest is None:
            return None
        if manifest.get("store_uid") != self._store_uid() or manifest.get("analyzer") != self._identity:
            return None
        return manifest

    def _persist(self, snap: IndexSnapshot, epoch: str) -> IndexSnapshot:
        if self.folder is None or not self._store_uid():
            self._pending = []
            return snap
        try:
            return self._write(snap, epoch)
        except OSError as exc:
            self._give_up_files(exc)
            return snap

    def _write(self, snap: IndexSnapshot, epoch: str) -> IndexSnapshot:
        assert self.folder is not None
        manifest = self._manifest() or {"segments": [], "deletes": []}
        on_disk = {e["name"]: e for e in manifest["segments"]}
        entries, named = [], []
        for seg in snap.segments:
            entry = on_disk.get(seg.name) if seg.name else None
            if entry is None:
                entry = self.folder.write_segment(seg)
                seg = dataclasses.replace(seg, name=entry["name"])
            entries.append(entry)
            named.append(seg)
        disk_deletes = {d["name"] for d in manifest["deletes"]}
        if all(d["name"] in disk_deletes for d in self._deletes):
            deletes = list(self._deletes)
            deletes += [self.folder.write_deletes(p, d) for p, d in self._pending]
        else:  # our records are gone: one record of every tombstone
            tomb = np.flatnonzero(~snap.active) if snap.active is not None else np.zeros(0, np.int64)
            deletes = [self.folder.write_deletes(tomb, snap.dead_df)] if len(tomb) else []
        row_sum = int(snap.row_ids()[snap.active_positions()].sum())
        self.folder.write_manifest({
            "store_uid": self._store_uid(), "analyzer": self._identity,
            "data_version": snap.version, "epoch": epoch, "segments": entries, "deletes": deletes,
            "n_positions": snap.n_positions, "n_active": snap.n_active, "active_row_sum": row_sum,
        })  # fmt: skip
        self.folder.remove_unreferenced({"segments": entries, "deletes": deletes})
        self._deletes, self._pending = deletes, []
        self.stats["writes"] += 1
        snap.rename_segments(named)
        return snap

    def _give_up_files(self, exc: OSError) -> None:
        _LOG.warning("cannot write the lexical index beside the store (%s); keeping it in memory", exc)
        self.folder = None
        self._pending = []

    # -- store reads ------------------------------------------------------------------------
    def _store_uid(self) -> str:
        if not self._uid:
            self._uid = self.store.store_uid()
        return self._uid

    def _matches_store(self, view: ChangeLog, snap: IndexSnapshot) -> bool:
        """False only when the store (`view`: one read snapshot), at the snapshot's version,
        has other active rows."""
        if view.data_version() != snap.version:
            return True  # cannot compare now; the next catch-up will
        count, total = view.active_fingerprint()
        mine = int(snap.row_ids()[snap.active_positions()].sum())
        return count == snap.n_active and total == mine

    def _active_pages(self, view: ChangeLog) -> Iterator[list[IndexRow]]:
        """Every active row of the store (as `view` sees it), in row-id order, PAGE_ROWS at a time."""
        last = 0
        while rows := view.active_index_rows(after_row_id=last, limit=PAGE_ROWS):
            yield rows
            last = rows[-1][0]

    def _add_rows(self, builder: SegmentBuilder, rows: list[IndexRow]) -> None:
        builder.add(
            [self.analyzer(text) for text in self._texts(rows)],
            chunk_ids=[row[1] for row in rows],
            row_ids=[row[0] for row in rows],
            fields=[row[3:] for row in rows],  # the INDEXED_FIELDS
        )

    def _texts(self, rows: list[IndexRow]) -> list[str]:
        """What is tokenized for each row: its text, or its index text (read from the store)."""
        if self.index_text is None:
            return [row[2] for row in rows]
        stored = self.store.chunks_by_row_ids([row[0] for row in rows])
        index_text = self.index_text
        return [row[2] if chunk is None else index_text(chunk) for row, chunk in zip(rows, stored, strict=True)]


def build_beside(
    store: ChangeLog, analyzer: Callable[[str], list[str]], *, index_text: IndexTextFn | None = None
) -> str:
    """Bring the index files beside `store` up to date with it now (`ragspine ingest`'s index
    step: the first search then loads them instead of building them), under the same lock and
    atomic manifest as any search's catch-up. Returns how ("built", "caught_up", "loaded"), or
    "" when this store keeps no index files (in memory, a server store without a local cache,
    an analyzer or index text without an identity)."""
    index = StoreIndex(store, analyzer, index_text=index_text)
    if index.folder is None:
        return ""
    index.snapshot()
    return index.last_action
