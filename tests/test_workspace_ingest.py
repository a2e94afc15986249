"""ragspine.open(...).ingest of files: PDF pages reach the locators, front-matter free fields filter."""

from __future__ import annotations

import sys
from pathlib import Path

import ragspine

sys.path.insert(0, str(Path(__file__).parent / "ingest"))
from ingest_fixtures import write_pdf  # noqa: E402


def test_pdf_ingest_through_the_workspace_cites_pages(tmp_path: Path) -> None:
    pages = ["Revenue fell because exports dropped. " * 20, "Margins recovered in the fourth quarter. " * 20]
    pdf = write_pdf(tmp_path / "report.pdf", pages)
    with ragspine.open(tmp_path / "ws") as ws:
        ws.ingest(pdf, entity="ACME")
        snippets = ws.search("margins recovered exports", top_k=10)
    located = {s["source_locator"].split(";")[1] for s in snippets if "Margins" in s["text"]}
    assert located == {"pages=2"}
    assert {s["source_locator"].split(";")[1] for s in snippets if "exports" in s["text"]} == {"pages=1"}


def test_front_matter_free_fields_are_filterable(tmp_path: Path) -> None:
    doc = tmp_path / "memo.md"
    doc.write_text("---\nowner: finance\npages: 3\ntags: [a, b]\n---\nRevenue memo text.\n", "utf-8")
    with ragspine.open(":memory:") as ws:
        ws.ingest(doc)
        ws.ingest("Revenue note without metadata.", doc_id="plain")
        assert [s["doc_id"] for s in ws.search("revenue", where={"owner": "finance"})] == ["memo.md"]
        assert [s["doc_id"] for s in ws.search("revenue", where={"pages": {"lt": 5}})] == ["memo.md"]
