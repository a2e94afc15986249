"""Structure-aware chunkers: layout, the laws / book / qa presets, parent_child, sentence_window
and semantic (`auto`, which picks among them, is `chunking.auto`).

    from ragspine.retrieval.chunking.factory import make_chunker

    chunks = make_chunker("laws").chunk(text, DocumentMeta("civil-code"))
    chunks[3].heading, chunks[3].parent_id      # "民法典 > 第一章 基本规定 > 第三条", "civil-code:parent:…"

Invariants (every chunker here; property tests over random Unicode keep them):
- A chunk's `text` is a contiguous substring of the text given to `chunk`, and its
  `source_locator` (`doc#pA-B@start-end`, the paragraph packer's format) points exactly at it;
  `window_text`, when set, is also a contiguous substring and `parent_locator` points at it.
- Chunks never cross a section boundary. A section starts at every heading line the chunker's
  rules detect outside code (fenced; indented code for `#` and numbered lines) that is not a
  sentence fragment (a division, numbered or question line starts a sentence and not in lower
  case) nor a numbered list item (a numbered line is never a heading when the loader marked the
  format's headings), at every heading line the loader marked (`Layout`), and at
  the document's title line (a first paragraph of one short line followed by more text); a page
  start cuts a section. Inside a section the paragraph packer's budget, overlap and sentence cuts
  apply unchanged; a heading line is glued to the first piece of its section (never a chunk
  alone), so that piece may exceed the budget by the heading's length. A heading with no body
  before the next heading joins the next section.
- `heading` is the section's heading path (" > "-joined labels, shallowest first); `parent_id`
  names the chunk's parent (the section, or for `laws` the enclosing article) and
  `parent_locator` points at the parent's span. The presets change only heading detection,
  except that `laws` keeps an article's item sections with it (`chunking.laws`).
- Deterministic: the same text and metadata give the same chunks (semantic: for the same backend).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    _hard_split,
    _locator,
    _pack,
    _sentence_spans,
    check_budget,
    chunk_document,
    document_chunk,
    paragraph_spans,
    trim_span,
)
from ragspine.retrieval.chunking.laws import law_pieces
from ragspine.retrieval.chunking.protocol import Layout
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.types import EmbeddingBackend

Span = tuple[int, int]
# A heading rule looks at one stripped line: (level, label) when the line starts a section.
HeadingRule = Callable[[str], "tuple[int, str] | None"]

HEADING_SEPARATOR = " > "
MAX_HEADING_LINE = 120  # a longer line is body text, never a standalone heading
MAX_TITLE_LINE = 200  # the longest first line taken as the document's title
PAGE_LEVEL = 100  # a section continued on the next page: deeper than any heading
_NUM = r"[一二三四五六七八九十百千万零〇两\d]+"
_CN_DIVISION = re.compile(rf"^第{_NUM}([编部卷篇章节])(?:\s|$|[：:、])")
_CN_DIVISION_LEVEL = {"编": 1, "部": 1, "卷": 1, "篇": 1, "章": 2, "节": 3}
_CN_ARTICLE = re.compile(rf"^第{_NUM}条")
_CN_CLAUSE = re.compile(rf"^第{_NUM}款")
_CN_ITEM = re.compile(r"^[（(][一二三四五六七八九十]+[)）]")
_EN_DIVISION = re.compile(r"^(part|book|chapter|section)\s+([0-9]+|[ivxlc]+)\b[.:]?", re.IGNORECASE)
_EN_DIVISION_LEVEL = {"part": 1, "book": 1, "chapter": 2, "section": 3}
_EN_ARTICLE = re.compile(r"^(article|art\.|§)\s*[0-9]+[a-z]?\b", re.IGNORECASE)
_EN_ITEM = re.compile(r"^\(([a-z]|[0-9]+|[ivx]+)\)\s")
_MARKDOWN = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_NUMBERED = re.compile(r"^(\d+(?:\.\d+){0,3})\.?\s+(\S.*)$")
_QUESTION = re.compile(r"^(?:q\d*|question\s*\d*|问|问题\s*\d*)\s*[:：.．]", re.IGNORECASE)
_TERMINAL = "。！？；.!?;：:，,"
_SENTENCE_STOP = "。！？；.!?;"
_INNER_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|[。！？]")
SENTENCE_ENDS = "。！？；.!?;：:…"  # a line ending in one of these ends a sentence (a colon introduces)


# -- heading rules ----------------------------------------------------------------------------
def markdown_heading(line: str) -> tuple[int, str] | None:
    """`# Title` … `###### Title` (what the Markdown and HTML loaders produce)."""
    match = _MARKDOWN.match(line)
    return (len(match.group(1)), match.group(2)) if match else None


def division_heading(line: str) -> tuple[int, str] | None:
    """A short line opening a part / chapter / section: 第N编|部|卷|篇|章|节 …, Chapter 3 …; not a
    sentence that starts so ("Section 4 answers this.")."""
    if len(line) > MAX_HEADING_LINE:
        return None
    match = _CN_DIVISION.match(line) or _EN_DIVISION.match(line)
    if match is None or (line[-1] in _SENTENCE_STOP and len(line) > len(match.group(0).rstrip()) + 1):
        return None
    if match.re is _CN_DIVISION:
        return _CN_DIVISION_LEVEL[match.group(1)], line
    return _EN_DIVISION_LEVEL[match.group(1).lower()], line


def numbered_heading(line: str) -> tuple[int, str] | None:
    """`2.1 Scope`: a short numbered line (1-2 digits, or dotted) whose text starts with a letter
    and does not end like a sentence."""
    match = _NUMBERED.match(line)
    if not match or len(line) > 80 or line[-1] in _TERMINAL or not match.group(2)[0].isalpha():
        return None
    if "." not in match.group(1) and len(match.group(1)) > 2:  # "2023 Revenue" is not a heading
        return None
    return 3 + match.group(1).count("."), line


def article_heading(line: str) -> tuple[int, str] | None:
    """A law's article / clause / item: 第N条 (4), 第N款 (5), （一） (6); Article N, § N, (a)."""
    if match := _CN_ARTICLE.match(line) or _EN_ARTICLE.match(line):
        return 4, match.group(0)
    if match := _CN_CLAUSE.match(line):
        return 5, match.group(0)
    if match := _CN_ITEM.match(line) or _EN_ITEM.match(line):
        return 6, match.group(0).strip()
    return None


