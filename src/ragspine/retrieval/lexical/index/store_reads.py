"""The reads the lexical index makes from a ChunkStore, all through its read-only API.

Invariant: only `execute_read` (SELECTs under the store's read-only authorizer) is used, so the
index can never change the store; large reads are paged by row id or batched by key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ragspine.retrieval.store.sqlite import TABLE, ChunkStore
from ragspine.retrieval.model import INDEXED_FIELDS

# row_id, chunk_id, text, then the INDEXED_FIELDS in order (metadata is stored as canonical JSON).
ROW_COLUMNS = "row_id, chunk_id, text, " + ", ".join(INDEXED_FIELDS)
Row = tuple[Any, ...]  # the ROW_COLUMNS of one stored row
_BATCH = 500  # keys per IN (...) list


def store_uid(store: ChunkStore) -> str:
    """The store's random identity ("" for a store whose schema predates it)."""
    rows = store.execute_read("SELECT value FROM ragspine_meta WHERE key = 'store_uid'")
    return str(rows[0][0]) if rows else ""


def active_fingerprint(store: ChunkStore) -> tuple[int, int]:
    """(number of active rows, sum of their row ids)."""
    ((count, total),) = store.execute_read(
        f"SELECT COUNT(*), COALESCE(SUM(row_id), 0) FROM {TABLE} WHERE active = 1"
    )
    return int(count), int(total)


def active_pages(store: ChunkStore, page_rows: int) -> Iterator[list[Row]]:
    """Every active row, in row-id order, `page_rows` at a time."""
    last = 0
    while True:
        rows = store.execute_read(
            f"SELECT {ROW_COLUMNS} FROM {TABLE} WHERE active = 1 AND row_id > ? "
            "ORDER BY row_id LIMIT ?",
            (last, page_rows),
        )
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def row_states(store: ChunkStore, doc_ids: list[str]) -> list[tuple[int, bool]]:
    """(row id, active) of every row, any version, of the given documents."""
    out: list[tuple[int, bool]] = []
    for start in range(0, len(doc_ids), _BATCH):
        batch = doc_ids[start : start + _BATCH]
        marks = ", ".join("?" for _ in batch)
        rows = store.execute_read(
            f"SELECT row_id, active FROM {TABLE} WHERE doc_id IN ({marks})", batch
        )
        out.extend((int(r), bool(a)) for r, a in rows)
    return out


def rows_by_id(store: ChunkStore, row_ids: list[int]) -> list[Row]:
    """The ROW_COLUMNS of the given rows (active or not); missing ids are simply absent."""
    out: list[Row] = []
    for start in range(0, len(row_ids), _BATCH):
        batch = row_ids[start : start + _BATCH]
        marks = ", ".join("?" for _ in batch)
        out.extend(
            store.execute_read(f"SELECT {ROW_COLUMNS} FROM {TABLE} WHERE row_id IN ({marks})", batch)
        )
    return out
