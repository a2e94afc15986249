"""The files beside a SQLite chunk store, by kind: what `ragspine check` verifies and
docs/operations.md lists.

Invariant: `FILE_KINDS` is the one list of what ragspine writes next to `<db>`; every name a
store's folder holds that starts with the store's file name is classified by the first pattern
that matches the rest of the name (`classify`), and a name no pattern matches is "unknown"
(never ragspine's, never touched). A test holds this list, the files an ingest + embed + search
make, and the table in docs/operations.md equal.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileKind:
    """One kind of file beside a store: `pattern` matches what follows the store's file name."""

    name: str
    pattern: str  # a regular expression, matched in full against the name's rest
    shown: str  # the name as docs/operations.md writes it (`<db>` is the store's path)
    derived: bool  # rebuilt from a source of truth when damaged (else the source itself)


_TAG = r"(\.ctx-[\w.-]+?)?"  # an index text's tag (`index_text_tag`): `.ctx-header-v1`
FILE_KINDS: tuple[FileKind, ...] = (
    FileKind("chunk store", r"", "<db>", derived=False),
    FileKind("sqlite companion", r"(-wal|-shm|-journal)", "<db>-wal, <db>-shm", derived=False),
    FileKind("vectors", _TAG + r"\.vectors\.sqlite", "<db>[.ctx-TAG].vectors.sqlite", derived=False),
    FileKind("vectors companion", _TAG + r"\.vectors\.sqlite(-wal|-shm|-journal)", "<vectors>-wal, <vectors>-shm", derived=False),
    FileKind("matrix cache", _TAG + r"\.vectors\.sqlite\.matrix", "<vectors>.matrix", derived=True),
    FileKind("alignment cache", _TAG + r"\.vectors\.sqlite\.align", "<vectors>.align", derived=True),
    FileKind("ann index", _TAG + r"\.vectors\.sqlite\.hnsw", "<vectors>.hnsw", derived=True),
    FileKind("embed marker", _TAG + r"\.vectors\.sqlite\.embedding", "<vectors>.embedding", derived=True),
    FileKind("lexical index", r"\.bm25", "<db>.bm25/", derived=True),
    FileKind("relation graph", r"\.graph\.json", "<db>.graph.json", derived=False),
    FileKind("raptor tree", r"\.raptor\.sqlite(-wal|-shm|-journal)?", "<db>.raptor.sqlite", derived=False),
    FileKind("page index", r"\.visual", "<db>.visual/", derived=False),
    FileKind("moved aside", r".*\.damaged-\d{8}T\d{6}Z(-wal|-shm)?", "<file>.damaged-<UTC time>", derived=False),
    FileKind("temporary", r".*(\.tmp[\w.-]*|\.tmp)", "<file>.tmp-…, .<file>.….tmp", derived=False),
)
UNKNOWN = "unknown"


def classify(db: str | Path, path: str | Path) -> str:
    """The kind (`FileKind.name`) of `path`, a file or folder beside the store `db`; "unknown"
    for a name that does not start with the store's file name or that no kind matches.

    >>> classify("data/chunks.db", "data/chunks.db.ctx-header-v1.vectors.sqlite.matrix")
    'matrix cache'
    >>> classify("data/chunks.db", "data/chunks.db.bm25"), classify("data/chunks.db", "data/notes.txt")
    ('lexical index', 'unknown')
    """
    base, name = Path(db).name, Path(path).name
    if name.startswith("." + base) and name.endswith(".tmp"):  # `atomic.write_atomic`'s, left by a crash
        return "temporary"
    if not name.startswith(base):
        return UNKNOWN
    rest = name[len(base) :]
    for kind in FILE_KINDS:
        if re.fullmatch(kind.pattern, rest):
            return kind.name
    return UNKNOWN


def files_beside(db: str | Path) -> list[Path]:
    """The store file and every file or folder beside it whose name starts with the store's file
    name (or is a temporary file `.<name>…tmp`), sorted (an absent store: only what exists)."""
    store = Path(db)
    folder = store.parent if str(store.parent) else Path(".")
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.startswith((store.name, "." + store.name)))


def remove_sqlite_files(path: str) -> list[str]:
    """Delete a SQLite file and its -wal/-shm companions; the names of those that existed."""
    removed = []
    for name in (path, path + "-wal", path + "-shm"):
        try:
            Path(name).unlink()
        except FileNotFoundError:
            continue
        removed.append(name)
    return removed


def vectors_model_id(path: Path) -> str | None:
    """The model id a vectors file names (None: it names none), read only (`mode=ro`: nothing
    is written or created); sqlite3.DatabaseError when the file is not a readable vectors file."""
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM chunk_vector_meta WHERE key = 'model_id'").fetchone()
    finally:
        conn.close()
    return str(row[0]) if row else None