def question_heading(line: str) -> tuple[int, str] | None:
    """A question: `Q:` / `Question:` / `问：` lines, or a line of one sentence ending in ? or ？
    (a line holding the end of an earlier sentence is wrapped text, not a question) (level 9)."""
    if _QUESTION.match(line) or (
        len(line) <= MAX_TITLE_LINE and line[-1] in "?？" and not _INNER_SENTENCE_END.search(line[:-1])
    ):
        return 9, line[:MAX_HEADING_LINE]
    return None


# Rules whose line must start a sentence (`_in_context`); an explicit `Q:` / `问：` need not.
_FRAGMENT_RULES: frozenset[HeadingRule] = frozenset({division_heading, numbered_heading, question_heading})
LAYOUT_RULES: tuple[HeadingRule, ...] = (markdown_heading, division_heading, numbered_heading)
BOOK_RULES = LAYOUT_RULES  # `book` is `layout` under its own name (auto records which it picked)
LAWS_RULES: tuple[HeadingRule, ...] = (markdown_heading, division_heading, article_heading)
QA_RULES: tuple[HeadingRule, ...] = (markdown_heading, question_heading)


@dataclass(frozen=True)
class Section:
    """A contiguous span of the source under one heading path."""

    start: int
    end: int
    level: int  # of the heading that opened it (99: text before any heading)
    path: tuple[str, ...]
    heading_end: int  # where the opening heading line ends (== start when there is none)


Mark = tuple[int, int, int, str]  # (start, heading end, level, label) of one heading line


