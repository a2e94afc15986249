"""A folder of real-like documents read faithfully (issue 38, items 1-3): HTML whose content sits
directly under <body> keeps every text node and its headings (FAQ questions as <h3>, <dt>, a
bold paragraph); `auto` picks qa for the FAQ, book for the manuals and Markdown guide, and never
qa for a paper whose wrapped sentences end in "?"; `#` lines in fenced and indented code and
numbered list items are never headings. Every chunk of the folder is the exact slice it cites."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from ragspine.ingest.loaders import load_document
from ragspine.ingest.pipeline import ingest_paths
from ragspine.retrieval.chunking.factory import make_chunker
from ragspine.retrieval.chunking.protocol import Layout
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.store.sqlite import ChunkStore

pytest.importorskip("trafilatura")
import lxml.html  # noqa: E402  (trafilatura's dependency)

REAL = Path(__file__).parents[1] / "fixtures" / "realfolder"
_SPAN = re.compile(r"@(\d+)-(\d+)")
_WORDS = re.compile(r"[\u3400-\u9fff]|[A-Za-z0-9]+")
# What a reader does not read as content on each page, named by the pages' author: navigation
# bars, breadcrumbs, language links, footers, in-page tables of contents, permalink marks.
NOT_CONTENT = {
    "faq_body.html": ["//*[@id='page-header']", "//*[@id='footer']", "//ul[li/a[starts-with(@href, '#')]]"],
    "manual_en.html": [
        "//*[@id='page-header']", "//*[@id='path']", "//*[@id='quickview']", "//*[@class='bottomlang']",
        "//*[@id='footer']", "//a[@class='permalink']",
    ],
    "manual_zh.html": [],
}  # fmt: skip
PAGES = sorted(NOT_CONTENT)


def _visible(page: Path) -> tuple[str, list[str]]:
    """The page's visible content text and its headings (h1-h6, dt, a bold question paragraph),
    read with lxml apart from the loader."""
    tree = lxml.html.document_fromstring(page.read_bytes())
    for path in ["//head", "//script", "//style", *NOT_CONTENT[page.name]]:
        for element in tree.xpath(path):
            element.drop_tree()
    bold_question = "//p[b and substring(normalize-space(), string-length(normalize-space())) = '?']"
    headings = tree.xpath(f"//h1 | //h2 | //h3 | //h4 | //h5 | //h6 | //dt | {bold_question}")
    return " ".join(tree.itertext()), [" ".join(" ".join(h.itertext()).split()) for h in headings]


def _recall(reference: str, text: str) -> float:
    want, have = Counter(_WORDS.findall(reference)), Counter(_WORDS.findall(text))
    return sum((want & have).values()) / sum(want.values())


def _cited(text: str, chunk: Chunk) -> str:
    match = _SPAN.search(chunk.source_locator)
    assert match, chunk.source_locator
    return text[int(match.group(1)) : int(match.group(2))]


def _chunks(path: Path, chunker: str) -> tuple[str, list[Chunk]]:
    loaded = load_document(path, path.read_bytes())
    made = make_chunker(chunker)
    meta = DocumentMeta(path.name)
    if loaded.headings:
        return loaded.text, made.chunk_structured(loaded.text, meta, Layout(headings=loaded.headings))  # type: ignore[attr-defined]
    return loaded.text, made.chunk(loaded.text, meta)


@pytest.mark.parametrize("name", PAGES)
def test_html_keeps_every_visible_text_node_and_every_heading(name: str) -> None:
    page = REAL / "html" / name
    visible, headings = _visible(page)
    loaded = load_document(page, page.read_bytes())
    assert _recall(visible, loaded.text) == 1.0  # text recall against the visible text
    labels = [" ".join(loaded.text[s:e].lstrip("#").split()) for s, e, _ in loaded.headings]
    assert labels == headings  # heading recall 1.0, in order, and none invented
    for navigation in ("Glossary", "Sitemap", "Available Languages", "Copyright", "¶"):
        assert navigation not in loaded.text


def test_faq_questions_directly_under_body_head_their_answers() -> None:
    text, chunks = _chunks(REAL / "html" / "faq_body.html", "auto")
    assert {c.metadata["chunker"] for c in chunks} == {"qa"}
    assert chunks[0].metadata["chunker_reason"].startswith("qa: 8 of 22 paragraphs open with a question")
    by_question = {c.heading.rsplit(" > ", 1)[-1]: c.text for c in chunks}
    assert "Seven days, then they are deleted" in by_question["How long are finished jobs kept?"]  # bare text under <body>
    assert "Jobs submitted before the port changes" in by_question["Which port does the gateway listen on?"]
    assert by_question["Does a quota count pages or sheets?"].endswith("duplex printing halves the charge.")  # <dt>/<dd>
    assert by_question["Is there a limit on the size of one job?"].startswith("### Is there a limit")  # <p><b>…?</b></p>
    assert chunks[5].heading == "Kestrel Print Gateway FAQ > Accounts and quotas > Does a quota count pages or sheets?"


def test_manual_code_comments_are_not_headings() -> None:
    text, chunks = _chunks(REAL / "html" / "manual_en.html", "auto")
    assert {c.metadata["chunker"] for c in chunks} == {"book"}
    squeeze = next(c for c in chunks if "# leave images alone" in c.text)
    assert squeeze.heading == "Kestrel Module mod_squeeze > Enabling squeezing > Squeezing and encryption"
    assert [c.heading.rsplit(" > ", 1)[-1] for c in chunks] == [
        "Kestrel Module mod_squeeze", "Summary", "Supported formats", "Squeezing and encryption", "Behind a proxy",
        "Note", "SqueezeLevel Directive", "SqueezeBuffer Directive",
    ]  # fmt: skip


def test_chinese_manual_is_a_book_with_its_sections() -> None:
    text, chunks = _chunks(REAL / "html" / "manual_zh.html", "auto")
    assert {c.metadata["chunker"] for c in chunks} == {"book"}
    assert [c.heading.split(" > ")[-1] for c in chunks] == [
        "星图配置语言 参考手册", "1 – 简介", "2 – 基本概念", "2.1 – 值与类型", "2.2 – 表", "2.3 – 作用域",
        "3.1 – 表构造", "3.2 – 注释", "4 – 命令行工具",
    ]  # fmt: skip
    assert not any("译者" in c.heading for c in chunks)
    table = next(c for c in chunks if c.heading.endswith("2.2 – 表"))
    assert "# 注释行以井号开头\n```" in table.text  # the <pre> comment stays code
    assert "1. 读入文件并检查语法；\n2. 检查每个值的类型；" in chunks[-1].text  # the <ol> items, in order


@pytest.mark.parametrize("chunker", ["book", "layout", "auto"])
def test_markdown_code_and_numbered_items_are_never_headings(chunker: str) -> None:
    text, chunks = _chunks(REAL / "markdown" / "deploy_guide.md", chunker)
    assert sorted({c.heading for c in chunks}) == [
        "Deploying the Kestrel gateway",
        "Deploying the Kestrel gateway > Configure the spool",
        "Deploying the Kestrel gateway > Configure the spool > Spool settings",
        "Deploying the Kestrel gateway > Prepare the machine",
        "Deploying the Kestrel gateway > Start the service",
    ]
    starts = [c.text.split("\n", 1)[0] for c in chunks]
    for heading in ("## Prepare the machine", "## Configure the spool", "### Spool settings", "## Start the service"):
        assert heading in starts  # every Markdown heading opens a chunk
    indented = next(c for c in chunks if "    # check that the binary runs" in c.text)
    assert indented.heading.endswith("Prepare the machine")


def test_a_paper_with_wrapped_questions_is_not_a_qa_collection() -> None:
    text, chunks = _chunks(REAL / "papers" / "wrapped_questions.txt", "auto")
    assert {c.metadata["chunker"] for c in chunks} == {"layout"}
    assert "questions=0/16" in chunks[0].metadata["chunker_reason"]
    assert [c.heading.split(" > ")[-1] for c in chunks] == [
        "Bounds for Sparse Recovery under Coherent Sampling", "1 Introduction", "1 Introduction", "2 Related work",
        "2.1 Deterministic designs", "3 Main result", "4 Experiments",
    ]  # fmt: skip
    as_qa = make_chunker("qa").chunk(text, DocumentMeta("p"))
    assert not any(c.heading.endswith("?") for c in as_qa)  # no wrapped line is taken for a question
    assert not any("a bound for coherent" in c.heading for c in chunks)  # a numbered list item


@pytest.mark.parametrize("chunker", ["auto", "book", "qa", "layout", "paragraph"])
def test_every_chunk_of_the_folder_is_the_slice_it_cites(tmp_path: Path, chunker: str) -> None:
    db = str(tmp_path / "s.db")
    folders = [REAL / "html", REAL / "markdown", REAL / "papers"]  # this test's share of the folder
    report = ingest_paths(folders, db, chunker=make_chunker(chunker), progress=False)
    files = [p for folder in folders for p in folder.iterdir()]
    assert not report.failures and len(report.ingested) == len(files) == 5
    texts = {p.name: load_document(p, p.read_bytes()).text for p in files}
    with ChunkStore(db) as store:
        chunks = list(store.iter_chunks())
    assert {c.doc_id for c in chunks} == set(texts)
    for chunk in chunks:
        assert chunk.text and chunk.text == _cited(texts[chunk.doc_id], chunk)
    for doc_id, text in texts.items():  # nothing of the loaded text is left out of every chunk
        covered = [False] * len(text)
        for chunk in (c for c in chunks if c.doc_id == doc_id):
            start, end = map(int, _SPAN.search(chunk.source_locator).groups())  # type: ignore[union-attr]
            covered[start:end] = [True] * (end - start)
        assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace()), doc_id


def test_the_walk_leaves_out_hidden_and_navigation_elements() -> None:
    from ragspine.ingest.loaders.html_dom import dom_text

    page = (
        "<html><body><nav><a href='/'>Home</a></nav><div hidden>secret draft</div>"
        "<p style='display: none'>invisible</p><div class='breadcrumb'>Docs / Page</div>"
        "<header><p>Site name</p></header><main><header><h1>Guide</h1></header>Loose text."
        "<details><summary>Why blue?</summary>Because.</details><aside>Related</aside></main>"
        "<footer>Legal</footer><div class='site-footer'>Terms</div><ul><li><a href='/a'>A</a></li>"
        "<li><a href='/b'>B</a></li><li><a href='/c'>C</a></li></ul><div class='faq_question'>Can I?</div>"
        "<p>Yes.</p><article><ol><li><a href='/x'>Paper X</a></li><li><a href='/y'>Paper Y</a></li>"
        "<li><a href='/z'>Paper Z</a></li></ol></article></body></html>"
    )
    assert dom_text(lxml.html.document_fromstring(page)) == "# Guide\n\nLoose text.\n\n## Why blue?\n\nBecause."
    main = page.replace("<main>", "<div>").replace("</main>", "</div>")  # without <main>, the whole <body>
    assert dom_text(lxml.html.document_fromstring(main)) == (
        "# Guide\n\nLoose text.\n\n## Why blue?\n\nBecause.\n\n## Can I?\n\nYes.\n\n"
        "1. Paper X\n2. Paper Y\n3. Paper Z"
    )  # a menu of links goes, a list of links inside <article> is content
