"""The chunk-store seam: its Protocols and the records they return.

A store is three narrow Protocols, Haystack-mixin style, and `ChunkStoreProtocol` is their
combination (plus closing):
- `ChunkReader`: what retrieval, ingest, eval and the graph read (chunks by field, counts,
  document versions, store notes, one read-only SQL statement);
- `ChunkWriter`: what ingest writes (the schema, a document's new version, store notes);
- `ChangeLog`: what an index that follows the store needs (the change log, write epochs, one
  read snapshot, and rows by row id): the lexical index (`retrieval/lexical/index/`) reads the
  store only through it.
Both `ChunkReader` and `ChangeLog` carry `StoreVersion` (where the store's caches live and the
version its data is at). Code that needs only a part annotates with that part.

Invariants: code outside `retrieval/store/` reads and writes chunks only through these methods
(no SQL against the chunk table or the change log anywhere else); every implementation passes
the conformance suite `ragspine.testing.chunk_store.ChunkStoreSuite`, the combination of one
suite per Protocol (`ChunkReaderSuite`, `ChunkWriterSuite`, `ChangeLogSuite`). The
specification's contract is `init_schema`, `replace_doc_chunks`, `iter_chunks`, `execute_read`
and `close`.

>>> from ragspine.retrieval.store.sqlite import ChunkStore
>>> store = ChunkStore(":memory:")
>>> all(isinstance(store, p) for p in (ChunkReader, ChunkWriter, ChangeLog, ChunkStoreProtocol))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple, Protocol, Self, Unpack, runtime_checkable

from ragspine.retrieval.model import INDEXED_FIELDS, Chunk, FieldFilters


@dataclass(frozen=True)
class StoredChunk(Chunk):
    """A `Chunk` as stored: its ingest metadata and whether it is in the active set."""

    valid_as_of: str = ""
    ingested_at: str = ""
    version: int = 1
    active: bool = True


class ChunkCounts(NamedTuple):
    """How many documents (distinct doc_ids) and chunk rows a store holds."""

    documents: int
    chunks: int


# What the lexical index reads of a row: row_id, chunk_id, text, then the INDEXED_FIELDS in
# order (metadata as canonical JSON text). A plain tuple: the index reads millions of them.
INDEX_ROW_FIELDS: tuple[str, ...] = ("row_id", "chunk_id", "text", *INDEXED_FIELDS)
IndexRow = tuple[Any, ...]


@runtime_checkable
class StoreVersion(Protocol):
    """Where a store's caches live and which committed state its data is at.

    `db_path` is the local file that caches (the lexical index, chunk vectors) persist beside,
    or ":memory:" when there is none (an in-memory or a server store).
    """

    db_path: str

    def data_version(self) -> int:
        """A counter that grows with every committed change to the chunks."""
        ...


@runtime_checkable
class ChunkReader(StoreVersion, Protocol):
    """The reads retrieval, ingest, eval and the graph make: chunks by field, counts, the
    versions of a document, store notes, and one read-only SQL statement."""

    def iter_chunks(
        self, *, doc_id: str | None = None, include_inactive: bool = False, **filters: Unpack[FieldFilters]
    ) -> list[StoredChunk]:
        """Chunks matching every given field (`doc_id` and the `FieldFilters`, AND-ed), active
        only unless asked, in (doc_id, version, seq) order (doc_id in byte order)."""
        ...

    def execute_read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read-only statement (`?` placeholders); a write raises PermissionError."""
        ...

    def read_meta(self, key: str) -> str | None:
        """The value kept under `key` (e.g. the settings its chunks and index were made with);
        None when there is none."""
        ...

    def counts(self, *, include_inactive: bool = False) -> ChunkCounts:
        """Documents and chunk rows, active ones only unless asked (read together)."""
        ...

    def active_doc_ids(self) -> list[str]:
        """The doc_ids that have active chunks, in byte order."""
        ...

    def active_version(self, doc_id: str) -> int | None:
        """The version of `doc_id`'s active chunks; None when it has none (withdrawn or unknown)."""
        ...

    def latest_version(self, doc_id: str) -> int:
        """The highest version ever written for `doc_id`, active or not; 0 when never written."""
        ...


@runtime_checkable
class ChunkWriter(Protocol):
    """The writes ingest makes: the schema, a document's new version, store notes."""

    def init_schema(self) -> None:
        """Create the tables, or migrate an older schema in place. Idempotent."""
        ...

    def replace_doc_chunks(self, doc_id: str, chunks: Sequence[Chunk], valid_as_of: str = "") -> int:
        """Make `chunks` the active version of `doc_id` (version = max + 1) in one transaction;
        return the rows written. An empty list withdraws the document."""
        ...

    def write_meta(self, key: str, value: str) -> None:
        """Keep `value` under `key` (replacing it), in one transaction; the store's own keys
        (data_version, store_uid, changes_from) are refused with ValueError."""
        ...


@runtime_checkable
class ChangeLog(StoreVersion, Protocol):
    """What an index that follows the store reads (the lexical index): which documents changed
    since a version, the store's identity and write epochs, one read snapshot, and rows by row
    id."""

    def changes_since(self, version: int) -> tuple[int, list[str]] | None:
        """(current data_version, distinct doc_ids changed after `version`, in change order),
        read in one snapshot; None when the log does not cover every version after `version`."""
        ...

    def store_uid(self) -> str:
        """The store's random identity, fixed at creation ("" for a schema that predates it)."""
        ...

    def epoch_at(self, version: int) -> str:
        """The random epoch of the write that made `version` ("" when unknown): a restored or
        diverged copy that reached the same version has another."""
        ...

    def read_snapshot(self) -> AbstractContextManager[Self]:
        """A view whose reads all see one committed state (one read transaction) until the
        block ends; only reads may be made through it."""
        ...

    def chunks_by_row_ids(self, row_ids: Sequence[int]) -> list[StoredChunk | None]:
        """The rows with these row ids (active or not), in the given order; None for a row id
        that does not exist."""
        ...

    def active_index_rows(self, *, after_row_id: int, limit: int) -> list[IndexRow]:
        """Up to `limit` active rows with row_id > `after_row_id`, in row-id order
        (`INDEX_ROW_FIELDS`): page through them to build an index."""
        ...

    def index_rows(self, row_ids: Sequence[int]) -> list[IndexRow]:
        """The `INDEX_ROW_FIELDS` of these rows (active or not); missing ids are absent."""
        ...

    def row_states(self, doc_ids: Sequence[str], *, active_only: bool = False) -> list[tuple[int, bool]]:
        """(row_id, active) of every row, any version, of these documents (only the active
        rows when `active_only`)."""
        ...

    def active_fingerprint(self) -> tuple[int, int]:
        """(number of active rows, sum of their row ids): a cheap check that an index built
        from the store still covers exactly its active rows."""
        ...


@runtime_checkable
class ChunkStoreProtocol(ChunkReader, ChunkWriter, ChangeLog, Protocol):
    """A versioned chunk store (SQLite `ChunkStore`, `PostgresChunkStore`, or a third party's):
    the reads, the writes and the change log, closed when done (also as a context manager)."""

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
