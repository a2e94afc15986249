"""Which analyzer built an index, and which settings built a store's chunks.

A persisted index is served only to the same analyzer. An analyzer's identity is its `analyzer_id` attribute when it has one, else its module and
qualified name; plus a digest of its module's source file and the Unicode database version
(normalisation and character classes depend on it). A lambda, a closure or a partial has no
stable name: its index is kept in memory only, never persisted.

A store records the `IndexSettings` its chunks and lexical index were made with (analyzer,
chunker, chunk budget and overlap, and the index-text function: the text both channels index) under its meta key `index_settings` (the chunk store's
`read_meta` / `write_meta`); `check_index_settings` makes opening it with other settings an
`IndexSettingsMismatch` that names the differences and how to rebuild, so chunkings are never
mixed and a store is never silently re-tokenised.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import logging
import re
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from ragspine.errors import ModelMismatch

_LOG = logging.getLogger(__name__)


def analyzer_identity(analyzer: Callable[[str], list[str]]) -> dict[str, str] | None:
    """A JSON-able identity of `analyzer`, or None when it cannot be named stably.

    >>> from ragspine.retrieval.lexical.tokenize import tokenize
    >>> analyzer_identity(tokenize)["name"]
    'ragspine.retrieval.lexical.tokenize:tokenize'
    >>> analyzer_identity(lambda text: text.split()) is None
    True
    """
    explicit = getattr(analyzer, "analyzer_id", None)
    module = getattr(analyzer, "__module__", None)
    qualname = getattr(analyzer, "__qualname__", None)
    if explicit:
        name = str(explicit)
    elif isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
        name = f"{module}:{qualname}"
    else:
        return None
    return {"name": name, "source": _source_digest(module), "unicode": unicodedata.unidata_version}


def index_text_identity(index_text: Callable[[Any], str]) -> dict[str, str] | None:
    """A JSON-able identity of an index-text function (its `index_text_id` and the digest of its
    module's source), or None when it has no `index_text_id`: then no index of it is persisted.

    >>> from ragspine.retrieval.chunking.contextual import ContextHeader
    >>> index_text_identity(ContextHeader())["name"]
    'header-v1'
    """
    name = getattr(index_text, "index_text_id", None)
    if not isinstance(name, str) or not name:
        return None
    return {"name": name, "source": _source_digest(getattr(index_text, "__module__", None))}


def identity_key(identity: dict[str, Any]) -> str:
    """A folder name for an identity: readable prefix plus a digest of the whole identity."""
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", identity["name"].rsplit(":", 1)[-1])[:40]
    return f"{slug}-{digest}"


def _source_digest(module_name: object) -> str:
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    try:
        path = inspect.getsourcefile(module) if module is not None else None
        if path:
            with open(path, "rb") as handle:
                return hashlib.sha256(handle.read()).hexdigest()
    except (OSError, TypeError):
        pass
    return ""


# -- the store's record of how its chunks were made and indexed --------------------------------
STORE_RECORD_KEY = "index_settings"  # a key of the chunk store's meta table (read_meta / write_meta)


# A store was built with other chunking or analyzer settings than the ones asked for now: the
# package's one "built with another model/settings" error (the name is kept for existing callers).
IndexSettingsMismatch = ModelMismatch


@dataclass(frozen=True)
class IndexSettings:
    """What decides a store's chunks and its lexical index: the chunker with its budget and
    overlap, and the analyzer (its resolved name: "auto" is recorded as what it chose).

    >>> IndexSettings("en-stem", 480, 80).describe()
    'RAGSPINE_ANALYZER=en-stem, RAGSPINE_CHUNKER=paragraph, RAGSPINE_CHUNK_CHARS=480, RAGSPINE_CHUNK_OVERLAP=80, RAGSPINE_CONTEXTUAL=none'
    """

    analyzer: str
    chunk_chars: int
    chunk_overlap: int
    chunker: str = "paragraph"
    index_text: str = "none"  # RAGSPINE_CONTEXTUAL: what the lexical and dense channels index

    def _items(self) -> list[tuple[str, str]]:
        return [
            ("RAGSPINE_ANALYZER", self.analyzer), ("RAGSPINE_CHUNKER", self.chunker),
            ("RAGSPINE_CHUNK_CHARS", str(self.chunk_chars)), ("RAGSPINE_CHUNK_OVERLAP", str(self.chunk_overlap)),
            ("RAGSPINE_CONTEXTUAL", self.index_text),  # stores recorded before it existed read as "none"
        ]  # fmt: skip

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self._items())

    def as_variables(self) -> dict[str, str]:
        """The record as RAGSPINE_* variables and their raw values (what opening a store adopts)."""
        return dict(self._items())

    def same_chunks(self, other: IndexSettings) -> bool:
        """Whether chunks made under `other` are the chunks these settings make."""
        return (self.chunker, self.chunk_chars, self.chunk_overlap) == (
            other.chunker, other.chunk_chars, other.chunk_overlap,
        )  # fmt: skip

    def differences(self, asked: IndexSettings) -> list[str]:
        """'VARIABLE: recorded -> asked' for each setting that differs."""
        mine, theirs = dict(self._items()), dict(asked._items())
        return [
            f"{k}: {mine.get(k, 'none')} -> {theirs.get(k, 'none')}"
            for k in dict.fromkeys([*mine, *theirs])
            if mine.get(k, "none") != theirs.get(k, "none")
        ]


# What every version before the record made: the paragraph packer at 480/80, indexed by `tokenize`.
LEGACY_SETTINGS = IndexSettings("spec", 480, 80)


def recorded_index_settings(store: Any) -> IndexSettings | None:
    """The settings the store recorded (None: none recorded yet, or a store from before this
    record existed). Read with the chunk store's `read_meta`."""
    try:
        raw = store.read_meta(STORE_RECORD_KEY)
    except Exception:  # noqa: BLE001 - each store raises its own driver's error for a missing table
        return None  # no meta table yet (schema not created): nothing recorded
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return IndexSettings(str(data["analyzer"]), int(data["chunk_chars"]), int(data["chunk_overlap"]),
                             str(data.get("chunker", "paragraph")), str(data.get("index_text", "none")))  # fmt: skip
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexSettingsMismatch(
            f"{store.db_path}: the store's record of its index settings is unreadable ({exc}); "
            "rebuild the store with `ragspine ingest PATH... --db DB --rebuild`"
        ) from None


def check_index_settings(store: Any, asked: IndexSettings) -> IndexSettings | None:
    """Refuse a store whose recorded settings differ from `asked`; record `asked` in a store
    that has no record yet (new, or made before records existed: its chunks are the 480/80
    paragraph chunks every earlier version made, and its lexical index is rebuilt for the
    recorded analyzer, which is logged). Returns what was recorded before (None: nothing).

    IndexSettingsMismatch names each difference, the store, and both ways out: the recorded
    values, or `ragspine ingest PATH... --db DB --rebuild`.
    """
    recorded = recorded_index_settings(store)
    if recorded is None:
        if store.counts(include_inactive=True).chunks:  # made before stores kept this record
            legacy = dataclasses.replace(LEGACY_SETTINGS, analyzer=asked.analyzer)
            if not legacy.same_chunks(asked):
                _refuse(store, legacy, asked, adopts=False)
            if asked.analyzer != LEGACY_SETTINGS.analyzer:
                _LOG.warning(
                    "%s has no record of its index settings (made by an earlier version, whose "
                    "lexical index used the analyzer %s); recording %s: its lexical index is "
                    "rebuilt once for %s", store.db_path, LEGACY_SETTINGS.analyzer, asked.describe(), asked.analyzer,
                )  # fmt: skip
        record_index_settings(store, asked)
        return None
    if recorded != asked:
        _refuse(store, recorded, asked, adopts=True)
    return recorded


def _refuse(store: Any, recorded: IndexSettings, asked: IndexSettings, *, adopts: bool) -> NoReturn:
    db = store.db_path
    unset = "Unset those variables (opening a store adopts its record: `ragspine config show` says \"store\") or s"
    raise IndexSettingsMismatch(
        f"the store {db} was built with {recorded.describe()}; these settings ask for "
        f"{'; '.join(recorded.differences(asked))}. A store is never extended or searched with "
        "other chunking or analyzer settings (its chunks and lexical index would no longer "
        f"match). {unset if adopts else 'S'}et the recorded values again ({recorded.describe()}), or rebuild the store "
        f"with the new ones: `ragspine ingest PATH... --db {db} --rebuild` (re-chunks every file "
        "under PATH, withdraws the documents not found there, records the new settings; the "
        "lexical index and the vectors follow)"
    )


def record_index_settings(store: Any, settings: IndexSettings) -> None:
    """Write `settings` as the store's record (its `write_meta`: SQLite and PostgreSQL keep it in
    their meta table, an in-memory store for its lifetime)."""
    store.write_meta(STORE_RECORD_KEY, json.dumps(dataclasses.asdict(settings), sort_keys=True))
    _LOG.info("%s: recorded index settings %s", store.db_path, settings.describe())