def find_sections(
    text: str, rules: Sequence[HeadingRule], *, title_line: bool = True, layout: Layout | None = None
) -> list[Section]:
    """The sections of `text` under `rules`, in order, whitespace-trimmed (see the module
    docstring). A loader's `layout` adds its heading lines (its level wins where a rule fires on
    the same line) and cuts sections at page starts (the path carries over)."""
    given = {start: (end, level) for start, end, level in (layout.headings if layout else ())}
    if given:  # the format marks its headings (Markdown, HTML, Word): a numbered line is a list item
        rules = [rule for rule in rules if rule is not numbered_heading]
    marks = _layout_marks(text, given) + _rule_marks(text, rules, skip=given.keys())
    marks.sort()
    if title_line:
        _add_title_mark(marks, text)
    merged = _merge_bodiless(_sections_at_marks(text, marks))
    return _cut_at_pages(merged, text, layout.page_starts) if layout and layout.page_starts else merged


def _layout_marks(text: str, given: dict[int, tuple[int, int]]) -> list[Mark]:
    """The heading lines a loader marked (`start -> (end, level)`), in order; an empty or
    out-of-range span is ignored and a Markdown `#` prefix is not part of the label."""
    return [
        (start, end, level, " ".join(text[start:end].lstrip("#").split()))
        for start, (end, level) in sorted(given.items())
        if 0 <= start < end <= len(text) and text[start:end].strip()
    ]


def _rule_marks(text: str, rules: Sequence[HeadingRule], *, skip: Collection[int]) -> list[Mark]:
    """The heading lines `rules` detect outside code (fenced ``` / ~~~, or indented code for
    `#` and numbered lines), except those starting at a position in `skip` (the loader's own
    headings) and those that are not headings in context (`_in_context`)."""
    return [mark for mark, _ in rule_hits(text, rules, skip=skip)]


def rule_hits(text: str, rules: Sequence[HeadingRule], *, skip: Collection[int] = ()) -> list[tuple[Mark, HeadingRule]]:
    """`_rule_marks`, each mark with the rule that made it (the first of `rules` that fires in
    context on its line)."""
    hits: list[tuple[Mark, HeadingRule]] = []
    position = 0
    fence = ""  # inside fenced code (``` or ~~~) no line is a heading
    lines = text.split("\n")
    previous_mark = -1  # index of the last line that was a heading
    for i, line in enumerate(lines):
        stripped = line.strip()
        start = position + len(line) - len(line.lstrip())
        if stripped[:3] in ("```", "~~~") and (not fence or stripped.startswith(fence)):
            fence = "" if fence else stripped[:3]
        elif stripped and not fence and start not in skip:
            found = next(
                ((_mark(stripped, start, hit), rule) for rule in rules
                 if (hit := rule(stripped)) is not None and _in_context(rule, lines, i, previous_mark)),
                None,
            )  # fmt: skip
            if found is not None:
                hits.append(found)
                previous_mark = i
        position += len(line) + 1
    return hits


_INDENTED_CODE = 4  # columns of indentation that make a line code (Markdown), never a `#` / numbered heading
_CLOSERS = "\"'”’）)」』】]*"
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*+•])\s+\S")
_ITEM_NUMBER = re.compile(r"^\s*(\d{1,3})[.)]\s")


def _in_context(rule: HeadingRule, lines: Sequence[str], i: int, previous_mark: int) -> bool:
    """Whether `rule` may fire on line i: a `#` or numbered line indented as code never does;
    a numbered line in a list (`_in_list`) never does; a division, numbered or question line
    must start a sentence (the line above is blank, a heading, or ends a sentence) and not open
    with a lower-case letter — a wrapped line is a fragment, never a heading."""
    line = lines[i]
    spaced = line.expandtabs(4)
    if rule in (markdown_heading, numbered_heading) and len(spaced) - len(spaced.lstrip(" ")) >= _INDENTED_CODE:
        return False
    if rule is numbered_heading and _in_list(lines, i):
        return False
    if rule in _FRAGMENT_RULES and not (rule is question_heading and _QUESTION.match(line.strip())):
        first = next((ch for ch in line.strip() if ch.isalpha()), "")
        above = lines[i - 1].strip().rstrip(_CLOSERS) if i > 0 else ""
        if first.islower() or (above and previous_mark != i - 1 and above[-1] not in SENTENCE_ENDS):
            return False
    return True


