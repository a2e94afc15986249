"""`PgVectorStore`: the `VectorStore` seam on PostgreSQL + pgvector.

Invariants (those of `store.VectorStore`, checked by tests/vector/vector_store_suite.py):
- One table per store: `id TEXT PRIMARY KEY, embedding vector(dim), metadata JSONB`, unit-length
  vectors (zero vectors stay zero), an HNSW index with `vector_cosine_ops` and an index on
  `metadata->>'doc_id'`. The table's model id and dimension are recorded in
  `ragspine_vector_tables`; opening it with another model or dimension is a VectorModelMismatch.
- `where` means exactly what `filters.matches` means. The filter is pushed down as a SQL
  condition that every matching row satisfies (a superset: field present, and for string
  equality the exact string); `filters.matches` then runs on the fetched metadata, so
  number/period comparisons and `str()` edge cases are never approximated by SQL.
- Rows are read in PostgreSQL's binary format (vectors arrive as float32 bytes: parsing the
  text form cost about 1 ms per vector in Python).
- Scores are computed here exactly as `InProcessVectorStore` computes them (float32 dot product of
  unit rows, rounded to SCORE_DECIMALS), ties by ascending id. Up to EXACT_MAX_ROWS rows
  the ranking is an exact scan (every row passing the pushed-down filter is scored); above
  it, candidates come from the HNSW index (`hnsw.ef_search` raised to the candidate count,
  at most 1000) and are re-scored here, so the order is exact among the candidates but the
  candidate set is approximate, as with any ANN index.

Needs `pip install 'ragspine[postgres]'` (psycopg 3 and pgvector) and a server where
`CREATE EXTENSION vector` is allowed (or already done).

>>> store = PgVectorStore("postgresql://u@127.0.0.1/db", "vectors", 384, "e5-small")  # doctest: +SKIP
>>> store.upsert(["a:0"], [[0.1] * 384], [{"doc_id": "a"}])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragspine.closing import Closeable
from ragspine.extras import require
from ragspine.retrieval.filters import And, Filter, Or, Predicate, compares_as_text, matches
from ragspine.retrieval.vector.errors import VectorModelMismatch
from ragspine.retrieval.vector.stores.inprocess import SCORE_DECIMALS, StoreChecks, VectorMetadata, Vectors, check_query, rows_found, top_k
from ragspine.retrieval.vector.arrays import unit_rows

EXACT_MAX_ROWS = 20_000  # up to this many rows a query scores every (pre-filtered) row
REGISTRY = "ragspine_vector_tables"
_TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,50}$")
_MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search


def _drivers() -> tuple[Any, Any]:
    psycopg = require("psycopg", extra="postgres", purpose="PgVectorStore")
    return psycopg, require("pgvector.psycopg", extra="postgres", purpose="PgVectorStore").register_vector


class PgVectorStore(StoreChecks, Closeable):
    """Vectors in one PostgreSQL table (pgvector), cosine ranking; see the module invariants."""

    def __init__(self, url: str, table: str, dim: int, model_id: str | None = None) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        if not _TABLE_NAME.match(table):
            raise ValueError(f"table must be a lower-case SQL name (letters, digits, _), got {table!r}")
        psycopg, register_vector = _drivers()
        self.table, self.dim, self.model_id = table, dim, model_id
        self._lock = threading.RLock()
        self._conn = psycopg.connect(url, autocommit=True)
        try:
            self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(self._conn)
            self._init_table()
        except BaseException:
            self._conn.close()
            raise

    def _init_table(self) -> None:
        run = self._conn.execute
        with self._conn.transaction():
            run("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"ragspine-vectors:{self.table}",))
            run(f"CREATE TABLE IF NOT EXISTS {REGISTRY} "
                "(table_name TEXT PRIMARY KEY, model_id TEXT, dim INTEGER NOT NULL)")  # fmt: skip
            row = run(
                f"SELECT model_id, dim FROM {REGISTRY} WHERE table_name = %s", (self.table,)
            ).fetchone()
            if row is not None and (row[1] != self.dim or row[0] != self.model_id):
                raise VectorModelMismatch(
                    f"table {self.table!r} holds vectors of model {row[0]!r}, dimension {row[1]}; "
                    f"this store is for model {self.model_id!r}, dimension {self.dim}: re-embed into "
                    "another table (or drop this one)"
                )
            if row is None:
                run(f"INSERT INTO {REGISTRY} (table_name, model_id, dim) VALUES (%s, %s, %s)",
                    (self.table, self.model_id, self.dim))  # fmt: skip
            t = self.table
            run(
                f"CREATE TABLE IF NOT EXISTS {t} (id TEXT PRIMARY KEY, embedding vector({self.dim}) "
                "NOT NULL, metadata JSONB NOT NULL DEFAULT '{}')"
            )
            run(f"CREATE INDEX IF NOT EXISTS {t}_hnsw ON {t} USING hnsw (embedding vector_cosine_ops)")
            run(f"CREATE INDEX IF NOT EXISTS {t}_doc ON {t} ((metadata->>'doc_id'))")

    # -- writes -------------------------------------------------------------------------------
    def upsert(self, ids: Sequence[str], vectors: Vectors, metadata: VectorMetadata = None) -> None:
        """Insert or replace one vector (and its metadata, default {}) per id, in one transaction."""
        ids, matrix, metas = self._check_upsert(ids, vectors, metadata)
        if not ids:
            return
        rows = [
            (id_, vec, json.dumps(meta, ensure_ascii=False))
            for id_, vec, meta in zip(ids, unit_rows(matrix), metas, strict=True)
        ]
        sql = (
            f"INSERT INTO {self.table} (id, embedding, metadata) VALUES (%s, %s, %s::jsonb) "
            "ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding, metadata = EXCLUDED.metadata"
        )
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            cur.executemany(sql, rows)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete these ids (unknown ids are ignored); returns how many were deleted."""
        if isinstance(ids, str):
            raise ValueError("ids must be a list of strings, not one string")
        wanted = sorted({str(i) for i in ids})
        if not wanted:
            return 0
        with self._lock:
            cur = self._conn.execute(f"DELETE FROM {self.table} WHERE id = ANY(%s)", (wanted,))
        return int(cur.rowcount)

    def delete_doc(self, doc_id: str) -> int:
        """Delete every vector whose metadata "doc_id" (a string) equals `doc_id`; returns how many."""
        with self._lock:
            cur = self._conn.execute(
                f"DELETE FROM {self.table} WHERE metadata->>'doc_id' = %s "
                "AND jsonb_typeof(metadata->'doc_id') = 'string'",
                (doc_id,),
            )
        return int(cur.rowcount)

    # -- reads --------------------------------------------------------------------------------
    def count(self) -> int:
        with self._lock:
            (n,) = self._conn.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()
        return int(n)

    def ids(self) -> list[str]:
        """Every stored id, sorted."""
        with self._lock:
            return [row[0] for row in self._conn.execute(f"SELECT id FROM {self.table} ORDER BY id")]

    def missing(self, ids: Sequence[str]) -> list[str]:
        """The ids in `ids` without a vector, in the given order."""
        wanted = sorted(set(ids))
        with self._lock:
            present = {
                row[0] for row in self._conn.execute(f"SELECT id FROM {self.table} WHERE id = ANY(%s)", (wanted,))
            }
        return [i for i in ids if i not in present]

    def get(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(rows, present): the stored unit vectors of `ids` (zero rows where absent) and the mask."""
        with self._lock:
            found = {
                row[0]: _values(row[1])
                for row in self._conn.execute(
                    f"SELECT id, embedding FROM {self.table} WHERE id = ANY(%s)", (sorted(set(ids)),), binary=True
                )
            }
        return rows_found(ids, found, self.dim)

    def query(
        self, vector: Sequence[float] | np.ndarray, *, k: int, where: Filter | Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The `k` best (id, cosine) among vectors whose metadata matches `where`."""
        typed = check_query(k, where)
        query = self._query_vector(vector)
        condition, params = to_sql(typed)
        with self._lock:
            (small,) = self._conn.execute(
                f"SELECT COUNT(*) <= %s FROM (SELECT 1 FROM {self.table} LIMIT %s) AS head",
                (EXACT_MAX_ROWS, EXACT_MAX_ROWS + 1),
            ).fetchone()
            if small:
                rows = self._conn.execute(
                    f"SELECT id, embedding, metadata FROM {self.table} WHERE {condition}", params, binary=True
                ).fetchall()
            else:
                rows = self._ann_candidates(query, k, condition, params)
        if typed is not None:
            rows = [row for row in rows if matches(typed, row[2])]
        if not rows:
            return []
        matrix = np.asarray([_values(row[1]) for row in rows], dtype=np.float32)
        scores = np.round((matrix @ query).astype(np.float64), SCORE_DECIMALS)
        return top_k(np.arange(len(rows)), scores, k, [row[0] for row in rows])

    def _ann_candidates(self, query: np.ndarray, k: int, condition: str, params: list[Any]) -> list[Any]:
        """Nearest rows by the HNSW index (approximate), enough of them to re-rank exactly."""
        limit = min(max(4 * k, 100), _MAX_EF_SEARCH)
        with self._conn.transaction():
            self._conn.execute(f"SET LOCAL hnsw.ef_search = {limit}")
            rows: list[Any] = self._conn.execute(
                f"SELECT id, embedding, metadata FROM {self.table} WHERE {condition} "
                "ORDER BY embedding <=> %s LIMIT %s",
                [*params, query, limit],
                binary=True,
            ).fetchall()
        return rows

    # -- lifecycle ----------------------------------------------------------------------------
    def drop(self) -> None:
        """Drop the table and its registry entry (the store is empty and unusable afterwards)."""
        with self._lock, self._conn.transaction():
            self._conn.execute(f"DROP TABLE IF EXISTS {self.table}")
            self._conn.execute(f"DELETE FROM {REGISTRY} WHERE table_name = %s", (self.table,))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"PgVectorStore(table={self.table!r}, dim={self.dim}, model_id={self.model_id!r})"


def _values(embedding: Any) -> Any:
    """A loaded pgvector value as numbers (pgvector-python gives a `Vector` or a numpy array)."""
    return embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding


def to_sql(spec: Filter | None) -> tuple[str, list[Any]]:
    """A SQL condition over `metadata` that every record matching `spec` satisfies (a superset:
    `filters.matches` decides afterwards) and its parameters."""
    if spec is None:
        return "TRUE", []
    if isinstance(spec, (And, Or)):
        if not spec.items:
            return ("TRUE" if isinstance(spec, And) else "FALSE"), []
        parts = [to_sql(item) for item in spec.items]
        joiner = " AND " if isinstance(spec, And) else " OR "
        return "(" + joiner.join(sql for sql, _ in parts) + ")", [p for _, ps in parts for p in ps]
    return _predicate_sql(spec)


def _predicate_sql(predicate: Predicate) -> tuple[str, list[Any]]:
    present = "(metadata->>%s) IS NOT NULL"  # missing or JSON null never matches
    if predicate.op in ("eq", "in"):
        values = [predicate.value] if predicate.op == "eq" else list(predicate.value)
        if all(compares_as_text(v) for v in values):
            # Only an exact string match can match a string; other JSON types fall to `matches`.
            return (
                "(jsonb_typeof(metadata->%s) NOT IN ('string', 'null') OR metadata->>%s = ANY(%s))",
                [predicate.field, predicate.field, values],
            )
    return present, [predicate.field]
