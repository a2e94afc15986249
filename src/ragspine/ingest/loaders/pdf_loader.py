"""PDF (.pdf) files: the text of each page (`pdf_text`: pypdfium2, pypdf as fallback), page boundaries kept.

Invariants: pages are joined in order by a blank line (a page boundary is always a paragraph
boundary); `page_spans[i]` is where page `page_numbers[i]` lies in the text, so a chunk's
character span maps to the pages it came from. A page without extractable text (a scan) adds
nothing but keeps the numbering; a PDF with no text at all, one encrypted with a password, or a
corrupt one raises ValueError with the reason. An encrypted PDF that opens with the empty password
(common: owner-password-only AES PDFs) is read (by PDFium natively; pypdf needs `cryptography`,
in `ragspine[pdf]`, and without it the error names the extra).
"""

from __future__ import annotations

from pathlib import Path

from ragspine.ingest.loaders.base import LoadedDocument, Span
from ragspine.ingest.loaders.pdf_text import read_pdf_pages

PAGE_SEPARATOR = "\n\n"


def load_pdf(data: bytes, path: Path) -> LoadedDocument:
    """The text of a PDF, page by page; see the module docstring."""
    pages, title = read_pdf_pages(data, path)
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