def _in_list(lines: Sequence[str], i: int) -> bool:
    """Line i (a numbered line) is a list item: the line above or below is a list item too, or
    the nearest non-blank line above or below is the previous / next number of the same list."""
    near = [j for j in (i - 1, i + 1) if 0 <= j < len(lines)]
    if any(_LIST_ITEM.match(lines[j]) for j in near if lines[j].strip()):
        return True
    number = _item_number(lines[i])
    for step in (-1, 1):
        j = i + step
        while 0 <= j < len(lines) and not lines[j].strip():
            j += step
        if 0 <= j < len(lines) and number is not None and _item_number(lines[j]) == number + step:
            return True
    return False


def _item_number(line: str) -> int | None:
    """N of a line opening `N.` / `N)` (one number, not a dotted 2.1), else None."""
    match = _ITEM_NUMBER.match(line)
    return int(match.group(1)) if match else None


def _mark(stripped: str, start: int, hit: tuple[int, str]) -> Mark:
    """The mark of a rule's `hit` on a (stripped) line starting at `start`. A line that is only
    its heading ends it; one with content after the label does not."""
    label = " ".join(hit[1].split())
    alone = label == " ".join(stripped.split()) or markdown_heading(stripped) is not None
    return (start, start + len(stripped) if alone else start, hit[0], label)


def _add_title_mark(marks: list[Mark], text: str) -> None:
    """Insert the document's title line as a level-0 mark: a first paragraph of one short line,
    followed by more text, that is not already a heading."""
    paragraphs = paragraph_spans(text)
    if len(paragraphs) <= 1:
        return
    first_start, first_end = paragraphs[0]
    line = text[first_start:first_end]
    if "\n" not in line and len(line) <= MAX_TITLE_LINE and not (marks and marks[0][0] == first_start):
        marks.insert(0, (first_start, first_end, 0, " ".join(line.split())))


def _sections_at_marks(text: str, marks: Sequence[Mark]) -> list[Section]:
    """One section per mark (to the next mark) with its heading path, after the text before the
    first mark (level 99, no path)."""
    sections: list[Section] = []
    if not marks or marks[0][0] > 0:
        end = marks[0][0] if marks else len(text)
        _add_section(sections, text, 0, end, 99, (), None)
    stack: list[tuple[int, str]] = []
    for i, (start, line_end, level, label) in enumerate(marks):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, label))
        end = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        _add_section(sections, text, start, end, level, tuple(lab for _, lab in stack), line_end)
    return sections


def _cut_at_pages(sections: list[Section], text: str, page_starts: Sequence[int]) -> list[Section]:
    """Sections cut where a page starts inside them; the continuation keeps the path and joins
    its section's parent (level PAGE_LEVEL)."""
    out: list[Section] = []
    for section in sections:
        start = section.start
        for cut in [*sorted(p for p in page_starts if section.heading_end < p < section.end), section.end]:
            first = start == section.start
            _add_section(out, text, start, cut, section.level if first else PAGE_LEVEL, section.path,
                         section.heading_end if first else None)  # fmt: skip
            start = cut
    return out


def _add_section(
    sections: list[Section], text: str, start: int, end: int, level: int, path: tuple[str, ...], line_end: int | None
) -> None:
    start, end = trim_span(text, start, end)
    if end > start:
        sections.append(Section(start, end, level, path, min(line_end, end) if line_end is not None else start))


def _merge_bodiless(sections: list[Section]) -> list[Section]:
    """A section that is only its heading line joins the next section."""
    out: list[Section] = []
    pending: Section | None = None
    for i, section in enumerate(sections):
        if pending is not None:
            section = replace(section, start=pending.start, heading_end=max(section.heading_end, pending.heading_end))
            pending = None
        if section.heading_end >= section.end and i + 1 < len(sections):
            pending = section
            continue
        out.append(section)
    return out


# -- chunk construction -------------------------------------------------------------------------
@dataclass(frozen=True)
class Piece:
    """One chunk to make: its span and what it carries besides the document's fields."""

    start: int
    end: int
    heading: str = ""
    parent: Span | None = None
    window: Span | None = None


