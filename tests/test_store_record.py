"""A store carries its own build settings (issue 33 item 6): what it was built with is recorded in
its meta table, opening it adopts the record for every setting not given, a given setting that
conflicts is refused with the way out, `config show` says "store", credentials are never written.
Real SQLite stores, the real CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import ragspine
from ragspine.assembly import build_retriever, load_settings, resolve_settings
from ragspine.cli import main
from ragspine.errors import ModelMismatch
from ragspine.retrieval.lexical.index.identity import IndexSettings, record_index_settings
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.settings import Settings
from ragspine.store_record import (
    RECORD_KEY,
    check_vector_store,
    read_record,
    record_build,
    vector_store_of,
)

LAW = (Path(__file__).parent / "fixtures/chunking/law_zh.txt").read_text("utf-8")
DENSE = {"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RETRIEVAL_MODE": "hybrid"}
BUILT = {"RAGSPINE_CHUNKER": "laws", "RAGSPINE_ANALYZER": "spec", "RAGSPINE_CONTEXTUAL": "none", **DENSE}
# every variable of the record, so a value in the test process's environment cannot leak in
UNSET = ["RAGSPINE_CHUNKER", "RAGSPINE_ANALYZER", "RAGSPINE_CONTEXTUAL", "RAGSPINE_CHUNK_CHARS",
         "RAGSPINE_CHUNK_OVERLAP", "RAGSPINE_EMBEDDING", "RAGSPINE_EMBEDDING_BACKEND", "RAGSPINE_EMBEDDING_MODEL",
         "RAGSPINE_VECTOR_STORE", "RAGSPINE_VECTOR_URL", "RAGSPINE_VECTOR_COLLECTION", "RAGSPINE_CONFIG"]  # fmt: skip


@pytest.fixture(autouse=True)
def _no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in UNSET:
        monkeypatch.delenv(var, raising=False)


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


@pytest.fixture
def laws_db(tmp_path: Path) -> Path:
    """A store ingested with RAGSPINE_CHUNKER=laws, the spec analyzer and no contextual header."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "law.txt").write_text(LAW, "utf-8")
    (folder / "memo.md").write_text("# Export memo\n\nExport orders dropped in the north region.\n", "utf-8")
    db = tmp_path / "s.db"
    result = cli("ingest", str(folder), "--db", str(db), env=BUILT)
    assert result.exit_code == 0, result.output
    return db


