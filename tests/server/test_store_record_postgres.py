"""A PostgreSQL store carries its own build settings (issue 33 item 6): ingested with
RAGSPINE_VECTOR_STORE=pgvector, a replica started without it adopts the store's pgvector table
(`/stats` says so), a replica told to keep vectors in its own memory refuses to start, and the
record in the store's meta table never holds a credential. A real PostgreSQL with pgvector
(tests/server/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragspine.assembly import build_retriever, load_settings, resolve_settings
from ragspine.cli import main
from ragspine.errors import ModelMismatch
from ragspine.retrieval.store.factory import open_chunk_store
from ragspine.store_record import RECORD_KEY
from ragspine.workspace import Workspace

DENSE = {"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RETRIEVAL_MODE": "hybrid", "RAGSPINE_CHUNKER": "paragraph"}


@pytest.fixture(autouse=True)
def _no_vector_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RAGSPINE_VECTOR_STORE", "RAGSPINE_VECTOR_URL", "RAGSPINE_VECTOR_COLLECTION", "RAGSPINE_CHUNKER",
                "RAGSPINE_EMBEDDING", "RAGSPINE_EMBEDDING_BACKEND", "RAGSPINE_CONFIG"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)


def _record(url: str) -> dict[str, str]:
    with open_chunk_store(url) as store:
        raw = store.read_meta(RECORD_KEY)
    assert raw is not None
    return dict(json.loads(raw))


def test_a_replica_adopts_the_stores_vector_store_or_refuses_another(pg_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Revenue\n\nRevenue fell because export orders dropped.\n", "utf-8")
    (folder / "b.txt").write_text("Margins grew while costs were cut.\n", "utf-8")
    built = {**DENSE, "RAGSPINE_VECTOR_STORE": "pgvector"}
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", pg_url], env=built)
    assert result.exit_code == 0, result.output
    assert _record(pg_url)["RAGSPINE_VECTOR_STORE"] == "pgvector"

    resolved = resolve_settings({"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RETRIEVAL_MODE": "hybrid"},
                                flags={"RAGSPINE_DB": pg_url})  # fmt: skip
    assert resolved.settings.vector_store == "pgvector" and resolved.sources["RAGSPINE_VECTOR_STORE"] == "store"
    assert resolved.settings.chunker == "paragraph" and resolved.sources["RAGSPINE_CHUNKER"] == "store"
    with Workspace.from_settings(resolved.settings) as replica:
        shown = replica.stats()["index"]["vector_store"]
        assert shown["kind"] == "pgvector" and "@127.0.0.1" in shown["location"]
        assert replica.stats()["index"]["dense"]["stored_vectors"] == 2  # the shared table, not its memory
        assert replica.search("export orders")[0]["doc_id"] == "a.md"

    in_memory = load_settings({**DENSE, "RAGSPINE_VECTOR_STORE": "in_process"}, flags={"RAGSPINE_DB": pg_url})
    with pytest.raises(ModelMismatch, match=r"RAGSPINE_VECTOR_STORE: pgvector -> in_process"):
        build_retriever(in_memory)

    # given with a password, the vector URL is recorded without it (and without the user)
    secret = f"{pg_url}&password=hunter2-not-written"
    again = {**built, "RAGSPINE_VECTOR_URL": secret}
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", pg_url], env=again)
    assert result.exit_code == 0, result.output
    record = _record(pg_url)
    assert record["RAGSPINE_VECTOR_URL"].startswith("postgresql://127.0.0.1:")
    with open_chunk_store(pg_url) as store:
        raw = " ".join(str(store.read_meta(key)) for key in (RECORD_KEY, "index_settings"))
    assert "hunter2" not in raw and "postgres@" not in raw