def make_chunks(text: str, meta: DocumentMeta, pieces: Sequence[Piece], *, extra: dict[str, Any] | None = None) -> list[Chunk]:
    """Chunks for `pieces` in order: ids, locators and the document's fields filled in."""
    paragraphs = paragraph_spans(text)
    starts = [s for s, _ in paragraphs]
    ends = [e for _, e in paragraphs]
    metadata = {**meta.metadata, **(extra or {})}
    chunks: list[Chunk] = []
    for seq, piece in enumerate(pieces):
        body = text[piece.start : piece.end]
        parent_id = parent_locator = window_text = ""
        if piece.parent is not None:
            parent_id = f"{meta.doc_id}:parent:{piece.parent[0]}-{piece.parent[1]}"
            parent_locator = _locator(meta.doc_id, starts, ends, *piece.parent)
        if piece.window is not None:
            window_text = text[piece.window[0] : piece.window[1]]
            parent_locator = _locator(meta.doc_id, starts, ends, *piece.window)
        chunks.append(
            document_chunk(
                meta, seq, body, _locator(meta.doc_id, starts, ends, piece.start, piece.end),
                parent_id=parent_id, heading=piece.heading, window_text=window_text,
                parent_locator=parent_locator, metadata=dict(metadata),
            )  # fmt: skip
        )
    return chunks


def pack_section(text: str, section: Section, max_chars: int, overlap_chars: int) -> list[Span]:
    """The paragraph packer inside one section; a heading-only first piece is glued to the next."""
    paragraphs = [(section.start + s, section.start + e) for s, e in paragraph_spans(text[section.start : section.end])]
    spans = _pack(text, paragraphs, max_chars, overlap_chars)
    if len(spans) > 1 and spans[0][1] <= section.heading_end:
        spans[1] = (min(spans[0][0], spans[1][0]), spans[1][1])
        del spans[0]
    return spans


def parents_of(sections: Sequence[Section], parent_level: int) -> list[Span]:
    """Each section's parent span: the nearest section at or above `parent_level` that opens
    a run of deeper sections, through the end of that run (the section itself otherwise)."""
    out: list[Span] = []
    groups: list[list[int]] = []
    for i, section in enumerate(sections):
        if not groups or section.level <= parent_level or sections[groups[-1][0]].level > parent_level:
            groups.append([i])
        else:
            groups[-1].append(i)
    for group in groups:
        span = (sections[group[0]].start, sections[group[-1]].end)
        out.extend(span for _ in group)
    return out


class LayoutChunker:
    """Sections by heading rules, packed by the paragraph packer inside each section.

    >>> text = "# Guide\\n\\nIntro.\\n\\n## Setup\\n\\nRun it."
    >>> [(c.text, c.heading) for c in LayoutChunker().chunk(text, DocumentMeta("d"))]
    [('# Guide\\n\\nIntro.', 'Guide'), ('## Setup\\n\\nRun it.', 'Guide > Setup')]
    """

    name = "layout"
    rules: tuple[HeadingRule, ...] = LAYOUT_RULES
    parent_level = 99  # the parent of a chunk is its own section

    def __init__(self, max_chars: int = DEFAULT_CHUNK_CHARS, overlap_chars: int = DEFAULT_OVERLAP_CHARS) -> None:
        check_budget(max_chars, overlap_chars)
        self.max_chars, self.overlap_chars = max_chars, overlap_chars

    def chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]:
        return make_chunks(text, meta, self.pieces(text))

    def chunk_structured(self, text: str, meta: DocumentMeta, layout: Layout) -> list[Chunk]:
        """`chunk`, with the loader's headings and page breaks as well (`find_sections`)."""
        return make_chunks(text, meta, self.pieces(text, layout))

    def pieces(self, text: str, layout: Layout | None = None) -> list[Piece]:
        sections = find_sections(text, self.rules, layout=layout)
        parents = parents_of(sections, self.parent_level)
        return [
            Piece(start, end, HEADING_SEPARATOR.join(section.path), parent)
            for section, parent in zip(sections, parents, strict=True)
            for start, end in pack_section(text, section, self.max_chars, self.overlap_chars)
        ]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_chars={self.max_chars}, overlap_chars={self.overlap_chars})"


