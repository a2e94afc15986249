"""Ingest hands the loaders' structure to the chunker (issue 15): Markdown headings, HTML <h*>,
Word heading styles and PDF pages become section boundaries and heading paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragspine.ingest.loaders import load_document
from ragspine.ingest.pipeline import ingest_paths
from ragspine.retrieval.chunking.factory import make_chunker
from ragspine.retrieval.store.sqlite import ChunkStore

from ingest_fixtures import NOISY_HTML, write_docx, write_pdf

_SPAN = re.compile(r"@(\d+)-(\d+)")


def _chunks(tmp_path: Path, file: Path, chunker: str = "layout") -> list:
    db = str(tmp_path / "s.db")
    report = ingest_paths([file], db, chunker=make_chunker(chunker), progress=False)
    assert not report.failures and report.ingested
    with ChunkStore(db) as store:
        return list(store.iter_chunks())


def _check_spans(text: str, chunks: list) -> None:
    for chunk in chunks:
        start, end = map(int, _SPAN.search(chunk.source_locator).groups())
        assert text[start:end] == chunk.text


def test_markdown_heading_spans_include_setext(tmp_path: Path) -> None:
    file = tmp_path / "guide.md"
    file.write_text("Guide\n=====\nIntro text.\n\nInstall\n-------\nRun it.\n\n```\n# not a heading\n```\n", "utf-8")
    loaded = load_document(file, file.read_bytes())
    assert [(loaded.text[s:e], level) for s, e, level in loaded.headings] == [("Guide", 1), ("Install", 2)]
    chunks = _chunks(tmp_path, file)
    _check_spans(loaded.text, chunks)
    assert [c.heading for c in chunks] == ["Guide", "Guide > Install"]  # setext: no rule sees them alone
    assert "# not a heading" in chunks[-1].text


def test_docx_heading_styles_become_sections(tmp_path: Path) -> None:
    pytest.importorskip("docx")
    file = write_docx(tmp_path / "minutes.docx")
    loaded = load_document(file, file.read_bytes())
    assert [(loaded.text[s:e], level) for s, e, level in loaded.headings] == [("Quarterly review", 1), ("Outlook", 2)]
    chunks = _chunks(tmp_path, file)
    _check_spans(loaded.text, chunks)
    assert [c.heading for c in chunks] == ["Quarterly review", "Quarterly review > Outlook"]
    assert chunks[1].text == "Outlook\n\nA recovery is expected next year."


def test_html_headings_become_sections(tmp_path: Path) -> None:
    pytest.importorskip("trafilatura")
    file = tmp_path / "page.html"
    file.write_text(NOISY_HTML, "utf-8")
    loaded = load_document(file, file.read_bytes())
    assert [loaded.text[s:e].lstrip("# ") for s, e, _ in loaded.headings] == ["Revenue review", "Outlook"]
    chunks = _chunks(tmp_path, file, "auto")
    _check_spans(loaded.text, chunks)
    assert chunks[-1].heading.endswith("Outlook") and "recovery" in chunks[-1].text
    assert not any("Outlook" in c.text and "twelve percent" in c.text for c in chunks)


def test_pdf_pages_are_boundaries(tmp_path: Path) -> None:
    pytest.importorskip("fpdf")
    file = write_pdf(tmp_path / "r.pdf", ["Page one says revenue fell.", "Page two says the outlook is stable."])
    paragraph = _chunks(tmp_path / "p", file, "paragraph")
    assert len(paragraph) == 1  # the paragraph packer runs across the page break
    chunks = _chunks(tmp_path, file)
    assert [c.text for c in chunks] == ["Page one says revenue fell.", "Page two says the outlook is stable."]
    assert [c.source_locator.rsplit(";", 1)[1] for c in chunks] == ["pages=1", "pages=2"]
