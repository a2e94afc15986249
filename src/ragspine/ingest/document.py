"""Turn one file's bytes into the chunks of one document version (no store, no registry).

Invariants: the same bytes, sidecar and settings give the same chunks (deterministic), and
`ingest_key` changes whenever any of them changes, so an unchanged key means unchanged chunks.
Field precedence, highest first: sidecar, Markdown front matter, CLI defaults; `language` falls
back to detection on the text. `sensitivity` is the exception: the strictest label from any
source wins (sidecar, front matter, the caller's explicit label, every matching rule); only when
no source labels the document does the default (INTERNAL) apply. Every label is normalised and
checked against the known levels (an unknown label fails the document, naming where it came
from). `keep_stricter` never lets a new version lower the label of the stored one unless the
caller says so for that document. Every chunk's text is a substring of the
loaded text; PDF locators gain `;pages=…` (see `pages`).

This is the one preparation path: the folder pipeline (`prepare`), and `Workspace.ingest_bytes`
(HTTP upload, `ragspine.open().ingest`) and `Workspace.ingest_text` (via `prepare_loaded`) all
label and chunk here, so the same file and metadata give the same chunks whichever way it came.
Chunks are cut by `IngestSettings.chunker` (the workspace passes its configured one), else by the
paragraph packer with the settings' budget.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ragspine.ingest.files import SourceFile
from ragspine.retrieval.language import detect_language
from ragspine.ingest.loaders import LoadedDocument, load_document
from ragspine.ingest.metadata import DocumentFields, Sidecar, filterable, to_fields
from ragspine.ingest.pages import with_pages
from ragspine.ingest.sensitivity_rules import SensitivityRules
from ragspine.ingest.quality import GARBLED_SHARE, garbled_share
from ragspine.retrieval.sensitivity import check_label, normalize_label, strictest
from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    chunk_document,
)
from ragspine.retrieval.chunking.protocol import Chunker, Layout, StructureAwareChunker
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.store.protocol import ChunkStoreProtocol

# Bump when loaders, locators or labels change what the same bytes turn into, so re-runs
# re-ingest. 2: sensitivity labels normalised by NFKC (full-width spellings), unknown ones refused.
# 3: the strictest label of every source wins; rules also match paths relative to the folders
# above a file; garbled-text detection recorded.
INGEST_FORMAT = 3
DEFAULT_SENSITIVITY = "INTERNAL"
GARBLED = "garbled"  # the registry metadata key of a document whose text looks garbled
DIMENSIONS = ("topic", "entity", "geography", "period", "language")


@dataclass(frozen=True)
class IngestSettings:
    """Everything besides the file that shapes a document's chunks."""

    defaults: DocumentFields = field(default_factory=DocumentFields)
    sensitivity: str = "INTERNAL"
    rules: SensitivityRules = field(default_factory=SensitivityRules)
    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS
    # Where the default label comes from, for the unknown-label error.
    sensitivity_from: str = field(default="--sensitivity", compare=False)
    # The configured chunker (RAGSPINE_CHUNKER); None: the paragraph packer with the budget above.
    chunker: Chunker | None = field(default=None, compare=False)
    # True: the caller named `sensitivity` (a flag, an argument, a form field), so it is one of
    # the label sources the strictest is taken from; False: it only labels unlabelled documents.
    sensitivity_given: bool = False

    def __post_init__(self) -> None:
        if self.sensitivity_given:  # checked now; the default only when a document needs it
            label = check_label(self.sensitivity, self.rules.levels, source=self.sensitivity_from)
        else:
            label = normalize_label(self.sensitivity)
        object.__setattr__(self, "sensitivity", label)

    def fingerprint(self) -> str:
        """A digest of these settings (part of every document's `ingest_key`)."""
        data = {
            "defaults": dict(sorted(self.defaults.known.items())),
            "sensitivity": [self.sensitivity, self.sensitivity_given],
            "rules": self.rules.fingerprint(),
            "chunking": [self.max_chars, self.overlap_chars],
        }
        if self.chunker is not None:
            data["chunker"] = _identity(self.chunker)
        return _digest(data)