class LawsChunker(LayoutChunker):
    """Laws and regulations: a section at every 第N条 / 第N款 / （一） (Article N, (a)), 编 / 章 /
    节 in the heading path; the parent of a clause or item is its article. An article's items
    stay with its lead sentence (`chunking.laws`)."""

    name = "laws"
    rules = LAWS_RULES
    parent_level = 4

    def pieces(self, text: str, layout: Layout | None = None) -> list[Piece]:
        sections = find_sections(text, self.rules, layout=layout)

        def pack(section: Section, span: Span, heading_end: int) -> list[Span]:
            part = replace(section, start=span[0], end=span[1], heading_end=heading_end)
            return pack_section(text, part, self.max_chars, self.overlap_chars)

        return [
            Piece(p.start, p.end, HEADING_SEPARATOR.join(p.path), p.parent, p.window)
            for p in law_pieces(
                text, sections, parents_of(sections, self.parent_level), self.max_chars, pack,
                layout.page_starts if layout else (),
            )  # fmt: skip
        ]


class BookChunker(LayoutChunker):
    """Books and manuals: a section at every 第N篇 / 章 / 节, Chapter / Part, Markdown or numbered heading."""

    name = "book"
    rules = BOOK_RULES


class QAChunker(LayoutChunker):
    """FAQs: each question (`Q:`, `问：`, a line ending in ? or ？) with its answer paragraphs is
    one section; every chunk of it shares the question's `parent_id`."""

    name = "qa"
    rules = QA_RULES


class ParentChildChunker:
    """Small children for matching, their section (the parent) for generation.

    Parents: the layout sections, cut by the paragraph packer at `4 × max_chars` when longer.
    Children: each parent cut at `max_chars // 2` (overlap `overlap_chars // 2`). A child's
    `window_text` is its parent's verbatim text, `parent_id` / `parent_locator` name the parent.
    """

    name = "parent_child"

    def __init__(self, max_chars: int = DEFAULT_CHUNK_CHARS, overlap_chars: int = DEFAULT_OVERLAP_CHARS) -> None:
        check_budget(max_chars, overlap_chars)
        self.max_chars, self.overlap_chars = max_chars, overlap_chars
        self.child_chars = max(1, max_chars // 2)
        self.child_overlap = min(overlap_chars // 2, self.child_chars - 1)

    def chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]:
        return self.chunk_structured(text, meta, Layout())

    def chunk_structured(self, text: str, meta: DocumentMeta, layout: Layout) -> list[Chunk]:
        pieces: list[Piece] = []
        for section in find_sections(text, LAYOUT_RULES, layout=layout):
            heading = HEADING_SEPARATOR.join(section.path)
            for parent in pack_section(text, section, self.max_chars * 4, 0):
                part = replace(section, start=parent[0], end=parent[1], heading_end=min(section.heading_end, parent[1]))
                for start, end in pack_section(text, part, self.child_chars, self.child_overlap):
                    pieces.append(Piece(start, end, heading, parent, parent))
        return make_chunks(text, meta, pieces)

    def __repr__(self) -> str:
        return f"ParentChildChunker(max_chars={self.max_chars}, overlap_chars={self.overlap_chars})"


def sentence_spans(text: str, max_chars: int) -> list[Span]:
    """Every sentence of `text` in order (cut at sentence ends inside each paragraph); a
    sentence longer than `max_chars` is cut into pieces."""
    out: list[Span] = []
    for p_start, p_end in paragraph_spans(text):
        for s_start, s_end in _sentence_spans(text, p_start, p_end):
            if s_end - s_start > max_chars:
                out.extend(_hard_split(text, s_start, s_end, max_chars))
            else:
                out.append((s_start, s_end))
    return out


class SentenceWindowChunker:
    """One chunk per sentence; `window_text` is the sentence with `window` sentences each side
    (verbatim, from the first one's start to the last one's end).

    >>> [c.window_text for c in SentenceWindowChunker(window=1).chunk("A b. C d. E f.", DocumentMeta("d"))]
    ['A b. C d.', 'A b. C d. E f.', 'C d. E f.']
    """

    name = "sentence_window"

    def __init__(
        self, max_chars: int = DEFAULT_CHUNK_CHARS, overlap_chars: int = DEFAULT_OVERLAP_CHARS, window: int = 2
    ) -> None:
        check_budget(max_chars, overlap_chars)
        if window < 0:
            raise ValueError(f"window must be >= 0 sentences, got {window}")
        self.max_chars, self.overlap_chars, self.window = max_chars, overlap_chars, window

    def chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]:
        sentences = sentence_spans(text, self.max_chars)
        w = self.window
        pieces = [
            Piece(s, e, window=(sentences[max(0, i - w)][0], sentences[min(len(sentences) - 1, i + w)][1]))
            for i, (s, e) in enumerate(sentences)
        ]
        return make_chunks(text, meta, pieces)

    def __repr__(self) -> str:
        return f"SentenceWindowChunker(max_chars={self.max_chars}, window={self.window})"


