"""A full disk over HTTP (issue 40, item 3), against the real server and a really full store.

`ChunkStore.max_pages` caps the store's file (SQLite's `max_page_count`), so a write past it
fails with SQLite's own "database or disk is full", exactly as on a full disk: the write is
answered 507 with a one-line reason in the usual error body, logged as one WARNING (not a
traceback per request), nothing of it is kept, and reads go on answering.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.service import errors

PAGES = 128  # 512 KiB at SQLite's 4 KiB pages: a fresh store with a small document uses ~12
BIG_TEXT = " ".join(f"word{i % 997} margin{i % 313}" for i in range(60_000))  # ~1 MB: ~370 pages


def _full_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ragspine.service" and "507" in r.getMessage()]


def test_a_full_disk_is_507_with_one_line_one_warning_and_reads_still_work(
    serve: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(ChunkStore, "max_pages", PAGES)
    served = serve()
    client = served.client
    small = {"doc_id": "north.md", "text": "Revenue grew in the north because export orders rose."}
    assert client.post("/documents", json=small).status_code == 201
    caplog.set_level(logging.INFO)
    answers = [client.post("/documents", json={"doc_id": f"big{n}.md", "text": BIG_TEXT}) for n in range(3)]
    for response in answers:
        assert response.status_code == 507, response.text
        body = response.json()
        assert set(body) == {"status", "error", "message"}
        assert body["status"] == 507 and body["error"] == "insufficient_storage"
        assert "\n" not in body["message"] and body["message"].startswith("storage full: database or disk is full")
    assert len(_full_warnings(caplog)) == 1, "one WARNING for several requests"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], "no traceback"
    assert served.ws.store.active_version("big0.md") is None, "nothing of the refused write is kept"
    hits = client.post("/search", json={"query": "export orders north", "top_k": 3})
    assert hits.status_code == 200 and hits.json()["snippets"][0]["doc_id"] == "north.md"
    assert client.get("/stats").status_code == 200
    assert client.get("/documents/north.md/chunks").status_code == 200


def test_the_full_disk_warning_repeats_only_after_its_interval(
    serve: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(ChunkStore, "max_pages", PAGES)
    monkeypatch.setattr(errors, "FULL_WARNING_EVERY_S", 0.0)  # "once a minute", with no minute to wait
    client = serve().client
    caplog.set_level(logging.INFO)
    for n in range(2):
        assert client.post("/documents", json={"doc_id": f"big{n}.md", "text": BIG_TEXT}).status_code == 507
    assert len(_full_warnings(caplog)) == 2
