"""`ragspine ingest`'s side of the store's index-settings record: check it, or rebuild the store.

Invariants: a plain ingest into a store recorded with other chunking or analyzer settings is
refused before anything is written (`IndexSettingsMismatch`, naming the differences and
`--rebuild`). `--rebuild` makes the store exactly the files under the given paths, cut and
indexed with the current settings: every file is re-chunked when the chunking changed, every
active document that the run did not write (or find unchanged) is withdrawn, and only then is
the new record written, so an interrupted rebuild leaves the old record and is refused again
until a rebuild completes. Never a store whose documents were cut two ways.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from ragspine.ingest.registry import DocumentRegistry
from ragspine.retrieval.lexical.index.identity import (
    LEGACY_SETTINGS,
    IndexSettings,
    check_index_settings,
    record_index_settings,
    recorded_index_settings,
)
from ragspine.retrieval.store.factory import open_chunk_store


def prepare_store(db: str, asked: IndexSettings, *, rebuild: bool) -> bool:
    """Check the store at `db` against `asked` (creating it when new). Without `rebuild`, a
    difference raises IndexSettingsMismatch; with it, return whether every document must be
    re-chunked (the recorded chunking differs from `asked`)."""
    with open_chunk_store(db) as store:
        store.init_schema()
        if not rebuild:
            check_index_settings(store, asked)
            return False
        recorded = recorded_index_settings(store)
        if recorded is None and store.counts(include_inactive=True).chunks:
            recorded = LEGACY_SETTINGS  # made before stores kept a record
        return recorded is not None and not recorded.same_chunks(asked)


def finish_rebuild(db: str, asked: IndexSettings, kept: Iterable[str]) -> list[str]:
    """Withdraw the active documents not in `kept` (those this run wrote or found unchanged),
    then record `asked`; return the withdrawn doc_ids."""
    keep = set(kept)
    at = datetime.now(UTC).isoformat(timespec="seconds")
    with open_chunk_store(db) as store, DocumentRegistry(db) as registry:
        stale = [doc for doc in store.active_doc_ids() if doc not in keep]
        for doc in stale:
            store.replace_doc_chunks(doc, [])
            if registry.get(doc) is not None:
                registry.mark_withdrawn(doc, at)
        record_index_settings(store, asked)
    return stale
