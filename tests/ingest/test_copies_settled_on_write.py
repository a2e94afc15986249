"""A copy's text stays searchable when its original is replaced or withdrawn outside a folder run
(issue 38 item 6): `Workspace.ingest_text(existing="replace_visible")` (POST /documents with
replace), `Workspace.withdraw` and DELETE /documents/{id} settle the original's recorded copies as
a folder run's end does: the first copy still on disk is stored, the others point at it; a copy
whose file changed is left to the next folder run, with a WARNING. Real SQLite, real files, a real
HTTP server."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

import ragspine
from ragspine.assembly import ingest_files, load_settings
from ragspine.ingest.registry import ACTIVE, DUPLICATE, DocumentRegistry
from ragspine.service import running_server

TEXT = "# Kestrel ledger\n\nThe kestrel ledger records every borrowed archive box and its return date.\n"
QUERY = "kestrel ledger borrowed archive box"
KEY = "copies-key-0123456789abcdef"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A store holding a folder of a.md and its byte-copies b.md and c.md, ingested once."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a.md", "b.md", "c.md"):
        (folder / name).write_text(TEXT, encoding="utf-8")
    (folder / "other.md").write_text("# Other\n\nHumidity in the basement store room.\n", encoding="utf-8")
    path = tmp_path / "s.db"
    report = ingest_files([folder], load_settings(flags={"RAGSPINE_DB": str(path)}), progress=False)[0]
    assert report.duplicate_of == {"b.md": "a.md", "c.md": "a.md"} and not report.failures
    return path


def _rows(db: Path) -> dict[str, tuple[str, str]]:
    with DocumentRegistry(db) as registry:
        return {row.doc_id: (row.status, row.duplicate_of) for row in registry.all()}


def _kestrel(ws: ragspine.Workspace) -> list[dict]:
    return [s for s in ws.search(QUERY, top_k=5) if "borrowed archive box" in s["text"]]


def test_replacing_the_original_stores_its_first_copy_and_the_others_point_at_it(db: Path) -> None:
    with ragspine.open(str(db)) as ws:
        [before] = _kestrel(ws)
        assert before["doc_id"] == "a.md" and before["lineage"]["duplicates"] == ["a.md", "b.md", "c.md"]
        ws.ingest_text("Heron inventory, replaced.", "a.md", existing="replace_visible")
        [hit] = _kestrel(ws)  # at once, before any folder run: the copy's text is not lost
        assert hit["doc_id"] == "b.md" and hit["lineage"]["duplicates"] == ["b.md", "c.md"]
        assert [s["doc_id"] for s in ws.search("Heron inventory", top_k=3)][:1] == ["a.md"]
    rows = _rows(db)
    assert rows["a.md"] == (ACTIVE, "") and rows["b.md"] == (ACTIVE, "") and rows["c.md"] == (DUPLICATE, "b.md")


def test_withdrawing_the_original_stores_its_first_copy(db: Path) -> None:
    with ragspine.open(str(db)) as ws:
        assert ws.withdraw("a.md") == 1
        [hit] = _kestrel(ws)
        assert hit["doc_id"] == "b.md" and hit["lineage"]["duplicates"] == ["b.md", "c.md"]
        assert ws.chunks("b.md") and ws.chunks("a.md") == []
    assert _rows(db)["a.md"][0] == "withdrawn" and _rows(db)["c.md"] == (DUPLICATE, "b.md")
    again = ingest_files([db.parent / "docs"], load_settings(flags={"RAGSPINE_DB": str(db)}), progress=False)[0]
    # The next folder run agrees: a.md (its file still there) and c.md are copies of b.md. b.md was
    # read with its recorded fields, not the run's settings: the run writes it once more, same text.
    assert again.duplicate_of == {"a.md": "b.md", "c.md": "b.md"} and not again.failures
    with ragspine.open(str(db)) as ws:
        assert [(s["doc_id"], s["lineage"]["duplicates"]) for s in _kestrel(ws)] == [("b.md", ["b.md", "a.md", "c.md"])]


def test_a_gone_copy_is_skipped_for_the_next_one_on_disk(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    (db.parent / "docs" / "b.md").unlink()
    with ragspine.open(str(db)) as ws, caplog.at_level(logging.WARNING, logger="ragspine"):
        ws.ingest_text("Heron inventory, replaced.", "a.md")
        assert [s["doc_id"] for s in _kestrel(ws)] == ["c.md"]
    assert any("b.md: copy of 'a.md' not stored: cannot read" in r.getMessage() for r in caplog.records)


def test_a_changed_copy_is_left_to_the_next_folder_run_with_a_warning(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    changed = db.parent / "docs" / "b.md"
    changed.write_text("# Kestrel ledger\n\nRewritten since.\n", encoding="utf-8")
    with ragspine.open(str(db)) as ws, caplog.at_level(logging.WARNING, logger="ragspine"):
        ws.withdraw("a.md")
        [hit] = _kestrel(ws)  # the next copy on disk with the recorded bytes stands in
        assert hit["doc_id"] == "c.md" and "duplicates" not in hit["lineage"]
    [warning] = [r.getMessage() for r in caplog.records if "copies of a.md" in r.getMessage()]
    assert str(changed) in warning and "changed since it was recorded; left to the next folder run" in warning
    assert _rows(db)["b.md"] == (DUPLICATE, "a.md")  # untouched: the folder run reads it


def test_http_delete_of_the_original_keeps_its_copy_searchable(db: Path) -> None:
    with ragspine.open(str(db), env={"RAGSPINE_EMBEDDING": "none"}, api_keys=[KEY]) as ws:
        with running_server(ws) as url, httpx.Client(base_url=url, timeout=30) as client:
            auth = {"Authorization": f"Bearer {KEY}"}
            deleted = client.delete("/documents/a.md", headers=auth)
            assert deleted.json() == {"doc_id": "a.md", "withdrawn_chunks": 1}
            found = client.post("/search", json={"query": QUERY, "top_k": 5}, headers=auth)
            assert found.status_code == 200, found.text
            hits = [s for s in found.json()["snippets"] if "borrowed archive box" in s["text"]]
            assert [s["doc_id"] for s in hits] == ["b.md"]


def test_a_recorded_copy_is_a_taken_doc_id_for_a_create_only_write(db: Path) -> None:
    """A duplicate row has no chunks of its own, but its doc_id is taken: a create-only write
    onto it is refused (the next folder run would otherwise fold the caller's text away)."""
    from ragspine.errors import DocumentExists

    with ragspine.open(str(db)) as ws:
        with pytest.raises(DocumentExists, match="'b.md' is taken"):
            ws.ingest_text("Budgets for the basement store room.", "b.md", existing="refuse")
        assert not [s for s in ws.search("budgets basement", top_k=3) if s["doc_id"] == "b.md"]
    assert _rows(db)["b.md"] == (DUPLICATE, "a.md")
