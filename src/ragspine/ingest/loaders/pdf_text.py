"""The text of each page of a PDF: pypdfium2 (PDFium) when installed, pypdf otherwise.

Invariants: `read_pdf_pages` returns one string per page, in page order (a page without text is
""), each with `\\n` line ends, no NUL, no surrounding blanks, and spaces between two CJK
characters removed (`join_cjk_spaces`); both extractors go through the same cleaning, so which one
ran changes only what the PDF library finds. PDFium reads first; a file it cannot open (other than
for a password) is read again by pypdf, which repairs more kinds of damage, so pypdf's error is
the one reported. A PDF locked by a password is `PdfLocked`; every other failure is ValueError
"not a readable PDF (...)"; a missing pypdf names the `pdf` extra. PDFium runs on one thread
at a time (it is not thread-safe).
"""

from __future__ import annotations

import io
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ragspine.errors import RagspineError
from ragspine.ingest.loaders.base import MissingExtraError, clean_text, require
from ragspine.retrieval.lexical.tokenize import CJK_RUN

# PDFium marks a hyphen it judged to end a hyphenated line with U+FFFE (and U+0002 in bounded
# text); the page shows a hyphen, so the text keeps one
_GENERATED_HYPHENS = str.maketrans({"\ufffe": "-", "\x02": "-"})
_SPACE_RUN = re.compile(" +")
# PDFium is not thread-safe; the service reads uploads on several threads, so one at a time
_PDFIUM_LOCK = threading.Lock()


class PdfLocked(RagspineError, ValueError):
    """The PDF opens only with a password."""


def pdf_extractor() -> str:
    """The library that reads PDF text here: "pypdfium2" when installed, else "pypdf"."""
    return "pypdfium2" if find_spec("pypdfium2") is not None else "pypdf"


def pdf_reader_revision() -> int:
    """The PDF loader's revision (`loaders.READER_REVISIONS`) for the extractor that runs here:
    1 pypdf with spaces between CJK characters removed, 2 pypdfium2. (0, before: pypdf as is.)"""
    return 2 if pdf_extractor() == "pypdfium2" else 1


def read_pdf_pages(data: bytes, path: Path, *, extractor: str | None = None) -> tuple[list[str], str]:
    """(the cleaned text of every page, the document title or "") of the PDF in `data`, read by
    `extractor` ("pypdfium2" or "pypdf"; by default `pdf_extractor()`)."""
    if extractor not in (None, "pypdfium2", "pypdf"):
        raise ValueError(f"unknown PDF extractor {extractor!r}; valid: pypdfium2, pypdf")
    if (extractor or pdf_extractor()) == "pypdfium2":
        try:
            return _read_pdfium(data)
        except PdfLocked:
            raise
        except Exception:  # a file PDFium cannot read: pypdf repairs more, and reports why not
            pass
    return _read_pypdf(data, path)


def join_cjk_spaces(text: str) -> str:
    """`text` with every run of spaces removed whose both neighbours are CJK characters.

    PDF extractors put spaces between the glyphs of some Chinese reports ("本 报 告", "手 续费"),
    which breaks the bigrams BM25 indexes; CJK means the lexical tokenizer's `CJK_RUN` (Han, kana),
    so a space beside Latin text, digits, punctuation or Hangul (Korean spaces words) stays.

    >>> join_cjk_spaces("本 报 告 on 手 续费 2024 年")
    '本报告 on 手续费 2024 年'
    """
    if CJK_RUN.search(text) is None:
        return text

    def keep(match: re.Match[str]) -> str:
        start, end = match.span()
        joined = start > 0 and end < len(text) and CJK_RUN.match(text[start - 1]) and CJK_RUN.match(text[end])
        return "" if joined else match.group()

    return _SPACE_RUN.sub(keep, text)


def _clean(raw: str) -> str:
    return join_cjk_spaces(clean_text(raw)).strip()


def _read_pdfium(data: bytes) -> tuple[list[str], str]:
    pdfium = require("pypdfium2", extra="pdf", purpose="reading .pdf files")
    with _PDFIUM_LOCK:
        try:
            document = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            if "password" in str(exc).lower():
                raise PdfLocked("the PDF is encrypted with a password") from exc
            raise
        try:
            pages = [_pdfium_page_text(document, index) for index in range(len(document))]
            return pages, _pdfium_title(document)
        finally:
            document.close()


def _pdfium_page_text(document: Any, index: int) -> str:
    page = document[index]
    try:
        textpage = page.get_textpage()
        try:
            return _clean(textpage.get_text_range().translate(_GENERATED_HYPHENS))
        finally:
            textpage.close()
    finally:
        page.close()


def _pdfium_title(document: Any) -> str:
    try:
        title = document.get_metadata_dict().get("Title", "")
    except Exception:  # a damaged info dictionary only costs the title
        return ""
    return " ".join(str(title).split())


def _read_pypdf(data: bytes, path: Path) -> tuple[list[str], str]:
    pypdf = require("pypdf", extra="pdf", purpose="reading .pdf files")
    try:
        with _quiet("pypdf"):
            reader = pypdf.PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):
                raise PdfLocked("the PDF is encrypted with a password")
            return [_clean(page.extract_text() or "") for page in reader.pages], _pypdf_title(reader)
    except PdfLocked:
        raise
    except pypdf.errors.DependencyError as exc:  # AES without `cryptography`
        raise MissingExtraError(
            f"{path.name} is AES-encrypted; reading it needs the optional package 'cryptography': "
            "pip install 'ragspine[pdf]'"
        ) from exc
    except Exception as exc:  # pypdf raises many types for damaged files; report them all
        raise ValueError(f"not a readable PDF ({type(exc).__name__}: {exc})") from exc


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


def _pypdf_title(reader: object) -> str:
    try:
        meta = getattr(reader, "metadata", None)
        title = getattr(meta, "title", None) if meta is not None else None
    except Exception:  # a damaged info dictionary only costs the title
        return ""
    return " ".join(str(title).split()) if title else ""
