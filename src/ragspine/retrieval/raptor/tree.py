"""The RAPTOR tree of one chunk store, kept beside it (`<db>.raptor.sqlite`, in memory otherwise).

Invariants: every cluster of every level is one row (its member ids: chunk ids at level 1, node
ids above); a cluster of two or more members is a node with a summary, a unit vector (the mean of
its members'), the union of its leaves' lineage (chunk id, doc id, title, locator, sensitivity)
and the chunk ids its summary drew on. `data_version` records the store version the tree was
built from; a tree whose version differs from the store's is stale. `save` writes a build's
changes in one transaction (a reader sees all of it or none of it).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RAPTOR_SUFFIX = ".raptor.sqlite"
_FORMAT = "ragspine-raptor-v1"


@dataclass(frozen=True)
class Leaf:
    """The lineage of one chunk under a node."""

    chunk_id: str
    doc_id: str
    title: str
    source_locator: str
    sensitivity: str


@dataclass(frozen=True)
class Node:
    """A cluster's synthesis node: never a citable fact."""

    node_id: str
    level: int
    members: tuple[str, ...]
    summary: str
    vector: np.ndarray
    leaves: tuple[Leaf, ...]
    sources: tuple[str, ...]
    summarizer: str


class RaptorTree:
    """Clusters and nodes of every level, loaded whole, saved by change.

    >>> tree = RaptorTree(None)
    >>> tree.data_version, tree.nodes
    (None, {})
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else str(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path or ":memory:", check_same_thread=False, isolation_level=None)
        if self.path:
            self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(
            "CREATE TABLE IF NOT EXISTS raptor_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS raptor_cluster (cluster_id TEXT PRIMARY KEY, level INTEGER NOT NULL,"
            " members TEXT NOT NULL, summary TEXT, vec BLOB, leaves TEXT, sources TEXT, summarizer TEXT);"
        )
        fmt = self._meta().get("format")
        if fmt is not None and fmt != _FORMAT:
            raise ValueError(f"{self.path} holds a RAPTOR tree of format {fmt!r}, not {_FORMAT!r}: delete it and run `ragspine raptor build`")
        self.clusters: dict[int, dict[str, list[str]]] = {}
        self.nodes: dict[str, Node] = {}
        self.meta: dict[str, Any] = {}
        self.load()

    @classmethod
    def beside(cls, db_path: str) -> RaptorTree:
        """The tree of the store at `db_path`: a file beside a SQLite store, in memory for ":memory:"
        or a server store (PostgreSQL: rebuilt per process, not persisted)."""
        local = db_path != ":memory:" and "://" not in db_path
        return cls(db_path + RAPTOR_SUFFIX if local else None)

    @property
    def data_version(self) -> int | None:
        """The store version the tree was built from (None: never built)."""
        value = self.meta.get("data_version")
        return None if value is None else int(value)

    def load(self) -> None:
        """Read the whole tree."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT cluster_id, level, members, summary, vec, leaves, sources, summarizer FROM raptor_cluster"
            ).fetchall()
            self.meta = {k: json.loads(v) for k, v in self._meta().items() if k != "format"}
        self.clusters, self.nodes = {}, {}
        for cid, level, members, summary, vec, leaves, sources, summarizer in rows:
            self.clusters.setdefault(level, {})[cid] = json.loads(members)
            if summary is not None:
                self.nodes[cid] = Node(
                    cid, level, tuple(json.loads(members)), summary, np.frombuffer(vec, dtype="<f4").copy(),
                    tuple(Leaf(*leaf) for leaf in json.loads(leaves)), tuple(json.loads(sources)), summarizer,
                )  # fmt: skip

    def save(self, changed: set[str], meta: dict[str, Any], *, reset: bool = False) -> None:
        """Write the rows of the `changed` cluster ids (a gone one is deleted) and `meta`, in
        one transaction; `reset` first deletes every row."""
        level_of = {cid: level for level, clusters in self.clusters.items() for cid in clusters}
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if reset:
                    self._conn.execute("DELETE FROM raptor_cluster")
                for cid in sorted(changed):
                    self._conn.execute("DELETE FROM raptor_cluster WHERE cluster_id = ?", (cid,))
                    if cid not in level_of:
                        continue
                    level = level_of[cid]
                    node = self.nodes.get(cid)
                    self._conn.execute(
                        "INSERT INTO raptor_cluster VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (cid, level, json.dumps(self.clusters[level][cid]),
                         *((node.summary, node.vector.astype("<f4").tobytes(),
                            json.dumps([list(vars(leaf).values()) for leaf in node.leaves], ensure_ascii=False),
                            json.dumps(list(node.sources)), node.summarizer) if node else (None,) * 5)),
                    )  # fmt: skip
                for key, value in {"format": _FORMAT, **meta}.items():
                    self._conn.execute(
                        "INSERT OR REPLACE INTO raptor_meta VALUES (?, ?)",
                        (key, value if key == "format" else json.dumps(value)),
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        self.meta = {**self.meta, **meta}

    def size_bytes(self) -> int:
        """Bytes the tree's file takes (0 in memory)."""
        if self.path is None:
            return 0
        return sum(p.stat().st_size for p in Path(self.path).parent.glob(Path(self.path).name + "*"))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _meta(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT key, value FROM raptor_meta").fetchall())
