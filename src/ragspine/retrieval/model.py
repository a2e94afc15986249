"""The chunk model shared by every stage: what a document and a chunk carry, and the field sets
filters and indexes use.

Invariant: a `Chunk`'s `text` is verbatim source text and `source_locator` finds it; user
metadata never shadows a built-in field (`check_user_metadata`); `make_chunk_id` gives the same
id for the same document, position and text; the metadata RAGSpine writes itself
(`SYSTEM_METADATA_KEYS`) is never offered as a filter field (`offered_metadata`, the one list
GET /fields, the facets and the search page read).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

_META_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class FieldFilters(TypedDict, total=False):
    """The five metadata dimensions a query can filter on (exact match, AND-ed; None: no filter),
    as keyword arguments: `HybridRetriever.search(q, entity="ACME_CN")`, `NarrativeIndex.retrieve`."""

    topic: str | None
    entity: str | None
    geography: str | None
    period: str | None
    language: str | None


# The five metadata dimensions a query can filter on, in order.
FILTER_FIELDS: tuple[str, ...] = tuple(FieldFilters.__annotations__)


def field_filters(given: Mapping[str, object], *, caller: str) -> dict[str, str]:
    """The metadata filters actually set in `given` (a `**FieldFilters` keyword dict); a key that
    is not one of the five fields is the TypeError an unknown keyword argument gives."""
    for key in given:
        if key not in FILTER_FIELDS:
            raise TypeError(f"{caller}() got an unexpected keyword argument {key!r}")
    return cast(dict[str, str], {key: value for key, value in given.items() if value is not None})
# The fields the lexical index keeps per chunk for filtering: the five dimensions, then doc_id,
# sensitivity, valid_as_of and the user metadata as canonical JSON (see `index_field_values`).
INDEXED_FIELDS = (*FILTER_FIELDS, "doc_id", "sensitivity", "valid_as_of", "metadata")
# Names user metadata may not take (the chunk's own fields and what the store adds).
RESERVED_FIELDS = frozenset(
    {"chunk_id", "doc_id", "seq", "text", "source_locator", "title", "topic", "entity", "geography",
     "period", "language", "sensitivity", "parent_id", "heading", "window_text", "parent_locator",
     "metadata", "valid_as_of", "ingested_at", "version", "active", "library_id"}
)  # fmt: skip
# The metadata RAGSpine itself writes on chunks: the auto chunker's choice and its reason (how a
# document was cut, not a label). Stored like user metadata, never offered as a field to filter on.
SYSTEM_METADATA_KEYS = ("chunker", "chunker_reason")


def offered_metadata(keys: Iterable[str]) -> list[str]:
    """The metadata fields offered to a caller as filters (GET /fields, facets, the search page),
    sorted: the user's own, `keys` less SYSTEM_METADATA_KEYS.

    >>> offered_metadata({"project", "chunker", "chunker_reason", "owner"})
    ['owner', 'project']
    """
    return sorted(set(keys) - set(SYSTEM_METADATA_KEYS))


@dataclass(frozen=True)
class DocumentMeta:
    """Document-level metadata copied onto each of its chunks."""

    doc_id: str
    title: str = ""
    topic: str = ""
    entity: str = ""
    geography: str = ""
    period: str = ""
    language: str = ""
    sensitivity: str = "INTERNAL"
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_user_metadata(self.metadata)


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit. `text` is verbatim source text; `source_locator` finds it."""

    chunk_id: str
    doc_id: str
    seq: int
    text: str
    source_locator: str
    title: str = ""
    topic: str = ""
    entity: str = ""
    geography: str = ""
    period: str = ""
    language: str = ""
    sensitivity: str = "INTERNAL"
    parent_id: str = ""
    heading: str = ""
    window_text: str = ""
    parent_locator: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


def check_user_metadata(metadata: Any) -> None:
    """User metadata: a dict of name → string or number; names must not shadow Chunk fields or
    the metadata RAGSpine writes itself (SYSTEM_METADATA_KEYS)."""
    if not isinstance(metadata, dict):
        raise ValueError(f"metadata must be a dict, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not _META_KEY.match(key):
            raise ValueError(f"metadata key {key!r}: use letters, digits, '_', '.', '-'")
        if key in RESERVED_FIELDS:
            raise ValueError(f"metadata key {key!r} is a built-in field; pass it as a field instead")
        if key in SYSTEM_METADATA_KEYS:
            raise ValueError(f"metadata key {key!r} is written by RAGSpine itself (how a document was cut); use another name")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"metadata {key!r} must be a string or a number, got {value!r}")


def metadata_json(metadata: dict[str, Any]) -> str:
    """Canonical JSON of user metadata (sorted keys): one spelling per distinct value set."""
    return json.dumps(metadata, ensure_ascii=False, sort_keys=True)


def index_field_values(chunk: Chunk) -> tuple[str, ...]:
    """The chunk's values in INDEXED_FIELDS order (valid_as_of is "" for a plain Chunk)."""
    return (
        *(getattr(chunk, name) for name in FILTER_FIELDS),
        chunk.doc_id,
        chunk.sensitivity,
        getattr(chunk, "valid_as_of", ""),
        metadata_json(chunk.metadata),
    )


def make_chunk_id(doc_id: str, seq: int, text: str) -> str:
    """Stable id: document, position and a short content digest (same text, same id)."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=4).hexdigest()
    return f"{doc_id}:{seq:04d}:{digest}"


def doc_id_of_chunk(chunk_id: str) -> str:
    """The document of a `make_chunk_id` id (DOC_ID:SEQ:DIGEST); "" when it is not of that form.

    >>> doc_id_of_chunk("reports/a.md:0003:89c82a2e"), doc_id_of_chunk("nope")
    ('reports/a.md', '')
    """
    return chunk_id.rsplit(":", 2)[0] if chunk_id.count(":") >= 2 else ""
