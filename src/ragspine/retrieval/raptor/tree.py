"""The RAPTOR tree of one chunk store, kept beside it: `<db>.raptor.sqlite` beside a SQLite
store, tables `raptor_meta` / `raptor_cluster` / `raptor_leaf` in the same schema for a PostgreSQL store, in
memory for ":memory:".

Invariants: every cluster of every level is one row (its member ids: chunk ids at level 1, node
ids above); a cluster of two or more members is a node with a summary, a unit vector (the mean of
its members'), the union of its leaves' lineage (chunk id, doc id, title, locator, sensitivity)
and the chunk ids its summary drew on. Each leaf's language code (of its text, which its chunk id
fixes) is kept, so an update detects only the new leaves' languages. `data_version` records the store version the tree was
built from; a tree whose version differs from the store's is stale. `save` writes a build's
changes in one transaction, writers serialised (a reader sees all of it or none of it); the
same SQL runs on both databases (`?` placeholders, rewritten for psycopg).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.retrieval.store.factory import is_postgres_url
from ragspine.retrieval.store.postgres import connect, qmark_to_format

RAPTOR_SUFFIX = ".raptor.sqlite"
_FORMAT = "ragspine-raptor-v1"
_PG_LOCK = 0x52415054  # pg_advisory_xact_lock key: one tree writer at a time ("RAPT")
_TABLES = (
    "CREATE TABLE IF NOT EXISTS raptor_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS raptor_cluster (cluster_id TEXT PRIMARY KEY, level INTEGER NOT NULL,"
    " members TEXT NOT NULL, summary TEXT, vec {blob}, leaves TEXT, sources TEXT, summarizer TEXT)",
    # the language code of each leaf's text (a chunk id fixes its text): detected once, not per update
    "CREATE TABLE IF NOT EXISTS raptor_leaf (chunk_id TEXT PRIMARY KEY, language INTEGER NOT NULL)",
)


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


class _Database:
    """The tree's connection: SQLite (a file or memory) or PostgreSQL (psycopg 3), one dialect."""

    def __init__(self, location: str | None) -> None:
        self.location = location
        self.postgres = location is not None and is_postgres_url(location)
        if location is not None and self.postgres:
            self.conn: Any = connect(location)
            with self.write():
                for sql in _TABLES:
                    self.conn.execute(sql.format(blob="BYTEA"))
        else:
            self.conn = sqlite3.connect(location or ":memory:", check_same_thread=False, isolation_level=None)
            if location:
                self.conn.execute("PRAGMA journal_mode=WAL")
            for sql in _TABLES:
                self.conn.execute(sql.format(blob="BLOB"))

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self.conn.execute(self._sql(sql), tuple(params)).fetchall())

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.conn.execute(self._sql(sql), tuple(params))

    def run_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        if self.postgres:
            with self.conn.cursor() as cur:
                cur.executemany(self._sql(sql), rows)
        else:
            self.conn.executemany(sql, rows)

    @contextmanager
    def write(self) -> Iterator[None]:
        """One transaction, other writers of the tree waiting until it ends."""
        if self.postgres:
            with self.conn.transaction():
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK,))
                yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads that all see one committed state."""
        if self.postgres:
            with self.conn.transaction():
                self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    def size_bytes(self) -> int:
        if self.postgres:
            (size,) = self.rows("SELECT pg_total_relation_size('raptor_cluster') + pg_total_relation_size('raptor_meta')"
                                " + pg_total_relation_size('raptor_leaf')")[0]
            return int(size)
        if self.location is None:
            return 0
        path = Path(self.location)
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))

    def close(self) -> None:
        self.conn.close()

    def _sql(self, sql: str) -> str:
        return qmark_to_format(sql) if self.postgres else sql


class RaptorTree:
    """Clusters and nodes of every level, loaded whole, saved by change.

    `location`: a SQLite file, a `postgresql://` URL (the tables go in the schema the URL's
    connections use, beside the chunk store's), or None (memory).

    >>> tree = RaptorTree(None)
    >>> tree.data_version, tree.nodes
    (None, {})
    """

    def __init__(self, location: str | Path | None) -> None:
        self.path = None if location is None else str(location)
        self._lock = threading.Lock()
        self._db = _Database(self.path)
        fmt = self._meta().get("format")
        if fmt is not None and fmt != _FORMAT:
            fix = "drop its tables raptor_cluster, raptor_meta and raptor_leaf" if self._db.postgres else "delete the file"
            raise ValueError(f"{self.where} holds a RAPTOR tree of format {fmt!r}, not {_FORMAT!r}: "
                             f"{fix} and run `ragspine raptor build`")  # fmt: skip
        self.clusters: dict[int, dict[str, list[str]]] = {}
        self.nodes: dict[str, Node] = {}
        self.meta: dict[str, Any] = {}
        self.languages: dict[str, int] = {}  # leaf chunk id -> language code of its text
        self.load()

    @classmethod
    def beside(cls, db_path: str) -> RaptorTree:
        """The tree of the store at `db_path`: a file beside a SQLite store, tables beside a
        PostgreSQL store's (`postgresql://…`), in memory for ":memory:"."""
        if is_postgres_url(db_path):
            return cls(db_path)
        return cls(db_path + RAPTOR_SUFFIX if db_path != ":memory:" and "://" not in db_path else None)

    @classmethod
    def for_store(cls, store: Any) -> RaptorTree:
        """The tree of `store`: beside its file, or in its PostgreSQL schema (`store.url`)."""
        url = getattr(store, "url", None)
        return cls.beside(url if isinstance(url, str) and is_postgres_url(url) else str(store.db_path))

    @property
    def where(self) -> str:
        """Where the tree is kept, for status lines (a URL without its credentials)."""
        if self._db.postgres:
            info = self._db.conn.info
            return f"postgresql://{info.host}:{info.port}/{info.dbname} (tables raptor_cluster, raptor_meta, raptor_leaf)"
        return self.path or ":memory:"

    @property
    def data_version(self) -> int | None:
        """The store version the tree was built from (None: never built)."""
        value = self.meta.get("data_version")
        return None if value is None else int(value)

    def load(self) -> None:
        """Read the whole tree."""
        with self._lock, self._db.snapshot():
            rows = self._db.rows(
                "SELECT cluster_id, level, members, summary, vec, leaves, sources, summarizer FROM raptor_cluster"
            )
            meta = {k: json.loads(v) for k, v in self._meta().items() if k != "format"}
            languages = {cid: int(code) for cid, code in self._db.rows("SELECT chunk_id, language FROM raptor_leaf")}
        clusters: dict[int, dict[str, list[str]]] = {}
        nodes: dict[str, Node] = {}
        for cid, level, members, summary, vec, leaves, sources, summarizer in rows:
            clusters.setdefault(level, {})[cid] = json.loads(members)
            if summary is not None:
                nodes[cid] = Node(
                    cid, level, tuple(json.loads(members)), summary, np.frombuffer(bytes(vec), dtype="<f4").copy(),
                    tuple(Leaf(*leaf) for leaf in json.loads(leaves)), tuple(json.loads(sources)), summarizer,
                )  # fmt: skip
        # swapped whole: a reader sees one tree
        self.clusters, self.nodes, self.meta, self.languages = clusters, nodes, meta, languages

    def stored_version(self) -> int | None:
        """The data_version of the tree as stored now (another process may have built it since
        `load`); one row read."""
        with self._lock:
            rows = self._db.rows("SELECT value FROM raptor_meta WHERE key = ?", ("data_version",))
        return None if not rows else int(json.loads(rows[0][0]))

    def save(
        self, changed: set[str], meta: dict[str, Any], *, reset: bool = False, languages: dict[str, int | None] | None = None
    ) -> None:
        """Write the rows of the `changed` cluster ids (a gone one is deleted), `meta` and the
        `languages` given (None: the leaf is gone), in one transaction; `reset` first deletes
        every row."""
        languages = languages or {}
        level_of = {cid: level for level, clusters in self.clusters.items() for cid in clusters}
        rows: list[tuple[Any, ...]] = []
        for cid in sorted(changed):
            if cid not in level_of:
                continue
            level = level_of[cid]
            node = self.nodes.get(cid)
            rows.append(
                (cid, level, json.dumps(self.clusters[level][cid]),
                 *((node.summary, node.vector.astype("<f4").tobytes(),
                    json.dumps([list(vars(leaf).values()) for leaf in node.leaves], ensure_ascii=False),
                    json.dumps(list(node.sources)), node.summarizer) if node else (None,) * 5))
            )  # fmt: skip
        metas = [(key, value if key == "format" else json.dumps(value)) for key, value in {"format": _FORMAT, **meta}.items()]
        with self._lock, self._db.write():
            if reset:
                self._db.run("DELETE FROM raptor_cluster")
                self._db.run("DELETE FROM raptor_leaf")
            else:
                self._db.run_many("DELETE FROM raptor_leaf WHERE chunk_id = ?", [(c,) for c in sorted(languages)])
                self._db.run_many("DELETE FROM raptor_cluster WHERE cluster_id = ?", [(cid,) for cid in sorted(changed)])
            self._db.run_many("INSERT INTO raptor_cluster VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            self._db.run_many("INSERT INTO raptor_leaf VALUES (?, ?)",
                              [(c, code) for c, code in sorted(languages.items()) if code is not None])  # fmt: skip
            self._db.run_many(
                "INSERT INTO raptor_meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", metas
            )
        self.meta = {**self.meta, **meta}
        kept = {} if reset else self.languages
        self.languages = {**{c: v for c, v in kept.items() if c not in languages},
                          **{c: v for c, v in languages.items() if v is not None}}  # fmt: skip

    def size_bytes(self) -> int:
        """Bytes the tree takes: its file, or its PostgreSQL tables (0 in memory)."""
        with self._lock:
            return self._db.size_bytes()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _meta(self) -> dict[str, str]:
        return dict(self._db.rows("SELECT key, value FROM raptor_meta"))