def ingest_settings(
    defaults: Mapping[str, str | None], sensitivity: str | None = None, **options: Any
) -> IngestSettings:
    """IngestSettings from the defaults a caller gives (CLI flags, `Workspace.ingest_bytes`
    arguments): blank values dropped, the rest stripped; a blank `sensitivity` is INTERNAL for
    unlabelled documents only, a given one is a label source. `options`: the other fields."""
    given = {k: v.strip() for k, v in defaults.items() if v and v.strip()}
    label = (sensitivity or "").strip()
    return IngestSettings(
        defaults=DocumentFields(given), sensitivity=label or DEFAULT_SENSITIVITY,
        sensitivity_given=bool(label), **options,
    )  # fmt: skip


@dataclass(frozen=True)
class PreparedDocument:
    """A document version ready to write: its metadata, chunks, and what the loader found."""

    meta: DocumentMeta
    chunks: list[Chunk]
    loaded: LoadedDocument
    metadata: dict[str, Any]
    warnings: tuple[str, ...] = ()


def content_hash(data: bytes) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(data).hexdigest()


def ingest_key(doc_id: str, file_hash: str, sidecar: Sidecar, settings: IngestSettings) -> str:
    """A digest of everything that decides a document's chunks (see the module docstring)."""
    return _digest(
        {
            "format": INGEST_FORMAT,
            "doc_id": doc_id,
            "content": file_hash,
            "sidecar": sidecar.digest,
            "settings": settings.fingerprint(),
        }
    )


def prepare(
    source: SourceFile, data: bytes, sidecar: Sidecar, settings: IngestSettings
) -> PreparedDocument:
    """Load, label and chunk one file; ValueError (or MissingExtraError) with the reason on failure."""
    loaded = load_document(source.path, data)
    front = to_fields(loaded.metadata, "front matter") if loaded.metadata else DocumentFields()
    own = sidecar.fields.over(front)
    labels = [
        (fields.known["sensitivity"], f"the {where} of {source.doc_id!r}")
        for fields, where in ((sidecar.fields, "sidecar"), (front, "front matter"))
        if fields.known.get("sensitivity")
    ]
    prepared = prepare_loaded(
        source.doc_id, loaded, own, settings, user_metadata=filterable(own.free), labels=labels,
        paths=anchored_paths(source),
    )  # fmt: skip
    if sidecar.warnings:
        prepared = replace(prepared, warnings=(*sidecar.warnings, *prepared.warnings))
    return prepared


def anchored_paths(source: SourceFile) -> tuple[str, ...]:
    """The file's path relative to every folder above it (`a/b/c.md`, `b/c.md`, `c.md`), so a
    rule glob labels the same file however the folder is named on the command line."""
    if not source.root.is_absolute():
        return ()
    parts = (source.root / source.doc_id).parts[1:]
    return tuple("/".join(parts[i:]) for i in range(len(parts)))


