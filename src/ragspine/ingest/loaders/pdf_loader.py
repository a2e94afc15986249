"""PDF (.pdf) files: the text of each page, via pypdf, with page boundaries kept.

Invariants: pages are joined in order by a blank line (a page boundary is always a paragraph
boundary); `page_spans[i]` is where page `page_numbers[i]` lies in the text, so a chunk's
character span maps to the pages it came from. A page without extractable text (a scan) adds
nothing but keeps the numbering; a PDF with no text at all, one encrypted with a password, or a
corrupt one raises ValueError with the reason. An encrypted PDF that opens with the empty password
(common: owner-password-only AES PDFs) is read; AES needs `cryptography` (in `ragspine[pdf]`),
and without it the error names the extra.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragspine.ingest.loaders.base import LoadedDocument, MissingExtraError, Span, clean_text, require

PAGE_SEPARATOR = "\n\n"


def load_pdf(data: bytes, path: Path) -> LoadedDocument:
    """The text of a PDF, page by page; see the module docstring."""
    pypdf = require("pypdf", extra="pdf", purpose="reading .pdf files")
    try:
        with _quiet("pypdf"):
            reader = pypdf.PdfReader(io.BytesIO(data))
            locked = bool(reader.is_encrypted) and not reader.decrypt("")
            pages = [] if locked else [_page_text(page) for page in reader.pages]
            title = "" if locked else _title(reader)
    except pypdf.errors.DependencyError as exc:  # AES without `cryptography`
        raise MissingExtraError(
            f"{path.name} is AES-encrypted; reading it needs the optional package 'cryptography': "
            "pip install 'ragspine[pdf]'"
        ) from exc
    except Exception as exc:  # pypdf raises many types for damaged files; report them all
        raise ValueError(f"not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if locked:
        raise ValueError("the PDF is encrypted with a password")
    parts: list[str] = []
    spans: list[Span] = []
    numbers: list[int] = []
    cursor = 0
    for number, page_text in enumerate(pages, start=1):
        if not page_text:
            continue
        if parts:
            cursor += len(PAGE_SEPARATOR)
        spans.append((cursor, cursor + len(page_text)))
        numbers.append(number)
        parts.append(page_text)
        cursor += len(page_text)
    if not parts:
        raise ValueError(
            f"no extractable text on any of its {len(pages)} page(s) (a scan? run OCR on it first)"
        )
    return LoadedDocument(
        PAGE_SEPARATOR.join(parts),
        title=title or path.stem,
        loader="pdf",
        page_spans=tuple(spans),
        page_numbers=tuple(numbers),
    )


def _page_text(page: Any) -> str:
    return clean_text(page.extract_text() or "").strip()


@contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Hold back a library's warnings while it reads a damaged file: the reason is reported instead."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _title(reader: object) -> str:
    try:
        meta = getattr(reader, "metadata", None)
        title = getattr(meta, "title", None) if meta is not None else None
    except Exception:  # a damaged info dictionary only costs the title
        return ""
    return " ".join(str(title).split()) if title else ""