class SemanticChunker:
    """Boundaries where consecutive sentence embeddings diverge: a new chunk starts after a
    sentence whose similarity to the next is at or below the `breakpoint_percentile` of the
    document's (never at its maximum: a document of one topic is not cut), or when the next
    sentence would pass `max_chars`.

    Needs an embedding backend (RAGSPINE_EMBEDDING); a RESTRICTED document is never sent to a
    remote backend: it is cut by the paragraph packer instead.
    """

    name = "semantic"

    def __init__(
        self,
        max_chars: int = DEFAULT_CHUNK_CHARS,
        overlap_chars: int = DEFAULT_OVERLAP_CHARS,
        *,
        embedding_backend: EmbeddingBackend | None = None,
        breakpoint_percentile: float = 25.0,
    ) -> None:
        check_budget(max_chars, overlap_chars)
        if embedding_backend is None:
            raise ValueError(
                "the semantic chunker needs an embedding backend to compare sentences: set "
                "RAGSPINE_EMBEDDING (e.g. e5 or onnx, with its extra installed) and a retrieval "
                "mode that uses it, or pick another RAGSPINE_CHUNKER (layout, paragraph)"
            )
        if not 0.0 <= breakpoint_percentile <= 100.0:
            raise ValueError(f"breakpoint_percentile must be in [0, 100], got {breakpoint_percentile}")
        self.max_chars, self.overlap_chars = max_chars, overlap_chars
        self.backend = embedding_backend
        self.breakpoint_percentile = breakpoint_percentile

    def chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]:
        if getattr(self.backend, "is_remote", False) and is_restricted(meta.sensitivity):
            return chunk_document(text, meta, max_chars=self.max_chars, overlap_chars=self.overlap_chars)
        sentences = sentence_spans(text, self.max_chars)
        if len(sentences) < 3:
            return make_chunks(text, meta, [Piece(s, e) for s, e in _greedy(sentences, set(), self.max_chars)])
        vectors = np.asarray(self.backend.embed_texts([text[s:e] for s, e in sentences]), dtype=np.float64)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        similarity = np.einsum("ij,ij->i", vectors[:-1], vectors[1:])
        cut = float(np.percentile(similarity, self.breakpoint_percentile))
        top = float(similarity.max())
        breaks = {i for i, value in enumerate(similarity.tolist()) if value < cut or (value == cut < top)}
        return make_chunks(text, meta, [Piece(s, e) for s, e in _greedy(sentences, breaks, self.max_chars)])

    def __repr__(self) -> str:
        model = getattr(self.backend, "model_id", type(self.backend).__name__)
        return f"SemanticChunker(max_chars={self.max_chars}, model={model!r}, percentile={self.breakpoint_percentile})"


def _greedy(sentences: Sequence[Span], breaks: set[int], max_chars: int) -> list[Span]:
    """Consecutive sentences grouped; a group ends after a sentence in `breaks` or at the budget."""
    out: list[Span] = []
    current: Span | None = None
    for i, (s, e) in enumerate(sentences):
        if current is not None and e - current[0] <= max_chars:
            current = (current[0], e)
        else:
            if current is not None:
                out.append(current)
            current = (s, e)
        if i in breaks:
            out.append(current)
            current = None
    if current is not None:
        out.append(current)
    return out