def _meta(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT key, value FROM ragspine_meta").fetchall())


def test_the_store_records_what_it_was_built_with(laws_db: Path) -> None:
    meta = _meta(laws_db)
    assert json.loads(meta["index_settings"])["chunker"] == "laws"
    assert json.loads(meta[RECORD_KEY]) == {
        "RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_EMBEDDING_MODEL": "", "RAGSPINE_VECTOR_STORE": "in_process",
        "RAGSPINE_VECTOR_URL": "", "RAGSPINE_VECTOR_COLLECTION": "",
    }  # fmt: skip


def test_opening_adopts_the_record_for_what_is_not_given(laws_db: Path) -> None:
    resolved = resolve_settings({}, flags={"RAGSPINE_DB": str(laws_db)})
    adopted = {var: resolved.sources[var] for var in BUILT}
    assert adopted == dict.fromkeys(BUILT, "store") | {"RAGSPINE_RETRIEVAL_MODE": "default"}
    settings = resolved.settings
    assert (settings.chunker, settings.analyzer, settings.contextual, settings.embedding) == (
        "laws", "spec", "none", "deterministic",
    )  # fmt: skip
    assert resolved.sources["RAGSPINE_CHUNK_CHARS"] == "default"  # built with the default: reported as such
    result = cli("search", "数据样例保护法 第四条", "--db", str(laws_db), env={})
    assert result.exit_code == 0, result.output
    assert "law.txt" in result.output
    with ragspine.open(laws_db) as workspace:
        hits = workspace.search("export orders")
        assert hits and hits[0]["doc_id"] == "memo.md"
        assert workspace.settings.chunker == "laws"


def test_a_given_setting_that_conflicts_is_refused_with_the_way_out(laws_db: Path) -> None:
    with pytest.raises(ModelMismatch, match=r"RAGSPINE_CHUNKER: laws -> paragraph.*Unset those variables.*--rebuild"):
        ragspine.open(laws_db, chunker="paragraph")
    refused = cli("search", "export", "--db", str(laws_db), env={"RAGSPINE_ANALYZER": "en-stem"})
    assert refused.exit_code == 1
    assert "RAGSPINE_ANALYZER: spec -> en-stem" in refused.output and "--rebuild" in refused.output
    # the same values given again are no conflict
    with ragspine.open(laws_db, chunker="laws", analyzer="spec") as workspace:
        assert workspace.search("export orders")[0]["doc_id"] == "memo.md"


def test_config_show_says_a_value_came_from_the_store(laws_db: Path) -> None:
    result = cli("config", "show", "--db", str(laws_db), "--json", env={"RAGSPINE_ANALYZER": "spec"})
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["settings"]
    assert rows["RAGSPINE_CHUNKER"] == {"value": "laws", "source": "store"}
    assert rows["RAGSPINE_CONTEXTUAL"] == {"value": "none", "source": "store"}
    assert rows["RAGSPINE_ANALYZER"] == {"value": "spec", "source": "environment"}  # given: never replaced
    assert rows["RAGSPINE_CHUNK_CHARS"]["source"] == "default"
    plain = cli("config", "show", "--db", str(laws_db), env={})
    line = next(row for row in plain.output.splitlines() if row.startswith("RAGSPINE_CHUNKER "))
    assert line.split() == ["RAGSPINE_CHUNKER", "laws", "store"]


def test_a_new_store_path_is_not_created_by_reading_settings(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    resolved = resolve_settings({}, flags={"RAGSPINE_DB": str(db)})
    assert "store" not in resolved.sources.values() and not db.exists()


def _sqlite_store_recorded_with(tmp_path: Path, record: dict[str, str]) -> Path:
    db = tmp_path / "v.db"
    with ChunkStore(db) as store:
        store.init_schema()
        store.replace_doc_chunks("d", [Chunk("d:0", "d", 0, "some text", "d#p1@0-9")])
        store.write_meta(RECORD_KEY, json.dumps(record))
        record_index_settings(store, IndexSettings("en-stem", 1000, 80, "auto", "header"))  # the defaults
    return db


def test_a_sqlite_store_recorded_with_a_vector_store_adopts_or_refuses(tmp_path: Path) -> None:
    qdrant = str(tmp_path / "qdrant")
    db = _sqlite_store_recorded_with(tmp_path, {
        "RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_EMBEDDING_MODEL": "", "RAGSPINE_VECTOR_STORE": "qdrant",
        "RAGSPINE_VECTOR_URL": qdrant, "RAGSPINE_VECTOR_COLLECTION": "kept_here",
    })  # fmt: skip
    resolved = resolve_settings({"RAGSPINE_RETRIEVAL_MODE": "hybrid"}, flags={"RAGSPINE_DB": str(db)})
    settings = resolved.settings
    assert (settings.vector_store, settings.vector_url, settings.vector_collection) == ("qdrant", qdrant, "kept_here")
    assert {resolved.sources[v] for v in ("RAGSPINE_VECTOR_STORE", "RAGSPINE_VECTOR_URL", "RAGSPINE_EMBEDDING")} == {"store"}
    assert vector_store_of(settings) == {"kind": "qdrant", "location": qdrant, "collection": "kept_here"}
    # a replica told to keep its vectors in its own process is refused before it builds anything
    given = load_settings({"RAGSPINE_VECTOR_STORE": "in_process", **DENSE}, flags={"RAGSPINE_DB": str(db)})
    assert given.vector_url is None  # the recorded location follows only the recorded kind
    with pytest.raises(ModelMismatch, match=r"RAGSPINE_VECTOR_STORE: qdrant -> in_process.*Unset RAGSPINE_VECTOR_STORE"):
        build_retriever(given)
    elsewhere = load_settings({"RAGSPINE_VECTOR_URL": str(tmp_path / "other"), **DENSE}, flags={"RAGSPINE_DB": str(db)})
    with pytest.raises(ModelMismatch, match=r"RAGSPINE_VECTOR_URL: .*qdrant -> .*other"):
        build_retriever(elsewhere)
    lexical = load_settings({"RAGSPINE_VECTOR_STORE": "in_process", "RAGSPINE_RETRIEVAL_MODE": "bm25"},
                            flags={"RAGSPINE_DB": str(db)})  # fmt: skip
    retriever, store = build_retriever(lexical)  # no dense channel: no vectors to keep anywhere
    retriever.index.close()
    store.close()


def test_a_pgvector_location_is_compared_without_credentials(tmp_path: Path) -> None:
    record = {"RAGSPINE_VECTOR_STORE": "pgvector", "RAGSPINE_VECTOR_URL": ""}
    db = "postgresql://app:s3cret@db.example:5432/rag"
    same = Settings(db=db, vector_store="pgvector", vector_url="postgresql://other:pw@db.example:5432/rag")
    check_vector_store(record, same, "deterministic")  # the store's own database, other credentials
    moved = Settings(db=db, vector_store="pgvector", vector_url="postgresql://app:s3cret@vectors.example/rag")
    with pytest.raises(ModelMismatch) as refused:
        check_vector_store(record, moved, "deterministic")
    assert "RAGSPINE_VECTOR_URL" in str(refused.value) and "s3cret" not in str(refused.value)
    check_vector_store(record, moved, None)  # no dense channel: nothing refused


def test_credentials_are_never_written_into_the_store(tmp_path: Path) -> None:
    url = "postgresql://app:hunter2@vectors.example:5432/rag?sslmode=require&password=hunter3"
    db = tmp_path / "c.db"
    settings = Settings(db=str(db), vector_store="pgvector", vector_url=url, embedding="deterministic")
    with ChunkStore(db) as store:
        store.init_schema()
        record_build(store, settings, "deterministic", replace=True)
        assert read_record(store)["RAGSPINE_VECTOR_URL"] == "postgresql://vectors.example:5432/rag?sslmode=require"
    raw = "\n".join(_meta(db).values())
    assert "hunter" not in raw and "app" not in raw and "@" not in raw
    assert vector_store_of(settings)["location"] == "postgresql://app:****@vectors.example:5432/rag?sslmode=require&password=****"
    # adopted without credentials; given again with them, it is the same place
    resolved = resolve_settings({"RAGSPINE_RETRIEVAL_MODE": "hybrid"}, flags={"RAGSPINE_DB": str(db)})
    assert resolved.settings.vector_url == "postgresql://vectors.example:5432/rag?sslmode=require"
    with ChunkStore(db) as store:
        check_vector_store(read_record(store), Settings(db=str(db), vector_store="pgvector", vector_url=url), "x")


def test_a_store_from_before_the_record_behaves_as_before_until_its_next_ingest(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with ChunkStore(db) as store:
        store.init_schema()
        store.replace_doc_chunks("d", [Chunk("d:0", "d", 0, "old text about kelp", "d#p1@0-19")])
    resolved = resolve_settings(DENSE, flags={"RAGSPINE_DB": str(db)})
    assert "store" not in resolved.sources.values()
    # min_score 0: every ranked snippet (the relevance floor is tested in tests/integrations/test_min_score.py)
    with ragspine.open(db, env=DENSE, chunk_chars=480, chunk_overlap=80, chunker="paragraph", analyzer="spec",
                       contextual="none", min_score="0") as workspace:  # fmt: skip
        assert workspace.search("kelp")[0]["doc_id"] == "d"
    assert RECORD_KEY not in _meta(db)  # opening records nothing new in a store with chunks
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "kelp.txt").write_text("Kelp forests grow fast.", "utf-8")
    env = {**DENSE, "RAGSPINE_CHUNK_CHARS": "480", "RAGSPINE_CHUNKER": "paragraph", "RAGSPINE_ANALYZER": "spec",
           "RAGSPINE_CONTEXTUAL": "none"}  # fmt: skip
    assert cli("ingest", str(folder), "--db", str(db), env=env).exit_code == 0
    assert json.loads(_meta(db)[RECORD_KEY])["RAGSPINE_EMBEDDING"] == "deterministic"


def test_stats_show_the_vector_store(laws_db: Path) -> None:
    from fastapi.testclient import TestClient

    from ragspine.service.app import create_app

    with ragspine.open(laws_db) as workspace:
        shown = {"kind": "in_process", "location": f"beside {laws_db}", "collection": None}
        assert workspace.stats()["index"]["vector_store"] == shown
        with TestClient(create_app(workspace)) as client:
            assert client.get("/stats").json()["index"]["vector_store"] == shown
