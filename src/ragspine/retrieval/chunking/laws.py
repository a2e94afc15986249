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
This module sits below `chunking.structure` (whose `LawsChunker` calls `law_pieces` with its
sections and its packer): it imports nothing from it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ragspine.retrieval.chunking.chunking import _sentence_spans, trim_span

Span = tuple[int, int]
ARTICLE_LEVEL = 4  # 第N条 / Article N (`structure.article_heading`)
ITEM_LEVELS = (5, 6)  # 第N款, （一） / (a); a deeper section of another level is a page continuation
WINDOW_FACTOR = 4  # the longest article carried whole in a piece's window, in budgets
LEAD_CHARS = 120  # the longest lead sentence put in a heading path
_NUMBERED_ITEM = re.compile(r"^[ \t]*\d{1,2}[.．、](?!\d)", re.MULTILINE)


class SectionLike(Protocol):
    """What `law_pieces` reads of a section (`structure.Section`)."""

    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def level(self) -> int: ...
    @property
    def path(self) -> tuple[str, ...]: ...
    @property
    def heading_end(self) -> int: ...


S = TypeVar("S", bound=SectionLike)
# The layout packer: `(section, span inside it, heading end)` -> the chunk spans of that span.
Pack = Callable[[S, Span, int], list[Span]]


@dataclass(frozen=True)
class LawPiece:
    """One chunk to make: its span, heading path, parent span and window span (or None)."""

    start: int
    end: int
    path: tuple[str, ...]
    parent: Span
    window: Span | None = None


def law_pieces(
    text: str,
    sections: Sequence[S],
    parents: Sequence[Span],
    max_chars: int,
    pack: Pack[S],
    page_starts: Sequence[int] = (),
) -> list[LawPiece]:
    """The pieces of a law cut into `sections` (with their `parents`) on pages starting at
    `page_starts`; see the module docstring."""
    pages = sorted(page_starts)
    pieces: list[LawPiece] = []
    for group in _article_groups(sections):
        head = sections[group[0]]
        members = [sections[i] for i in group]
        end = members[-1].end
        items = any(m.level in ITEM_LEVELS for m in members[1:])
        itemized = items or _NUMBERED_ITEM.search(text, head.heading_end, end) is not None
        parent = parents[group[0]]
        if not itemized or head.level != ARTICLE_LEVEL:
            pieces.extend(
                LawPiece(*span, section.path, parents[i])
                for i, section in zip(group, members, strict=True)
                for span in pack(section, (section.start, section.end), section.heading_end)
            )
        elif end - head.start <= max_chars and not _crosses_page(pages, head.start, end):
            pieces.append(LawPiece(head.start, end, head.path, parent))
        else:
            pieces.extend(_split_article(text, members, parent, max_chars, pack, pages))
    return pieces


def _article_groups(sections: Sequence[SectionLike]) -> list[list[int]]:
    """Indices of `sections` grouped: an article with the deeper sections after it (clauses,
    items, page continuations); every other section alone."""
    groups: list[list[int]] = []
    for i, section in enumerate(sections):
        if groups and section.level > ARTICLE_LEVEL and sections[groups[-1][0]].level == ARTICLE_LEVEL:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _split_article(
    text: str, members: Sequence[S], parent: Span, max_chars: int, pack: Pack[S], pages: Sequence[int]
) -> list[LawPiece]:
    """A long article cut between its items (see the module docstring)."""
    head = members[0]
    article = (head.start, members[-1].end)
    lead = lead_sentence(text, head, _first_item_start(text, members))
    label = head.path[-1] if head.path else ""
    pieces: list[LawPiece] = []
    for section, span in _packed_items(text, members, max_chars, pack, pages):
        if span[0] == head.start:
            pieces.append(LawPiece(*span, head.path, parent))
            continue
        path = list(section.path)
        at = len(head.path) - 1  # the article's label in the path
        if lead and at >= 0 and path[: at + 1] == list(head.path):
            path[at] = lead if lead.startswith(label) else f"{label} {lead}"
        whole = article[1] - article[0] <= WINDOW_FACTOR * max_chars
        pieces.append(LawPiece(*span, tuple(path), parent, article if whole else (article[0], span[1])))
    return pieces


def _packed_items(
    text: str, members: Sequence[S], max_chars: int, pack: Pack[S], pages: Sequence[int]
) -> list[tuple[S, Span]]:
    """The article's item segments (each member section cut at its `1.` lines), consecutive ones
    packed up to `max_chars` without crossing a page start; each with the section it starts in."""
    out: list[tuple[S, Span]] = []
    current: tuple[S, Span] | None = None
    for section in members:
        for start, end in _segments(text, section):
            if current is not None and end - current[1][0] <= max_chars and not _crosses_page(pages, current[1][0], start):
                current = (current[0], (current[1][0], end))
                continue
            if current is not None:
                out.append(current)
                current = None
            if end - start <= max_chars:
                current = (section, (start, end))
            else:
                heading_end = section.heading_end if start == section.start else start
                out.extend((section, span) for span in pack(section, (start, end), heading_end))
    if current is not None:
        out.append(current)
    return out


def _crosses_page(pages: Sequence[int], start: int, end: int) -> bool:
    """Whether a page starts inside `(start, end]` (`pages` sorted)."""
    at = bisect.bisect_right(pages, start)
    return at < len(pages) and pages[at] <= end


def _segments(text: str, section: SectionLike) -> list[Span]:
    """`section` cut at the start of each numbered item line (`1.`, `2、`) after its heading."""
    found = _NUMBERED_ITEM.finditer(text, section.heading_end, section.end)
    bounds = [section.start, *(m.start() for m in found if m.start() > section.start), section.end]
    spans = [trim_span(text, a, b) for a, b in zip(bounds, bounds[1:])]
    return [(a, b) for a, b in spans if b > a]


def _first_item_start(text: str, members: Sequence[SectionLike]) -> int:
    """Where the article's first item starts: its first numbered line or item section."""
    numbered = _NUMBERED_ITEM.search(text, members[0].heading_end, members[-1].end)
    item = next((m.start for m in members[1:] if m.level in ITEM_LEVELS), members[-1].end)
    return min(item, numbered.start()) if numbered is not None else item


def lead_sentence(text: str, head: SectionLike, items_start: int) -> str:
    """The article's sentence just before its first item (the one that says what the list is
    about), from the article's own line on, whitespace-collapsed, cut to `LEAD_CHARS`.

    >>> from ragspine.retrieval.chunking.structure import Section
    >>> law = "第一章 总则\\n第四条 国家建立制度。制度包括：\\n（一）分级；"
    >>> lead_sentence(law, Section(0, len(law), 4, ("第一章 总则", "第四条"), 0), law.index("（"))
    '制度包括：'
    """
    label = head.path[-1] if head.path else ""
    start = head.start
    if label:  # a chapter heading glued above the article is not part of its lead
        line = text.rfind("\n" + label, head.start, items_start)
        start = line + 1 if line >= 0 else start
    start, end = trim_span(text, start, max(start, items_start))
    sentences = _sentence_spans(text, start, end)
    if not sentences:
        return ""
    s, e = sentences[-1]
    return " ".join(text[s:e].split())[:LEAD_CHARS]
