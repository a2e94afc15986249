"""The content step of the one ingest path: a document is known by its content, not only by its doc_id.

Invariants:
- `text_hash` is the SHA-256 of the loaded text after NFKC and whitespace collapse: a copy
  re-encoded (GBK, UTF-16, UTF-8 with a BOM), with CRLF line ends or other blank lines, or saved
  as `.txt` instead of `.md`, hashes the same; `content_hash` (the bytes) catches an exact copy
  before anything is loaded. Both are recorded on every registry row.
- The label follows the content (`check_content_label`): a document whose bytes hash or text
  hash is already on a registry row of another doc_id (active, duplicate or withdrawn: fail
  closed) holds at least that row's label (its recorded label and its active chunks' labels); a
  new document labelled lower is refused with a one-line ValueError naming it, unless the caller
  lowers it explicitly for that doc_id (`lower`: `ragspine ingest --lower-label DOC_ID`,
  `lower_label=True`). The error names the other doc_id only when `detail` (the owner's folder
  run), never to a Workspace or HTTP caller, so a caller learns no other document's name.
- A duplicate (`duplicate_of`) is a file of a folder run whose bytes equal an active document's,
  with the same label and metadata (the title aside: a copy's file name differs): it is recorded,
  not stored again, so one copy takes one slot in a search's top k.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragspine.ingest.labels import kept_label, stored_labels
from ragspine.ingest.registry import ACTIVE, DocumentRecord, DocumentRegistry
from ragspine.retrieval.sensitivity import normalize_label
from ragspine.retrieval.store.protocol import ChunkStoreProtocol

__all__ = ["check_content_label", "duplicate_of", "same_metadata", "text_hash"]

# Metadata that may differ between two copies of one file: the title (a .txt copy's is its file
# name) and which source gave the label.
_COPY_MAY_DIFFER = frozenset({"title", "sensitivity_from"})


def text_hash(text: str) -> str:
    """SHA-256 of `text` after NFKC and whitespace collapse (see the module docstring).

    >>> text_hash("Exports\\r\\nfell.") == text_hash("Exports fell.\\n") == text_hash("Ｅxports  fell.")
    True
    """
    folded = " ".join(unicodedata.normalize("NFKC", text).split())
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()


def check_content_label(
    registry: DocumentRegistry,
    store: ChunkStoreProtocol,
    doc_id: str,
    label: str,
    hashes: tuple[str, str],
    levels: Sequence[str],
    *,
    lower: bool = False,
    detail: bool = False,
) -> None:
    """ValueError when the content (`hashes`: bytes hash, text hash) is stored under another
    doc_id at a label stricter than `label` and `lower` is False (module docstring)."""
    if lower:
        return
    for record in registry.with_content(*hashes):
        if record.doc_id == doc_id:
            continue
        labels = set(_record_labels(record)) | stored_labels(store, record.doc_id)
        kept = kept_label(normalize_label(label), labels, levels)
        if kept is None:
            continue
        where = f" as {record.doc_id!r}, labelled {kept}" if detail else " at a stricter label"
        raise ValueError(
            f"{doc_id!r}: its content is already stored{where}; refused at {label}: the label follows "
            f"the content (to lower it, the owner runs ragspine ingest --lower-label {doc_id})"
        )


def duplicate_of(
    registry: DocumentRegistry, doc_id: str, content_hash: str, metadata: Mapping[str, Any], source_path: str = ""
) -> DocumentRecord | None:
    """The active row (another doc_id, another file than `source_path`) whose bytes are
    `content_hash` and whose metadata is the same as `metadata` (`same_metadata`): the document a
    new file is a copy of; None when none. (The same file under a second doc_id, left by an
    older release, is not a copy: `--prune` withdraws the extra doc_id.)"""
    for record in registry.with_content(content_hash):
        if source_path and record.source_path == source_path:
            continue
        if record.doc_id != doc_id and record.status == ACTIVE and record.content_hash == content_hash:
            if same_metadata(record.metadata_dict(), metadata):
                return record
    return None


def same_metadata(stored: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two documents' metadata agree on everything but what a copy may change (title)."""
    keys = (set(stored) | set(new)) - _COPY_MAY_DIFFER
    return all(stored.get(key) == new.get(key) for key in keys)


def _record_labels(record: DocumentRecord) -> Iterable[str]:
    """The label a registry row recorded (none when its metadata has none)."""
    label = record.metadata_dict().get("sensitivity")
    return (normalize_label(label),) if isinstance(label, str) and label else ()
