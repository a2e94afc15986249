"""The structure-aware chunkers (issue 15): citation invariant over random Unicode, a section
boundary at every article / chapter / question of the fixtures, parents and windows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.chunking.factory import CHUNKERS, make_chunker
from ragspine.retrieval.chunking.auto import detect_shape
from ragspine.retrieval.chunking.structure import SemanticChunker, find_sections
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.testing.chunker import ChunkerSuite

FIXTURES = Path(__file__).parent / "fixtures" / "chunking"
META = DocumentMeta("doc", title="T", sensitivity="INTERNAL")
_SPAN = re.compile(r"@(\d+)-(\d+)$")
STRUCTURED = ["layout", "laws", "book", "qa", "parent_child", "sentence_window", "auto"]


def _span(locator: str) -> tuple[int, int]:
    match = _SPAN.search(locator)
    assert match, locator
    return int(match.group(1)), int(match.group(2))


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _check_citations(text: str, chunks: list[Chunk]) -> None:
    for chunk in chunks:
        start, end = _span(chunk.source_locator)
        assert chunk.text == text[start:end]
        assert chunk.text and chunk.text == chunk.text.strip()
        if chunk.window_text:
            w_start, w_end = _span(chunk.parent_locator)
            assert chunk.window_text == text[w_start:w_end]
            assert w_start <= start and end <= w_end  # the window holds the chunk
        if chunk.parent_id:
            p_start, p_end = _span(chunk.parent_locator)
            assert p_start <= start and end <= p_end
    assert len({c.chunk_id for c in chunks}) == len(chunks)
    assert [c.seq for c in chunks] == list(range(len(chunks)))


_LINE = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["# H", "## Sub", "第一章 总则", "第二条 内容。", "（一）项", "Q: why?", "问：为什么？",
                     "Article 3 x", "(a) item", "1.2 Scope", "Chapter 4", "", "   ", "。", "?"]),
)  # fmt: skip


@pytest.mark.parametrize("name", STRUCTURED)
@settings(max_examples=120, deadline=None)
@given(lines=st.lists(_LINE, max_size=25), max_chars=st.integers(1, 200), ratio=st.floats(0, 0.9))
def test_every_chunk_is_an_exact_substring_of_random_unicode(name: str, lines: list[str], max_chars: int, ratio: float) -> None:
    text = "\n".join(lines)
    overlap = min(int(max_chars * ratio), max_chars - 1)
    chunks = make_chunker(name, max_chars=max_chars, overlap_chars=overlap).chunk(text, META)
    _check_citations(text, chunks)
    covered = set()
    for chunk in chunks:
        covered.update(range(*_span(chunk.source_locator)))
    assert all(i in covered or ch.isspace() for i, ch in enumerate(text))  # nothing is lost


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=600), max_chars=st.integers(2, 200))
def test_semantic_chunker_keeps_the_citation_invariant(text: str, max_chars: int) -> None:
    chunker = SemanticChunker(max_chars, 0, embedding_backend=DeterministicEmbeddingBackend(dim=8))
    _check_citations(text, chunker.chunk(text, META))


@pytest.mark.parametrize(
    ("fixture", "chunker", "marker"),
    [
        # items stay with their article's lead sentence (issue 38): only articles are boundaries
        ("law_zh.txt", "laws", r"^第[一二三四五六七八九十]+条"),
        ("law_en.txt", "laws", r"^Article \d+"),
        ("book_zh.txt", "book", r"^第[一二三四五六七八九十]+[篇章节]"),
        ("book_en.md", "book", r"^#+ "),
        ("qa_zh.txt", "qa", r"^问：|^.*[?？]$"),
        ("qa_en.txt", "qa", r"^Q:|^.*[?？]$"),
    ],
)
def test_presets_put_a_section_boundary_at_every_marker(fixture: str, chunker: str, marker: str) -> None:
    text = _fixture(fixture)
    chunks = make_chunker(chunker).chunk(text, DocumentMeta(fixture))
    _check_citations(text, chunks)
    starts = [m.start() for m in re.finditer(marker, text, re.MULTILINE)]
    assert len(starts) >= 3
    for position in starts:
        # No chunk runs across a marker: each marker line begins a chunk or ends the previous
        # bodiless headings glued to it (the title line, a chapter heading above an article).
        title = text.split("\n")[0]
        crossing = [c for c in chunks if _span(c.source_locator)[0] < position < _span(c.source_locator)[1]]
        for chunk in crossing:
            before = text[_span(chunk.source_locator)[0] : position]
            assert all(
                line.strip() in ("", title) or re.match(r"^(第.+[篇章节编]|Chapter|#)", line.strip())
                for line in before.split("\n")
            ), (position, chunk.text)


def test_laws_heading_path_and_parent_is_the_article() -> None:
    text = _fixture("law_zh.txt")
    chunks = make_chunker("laws").chunk(text, DocumentMeta("law"))
    article = next(c for c in chunks if c.heading.endswith("第四条"))
    assert article.text.startswith("第二章 样例数据安全制度\n\n第四条")  # the chapter line glued on
    assert article.text.endswith("具体目录。")  # its items (issue 38: they fit the budget) with it
    assert not [c for c in chunks if c.text.startswith("（")]
    p_start, p_end = _span(article.parent_locator)
    assert text[p_start:p_end] == article.text and "第五条" not in text[p_start:p_end]
    last = chunks[-1]
    assert last.heading.endswith("第三章 附则 > 第六条") and last.text.startswith("第三章 附则")


def test_laws_items_of_a_long_article_carry_its_lead_sentence() -> None:
    text = _fixture("law_zh.txt")
    chunks = make_chunker("laws", max_chars=60, overlap_chars=0).chunk(text, DocumentMeta("law"))
    _check_citations(text, chunks)
    article = next(c for c in chunks if c.heading.endswith("第四条"))
    items = [c for c in chunks if c.text.startswith("（")]
    assert [c.text[:3] for c in items] == ["（一）", "（三）"]  # (一) and (二) packed into one budget
    lead = "第四条 国家建立样例数据分类分级保护制度，包括："
    assert items[0].heading == f"中华人民共和国数据样例保护法 > 第二章 样例数据安全制度 > {lead} > （一）"
    assert all(lead in c.window_text for c in items)  # prompt_text, from the article's start
    assert {c.parent_id for c in items} == {article.parent_id}  # items share their article's parent


def test_qa_pairs_each_question_with_its_answer_under_one_parent() -> None:
    text = _fixture("qa_en.txt")
    chunks = make_chunker("qa", max_chars=60, overlap_chars=0).chunk(text, DocumentMeta("faq"))
    first = [c for c in chunks if "password" in c.heading]
    assert len(first) >= 2  # the long answer is cut, every piece under the question
    assert len({c.parent_id for c in first}) == 1
    assert "Q: How do I reset my password?" in first[0].text
    assert any("thirty minutes" in c.text for c in first)
    assert not any("VAT" in c.text for c in first)


def test_layout_glues_a_title_line_to_the_first_piece_of_a_long_entry() -> None:
    # The shape that costs the paragraph packer most: a title line over one long paragraph.
    body = " ".join(f"Sentence number {i} talks about sample data." for i in range(30))
    text = f"A study of sample data\n\n{body}"
    paragraph = make_chunker("paragraph").chunk(text, META)
    layout = make_chunker("layout").chunk(text, META)
    assert paragraph[0].text == "A study of sample data"  # alone: the old behaviour
    assert layout[0].text.startswith("A study of sample data\n\nSentence number 0")
    assert all(c.heading == "A study of sample data" for c in layout)


def test_parent_child_children_are_smaller_and_carry_their_section() -> None:
    text = _fixture("book_en.md")
    chunks = make_chunker("parent_child", max_chars=60, overlap_chars=10).chunk(text, DocumentMeta("b"))
    _check_citations(text, chunks)
    assert all(len(c.text) <= 30 + 40 for c in chunks)  # half budget (+ a glued heading)
    springs = [c for c in chunks if "groundwater" in c.text]
    assert springs and springs[0].window_text.startswith("### 1.1 Springs")
    assert "groundwater" in springs[0].window_text


def test_sentence_window_is_one_chunk_per_sentence() -> None:
    text = "第一句。第二句！Third one? Fourth."
    chunks = make_chunker("sentence_window").chunk(text, META)
    assert [c.text for c in chunks] == ["第一句。", "第二句！", "Third one?", "Fourth."]
    assert chunks[0].window_text == "第一句。第二句！Third one?"
    assert chunks[3].window_text == "第二句！Third one? Fourth."


def test_semantic_chunker_needs_a_backend_and_cuts_where_topics_change() -> None:
    with pytest.raises(ValueError, match="RAGSPINE_EMBEDDING"):
        make_chunker("semantic")
    text = "Cats purr. Cats nap. Cats hunt mice. Tax law changed. Tax rates rose. Tax forms grew."

    class Topics:  # a backend whose vectors say which topic a sentence is about (test-built)
        model_id = "topics"

        def embed_texts(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] if "Cats" in t else [0.0, 1.0] for t in texts]

    chunks = make_chunker("semantic", embedding_backend=Topics(), max_chars=200, overlap_chars=0).chunk(text, META)
    assert [c.text for c in chunks] == ["Cats purr. Cats nap. Cats hunt mice.", "Tax law changed. Tax rates rose. Tax forms grew."]


def test_semantic_chunker_never_sends_restricted_text_to_a_remote_backend() -> None:
    class Remote:
        model_id, is_remote = "remote", True

        def embed_texts(self, texts: list[str]) -> list[list[float]]:
            raise AssertionError("RESTRICTED text sent to a remote backend")

    chunker = make_chunker("semantic", embedding_backend=Remote())
    chunks = chunker.chunk("Secret one. Secret two. Secret three.", DocumentMeta("s", sensitivity="RESTRICTED"))
    assert [c.text for c in chunks] == ["Secret one. Secret two. Secret three."]


@pytest.mark.parametrize(
    ("fixture", "shape"),
    [("law_zh.txt", "laws"), ("law_en.txt", "laws"), ("qa_zh.txt", "qa"), ("qa_en.txt", "qa"),
     ("book_zh.txt", "book"), ("book_en.md", "book")],
)  # fmt: skip
def test_auto_picks_the_shape_and_records_it(fixture: str, shape: str) -> None:
    text = _fixture(fixture)
    assert detect_shape(text) == shape
    chunks = make_chunker("auto").chunk(text, DocumentMeta("d"))
    assert {c.metadata["chunker"] for c in chunks} == {shape}
    assert [c.text for c in chunks] == [c.text for c in make_chunker(shape).chunk(text, DocumentMeta("d"))]


def test_auto_falls_back_to_layout_and_paragraph() -> None:
    assert detect_shape("Title line\n\nA body paragraph.") == "layout"
    assert detect_shape("Just one paragraph of text.") == "paragraph"
    chunks = make_chunker("auto").chunk("Just one paragraph of text.", META)
    assert chunks[0].metadata["chunker"] == "paragraph" and chunks[0].heading == ""
    assert chunks[0].metadata["chunker_reason"].startswith("paragraph: no family has 2 marks and no heading")


def test_every_registered_chunker_takes_the_budget() -> None:
    for name in CHUNKERS.names:
        options = {"embedding_backend": DeterministicEmbeddingBackend(dim=4)} if name == "semantic" else {}
        chunker = make_chunker(name, max_chars=100, overlap_chars=10, **options)
        assert f"max_chars=100" in repr(chunker)


def test_find_sections_nests_headings() -> None:
    sections = find_sections("# A\n\nx\n\n## B\n\ny\n\n# C\n\nz", [lambda line: (line.count("#"), line.strip("# ")) if line.startswith("#") else None])
    assert [s.path for s in sections] == [("A",), ("A", "B"), ("C",)]


@pytest.fixture(params=STRUCTURED + ["semantic"])
def any_structured(request: pytest.FixtureRequest) -> object:
    if request.param == "semantic":
        return make_chunker("semantic", embedding_backend=DeterministicEmbeddingBackend(dim=16))
    return make_chunker(request.param)


class TestStructuredChunkersConform(ChunkerSuite):
    """The conformance suite every Chunker runs, for each chunker of issue 15."""

    @pytest.fixture
    def chunker(self, any_structured: object) -> object:
        return any_structured


@pytest.mark.parametrize(
    ("text", "headings"),
    [
        ("Guide\n\n    # a shell comment\n    ls\n\nMore text.", ["Guide"]),  # indented code
        ("Guide\n\n```\n# a comment\n```\n\nMore text.", ["Guide"]),  # fenced code
        ("Steps\n\n1. Download it\n2. Unpack it\n\nDone.", ["Steps"]),  # a tight numbered list
        ("Steps\n\n1. Download it\n\n2. Unpack it\n\nDone.", ["Steps"]),  # a loose one
        ("Report\n\nAbstract.\n\n1 Introduction\n\nBody text.\n\n2 Methods\n\nMore.", ["Report", "1 Introduction", "2 Methods"]),
        ("Report\n\nThe samples we found in\n12 Nests were dry.", ["Report"]),  # a wrapped line
        ("Report\n\nAs noted.\nSection 4 answers this for audio.", ["Report"]),  # a sentence, not a division
    ],
)
def test_a_heading_is_never_code_a_list_item_or_a_fragment(text: str, headings: list[str]) -> None:
    chunks = make_chunker("layout", max_chars=30, overlap_chars=0).chunk(text, META)
    _check_citations(text, chunks)
    assert sorted({c.heading.split(" > ")[-1] for c in chunks}) == sorted(headings)


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        ("Notes\n\nWhy is the sky blue?\nLight scatters.\n\nWhy is grass green?\nChlorophyll.", "qa"),
        ("Notes\n\nWe ask which sets work, and\nwhy do they work?\nBecause of x. Does it\nscale to long signals?\nYes.", "layout"),
        ("Notes\n\nA first point. Is it so?\nIt is.\n\nA second point. Is that so?\nIt is.", "layout"),  # two sentences
        ("常见问题\n1、如何退货？\n答：在订单页点击退货。\n2、运费由谁承担？\n答：由商家承担。\n3、多久到账？\n答：三天内。", "qa"),  # no blank lines
    ],
)
def test_auto_counts_only_questions_that_open_a_paragraph(text: str, shape: str) -> None:
    chunks = make_chunker("auto").chunk(text, META)
    assert {c.metadata["chunker"] for c in chunks} == {shape}
    assert chunks[0].metadata["chunker_reason"].startswith(f"{shape}: ")