def prepare_loaded(
    doc_id: str,
    loaded: LoadedDocument,
    own: DocumentFields,
    settings: IngestSettings,
    *,
    user_metadata: dict[str, Any],
    labels: Sequence[tuple[str, str]] = (),
    paths: Sequence[str] = (),
) -> PreparedDocument:
    """Label and chunk a loaded document whose own fields are `own`; `settings` fill the rest.
    `labels`: the document's own (label, where it came from) pairs; `paths`: more paths the
    rule globs match besides `doc_id`. ValueError with the reason."""
    fields = own.over(settings.defaults).known
    title = fields.get("title") or loaded.title
    sensitivity, source_of_label = _sensitivity(doc_id, loaded, title, labels, paths, settings)
    meta = DocumentMeta(
        doc_id=doc_id,
        title=title,
        topic=fields.get("topic", ""),
        entity=fields.get("entity", ""),
        geography=fields.get("geography", ""),
        period=fields.get("period", ""),
        language=fields.get("language") or detect_language(loaded.text),
        sensitivity=sensitivity,
        metadata=user_metadata,
    )
    layout = Layout(loaded.headings, tuple(start for start, _ in loaded.page_spans[1:]))
    if isinstance(settings.chunker, StructureAwareChunker) and (layout.headings or layout.page_starts):
        chunks = settings.chunker.chunk_structured(loaded.text, meta, layout)  # the loader's structure too
    elif settings.chunker is not None:
        chunks = settings.chunker.chunk(loaded.text, meta)
    else:
        chunks = chunk_document(
            loaded.text, meta, max_chars=settings.max_chars, overlap_chars=settings.overlap_chars
        )
    if not chunks:
        raise ValueError("no text to index")
    chunks = with_pages(chunks, loaded.page_spans, loaded.page_numbers)
    metadata: dict[str, Any] = {name: getattr(meta, name) for name in ("title", *DIMENSIONS)}
    metadata.update(sensitivity=sensitivity, sensitivity_from=source_of_label, free=dict(own.free))
    warnings: list[str] = []
    garbled = garbled_share(loaded.text)
    if garbled >= GARBLED_SHARE:
        metadata[GARBLED] = round(garbled, 3)
        warnings.append(
            f"{garbled:.0%} of the text looks garbled (glyph names such as /g18, replacement or "
            "mis-decoded characters); check the file, or skip such files with --skip-garbled"
        )
    return PreparedDocument(meta, chunks, loaded, metadata, tuple(warnings))


def stored_labels(store: ChunkStoreProtocol, doc_id: str) -> frozenset[str]:
    """The labels (normalised) of the active chunks of `doc_id`; empty when it has none."""
    return frozenset(normalize_label(chunk.sensitivity) for chunk in store.iter_chunks(doc_id=doc_id))


def keep_stricter(
    prepared: PreparedDocument, stored: Iterable[str], levels: Sequence[str], *, lower: bool = False
) -> PreparedDocument:
    """`prepared`, relabelled with the strictest `stored` label of the active version when that
    is stricter than its own and `lower` is False (a warning says so): a re-ingest never lowers
    a label implicitly. A stored label outside `levels` counts as the strictest (fails closed)."""
    known = [normalize_label(level) for level in levels]
    ranked = sorted(stored, key=lambda label: (known.index(label) if label in known else len(known), label))
    new = prepared.meta.sensitivity
    if not ranked or lower:
        return prepared
    kept = ranked[-1]
    if kept in known and known.index(kept) <= known.index(new):
        return prepared
    chunks = [replace(chunk, sensitivity=kept) for chunk in prepared.chunks]
    metadata = {**prepared.metadata, "sensitivity": kept, "sensitivity_from": "kept"}
    warning = (
        f"kept the stored label {kept}: this version would be labelled {new}, and a label is "
        "only lowered when asked for this document (ragspine ingest --lower-label DOC_ID)"
    )
    return replace(
        prepared, meta=replace(prepared.meta, sensitivity=kept), chunks=chunks, metadata=metadata,
        warnings=(*prepared.warnings, warning),
    )  # fmt: skip


def _sensitivity(
    doc_id: str,
    loaded: LoadedDocument,
    title: str,
    labels: Sequence[tuple[str, str]],
    paths: Sequence[str],
    settings: IngestSettings,
) -> tuple[str, str]:
    """(the strictest label of every source, which kind of source gave it)."""
    levels = settings.rules.levels
    found = [(check_label(label, levels, source=where), "document") for label, where in labels]
    ruled = settings.rules.classify(doc_id, loaded.text, title, paths=paths)
    if ruled is not None:
        found.append((ruled, "rule"))
    if settings.sensitivity_given:
        found.append((settings.sensitivity, "argument"))
    if not found:
        where = f"the default label, as nothing labels {doc_id!r}: give it a sensitivity"
        return check_label(settings.sensitivity, levels, source=where), "default"
    best = strictest([label for label, _ in found], levels)
    return next((label, kind) for label, kind in found if label == best)


def _identity(chunker: Chunker) -> str:
    """The chunker's repr when its class defines one (e.g. its budget), else its class path."""
    kind = type(chunker)
    path = f"{kind.__module__}.{kind.__qualname__}"
    return repr(chunker) if kind.__repr__ is not object.__repr__ else path


def _digest(data: Any) -> str:
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
