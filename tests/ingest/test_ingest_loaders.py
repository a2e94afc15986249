"""Loaders: text, locators and metadata from real files built with each format's library."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ingest_fixtures import BIG5_TEXT, GBK_TEXT, NOISY_HTML, write_docx, write_pdf

from ragspine.ingest.loaders import SUPPORTED_SUFFIXES, MissingExtraError, load_document
from ragspine.ingest.loaders.html_loader import declared_charset
from ragspine.ingest.loaders.text_loader import separate_headings


def _load(path: Path):  # noqa: ANN202 - LoadedDocument
    return load_document(path, path.read_bytes())


def test_pdf_text_per_page_with_page_spans(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "two.pdf", ["First page: revenue fell.", "", "Third page: outlook stable."])
    doc = _load(path)
    assert doc.loader == "pdf" and doc.title == "two"
    assert doc.page_numbers == (1, 3)  # the blank page adds no text but keeps the numbering
    pages = [doc.text[start:end] for start, end in doc.page_spans]
    assert pages == ["First page: revenue fell.", "Third page: outlook stable."]
    assert doc.text == "First page: revenue fell.\n\nThird page: outlook stable."


def test_pdf_without_text_or_corrupt_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no extractable text on any of its 2 page"):
        _load(write_pdf(tmp_path / "scan.pdf", ["", ""]))
    corrupt = tmp_path / "bad.pdf"
    corrupt.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage")
    with pytest.raises(ValueError, match="not a readable PDF"):
        _load(corrupt)


def test_docx_paragraphs_headings_and_table_rows(tmp_path: Path) -> None:
    doc = _load(write_docx(tmp_path / "m.docx"))
    assert doc.loader == "docx" and doc.title == "Board minutes"
    assert doc.text.split("\n\n") == [
        "Quarterly review",
        "Revenue fell because export orders declined.",
        "Year | Revenue | Margin",
        "2023 | 12.5 | 8%",
        "2024 | 13.1",  # the merged cell counts once
        "Outlook",
        "A recovery is expected next year.",
    ]


def test_docx_title_falls_back_to_the_first_heading(tmp_path: Path) -> None:
    assert _load(write_docx(tmp_path / "m.docx", title="")).title == "Quarterly review"


def test_corrupt_docx_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.docx"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match="not a readable .docx"):
        _load(path)


def test_html_main_text_without_navigation_scripts_or_styles(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(NOISY_HTML, "utf-8")
    doc = _load(path)
    assert doc.loader == "html" and doc.title == "Borealis 2023 review"
    for noise in ("NAVNOISE", "HEADERNOISE", "ASIDENOISE", "FOOTERNOISE", "SCRIPTNOISE", "STYLENOISE", "tracking"):
        assert noise not in doc.text
    paragraphs = doc.text.split("\n\n")
    assert paragraphs[0] == "# Revenue review" and "## Outlook" in paragraphs
    assert any(p.startswith("Revenue fell twelve percent") for p in paragraphs)


def test_html_declared_legacy_charset(tmp_path: Path) -> None:
    html = NOISY_HTML.replace('charset="utf-8"', 'charset="gb2312"').replace("Revenue review", GBK_TEXT[:12])
    path = tmp_path / "cn.htm"
    path.write_bytes(html.encode("gbk"))
    assert declared_charset(path.read_bytes()) == "gb2312"
    doc = _load(path)
    assert doc.encoding == "gb18030" and GBK_TEXT[:12] in doc.text


def test_html_with_only_scripts_and_styles_has_no_main_text(tmp_path: Path) -> None:
    path = tmp_path / "empty.html"
    path.write_text("<html><head><style>p {}</style></head><body><script>x()</script></body></html>", "utf-8")
    with pytest.raises(ValueError, match="no main text"):
        _load(path)


@pytest.mark.parametrize(("text", "codec"), [(GBK_TEXT, "gbk"), (BIG5_TEXT, "big5"), (GBK_TEXT, "utf-16")])
def test_text_files_in_chinese_encodings(tmp_path: Path, text: str, codec: str) -> None:
    path = tmp_path / "note.txt"
    path.write_bytes(text.encode(codec))
    doc = _load(path)
    assert doc.text == text and doc.title == "note" and doc.loader == "text"


def test_text_line_ends_are_normalised_and_blank_files_refused(tmp_path: Path) -> None:
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"one\r\n\r\ntwo\rthree\x00")
    assert _load(path).text == "one\n\ntwo\nthree"
    path.write_bytes(b" \n\t\n")
    with pytest.raises(ValueError, match="has no text"):
        _load(path)


def test_markdown_front_matter_and_headings_as_paragraphs(tmp_path: Path) -> None:
    path = tmp_path / "n.md"
    path.write_text(
        "---\ntitle: Plan\nperiod: 2024\ndate: 2024-03-01\n---\n# Strategy\nIntro line.\n## Risks\nRisk text.\n",
        "utf-8",
    )
    doc = _load(path)
    assert doc.metadata == {"title": "Plan", "period": 2024, "date": __import__("datetime").date(2024, 3, 1)}
    assert doc.text.split("\n\n") == ["# Strategy", "Intro line.", "## Risks", "Risk text.\n"]
    assert doc.title == "Strategy"  # the loader's own title; front matter wins in the pipeline


def test_markdown_headings_in_code_fences_and_setext_headings() -> None:
    text = "Intro\n\nSetext Title\n============\nbody\n```\n# not a heading\n```\n#hashtag is text"
    out, headings = separate_headings(text)
    assert headings == ["Setext Title"]
    assert out == "Intro\n\nSetext Title\n============\n\nbody\n```\n# not a heading\n```\n#hashtag is text"


def test_markdown_bad_front_matter_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_text("---\ntitle: [unclosed\n---\nBody\n", "utf-8")
    with pytest.raises(ValueError, match="front matter is not valid YAML"):
        _load(path)
    path.write_text("---\n\nJust a rule, no keys\n\n---\nBody\n", "utf-8")
    assert _load(path).text.startswith("---")  # a leading horizontal rule is not front matter


@pytest.mark.parametrize(
    ("suffix", "module", "extra"), [(".pdf", "pypdf", "pdf"), (".docx", "docx", "office"), (".html", "trafilatura", "html")]
)
def test_a_missing_library_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    path = tmp_path / f"x{suffix}"
    path.write_bytes(b"anything")
    with pytest.raises(MissingExtraError, match=rf"pip install 'ragspine\[{extra}\]'"):
        _load(path)


def test_unsupported_suffix_lists_the_supported_ones(tmp_path: Path) -> None:
    path = tmp_path / "x.doc"
    path.write_bytes(b"old word")
    with pytest.raises(ValueError, match="unsupported file type") as info:
        _load(path)
    assert all(suffix in str(info.value) for suffix in SUPPORTED_SUFFIXES)
