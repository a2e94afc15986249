"""The copies of stored documents, as a search result's lineage lists them (`lineage["duplicates"]`).

Invariants: reads only, through the store's own read path (`ChunkStoreProtocol.execute_read`:
`?` placeholders on SQLite and PostgreSQL, writes refused); a store without a registry, or with
one made before duplicates were recorded, has no copies (never an error); a snippet gains
`lineage["duplicates"]` (its own doc_id first, then the duplicates' doc_ids, sorted) only when
its document has a copy. A duplicate carries its document's label and metadata
(`ingest.content.duplicate_of`), so a caller who may see the snippet may see its copies' names;
a copy whose recorded label differs from its document's (relabelled since), or whose content no
longer equals its document's (replaced since through `Workspace.ingest_text`/HTTP), is not listed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from ragspine.ingest.registry import DUPLICATE, TABLE
from ragspine.retrieval.sensitivity import normalize_label
from ragspine.retrieval.store.protocol import ChunkStoreProtocol

__all__ = ["CopyLookup"]


class CopyLookup:
    """The duplicates recorded for documents of `store` (its registry lives in the same database).

    >>> from ragspine.retrieval.store.sqlite import ChunkStore
    >>> with ChunkStore(":memory:") as store:
    ...     CopyLookup(store).of(["a.md"])
    {}
    """

    def __init__(self, store: ChunkStoreProtocol) -> None:
        self.store = store

    def of(self, doc_ids: Iterable[str]) -> dict[str, list[str]]:
        """{doc_id: its duplicates' doc_ids, sorted} for those of `doc_ids` that have any."""
        wanted = sorted(set(doc_ids))
        if not wanted:
            return {}
        try:
            rows = self._rows(wanted)
        except Exception:  # no registry, or one older than its duplicate column: no copies
            return {}
        found: defaultdict[str, list[str]] = defaultdict(list)
        for original, copy, label, copy_label in rows:
            if _label(label) == _label(copy_label):  # a copy relabelled since is named nowhere
                found[original].append(copy)
        return {doc_id: sorted(copies) for doc_id, copies in found.items()}

    def annotate(self, snippets: Sequence[Any]) -> None:
        """Add `lineage["duplicates"]` to each snippet whose document has copies (in place)."""
        copies = self.of(s["doc_id"] for s in snippets if s.get("chunk_id"))
        for snippet in snippets:
            more = copies.get(snippet["doc_id"]) if snippet.get("chunk_id") else None
            if more:
                snippet["lineage"]["duplicates"] = [snippet["doc_id"], *more]

    def _rows(self, wanted: list[str]) -> list[tuple[str, ...]]:
        marks = ", ".join("?" for _ in wanted)
        sql = (
            f"SELECT d.duplicate_of, d.doc_id, o.metadata, d.metadata FROM {TABLE} d JOIN {TABLE} o "
            f"ON o.doc_id = d.duplicate_of WHERE d.status = ? AND d.duplicate_of IN ({marks}) "
            "AND ((d.content_hash <> '' AND d.content_hash = o.content_hash) "
            "OR (d.text_hash <> '' AND d.text_hash = o.text_hash))"  # still a copy: not replaced since
        )
        return [tuple(map(str, row)) for row in self.store.execute_read(sql, (DUPLICATE, *wanted))]


def _label(metadata: str) -> str:
    """The label a registry row's metadata JSON records ('' when none or unreadable)."""
    try:
        data = json.loads(metadata)
    except ValueError:
        return ""
    label = data.get("sensitivity") if isinstance(data, dict) else None
    return normalize_label(label) if isinstance(label, str) else ""
