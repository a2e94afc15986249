"""Duplicates, the failure log and the registry migration in PostgreSQL (issue 38 items 6 and 7):
an older `ragspine_document` table opens and gains its columns; a copy is recorded once and
named in the lineage by `ragspine search`; a repeated failure exits 0. A real PostgreSQL
(tests/server/conftest.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from ragspine.cli import main
from ragspine.ingest.registry import DUPLICATE, DocumentRegistry
from ragspine.retrieval.store.factory import open_chunk_store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "realfolder" / "duplicates"
OLD_TABLE = """CREATE TABLE ragspine_document (
    doc_id TEXT PRIMARY KEY, root TEXT NOT NULL, source_path TEXT NOT NULL, content_hash TEXT NOT NULL,
    ingest_key TEXT NOT NULL, version INTEGER NOT NULL, chunks INTEGER NOT NULL, status TEXT NOT NULL,
    loader TEXT NOT NULL DEFAULT '', encoding TEXT NOT NULL DEFAULT '', pages INTEGER NOT NULL DEFAULT 0,
    size_bytes INTEGER NOT NULL DEFAULT 0, metadata TEXT NOT NULL DEFAULT '{}', ingested_at TEXT NOT NULL)"""


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env={"RAGSPINE_EMBEDDING": "none"})
    return result.exit_code, result.output


def test_duplicates_failures_and_an_older_registry_in_postgres(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    with open_chunk_store(pg_url) as store:
        store.init_schema()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the table as the previous release made it
        conn.execute(OLD_TABLE)
        conn.execute("INSERT INTO ragspine_document VALUES ('old.md', '/r', '/r/old.md', 'h', 'k', 1, 0, "
                     "'withdrawn', '', '', 0, 0, '{}', '2025-01-01T00:00:00+00:00')")  # fmt: skip
    folder = Path(shutil.copytree(FIXTURE, tmp_path / "duplicates"))
    (folder / "_index.md").write_text("", "utf-8")
    code, out = _run("ingest", str(folder), "--db", pg_url)
    assert code == 1 and "exit 1: 1 new failure(s)" in out, out
    code, out = _run("ingest", str(folder), "--db", pg_url)
    assert code == 0 and "the 1 failure(s) are the same as the last run's" in out, out
    with DocumentRegistry(pg_url) as registry:
        rows = {row.doc_id: row for row in registry.all()}
    assert rows["old.md"].text_hash == "" and rows["old.md"].status == "withdrawn"
    copy = rows["saved/archive_rules (copy).txt"]
    assert copy.status == DUPLICATE and copy.duplicate_of == "law/archive_rules.txt"
    code, out = _run("search", "借阅登记表", "--db", pg_url, "--json")
    assert code == 0, out
    snippets = json.loads(out)["snippets"]
    law = [s for s in snippets if "借阅登记表" in s["text"]]
    assert len(law) == 1
    assert law[0]["lineage"]["duplicates"] == ["law/archive_rules.txt", "saved/archive_rules (copy).txt"]
