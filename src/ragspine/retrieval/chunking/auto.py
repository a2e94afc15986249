"""The `auto` chunker: laws, qa, book, layout or paragraph per document, from strong evidence.

    from ragspine.retrieval.chunking.factory import make_chunker

    chunk = make_chunker("auto").chunk(text, DocumentMeta("faq"))[0]
    chunk.metadata["chunker"], chunk.metadata["chunker_reason"]   # "qa", "qa: 6 of 13 paragraphs …"

Invariants: the choice reads only lines outside code (fenced, and indented code for `#` lines)
and never a sentence fragment (`structure._in_context`): article lines (第N条, Article N, § N)
for laws; questions for qa — an explicit `Q:` / `问：`, or a line of one sentence ending in ? / ？
that opens a paragraph (after a blank line, the start or a heading) and does not begin in lower
case, and they must be `QA_MIN_SHARE` of the paragraphs (or, in a list without blank lines, the
questions that start a sentence at a line start must be that share of the lines), so a paper
whose wrapped sentences end in "?" is never a Q&A collection; headings for book — Markdown `#` lines, 第N章 / Chapter N lines and the
loader's own headings, except those that are questions (an FAQ page's question headings count
for qa). The family with the most marks wins when it has `AUTO_MIN_MARKS`; else
`layout` when the layout rules (or the loader) find any heading, else `paragraph`. Every chunk
records the choice (`metadata["chunker"]`) and why (`metadata["chunker_reason"]`, with the
counts). Within the chosen chunker nothing changes: `auto`'s chunks are that chunker's chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    check_budget,
    chunk_document,
    paragraph_spans,
)
from ragspine.retrieval.chunking.protocol import Layout
from ragspine.retrieval.chunking.structure import (
    _CN_ARTICLE,
    _EN_ARTICLE,
    _QUESTION,
    LAYOUT_RULES,
    BookChunker,
    LawsChunker,
    LayoutChunker,
    QAChunker,
    division_heading,
    find_sections,
    make_chunks,
    markdown_heading,
    question_heading,
    rule_hits,
)
from ragspine.retrieval.model import SYSTEM_METADATA_KEYS, Chunk, DocumentMeta

AUTO_MIN_MARKS = 2  # marks of a family a document needs before auto picks that family
QA_MIN_SHARE = 0.2  # questions per paragraph a Q&A collection has at least
CHUNKER_KEYS = SYSTEM_METADATA_KEYS  # the metadata auto writes: how a document was cut, not a label


@dataclass(frozen=True)
class Evidence:
    """What `auto` counted in one document."""

    articles: int  # 第N条 / Article N / § N lines
    questions: int  # questions opening a paragraph (a heading among them), or explicit Q: / 问： lines
    headings: int  # Markdown #, 第N章 / Chapter N lines, and the loader's headings, less the questions
    paragraphs: int
    line_questions: int = 0  # questions that start a sentence at a line start (those above among them)
    lines: int = 0  # non-blank lines

    def summary(self) -> str:
        return (
            f"articles={self.articles} questions={self.questions}/{self.paragraphs} paragraphs "
            f"({self.line_questions}/{self.lines} lines) headings={self.headings}"
        )

    def qa_marks(self) -> int:
        """The questions that count for qa: paragraph openers when they are `QA_MIN_SHARE` of the
        paragraphs, else sentence-start question lines when they are that share of the lines
        (a Q&A list without blank lines), else none."""
        if self.questions >= QA_MIN_SHARE * max(1, self.paragraphs):
            return self.questions
        return self.line_questions if self.line_questions >= QA_MIN_SHARE * max(1, self.lines) else 0


def _article_line(line: str) -> tuple[int, str] | None:
    match = _CN_ARTICLE.match(line) or _EN_ARTICLE.match(line)
    return (4, match.group(0)) if match else None


def gather(text: str, layout: Layout | None = None) -> Evidence:
    """Count the marks of each family in `text` (module docstring), in one pass over its lines."""
    given = {start for start, _, _ in (layout.headings if layout else ())}
    hits = rule_hits(text, (_article_line, question_heading, markdown_heading, division_heading))
    asked = [(mark[0], mark[3]) for mark, rule in hits if rule is question_heading]
    questions = [start for start, label in asked if _QUESTION.match(label) or _opens_paragraph(text, start)]
    headings = given | {mark[0] for mark, rule in hits if rule in (markdown_heading, division_heading)}
    headings -= {start for start, _ in asked}
    articles = sum(1 for _, rule in hits if rule is _article_line)
    lines = sum(1 for line in text.split("\n") if line.strip())
    return Evidence(articles, len(questions), len(headings), len(paragraph_spans(text)), len(asked), lines)


def _opens_paragraph(text: str, start: int) -> bool:
    """The line at `start` is the text's first, or the line above it is blank or a heading."""
    line_start = text.rfind("\n", 0, start) + 1
    if line_start == 0:
        return True
    above = text[text.rfind("\n", 0, line_start - 1) + 1 : line_start - 1].strip()
    return not above or markdown_heading(above) is not None


