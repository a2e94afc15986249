"""HTML (.html, .htm) files: the page's main text, via trafilatura.

Invariants: scripts, styles, navigation, headers, footers, sidebars and comments are not part of
the text (trafilatura's main-content extraction, with its fallbacks); headings, paragraphs, lists
and tables come out as Markdown blocks separated by blank lines, so each is its own paragraph.
The bytes are decoded by `encoding.decode_bytes`, honouring a `<meta charset>` declaration that
fits them. The title is the page's `<title>`, else its first heading, else the file name. The
`<h1>`…`<h6>` headings, written as Markdown `#` lines, are the loaded document's `headings`.
"""

from __future__ import annotations

import re
from pathlib import Path

from ragspine.ingest.encoding import decode_bytes
from ragspine.ingest.loaders.base import LoadedDocument, clean_text, require
from ragspine.ingest.loaders.text_loader import heading_spans

_DECLARED = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_:.\-]+)"""
    rb"""|<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.\-]+)""",
    re.IGNORECASE,
)
_MD_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
_SNIFF_BYTES = 4096


def load_html(data: bytes, path: Path) -> LoadedDocument:
    """The main text of an HTML page; ValueError when the page has none."""
    trafilatura = require("trafilatura", extra="html", purpose="reading .html files")
    lxml_html = require("lxml.html", extra="html", purpose="reading .html files")
    decoded = decode_bytes(data, declared=declared_charset(data))
    if not decoded.text.strip():
        raise ValueError(f"{path.name} has no text")
    try:
        tree = lxml_html.document_fromstring(
            decoded.text.encode("utf-8"), parser=lxml_html.HTMLParser(encoding="utf-8")
        )
    except Exception as exc:  # lxml's ParserError and friends: report, never crash the batch
        raise ValueError(f"cannot parse the HTML: {exc}") from exc
    page_title = " ".join((tree.findtext(".//title") or "").split())
    extracted = trafilatura.extract(
        tree,
        output_format="markdown",
        include_formatting=True,
        include_tables=True,
        include_comments=False,
        include_links=False,
        include_images=False,
    )
    text = clean_text(extracted or "").strip()
    if not text:
        raise ValueError("no main text found in the page (only navigation, scripts or markup)")
    heading = _MD_HEADING.search(text)
    title = page_title or (heading.group(1) if heading else path.stem)
    return LoadedDocument(text, title=title, loader="html", encoding=decoded.encoding, headings=heading_spans(text))


def declared_charset(data: bytes) -> str | None:
    """The charset an HTML file declares in its first bytes (`<meta charset>`, XML prolog)."""
    match = _DECLARED.search(data[:_SNIFF_BYTES])
    if match is None:
        return None
    return (match.group(1) or match.group(2)).decode("ascii")
