"""Issue 37, item 3: PDF text by pypdfium2 when installed, pypdf as the fallback, both cleaned alike.

The PDFs are real files built at test time (fpdf2 for Latin text; Chinese drawn by hand in the
Adobe font STSong-Light, since this machine has no CJK font to embed), read by both extractors
and ingested through the real CLI into a real SQLite store, where every chunk must be the exact
slice of the text it cites and lie inside the pages it names.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from ingest_fixtures import write_cjk_pdf, write_pdf

from ragspine.cli import main
from ragspine.ingest.loaders import load_document
from ragspine.ingest.loaders import pdf_text
from ragspine.ingest.loaders.pdf_text import join_cjk_spaces, pdf_extractor
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.testing.citations import citation_failure

EXTRACTORS = ["pypdfium2", "pypdf"]
CJK_PAGES = [
    "本 报 告 披露 手 续费 收入\n第二行 English words stay apart, 2024 年",
    "",
    "第三页 的 内容：手 续费 下降 12% 。",
]


@pytest.fixture(params=EXTRACTORS)
def extractor(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(pdf_text, "pdf_extractor", lambda: request.param)
    return str(request.param)


def test_pypdfium2_is_the_extractor_when_installed() -> None:
    pytest.importorskip("pypdfium2")
    assert pdf_extractor() == "pypdfium2"


def test_spaces_between_cjk_characters_go_and_no_others() -> None:
    assert join_cjk_spaces("本 报 告  手 续费") == "本报告手续费"
    assert join_cjk_spaces("第二行 English 2024 年 12 月") == "第二行 English 2024 年 12 月"  # a Latin or digit side
    assert join_cjk_spaces("收入 （百万元） 下降 。") == "收入 （百万元） 下降 。"  # punctuation is not CJK here
    assert join_cjk_spaces("대한민국 은 국민") == "대한민국 은 국민"  # Korean spaces its words
    assert join_cjk_spaces("日本 の 報告") == "日本の報告"  # kana are CJK, as for the tokenizer
    assert join_cjk_spaces("本\n报 告\t书") == "本\n报告\t书"  # only spaces: lines and tabs stay
    assert join_cjk_spaces("plain English text") == "plain English text"


def test_chinese_pdf_text_has_whole_bigrams_with_either_extractor(tmp_path: Path, extractor: str) -> None:
    path = write_cjk_pdf(tmp_path / "report.pdf", CJK_PAGES)
    doc = load_document(path, path.read_bytes())
    assert doc.page_numbers == (1, 3)
    pages = [doc.text[start:end] for start, end in doc.page_spans]
    assert pages == [
        "本报告披露手续费收入\n第二行 English words stay apart, 2024 年",
        "第三页的内容：手续费下降 12% 。",
    ], extractor
    assert "手续" in tokenize(doc.text) and "报告" in tokenize(doc.text)  # the bigrams BM25 indexes


def test_both_extractors_read_the_same_latin_pages(tmp_path: Path) -> None:
    texts = ["Page one: revenue fell because export orders declined.", "", "Page three: " + "outlook stable. " * 30]
    path = write_pdf(tmp_path / "three.pdf", texts)
    seen = {}
    for name in EXTRACTORS:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(pdf_text, "pdf_extractor", lambda name=name: name)
            doc = load_document(path, path.read_bytes())
        seen[name] = (doc.page_numbers, [" ".join(doc.text[s:e].split()) for s, e in doc.page_spans])
    assert seen["pypdfium2"] == seen["pypdf"]
    assert seen["pypdf"] == ((1, 3), [" ".join(t.split()) for t in texts if t])


def test_a_password_locked_pdf_is_one_clear_line_with_either_extractor(tmp_path: Path, extractor: str) -> None:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=str(write_pdf(tmp_path / "plain.pdf", ["Secret minutes."])))
    writer.encrypt(user_password="open-sesame", owner_password="owner", algorithm="AES-256")
    buffer = io.BytesIO()
    writer.write(buffer)
    with pytest.raises(ValueError, match=r"^the PDF is encrypted with a password$"):
        load_document(tmp_path / "locked.pdf", buffer.getvalue())


def test_truncated_and_empty_pdfs_fail_with_the_reason(tmp_path: Path, extractor: str) -> None:
    whole = write_pdf(tmp_path / "whole.pdf", ["Some text on the only page."]).read_bytes()
    for data in (whole[: len(whole) // 3], b"", b"%PDF-1.4 truncated"):
        with pytest.raises(ValueError, match=r"not a readable PDF|no extractable text") as info:
            load_document(tmp_path / "cut.pdf", data)
        assert "\n" not in str(info.value)


def test_ingested_chinese_pdf_chunks_are_exact_slices_inside_their_pages(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    lines = [f"本 报 告 第 {n} 行 披露 手 续费 收入 。" for n in range(30)]
    long_pages = ["\n".join(lines), "", *("\n".join(f"第 {page} 页 {line}" for line in lines) for page in (3, 4, 5))]
    path = write_cjk_pdf(folder / "report.pdf", long_pages)
    db = tmp_path / "s.db"
    env = {"RAGSPINE_RETRIEVAL_MODE": "bm25", "RAGSPINE_CHUNKER": "auto"}
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", str(db)], env=env)
    assert result.exit_code == 0, result.output
    doc = load_document(path, path.read_bytes())
    with ChunkStore(db) as store:
        chunks = list(store.iter_chunks())
    assert len(chunks) > 2 and {c.doc_id for c in chunks} == {"report.pdf"}
    assert doc.page_spans
    for chunk in chunks:
        assert citation_failure(chunk.text, chunk.source_locator, doc.text, doc.page_spans, doc.page_numbers) is None
        assert " 报" not in chunk.text


def test_the_pdf_reader_revision_follows_the_extractor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PDF stored before is re-read once its extractor's text changes (the ingest key has it)."""
    from ragspine.ingest.loaders import READER_REVISIONS

    assert READER_REVISIONS[".pdf"] == pdf_text.pdf_reader_revision() == (2 if pdf_extractor() == "pypdfium2" else 1)
    monkeypatch.setattr(pdf_text, "pdf_extractor", lambda: "pypdf")
    assert pdf_text.pdf_reader_revision() == 1
