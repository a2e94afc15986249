"""HTML (.html, .htm) files: the page's main text, every text node of it, headings as headings.

Invariants: the text is trafilatura's main-content extraction when it holds at least
`MIN_TEXT_RECALL` of the words of the full DOM walk (`html_dom.dom_text`: every visible text
node of the main content, whatever wraps it) and exactly the walk's headings; otherwise it is
the walk's text (trafilatura drops text sitting directly under `<body>`, headings wrapped in
links, `<dt>` questions, and turns `#` lines of `<pre>` blocks into headings). Either way
scripts, styles, navigation, page headers and footers, sidebars and comments are not part of the
text; headings, paragraphs, lists, tables and code come out as Markdown blocks separated by
blank lines, so each is its own paragraph. The bytes are decoded by `encoding.decode_bytes`,
honouring a `<meta charset>` declaration that fits them. The title is the page's `<title>`,
else its first heading, else the file name. The headings (`<h1>`…`<h6>`, and FAQ questions:
`<dt>`, `<summary>`, …), written as Markdown `#` lines, are the loaded document's `headings`.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from ragspine.ingest.encoding import decode_bytes
from ragspine.ingest.loaders.base import LoadedDocument, clean_text, require
from ragspine.ingest.loaders.html_dom import dom_text
from ragspine.ingest.loaders.text_loader import heading_spans

_DECLARED = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_:.\-]+)"""
    rb"""|<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.\-]+)""",
    re.IGNORECASE,
)
_MD_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
_SNIFF_BYTES = 4096
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]|[^\W_]+")
MIN_TEXT_RECALL = 0.98  # trafilatura's text is used when it keeps this share of the walk's words


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
    walked = clean_text(dom_text(tree)).strip()  # before trafilatura, which may prune the tree
    text = choose_text(_trafilatura_text(trafilatura, tree), walked)
    if not text:
        raise ValueError("no main text found in the page (only navigation, scripts or markup)")
    heading = _MD_HEADING.search(text)
    title = page_title or (heading.group(1) if heading else path.stem)
    return LoadedDocument(text, title=title, loader="html", encoding=decoded.encoding, headings=heading_spans(text))


def _trafilatura_text(trafilatura: Any, tree: Any) -> str:
    extracted = trafilatura.extract(
        tree,
        output_format="markdown",
        include_formatting=True,
        include_tables=True,
        include_comments=False,
        include_links=False,
        include_images=False,
    )
    return clean_text(extracted or "").strip()


def choose_text(extracted: str, walked: str) -> str:
    """trafilatura's `extracted` text when it keeps `MIN_TEXT_RECALL` of the DOM walk's words
    and the same headings (none lost, none invented); the `walked` text otherwise.

    >>> choose_text("# Intro\\n\\nAll of it.", "# Intro\\n\\nAll of it.")
    '# Intro\\n\\nAll of it.'
    >>> choose_text("All of it.", "# Intro\\n\\nAll of it.")  # the heading was lost
    '# Intro\\n\\nAll of it.'
    """
    if not walked:
        return extracted
    if not extracted or text_recall(walked, extracted) < MIN_TEXT_RECALL:
        return walked
    return extracted if heading_labels(extracted) == heading_labels(walked) else walked


def text_recall(reference: str, text: str) -> float:
    """The share of `reference`'s words (a CJK character is a word) that `text` holds, counted
    with multiplicity; 1.0 for a reference without words.

    >>> text_recall("one two two three", "two one")
    0.5
    """
    want = Counter(_WORD.findall(reference.lower()))
    have = Counter(_WORD.findall(text.lower()))
    total = sum(want.values())
    return 1.0 if not total else sum((want & have).values()) / total


def heading_labels(text: str) -> list[str]:
    """The labels of `text`'s Markdown heading lines outside fenced code, in order."""
    return [" ".join(text[start:end].lstrip("#").split()) for start, end, _ in heading_spans(text)]


def declared_charset(data: bytes) -> str | None:
    """The charset an HTML file declares in its first bytes (`<meta charset>`, XML prolog)."""
    match = _DECLARED.search(data[:_SNIFF_BYTES])
    if match is None:
        return None
    return (match.group(1) or match.group(2)).decode("ascii")
