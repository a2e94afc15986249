"""Word (.docx) files: paragraphs, headings and tables in document order, via python-docx.

Invariants: every non-empty paragraph (headings included) is its own paragraph of the text;
a table becomes one paragraph per row, its cells joined by " | " (a merged cell counted once,
line breaks inside a cell turned into spaces); a table nested in a cell follows the row that holds
it, its rows as paragraphs the same way (at any depth). Headers, footers, comments and images are not
text. The title is the document's core title property, else its first heading, else the file name.
Heading-styled paragraphs are the loaded document's `headings` (Title: level 0, Heading N: N).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ragspine.ingest.loaders.base import LoadedDocument, clean_text, non_blank, require

CELL_SEPARATOR = " | "
BLOCK_SEPARATOR = "\n\n"


def load_docx(data: bytes, path: Path) -> LoadedDocument:
    """The text of a .docx file; see the module docstring."""
    docx = require("docx", extra="office", purpose="reading .docx files")
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # not a zip, missing parts, bad XML: report, never crash the batch
        raise ValueError(f"not a readable .docx file ({type(exc).__name__}: {exc})") from exc
    is_heading = _HeadingStyles(document)
    blocks: list[str] = []
    headings: list[str] = []
    spans: list[tuple[int, int, int]] = []
    cursor = 0  # where the next block starts in the joined text
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            for row in _table_rows(item):
                blocks.append(row)
                cursor += len(row) + len(BLOCK_SEPARATOR)
            continue
        text = clean_text(item.text).strip()
        if text:
            blocks.append(text)
            level = is_heading.level(item._p.style)  # the paragraph's own style id, if any
            if level is not None:
                headings.append(" ".join(text.split()))
                spans.append((cursor, cursor + len(text), level))
            cursor += len(text) + len(BLOCK_SEPARATOR)
    title = " ".join((document.core_properties.title or "").split())
    return LoadedDocument(
        non_blank(BLOCK_SEPARATOR.join(blocks), path.name),
        title=title or (headings[0] if headings else path.stem),
        loader="docx",
        headings=tuple(spans),
    )


def _table_rows(table: Any) -> list[str]:
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        nested: list[Any] = []
        previous = None
        for cell in row.cells:
            if previous is not None and cell._tc is previous:  # a merged cell repeats itself
                continue
            previous = cell._tc
            text = " ".join(p.text for p in cell.paragraphs)  # `cell.text` leaves nested tables out
            cells.append(" ".join(clean_text(text).split()))
            nested.extend(cell.tables)
        if any(cells):
            rows.append(CELL_SEPARATOR.join(cells))
        for inner in nested:
            rows.extend(_table_rows(inner))
    return rows


class _HeadingStyles:
    """The heading level of a paragraph style id (Title, Heading N), each id looked up once.

    Style names are English in every locale ("heading 1") while ids are localised ("1" in a
    Chinese Word), so the id is resolved to its name. python-docx's own `paragraph.style` rescans
    the whole style table for every paragraph without an explicit style, which dominated load time.
    """

    def __init__(self, document: Any) -> None:
        self._styles = document.styles.element
        self._known: dict[str, int | None] = {}

    def level(self, style_id: str | None) -> int | None:
        """0 for a Title style, N for "Heading N" (1 when unnumbered), None for any other."""
        if not style_id:
            return None
        if style_id not in self._known:
            style = self._styles.get_by_id(style_id)
            name = ((style.name_val if style is not None else None) or style_id).lower()
            digits = "".join(ch for ch in name if ch.isdigit())
            self._known[style_id] = (
                0 if name.startswith("title") else (int(digits) if digits else 1) if name.startswith("heading") else None
            )
        return self._known[style_id]