def choose(text: str, layout: Layout | None = None) -> tuple[str, str]:
    """(chunker name, reason) for `text` (module docstring).

    >>> choose("Q: Why?\\nBecause.\\n\\nQ: How?\\nSo.")[0], choose("第一条 总则。\\n第二条 适用范围。")[0]
    ('qa', 'laws')
    """
    seen = gather(text, layout)
    counts = {"laws": seen.articles, "qa": seen.qa_marks(), "book": seen.headings}
    best = max(counts, key=lambda k: counts[k])
    why = {
        "laws": f"{seen.articles} article lines (第N条 / Article N / § N), the most of any family",
        "qa": f"{seen.questions} of {seen.paragraphs} paragraphs open with a question"
        if counts["qa"] == seen.questions
        else f"{seen.line_questions} of {seen.lines} lines are questions that start a sentence",
        "book": f"{seen.headings} headings (Markdown #, the loader's, 第N章 / Chapter N), the most of any family",
    }
    if counts[best] >= AUTO_MIN_MARKS:
        return best, f"{best}: {why[best]}; {seen.summary()}"
    short = f"no family has {AUTO_MIN_MARKS} marks"
    if seen.line_questions >= AUTO_MIN_MARKS and counts["qa"] == 0:
        short += f" (questions are under {QA_MIN_SHARE:.0%} of the paragraphs and of the lines)"
    if _loader_structure(layout) or any(s.path for s in find_sections(text, LAYOUT_RULES, layout=layout)):
        return "layout", f"layout: {short}, but headings, pages or a title line; {seen.summary()}"
    return "paragraph", f"paragraph: {short} and no heading; {seen.summary()}"


def _loader_structure(layout: Layout | None) -> bool:
    """Whether the loader saw headings or pages (then the layout chunker cuts there)."""
    return bool(layout and (layout.headings or layout.page_starts))


def detect_shape(text: str) -> str:
    """laws, qa, book, layout or paragraph, from the document's own structure (`choose`).

    >>> detect_shape("第一条 总则。\\n第二条 适用范围。"), detect_shape("Q: Why?\\nBecause.\\n\\nQ: How?\\nSo.")
    ('laws', 'qa')
    """
    return choose(text)[0]


class AutoChunker:
    """Picks laws / qa / book / layout / paragraph per document (`choose`) and records the
    choice and its reason as the chunks' `metadata["chunker"]` and `metadata["chunker_reason"]`."""

    name = "auto"

    def __init__(self, max_chars: int = DEFAULT_CHUNK_CHARS, overlap_chars: int = DEFAULT_OVERLAP_CHARS) -> None:
        check_budget(max_chars, overlap_chars)
        self.max_chars, self.overlap_chars = max_chars, overlap_chars
        self._by_shape: dict[str, LayoutChunker] = {
            "laws": LawsChunker(max_chars, overlap_chars), "qa": QAChunker(max_chars, overlap_chars),
            "book": BookChunker(max_chars, overlap_chars), "layout": LayoutChunker(max_chars, overlap_chars),
        }  # fmt: skip

    def chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]:
        return self.chunk_structured(text, meta, Layout())

    def chunk_structured(self, text: str, meta: DocumentMeta, layout: Layout) -> list[Chunk]:
        shape, reason = choose(text, layout)
        extra = dict(zip(CHUNKER_KEYS, (shape, reason), strict=True))
        if shape == "paragraph":
            chunks = chunk_document(text, meta, max_chars=self.max_chars, overlap_chars=self.overlap_chars)
            return [replace(c, metadata={**c.metadata, **extra}) for c in chunks]
        return make_chunks(text, meta, self._by_shape[shape].pieces(text, layout), extra=extra)

    def __repr__(self) -> str:
        return f"AutoChunker(max_chars={self.max_chars}, overlap_chars={self.overlap_chars})"
