"""`ragspine config show`: every setting's effective value and source, what the channels resolve
to, and how many of the store's active chunks have a vector in each vectors file beside it.

Invariant: nothing here writes. The store and its vectors files are only queried (SELECT; SQLite
opens and removes its own -wal/-shm as for any reader, which a `mode=ro` connection would leave
behind), no embedding backend is built, and no file is created: a store or vectors file that does
not exist is not opened, so a BM25-only store stays BM25-only (`vector_lines` says how to add vectors).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import click

from ragspine.retrieval.sensitivity import RESTRICTED_SENSITIVITY
from ragspine.retrieval.store.sql_base import TABLE
from ragspine.retrieval.vector.dense.ranking import DenseCoverage
from ragspine.retrieval.vector.dense.embed_marker import embedding_in_progress, vector_note
from ragspine.settings.config import ResolvedSettings, describe
from ragspine.store_files import classify, files_beside, vectors_model_id

NO_STORE = "no store yet"


def _reader(path: Path) -> sqlite3.Connection:
    """A connection that only ever runs SELECTs, to a file that exists (checked by the caller)."""
    return sqlite3.connect(str(path))


def vector_coverage(db: str, *, remote: bool = False) -> list[dict[str, Any]] | str:
    """Per vectors file beside the SQLite store `db`: its path, model, how many active chunks
    have a vector in it and how many could (`DenseCoverage.seen_by`, as a search with RESTRICTED
    access counts them: with a `remote` backend, RESTRICTED chunks are never embedded, so not
    counted), and whether an embed run is writing it (`embed_marker`); NO_STORE when `db` is not
    a store file (":memory:", PostgreSQL, or not made yet). A store or vectors file that cannot
    be read is one entry with its `problem` (`ragspine check` says more). Reads only."""
    store = Path(db)
    if db == ":memory:" or "://" in db or not store.is_file():
        return NO_STORE
    try:
        with closing(_reader(store)) as conn:
            active = int(conn.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE active = 1").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        return [{"path": str(store), "problem": str(exc)}]
    found: list[dict[str, Any]] = []
    for path in (p for p in files_beside(store) if classify(store, p) == "vectors"):
        try:
            model = vectors_model_id(path)
            with_vector, never = _counts(store, path, remote)
        except sqlite3.DatabaseError as exc:  # `ragspine check` says more
            found.append({"path": str(path), "problem": str(exc)})
            continue
        with_vector, could = DenseCoverage(active, with_vector, never).seen_by(True)
        found.append({"path": str(path), "model": model, "with_vector": with_vector, "active": could,
                      "in_progress": embedding_in_progress(str(path))})  # fmt: skip
    return found or [{"path": None, "with_vector": 0, "active": active, "in_progress": False}]


def _counts(store: Path, path: Path, remote: bool) -> tuple[int, int]:
    """(active chunks with a vector in `path`, active RESTRICTED chunks without one that a
    `remote` backend never embeds: 0 for a local one)."""
    with closing(_reader(path)) as conn:
        conn.execute("ATTACH DATABASE ? AS store", (str(store),))
        active = f"SELECT chunk_id FROM store.{TABLE} WHERE active = 1"
        with_vector = conn.execute(f"SELECT COUNT(*) FROM chunk_vector WHERE chunk_id IN ({active})").fetchone()[0]
        never = 0
        if remote:
            never = conn.execute(
                f"SELECT COUNT(*) FROM store.{TABLE} WHERE active = 1 AND sensitivity = ? "
                "AND chunk_id NOT IN (SELECT chunk_id FROM chunk_vector)", (RESTRICTED_SENSITIVITY,),
            ).fetchone()[0]  # fmt: skip
    return int(with_vector), int(never)


def is_remote_backend(name: str) -> bool:
    """Whether the embedding backend RAGSPINE_EMBEDDING names sends texts off this machine
    (its class's `is_remote`), without building it."""
    from ragspine.retrieval.vector.embeddings.factory import EMBEDDING_BACKENDS

    entry = EMBEDDING_BACKENDS.get(name)
    return bool(entry is not None and getattr(entry.options_of, "is_remote", False))


def vector_lines(coverage: list[dict[str, Any]] | str) -> list[str]:
    """`vector_coverage` as the lines `config show` prints under "vectors:"."""
    if isinstance(coverage, str):
        return [coverage]
    lines = []
    for entry in coverage:
        if "problem" in entry:
            lines.append(f"{entry['path']}: unreadable ({entry['problem']}); run `ragspine check`")
            continue
        note = vector_note(entry["with_vector"], entry["active"], in_progress=entry["in_progress"])
        if entry["path"] is None:
            lines.append(note)
        elif entry["with_vector"] >= entry["active"] and not entry["in_progress"]:
            lines.append(f"{entry['path']}: {entry['with_vector']} of {entry['active']} chunks have vectors ({entry['model']})")
        else:
            lines.append(f"{entry['path']}: {note} ({entry['model']})")
    return lines


def print_config(resolved: ResolvedSettings, as_json: bool) -> None:
    """Print the settings (name, value, source), the effective channels and the vectors."""
    from ragspine.assembly import channels as describe_channels

    rows = describe(resolved)
    channels = describe_channels(resolved.settings)
    coverage = vector_coverage(str(resolved.settings.db), remote=is_remote_backend(str(resolved.settings.embedding)))
    if as_json:
        settings = {name: {"value": value, "source": source} for name, value, source in rows}
        click.echo(json.dumps({"settings": settings, "effective": channels, "vectors": coverage}, ensure_ascii=False, indent=2))
        return
    width = max(len(name) for name, _, _ in rows)
    value_width = min(48, max(len(value) for _, value, _ in rows))
    for name, value, source in rows:
        click.echo(f"{name:<{width}}  {value:<{value_width}}  {source}")
    click.echo("\neffective:")
    for key, value in channels.items():
        click.echo(f"  {key:<15} {value}")
    click.echo("\nvectors:")
    for line in vector_lines(coverage):
        click.echo(f"  {line}")
