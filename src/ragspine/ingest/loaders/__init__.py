"""File loaders: one per format, chosen by file suffix from the `LOADERS` registry.

Invariant: `SUPPORTED_SUFFIXES` is derived from `LOADERS`, so discovery, error messages and the
loaders can never disagree. Loaders for PDF, Word and HTML import their libraries lazily and name
the extra to install (`ragspine[pdf]`, `ragspine[office]`, `ragspine[html]`) when it is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ragspine.ingest.loaders.base import LoadedDocument, MissingExtraError
from ragspine.ingest.loaders.docx_loader import load_docx
from ragspine.ingest.loaders.html_loader import load_html
from ragspine.ingest.loaders.pdf_loader import load_pdf
from ragspine.ingest.loaders.pdf_text import pdf_reader_revision
from ragspine.ingest.loaders.text_loader import load_markdown, load_text

Loader = Callable[[bytes, Path], LoadedDocument]

LOADERS: dict[str, Loader] = {
    ".txt": load_text,
    ".text": load_text,
    ".md": load_markdown,
    ".markdown": load_markdown,
    ".html": load_html,
    ".htm": load_html,
    ".pdf": load_pdf,
    ".docx": load_docx,
}
SUPPORTED_SUFFIXES: tuple[str, ...] = tuple(LOADERS)
# A loader's revision, raised when it reads the same bytes differently, so files of that suffix
# are re-read (part of their ingest key; a suffix not listed adds nothing, so other files' keys,
# and the eval caches keyed by INGEST_FORMAT, stay). 1: plain text reads its front matter labels.
# .pdf (issue 37): 1 pypdf with spaces between CJK characters removed, 2 pypdfium2 (the extractor
# when installed), so a PDF is re-read when the text its extractor gives changes.
READER_REVISIONS: dict[str, int] = {".txt": 1, ".text": 1, ".pdf": pdf_reader_revision()}

__all__ = [
    "LOADERS", "READER_REVISIONS", "SUPPORTED_SUFFIXES", "LoadedDocument", "Loader", "MissingExtraError", "load_document"
]  # fmt: skip


def load_document(path: Path, data: bytes) -> LoadedDocument:
    """Turn the bytes of `path` into text with the loader for its suffix; ValueError if none fits."""
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise ValueError(f"unsupported file type (supported: {', '.join(SUPPORTED_SUFFIXES)})")
    return loader(data, path)
