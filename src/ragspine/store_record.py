"""A store carries its own build settings: what it was built with is recorded in it, and opening
it adopts that record for every setting the user did not give.

    from ragspine.assembly import load_settings

    settings = load_settings()   # a store ingested with RAGSPINE_CHUNKER=laws opens with laws

The record is two keys of the chunk store's meta table (`read_meta` / `write_meta`, SQLite and
PostgreSQL alike): `index_settings` (analyzer, chunker, chunk budget and overlap, the index text:
`ragspine.retrieval.lexical.index.identity`, checked by `check_index_settings`) and
`build_settings` (the embedding backend and model; for vectors the store keeps, where: the vector
store kind, its URL and collection). `read_record` gives both as RAGSPINE_* variables.

Invariants:
- Credentials are never written: a URL is recorded `without_credentials` (no user info, no
  credential-like query parameter); a value that is unset or the default is recorded as "".
- Adoption (`adoptable`) replaces defaults only, and only where the record changes something
  (a store built with the defaults reports the defaults): a value the user gave (flag,
  environment, config file) is never replaced. Dependent values follow their head: a recorded
  model only with the recorded backend, a recorded URL or collection only with the recorded kind.
- A value the user gave that conflicts with the record is refused where the store is used, with a
  `ModelMismatch` naming the variable, the recorded value, the given one and the way out: the
  index settings by `check_index_settings` (today's message), the vector store by
  `check_vector_store`; other embedding models are refused by the vectors themselves
  (`VectorModelMismatch`, which says how to re-embed).
- A store without a record behaves as before; `record_build` writes the record when the store is
  new, when it is ingested into, and after `ragspine embed`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragspine.errors import ModelMismatch
from ragspine.retrieval.lexical.analyzers import make_analyzer
from ragspine.retrieval.lexical.index.identity import IndexSettings, recorded_index_settings
from ragspine.retrieval.store.factory import open_chunk_store, store_kind
from ragspine.secret import redact_url, without_credentials
from ragspine.settings.config import SETTINGS, ResolvedSettings, Settings

__all__ = [
    "RECORD_KEY",
    "adoptable",
    "check_vector_store",
    "index_settings_for",
    "peek_record",
    "read_record",
    "record_build",
    "record_ingest",
    "record_of",
    "vector_store_of",
]

_LOG = logging.getLogger(__name__)

RECORD_KEY = "build_settings"  # a key of the chunk store's meta table, beside `index_settings`
EMBEDDING, MODEL = "RAGSPINE_EMBEDDING", "RAGSPINE_EMBEDDING_MODEL"
KIND, URL, COLLECTION = "RAGSPINE_VECTOR_STORE", "RAGSPINE_VECTOR_URL", "RAGSPINE_VECTOR_COLLECTION"
RECORDED = (EMBEDDING, MODEL, KIND, URL, COLLECTION)  # the build_settings record's variables
_BY_ENV = {s.env: s for s in SETTINGS}


# -- what is recorded -------------------------------------------------------------------------
def index_settings_for(settings: Settings) -> IndexSettings:
    """What a store built with `settings` records: the resolved analyzer (RAGSPINE_ANALYZER,
    auto → en-stem), RAGSPINE_CHUNKER, RAGSPINE_CHUNK_CHARS, RAGSPINE_CHUNK_OVERLAP and
    RAGSPINE_CONTEXTUAL."""
    return IndexSettings(
        make_analyzer(settings.analyzer).name, settings.chunk_chars, settings.chunk_overlap, settings.chunker,
        settings.contextual,
    )


def record_of(settings: Settings, backend: str | None) -> dict[str, str]:
    """The `build_settings` record of a store built with `settings` whose dense channel uses the
    embedding backend `backend` (a resolved registry name; None: no dense channel, nothing to
    record). The vector store is recorded when the vectors are the store's: beside a SQLite
    file, or in pgvector / Qdrant (not in each process's memory)."""
    if backend is None:
        return {}
    out = {EMBEDDING: backend, MODEL: settings.embedding_model or ""}
    if settings.vector_store == "in_process" and not _is_file(settings.db):
        return out  # a PostgreSQL or in-memory store: each process keeps its own vectors
    return out | {
        KIND: settings.vector_store,
        URL: without_credentials(settings.vector_url or ""),
        COLLECTION: settings.vector_collection or "",
    }


def read_record(store: Any) -> dict[str, str]:
    """Everything `store` recorded about how it was built, as RAGSPINE_* variables ({}: nothing,
    e.g. a store from before records existed). ModelMismatch when the record is unreadable."""
    index = recorded_index_settings(store)
    return {**(index.as_variables() if index is not None else {}), **_read_build(store)}


def peek_record(db: str, **options: Any) -> dict[str, str]:
    """`read_record` of the store at `db` without creating it: {} for `:memory:`, a SQLite file
    that does not exist yet, or a store that cannot be opened now (opening it later says why)."""
    if db == ":memory:" or (store_kind(db) == "sqlite" and not Path(db.split("://", 1)[-1]).is_file()):
        return {}
    try:
        store = open_chunk_store(db, **options)
    except Exception as exc:  # noqa: BLE001 - each store raises its own driver's error
        _LOG.debug("no record read from %s: %s", redact_url(db), exc)
        return {}
    try:
        return read_record(store)
    finally:
        store.close()


def record_build(store: Any, settings: Settings, backend: str | None, *, replace: bool) -> None:
    """Write `record_of(settings, backend)` into `store`'s record: every key when `replace`
    (after an ingest or an embed run made with these settings), else only the keys it lacks,
    and nothing in a store with chunks but no record (made before records: its next ingest
    records it)."""
    new = record_of(settings, backend)
    if not new:
        return
    old = _read_build(store)
    if not replace and not old and store.counts(include_inactive=True).chunks:
        return
    merged = {**old, **new} if replace else {**new, **old}
    if merged != old:
        store.write_meta(RECORD_KEY, json.dumps(merged, sort_keys=True))
        _LOG.info("%s: recorded build settings %s", redact_url(store.db_path), merged)


def _read_build(store: Any) -> dict[str, str]:
    try:
        raw = store.read_meta(RECORD_KEY)
    except Exception:  # noqa: BLE001 - no meta table yet (schema not created): nothing recorded
        return {}
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError("not an object of strings")
    except ValueError as exc:
        raise ModelMismatch(
            f"{redact_url(store.db_path)}: the store's record of its build settings is unreadable ({exc}); "
            "rebuild the store with `ragspine ingest PATH... --db DB --rebuild`"
        ) from None
    return {k: v for k, v in data.items() if k in RECORDED}


def record_ingest(db: str, settings: Settings, backend: str | None, **options: Any) -> None:
    """After an ingest into the store at `db` with `settings`: record them (`record_build`)."""
    if backend is not None:  # record_of has something to write
        with open_chunk_store(db, **options) as store:
            record_build(store, settings, backend, replace=True)


# -- opening a store: adopt what the user did not give ----------------------------------------
def adoptable(record: Mapping[str, str], resolved: ResolvedSettings) -> dict[str, str]:
    """The recorded values that replace defaults of `resolved` (see the module's invariants)."""
    settings, sources = resolved.settings, resolved.sources
    free = {var for var in record if sources.get(var, "default") == "default" and record[var]}
    out = {var: record[var] for var in free if var in _INDEX_VARS and not _same(settings, var, record[var])}
    return out | _embedding(record, settings, free) | _vectors(record, settings, free)


def _embedding(record: Mapping[str, str], settings: Settings, free: set[str]) -> dict[str, str]:
    """The recorded backend unless another is given; its recorded model only with it."""
    name = record.get(EMBEDDING)
    if not name:
        return {}
    same = _embedding_name(settings) == name
    out = {EMBEDDING: name} if EMBEDDING in free and not same else {}
    if MODEL in free and (out or same) and settings.embedding_model != record[MODEL]:
        out[MODEL] = record[MODEL]
    return out


def _vectors(record: Mapping[str, str], settings: Settings, free: set[str]) -> dict[str, str]:
    """The recorded vector store kind unless another is given; its URL and collection only with it."""
    kind = record.get(KIND)
    if not kind:
        return {}
    out = {KIND: kind} if KIND in free and settings.vector_store != kind else {}
    if out.get(KIND, settings.vector_store) == kind:
        out |= {var: record[var] for var in (URL, COLLECTION) if var in free and not _same(settings, var, record[var])}
    return out


_INDEX_VARS = ("RAGSPINE_ANALYZER", "RAGSPINE_CHUNKER", "RAGSPINE_CHUNK_CHARS", "RAGSPINE_CHUNK_OVERLAP",
               "RAGSPINE_CONTEXTUAL")  # fmt: skip


def _same(settings: Settings, var: str, raw: str) -> bool:
    """Whether the recorded `raw` value of `var` means what `settings` already hold."""
    setting = _BY_ENV[var]
    current = getattr(settings, setting.field_name)
    if var == URL:
        return without_credentials(current or "") == raw
    try:
        recorded = setting.parse(raw)
    except ValueError:
        return False  # adopted, then refused by the settings with the variable's name
    if var == "RAGSPINE_ANALYZER":
        return bool(make_analyzer(recorded).name == make_analyzer(current).name)
    return bool(recorded == current)


def _embedding_name(settings: Settings) -> str | None:
    """The backend RAGSPINE_EMBEDDING names, `auto` resolved (None: none)."""
    if settings.embedding == "auto":
        from ragspine.retrieval.vector.embeddings.factory import resolve_auto

        return resolve_auto()[0]
    return None if settings.embedding == "none" else settings.embedding


# -- using a store: refuse another vector store -----------------------------------------------
def check_vector_store(record: Mapping[str, str], settings: Settings, backend: str | None) -> None:
    """ModelMismatch when the store keeps its vectors elsewhere than `settings` ask (another
    RAGSPINE_VECTOR_STORE, or another RAGSPINE_VECTOR_URL); nothing when the store recorded no
    vector store or no dense channel runs (`backend` None)."""
    kind = record.get(KIND)
    if not kind or backend is None:
        return
    asked: list[tuple[str, str, str]] = [(KIND, kind, settings.vector_store)] if settings.vector_store != kind else []
    here, there = _location(kind, record.get(URL, ""), settings.db), _location(kind, settings.vector_url, settings.db)
    if not asked and here != there:
        asked = [(URL, record.get(URL) or f"(unset: {here})", without_credentials(settings.vector_url or "") or "(unset)")]
    if asked:
        var, recorded, given = asked[0]
        db = redact_url(settings.db)
        raise ModelMismatch(
            f"the store {db} was built with {var}={recorded} (its vectors are kept there, recorded in "
            f"the store); these settings ask for {var}: {recorded} -> {given}. A store's vectors are "
            "kept in one place, or its replicas would rank differently. Unset RAGSPINE_VECTOR_STORE "
            "and RAGSPINE_VECTOR_URL to adopt the recorded values (give a password through the URL "
            "of the same place, or PGPASSWORD), or rebuild the store with the new ones: `ragspine "
            f"ingest PATH... --db {db} --rebuild` (or ingest into a new store)"
        )


def _location(kind: str, url: str | None, db: str) -> str:
    """Where vectors of `kind` are kept, without credentials: pgvector's URL defaults to the store's."""
    return without_credentials(url or (db if kind == "pgvector" else ""))


def _is_file(db: str) -> bool:
    return db != ":memory:" and store_kind(db) == "sqlite"


def vector_store_of(settings: Settings) -> dict[str, str | None]:
    """Where the dense channel keeps its vectors, for /stats: kind, location (credentials masked)
    and collection (None: one per embedding model)."""
    kind = settings.vector_store
    if kind == "in_process":
        location = f"beside {settings.db}" if _is_file(settings.db) else "this process's memory"
    else:
        location = redact_url(settings.vector_url or (settings.db if kind == "pgvector" else ""))
    return {"kind": kind, "location": location, "collection": settings.vector_collection}
