"""The `laws` preset's pieces: every article (第N条, Article N) starts a chunk, and its list items
(（一）（二）…, `1.` / `1、` lines, (a), and 第N款 clauses) stay with the article's lead sentence.

Invariants (on top of `chunking.structure`'s, which still hold: every chunk is an exact slice of
the text, nothing is lost, no chunk crosses an article or a page start):
- An article whose text (with its items) fits `max_chars` and does not cross a page start is one
  chunk: its items are never cut from the sentence that says what the list is about.
- A longer article is cut only between items (consecutive items packed up to `max_chars`; an item
  longer than that is cut by the paragraph packer), never across a page start. Every piece
  after the first carries the article's lead sentence: its `window_text` (the snippet's
  `prompt_text`) is the article from its start — the whole article when it is at most
  `WINDOW_FACTOR × max_chars`, else up to the piece's end — and its heading path names the
  article with its lead sentence (`第四条 国家建立…制度，包括：`), so the contextual header
  carries it too.
- An article without items, and everything outside articles, is packed as the layout chunker
  packs it (unchanged).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragspine.retrieval.chunking.chunking import _sentence_spans, trim_span
from ragspine.retrieval.chunking.structure import (
    HEADING_SEPARATOR,
    MAX_HEADING_LINE,
    PAGE_LEVEL,
    Piece,
    Section,
    Span,
    article_heading,
    pack_section,
)

ARTICLE_LEVEL = 4  # 第N条 / Article N (`structure.article_heading`)
_ITEM_LEVELS = (5, 6)  # 第N款, （一） / (a)
WINDOW_FACTOR = 4  # the longest article carried whole in a piece's window, in budgets
_NUMBERED_ITEM = re.compile(r"^[ \t]*\d{1,2}[.．、](?!\d)", re.MULTILINE)


def law_pieces(
    text: str, sections: Sequence[Section], parents: Sequence[Span], max_chars: int, overlap_chars: int
) -> list[Piece]:
    """The pieces of a law cut into `sections` (with their `parents`); see the module docstring."""
    pieces: list[Piece] = []
    for group in _article_groups(sections):
        head = sections[group[0]]
        members = [sections[i] for i in group]
        end = members[-1].end
        itemized = len(members) > 1 or _NUMBERED_ITEM.search(text, head.heading_end, end) is not None
        parent = parents[group[0]]
        if not itemized or head.level != ARTICLE_LEVEL:
            pieces.extend(_packed(text, members, parents[group[0] : group[-1] + 1], max_chars, overlap_chars))
        elif end - head.start <= max_chars and all(m.level != PAGE_LEVEL for m in members[1:]):
            pieces.append(Piece(head.start, end, HEADING_SEPARATOR.join(head.path), parent))
        else:
            pieces.extend(_split_article(text, members, parent, max_chars, overlap_chars))
    return pieces


def _article_groups(sections: Sequence[Section]) -> list[list[int]]:
    """Indices of `sections` grouped: an article with the clause, item and page-continuation
    sections after it; every other section alone."""
    groups: list[list[int]] = []
    for i, section in enumerate(sections):
        joins = section.level in (*_ITEM_LEVELS, PAGE_LEVEL) and groups
        if joins and sections[groups[-1][0]].level == ARTICLE_LEVEL:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _packed(
    text: str, members: Sequence[Section], parents: Sequence[Span], max_chars: int, overlap_chars: int
) -> list[Piece]:
    """Each section packed on its own, as the layout chunker does."""
    return [
        Piece(start, end, HEADING_SEPARATOR.join(section.path), parent)
        for section, parent in zip(members, parents, strict=True)
        for start, end in pack_section(text, section, max_chars, overlap_chars)
    ]


def _split_article(
    text: str, members: Sequence[Section], parent: Span, max_chars: int, overlap_chars: int
) -> list[Piece]:
    """A long article cut between its items (see the module docstring)."""
    head = members[0]
    article = (head.start, members[-1].end)
    lead = lead_sentence(text, head, _first_item_start(text, members))
    pieces: list[Piece] = []
    for section, span in _packed_items(text, members, max_chars, overlap_chars):
        if span[0] == head.start:
            pieces.append(Piece(*span, HEADING_SEPARATOR.join(head.path), parent))
            continue
        path = list(section.path)
        at = len(head.path) - 1  # the article's label in the path
        if path[: at + 1] == list(head.path) and lead:
            path[at] = lead if lead.startswith(head.path[-1]) else f"{head.path[-1]} {lead}"
        whole = article[1] - article[0] <= WINDOW_FACTOR * max_chars
        window = article if whole else (article[0], span[1])
        pieces.append(Piece(*span, HEADING_SEPARATOR.join(path), parent, window))
    return pieces


def _packed_items(
    text: str, members: Sequence[Section], max_chars: int, overlap_chars: int
) -> list[tuple[Section, Span]]:
    """The article's item segments (each member section cut at its `1.` lines), consecutive ones
    packed up to `max_chars` without crossing a page start; each with the section it starts in."""
    out: list[tuple[Section, Span]] = []
    current: tuple[Section, Span] | None = None
    for section in members:
        page_cut = section.level == PAGE_LEVEL
        for start, end in _segments(text, section):
            if current is not None and not page_cut and end - current[1][0] <= max_chars:
                current = (current[0], (current[1][0], end))
                continue
            if current is not None:
                out.append(current)
                current = None
            page_cut = False
            if end - start <= max_chars:
                current = (section, (start, end))
            else:
                part = Section(start, end, section.level, section.path, section.heading_end if start == section.start else start)
                out.extend((section, span) for span in pack_section(text, part, max_chars, overlap_chars))
    if current is not None:
        out.append(current)
    return out


def _segments(text: str, section: Section) -> list[Span]:
    """`section` cut at the start of each numbered item line (`1.`, `2、`) after its heading."""
    cuts = [m.start() for m in _NUMBERED_ITEM.finditer(text, section.heading_end, section.end) if m.start() > section.start]
    bounds = [section.start, *cuts, section.end]
    spans = [trim_span(text, a, b) for a, b in zip(bounds, bounds[1:])]
    return [(a, b) for a, b in spans if b > a]


def _first_item_start(text: str, members: Sequence[Section]) -> int:
    """Where the article's first item starts: its first numbered line or its second section."""
    head = members[0]
    numbered = _NUMBERED_ITEM.search(text, head.heading_end, head.end)
    if numbered is not None:
        return numbered.start()
    return members[1].start if len(members) > 1 else head.end


def lead_sentence(text: str, head: Section, items_start: int) -> str:
    """The article's sentence just before its first item (the one that says what the list is
    about), whitespace-collapsed and cut to `MAX_HEADING_LINE` characters.

    >>> law = "第四条 国家建立制度。制度包括：\\n（一）分级；"
    >>> lead_sentence(law, Section(0, len(law), 4, ("第四条",), 0), law.index("（"))
    '制度包括：'
    """
    start, end = trim_span(text, _article_line_start(text, head.start, items_start), max(head.start, items_start))
    sentences = _sentence_spans(text, start, end)
    if not sentences:
        return ""
    s, e = sentences[-1]
    return " ".join(text[s:e].split())[:MAX_HEADING_LINE]


def _article_line_start(text: str, start: int, end: int) -> int:
    """The start of the last article line (第N条, Article N) in `text[start:end]`: a chapter
    heading glued above the article is not part of its lead."""
    found = start
    position = start
    for line in text[start:end].split("\n"):
        hit = article_heading(line.strip())
        if hit is not None and hit[0] == ARTICLE_LEVEL:
            found = position
        position += len(line) + 1
    return found
