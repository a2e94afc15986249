"""The visual channel end to end with the tiny model: a real PDF → `ingest` (text and pages) →
page index → fused search → a page pointer whose members are the page's text chunks, which
`ask` cites; RESTRICTED documents never reach the page index; with RAGSPINE_VISUAL_EMBEDDER
unset nothing changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from ingest_fixtures import write_pdf  # tests/ingest, put on the path by tests/visual/conftest.py
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from ragspine.assembly import build_retriever, ingest_files, load_settings
from ragspine.cli import main
from ragspine.ingest.loaders.pdf_pages import open_pdf_pages
from ragspine.ingest.pipeline import ingest_paths
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.vector.late_interaction import maxsim
from ragspine.retrieval.visual.factory import make_visual_embedder
from ragspine.workspace import Workspace

PAGES = ["Revenue fell in 2024 because overseas demand weakened.", "",
         "Chart: quarterly revenue by region, Asia and Europe."]  # fmt: skip


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    write_pdf(folder / "report.pdf", PAGES)
    write_pdf(folder / "board.pdf", ["Board minutes: the plan for the acquisition."])
    (folder / "board.pdf.meta.json").write_text(json.dumps({"sensitivity": "RESTRICTED"}), "utf-8")
    return folder


def env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"RAGSPINE_DB": str(tmp_path / "s.db"), "RAGSPINE_EMBEDDING": "none", **more}


def test_unset_changes_nothing(docs: Path, tmp_path: Path) -> None:
    settings = load_settings(env(tmp_path))
    report, _ = ingest_files([docs], settings)
    assert report.visual is None and not (tmp_path / "s.db.visual").exists()
    with Workspace.from_settings(settings) as ws:
        assert ws.retriever.visual is None and ws.stats()["index"]["visual"] is None
        snippets = ws.search("revenue chart")
        assert snippets and not any(s.get("is_visual") for s in snippets)
        assert ws.stats()["channels"]["visual"] == "none"


def test_pdf_to_page_index_to_fused_search_to_cited_page(docs: Path, tmp_path: Path) -> None:
    settings = load_settings(env(tmp_path, RAGSPINE_VISUAL_EMBEDDER="tiny"))
    report, _ = ingest_files([docs], settings)
    assert report.visual is not None
    assert (report.visual.embedded, report.visual.restricted) == (3, 1)  # board.pdf never rendered
    with Workspace.from_settings(settings) as ws:
        stats = ws.stats()["index"]["visual"]
        assert (stats["pages"], stats["documents"]) == (3, 1) and stats["bytes_per_page"] > 0
        snippets = ws.search("quarterly revenue chart", top_k=10)
        pointers = [s for s in snippets if s.get("is_visual")]
        assert {s["page"] for s in pointers} == {1, 2, 3} and all(s["doc_id"] == "report.pdf" for s in pointers)
        assert [s for s in snippets if not s.get("is_visual")], "the text channels are still there"
        # the pointer's score is MaxSim of the query and the page as rendered (the shared scorer)
        embedder = make_visual_embedder("tiny")
        assert embedder is not None
        with open_pdf_pages((docs / "report.pdf").read_bytes(), dpi=settings.visual_dpi) as pages:
            want = {n: maxsim(embedder.embed_queries(["quarterly revenue chart"])[0],
                              embedder.embed_pages([pages.render(n)])[0]) for n in (1, 2, 3)}  # fmt: skip
        for pointer in pointers:
            assert pointer["scores"]["visual"] == pytest.approx(want[pointer["page"]], abs=1e-3)
            assert pointer["lineage"]["channel"] == "visual" and pointer["chunk_id"] is None
        third = next(s for s in pointers if s["page"] == 3)
        assert third["text"] == PAGES[2] and third["source_locator"] == "report.pdf#page=3"
        assert [m["text"] for m in third["members"]] == [PAGES[2]]
        assert next(s for s in pointers if s["page"] == 2)["text"] == ""  # a page without text
        assert not any(s["doc_id"] == "board.pdf" for s in snippets)
        # a filter narrows the pages too
        assert not [s for s in ws.search("revenue", where={"entity": "NOBODY"}, top_k=10) if s.get("is_visual")]
        # ask cites text, not pixels: every citation is a chunk, the page's text among them
        answer = ws.ask("quarterly revenue chart", top_k=10)
        assert answer.citations and all(c["chunk_id"] and not c.get("is_visual") for c in answer.citations)


def test_a_page_of_an_older_version_is_not_shown(docs: Path, tmp_path: Path) -> None:
    settings = load_settings(env(tmp_path, RAGSPINE_VISUAL_EMBEDDER="tiny"))
    ingest_files([docs], settings)
    write_pdf(docs / "report.pdf", ["A rewritten report."])
    ingest_paths([docs], settings.db)  # text only: the page index is now behind the store
    with Workspace.from_settings(settings) as ws:
        assert not [s for s in ws.search("report revenue", top_k=10) if s.get("is_visual")]
    report, _ = ingest_files([docs], settings)  # the visual pass catches up
    assert report.visual is not None and report.visual.documents == ["report.pdf"]
    with Workspace.from_settings(settings) as ws:
        assert [s["page"] for s in ws.search("report", top_k=10) if s.get("is_visual")] == [1]


def test_stale_pages_of_a_document_now_restricted_change_nothing(docs: Path, tmp_path: Path) -> None:
    """A text-only ingest that relabels a document RESTRICTED leaves its older pages in the page
    index until the next visual pass. They are never shown, and they take no place in the visual
    ranking either: every search (pointers, order, scores) is what it is once the visual pass
    has removed them."""
    write_pdf(docs / "other.pdf", ["Other report: revenue rose.", "Other chart: revenue by quarter."])
    settings = load_settings(env(tmp_path, RAGSPINE_VISUAL_EMBEDDER="tiny"))
    ingest_files([docs], settings)
    (docs / "report.pdf.meta.json").write_text(json.dumps({"sensitivity": "RESTRICTED"}), "utf-8")
    ingest_files([docs], load_settings(env(tmp_path)))  # text only: report.pdf's PUBLIC-era pages are now stale

    def seen() -> list[list[tuple[Any, ...]]]:
        with Workspace.from_settings(settings) as ws:
            return [[(s["doc_id"], s.get("page"), s["chunk_id"], s["scores"]["fused"]) for s in ws.search(q, top_k=k)]
                    for q in ("quarterly revenue chart", "report", "revenue fell", "board") for k in (1, 2, 3)]  # fmt: skip

    before = seen()
    assert not any(doc == "report.pdf" for run in before for doc, *_ in run)
    report, _ = ingest_files([docs], settings)  # the visual pass removes the stale pages
    assert report.visual is not None and "report.pdf" in report.visual.cleared
    assert seen() == before


def test_cli_ingest_and_search_visual(docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RAGSPINE_VISUAL_EMBEDDER", raising=False)
    runner = CliRunner()
    refused = runner.invoke(main, ["ingest", str(docs), "--visual"])
    assert refused.exit_code != 0 and "--visual needs RAGSPINE_VISUAL_EMBEDDER" in refused.output
    monkeypatch.setenv("RAGSPINE_VISUAL_EMBEDDER", "tiny")
    empty = runner.invoke(main, ["search", "revenue", "--visual"])
    assert empty.exit_code != 0
    done = runner.invoke(main, ["ingest", str(docs), "--visual"])
    assert done.exit_code == 0, done.output
    assert "visual: 3 page(s) of 1 document(s) embedded" in done.output and "RESTRICTED pages dropped: 1" in done.output
    found = runner.invoke(main, ["search", "quarterly revenue chart", "--visual", "--top-k", "10"])
    assert found.exit_code == 0 and "report.pdf#page=3" in found.output and "page pointer, not a citation" in found.output
    as_json = json.loads(runner.invoke(main, ["search", "revenue", "--visual", "--json"]).output)
    assert any(s.get("is_visual") for s in as_json["snippets"])



@hsettings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(labels=st.lists(st.sampled_from(["PUBLIC", "INTERNAL", "RESTRICTED", "restricted", "ＲＥＳＴＲＩＣＴＥＤ"]),
                       min_size=1, max_size=3))  # fmt: skip
def test_restricted_documents_never_reach_the_embedder_through_ingest(tmp_path: Path, labels: list[str]) -> None:
    """Through the real ingest path (sidecar labels, the text ingest's label rules): the visual
    embedder is handed only pages of documents that are not RESTRICTED, and the page index
    holds only those."""
    root = tmp_path / f"run{abs(hash(tuple(labels)))}"
    folder = root / "docs"
    for i, label in enumerate(labels):
        write_pdf(folder / f"d{i}.pdf", [f"document {i} first page", f"document {i} second page"])
        (folder / f"d{i}.pdf.meta.json").write_text(json.dumps({"sensitivity": label}), "utf-8")
    seen: list[Any] = []
    import ragspine.ingest.visual as visual_pass

    real = visual_pass.index_pages

    def spy(documents: Any, embedder: Any, index: Any, **kw: Any) -> Any:
        class Spy:
            model_id, dim = embedder.model_id, embedder.dim

            def embed_pages(self, images: list[np.ndarray]) -> list[np.ndarray]:
                seen.extend(images)
                return embedder.embed_pages(images)

            def embed_queries(self, queries: list[str]) -> list[np.ndarray]:
                return embedder.embed_queries(queries)

        return real(documents, Spy(), index, **kw)

    visual_pass.index_pages = spy  # type: ignore[assignment]
    try:
        settings = load_settings({"RAGSPINE_DB": str(root / "s.db"), "RAGSPINE_EMBEDDING": "none",
                                  "RAGSPINE_VISUAL_EMBEDDER": "tiny"})  # fmt: skip
        report, _ = ingest_files([folder], settings)
    finally:
        visual_pass.index_pages = real  # type: ignore[assignment]
    open_docs = [i for i, label in enumerate(labels) if not is_restricted(label)]
    assert report.visual is not None and len(seen) == 2 * len(open_docs) == report.visual.embedded
    assert report.visual.restricted == 2 * (len(labels) - len(open_docs))
    manifest = json.loads((root / "s.db.visual" / "manifest.json").read_text("utf-8")) if open_docs else {"pages": []}
    assert sorted({p["record"]["doc_id"] for p in manifest["pages"]}) == [f"d{i}.pdf" for i in open_docs]
    retriever, store = build_retriever(settings)
    try:
        assert retriever.visual is not None
        hits = retriever.visual.search("document page", k=50)
        assert {k.split("#")[0] for k, _ in hits} == {f"d{i}.pdf" for i in open_docs}
    finally:
        retriever.index.close()
        store.close()


def test_raptor_keeps_the_visual_channel(docs: Path, tmp_path: Path) -> None:
    """RAGSPINE_RAPTOR=on wraps the retriever: the page pointers still come, fused with the
    leaves and the tree's nodes (a pointer has no chunk_id; the tree keys it by its locator)."""
    settings = load_settings(env(tmp_path, RAGSPINE_VISUAL_EMBEDDER="tiny", RAGSPINE_EMBEDDING="deterministic",
                                 RAGSPINE_RAPTOR="on"))  # fmt: skip
    ingest_files([docs], settings)
    with Workspace.from_settings(settings) as ws:
        ws.retriever.build()  # type: ignore[attr-defined]
        assert ws.retriever.visual is not None and ws.stats()["index"]["visual"]["pages"] == 3
        snippets = ws.search("quarterly revenue chart", top_k=10)
        assert any(s.get("is_visual") for s in snippets) and any(not s.get("is_visual") for s in snippets)


def test_a_visual_model_that_cannot_load_stops_the_ingest_before_any_write(docs: Path, tmp_path: Path) -> None:
    settings = load_settings(env(tmp_path, RAGSPINE_VISUAL_EMBEDDER="colqwen2",
                                 RAGSPINE_VISUAL_MODEL=str(tmp_path / "no-such-model")))  # fmt: skip
    with pytest.raises(ValueError, match="no model folder at"):
        ingest_files([docs], settings)
    assert not (tmp_path / "s.db.visual").exists()
    with Workspace.from_settings(load_settings(env(tmp_path))) as ws:
        assert ws.stats()["documents"] == 0


def test_a_rebuild_withdraws_the_pages_of_documents_left_out(docs: Path, tmp_path: Path) -> None:
    settings = load_settings(env(tmp_path, RAGSPINE_VISUAL_EMBEDDER="tiny"))
    ingest_files([docs], settings)
    only = tmp_path / "only"
    write_pdf(only / "other.pdf", ["Another report, one page."])
    report, withdrawn = ingest_files([only], settings, rebuild=True)
    assert "report.pdf" in withdrawn and report.visual is not None and "report.pdf" in report.visual.cleared
    with Workspace.from_settings(settings) as ws:
        assert ws.stats()["index"]["visual"]["documents"] == 1


def test_the_http_service_returns_page_pointers_and_shows_the_index(docs: Path, tmp_path: Path) -> None:
    """A real server: /search's response model takes a page pointer (chunk_id null, a visual
    score), /ask cites text chunks only, /stats shows the page index."""
    import httpx

    from ragspine.service import running_server

    settings = load_settings(env(tmp_path, RAGSPINE_VISUAL_EMBEDDER="tiny"))
    ingest_files([docs], settings)
    with Workspace.from_settings(settings) as ws, running_server(ws) as url, httpx.Client(base_url=url, timeout=30) as client:
        found = client.post("/search", json={"query": "quarterly revenue chart", "top_k": 10})
        assert found.status_code == 200, found.text
        pointers = [s for s in found.json()["snippets"] if s.get("is_visual")]
        assert pointers and all(s["chunk_id"] is None and isinstance(s["scores"]["visual"], float) for s in pointers)
        answer = client.post("/ask", json={"question": "quarterly revenue chart", "top_k": 10}).json()
        assert answer["citations"] and all(c["chunk_id"] and not c.get("is_visual") for c in answer["citations"])
        visual = client.get("/stats").json()["index"]["visual"]
        assert (visual["pages"], visual["documents"], visual["model"]) == (3, 1, "tiny-visual:dim=32:grid=8:patch=8:seed=0")
