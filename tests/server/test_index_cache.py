"""RAGSPINE_INDEX_CACHE (issue 21 item 4): a process over PostgreSQL keeps its lexical index in a
local folder between starts. The next start loads it (no rebuild) and catches up with writes made
meanwhile by another replica; a store that was replaced under the same URL is never served from
the old files (its uid and history differ): the index is rebuilt. Results always equal those of
a replica without the cache. A real PostgreSQL (tests/server/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import psycopg

from ragspine.settings.config import load_settings
from ragspine.workspace import Workspace

DOCS = [(f"d{i}", f"Quarter {i % 4} report: revenue {'fell' if i % 2 else 'rose'} in region {i % 5}. 营收{i}")
        for i in range(40)]  # fmt: skip
QUERIES = ["revenue fell region 3", "营收", "quarter 2 rose"]


def _open(pg_url: str, cache: Path | None) -> Workspace:
    env = {"RAGSPINE_DB": pg_url, "RAGSPINE_RETRIEVAL_MODE": "bm25"}
    if cache is not None:
        env["RAGSPINE_INDEX_CACHE"] = str(cache)
    return Workspace.from_settings(load_settings(env=env))


def _answers(ws: Workspace) -> list[list[tuple[str, float]]]:
    return [[(s["chunk_id"], s["scores"]["bm25"]) for s in ws.search(q, top_k=8)] for q in QUERIES]


def _lexical(ws: Workspace) -> object:
    return ws.retriever.index.lexical_index


def test_a_restart_loads_the_cached_index_and_catches_up(pg_url: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with _open(pg_url, None) as writer:
        for doc_id, text in DOCS:
            writer.ingest(text, doc_id=doc_id)
        with _open(pg_url, cache) as first:
            expected = _answers(first)
            assert _lexical(first).last_action == "built"  # type: ignore[attr-defined]
            assert expected == _answers(writer) and expected[0]
        assert list(cache.glob("pg-*.bm25/*/manifest.json"))  # persisted locally
        with _open(pg_url, cache) as second:
            assert _answers(second) == expected
            assert _lexical(second).stats["loads"] == 1 and _lexical(second).stats["builds"] == 0  # type: ignore[attr-defined]
        writer.ingest("revenue fell sharply in region 3 this quarter", doc_id="late")
        writer.withdraw("d3")
        with _open(pg_url, cache) as third:
            got = _answers(third)
            stats = _lexical(third).stats  # type: ignore[attr-defined]
            assert stats["loads"] == 1 and stats["builds"] == 0 and stats["catch_ups"] == 1
        assert got == _answers(writer) and got != expected
        assert "late" in {cid.split(":")[0] for cid, _ in got[0]}


def test_a_replaced_store_under_the_same_url_is_rebuilt(pg_url: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with _open(pg_url, cache) as ws:
        for doc_id, text in DOCS[:20]:
            ws.ingest(text, doc_id=doc_id)
        _answers(ws)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the database is replaced (restored elsewhere)
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        for table in tables:
            conn.execute(f"DROP TABLE {table}")
    with _open(pg_url, None) as other:
        for doc_id, text in DOCS[20:]:
            other.ingest(text, doc_id=doc_id)
        expected = _answers(other)
    with _open(pg_url, cache) as ws:
        assert _answers(ws) == expected
        assert _lexical(ws).stats["loads"] == 0 and _lexical(ws).stats["builds"] == 1  # type: ignore[attr-defined]
