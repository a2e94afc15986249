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
loaded text — for a file, after its mojibake is repaired where the repair is certain
(`ingest.mojibake`, recorded as `mojibake_repaired` and warned; a caller's own text is never
rewritten) — and PDF locators gain `;pages=…` (see `pages`).

This is the load-and-chunk half of the one ingest path (`ingest.pipeline.IngestPipeline`): files
(`prepare`: the folder run, `Workspace.ingest_bytes`, HTTP upload) and texts (`prepare_loaded`:
`Workspace.ingest_text`, `POST /documents`) are labelled (through `ingest.labels`, the one label
reader) and chunked here, so the same file and metadata give the same chunks whichever way it came.
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
from ragspine.ingest.labels import (
    DEFAULT_SENSITIVITY,
    caller_label,
    kept_label,
    kept_warning,
    label_sources,
    read_label,
)
from ragspine.retrieval.language import detect_language
from ragspine.ingest.loaders import LoadedDocument, load_document
from ragspine.ingest.metadata import DocumentFields, Sidecar, filterable, to_fields
from ragspine.ingest.mojibake import repair_mojibake
from ragspine.ingest.pages import with_pages
from ragspine.ingest.sensitivity_rules import SensitivityRules
from ragspine.ingest.quality import GARBLED_SHARE, garbled_share
from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    chunk_document,
)
from ragspine.retrieval.chunking.protocol import Chunker, Layout, StructureAwareChunker
from ragspine.retrieval.model import Chunk, DocumentMeta

# Bump when loaders, locators or labels change what the same bytes turn into, so re-runs
# re-ingest. 2: sensitivity labels normalised by NFKC (full-width spellings), unknown ones refused.
# 3: the strictest label of every source wins; rules also match paths relative to the folders
# above a file; garbled-text detection recorded.
# 4: every label key counts (duplicates, folded key spellings), front matter by a real parser
# (lead, ---- fences), rule keywords matched normalised: a file stored lower is re-read.
# 5: mojibake repaired (text decoded with the wrong code page), EUC-KR read as Korean, garbled
# share counts letter soup; `laws` keeps list items with their article's lead sentence.
#    HTML read by the full DOM walk when trafilatura drops text or headings; headings never in
# indented code, numbered list items or sentence fragments; `auto` records chunker_reason.
INGEST_FORMAT = 5
GARBLED = "garbled"  # the registry metadata key of a document whose text looks garbled
REPAIRED = "mojibake_repaired"  # the registry metadata key saying which mojibake was decoded again
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
        # checked now when given; the default only when a document needs it
        label = caller_label(
            self.sensitivity, self.rules.levels, given=self.sensitivity_given, source=self.sensitivity_from
        )
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


def ingest_key(
    doc_id: str, file_hash: str, sidecar: Sidecar, settings: IngestSettings, *, reader: int = 0
) -> str:
    """A digest of everything that decides a document's chunks (see the module docstring);
    `reader`: the loader's revision for the file's suffix (`loaders.READER_REVISIONS`; 0 adds nothing)."""
    data: dict[str, Any] = {
        "format": INGEST_FORMAT,
        "doc_id": doc_id,
        "content": file_hash,
        "sidecar": sidecar.digest,
        "settings": settings.fingerprint(),
    }
    if reader:
        data["reader"] = reader
    return _digest(data)


def prepare(
    source: SourceFile, data: bytes, sidecar: Sidecar, settings: IngestSettings
) -> PreparedDocument:
    """Load, label and chunk one file, its mojibake repaired first where certain (the repaired
    text is what is labelled, chunked and cited); ValueError (or MissingExtraError) with the
    reason on failure."""
    loaded, repair = repair_mojibake(load_document(source.path, data))
    front = to_fields(loaded.metadata, "front matter") if loaded.metadata else DocumentFields()
    own = sidecar.fields.over(front)
    labels = label_sources(source.doc_id, (sidecar.fields, "sidecar"), (front, "front matter"))
    prepared = prepare_loaded(
        source.doc_id, loaded, own, settings, user_metadata=filterable(own.free), labels=labels,
        paths=anchored_paths(source),
    )  # fmt: skip
    if repair is not None:
        described = repair.describe()
        prepared = replace(
            prepared, metadata={**prepared.metadata, REPAIRED: described},
            warnings=(f"mojibake repaired: {described}", *prepared.warnings),
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
    sensitivity, source_of_label = read_label(
        doc_id, loaded.text, title, labels, rules=settings.rules, paths=paths, default=settings.sensitivity,
        caller=settings.sensitivity if settings.sensitivity_given else None,
    )  # fmt: skip
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
            "unprintable characters, mojibake that could not be repaired with certainty); check the "
            "file, or skip such files with --skip-garbled"
        )
    return PreparedDocument(meta, chunks, loaded, metadata, tuple(warnings))


def keep_stricter(
    prepared: PreparedDocument, stored: Iterable[str], levels: Sequence[str], *, lower: bool = False
) -> PreparedDocument:
    """`prepared`, relabelled with the strictest `stored` label of the active version when that
    is stricter than its own and `lower` is False (a warning says so): a re-ingest never lowers
    a label implicitly. A stored label outside `levels` counts as the strictest (fails closed)."""
    new = prepared.meta.sensitivity
    kept = kept_label(new, stored, levels, lower=lower)
    if kept is None:
        return prepared
    chunks = [replace(chunk, sensitivity=kept) for chunk in prepared.chunks]
    metadata = {**prepared.metadata, "sensitivity": kept, "sensitivity_from": "kept"}
    return replace(
        prepared, meta=replace(prepared.meta, sensitivity=kept), chunks=chunks, metadata=metadata,
        warnings=(*prepared.warnings, kept_warning(kept, new)),
    )  # fmt: skip


def _identity(chunker: Chunker) -> str:
    """The chunker's repr when its class defines one (e.g. its budget), else its class path."""
    kind = type(chunker)
    path = f"{kind.__module__}.{kind.__qualname__}"
    return repr(chunker) if kind.__repr__ is not object.__repr__ else path


def _digest(data: Any) -> str:
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
