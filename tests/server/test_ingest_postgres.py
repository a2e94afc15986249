"""`ragspine ingest PATH --db postgresql://…` (issue 21 item 2): the folder pipeline with its
change-detection registry in PostgreSQL gives the same store as the same folder ingested into
SQLite, skips unchanged files, versions changed ones, prunes deleted ones, and with
RAGSPINE_VECTOR_STORE=pgvector embeds into pgvector, which `ragspine embed --db URL` completes.
A real PostgreSQL with pgvector (tests/server/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from ragspine.cli import main
from ragspine.ingest.registry import DocumentRegistry
from ragspine.retrieval.store.factory import open_chunk_store
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.retrieval.vector.stores.pgvector import PgVectorStore

FILES = {
    "a.md": "# Revenue\n\nRevenue fell in the north region because export orders dropped.\n",
    "b.txt": "艾克美中国营收下滑的原因是出口订单减少。\n\n第二段：成本上升。\n",
    "sub/c.md": "---\nentity: ACME\nperiod: 2024\n---\nMargins grew in 2024 while costs were cut.\n",
    "d.txt": "A memo about SECRETMARK plans.\n",
}


def _folder(root: Path) -> Path:
    for name, text in FILES.items():
        path = root / "docs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "docs"


def _ingest(folder: Path, db: str, *extra: str, env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", db, *extra], env=env or {})
    assert result.exit_code == 0, result.output
    return result.output


def _rows(db: str) -> list[tuple[object, ...]]:
    with open_chunk_store(db) as store:
        return [
            (c.chunk_id, c.doc_id, c.version, c.text, c.sensitivity, c.entity, c.period, c.language)
            for c in store.iter_chunks(include_inactive=True)
        ]


def _search(db: str, query: str) -> list[str]:
    result = CliRunner().invoke(main, ["search", query, "--db", db, "--json"])
    assert result.exit_code == 0, result.output
    return [s["chunk_id"] for s in json.loads(result.stdout)["snippets"]]


def test_folder_ingest_into_postgres_matches_sqlite_and_is_incremental(pg_url: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    lite = str(tmp_path / "chunks.db")
    _ingest(folder, pg_url, "--rules", str(_rules(tmp_path)))
    _ingest(folder, lite, "--rules", str(_rules(tmp_path)))
    assert _rows(pg_url) == _rows(lite) and len(_rows(pg_url)) == len(FILES)
    for query in ("revenue export orders", "营收下滑", "margins 2024"):
        assert _search(pg_url, query) == _search(lite, query)

    again = _ingest(folder, pg_url, "--rules", str(_rules(tmp_path)))
    assert "ingested 0 document(s)" in again and "unchanged: 4" in again  # the registry in PostgreSQL saw them
    (folder / "a.md").write_text("# Revenue\n\nRevenue rose in the north region.\n", encoding="utf-8")
    (folder / "d.txt").unlink()
    changed = _ingest(folder, pg_url, "--prune", "--rules", str(_rules(tmp_path)))
    assert "ingested 1 document(s)" in changed and "withdrawn: 1" in changed, changed
    with open_chunk_store(pg_url) as store:
        assert store.active_version("a.md") == 2 and store.active_version("d.txt") is None
    with DocumentRegistry(pg_url) as registry:
        records = {r.doc_id: r for r in registry.all()}
        assert records["a.md"].version == 2 and records["d.txt"].status == "withdrawn"
        assert [r.doc_id for r in registry.active_under(str(folder.resolve()))] == ["a.md", "b.txt", "sub/c.md"]
    with open_chunk_store(pg_url) as store:
        new_a = [c.chunk_id for c in store.iter_chunks(doc_id="a.md")]
    assert _search(pg_url, "revenue rose")[:1] == new_a[:1]
    rebuilt = _ingest(folder / "sub", pg_url, "--rebuild", "--rules", str(_rules(tmp_path)))
    # a.md and b.txt; sub/c.md is the same file found under the sub-folder: it keeps its doc_id
    assert "withdrawn (not under PATHS): 2" in rebuilt, rebuilt
    with open_chunk_store(pg_url) as store:
        assert store.active_doc_ids() == ["sub/c.md"]


def _rules(root: Path) -> Path:
    path = root / "rules.json"
    path.write_text(json.dumps({"rules": [{"keywords": ["SECRETMARK"], "label": "RESTRICTED"}]}), encoding="utf-8")
    return path


def test_folder_ingest_embeds_into_pgvector_and_embed_completes_it(pg_url: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    env = {"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RETRIEVAL_MODE": "hybrid",
           "RAGSPINE_VECTOR_STORE": "pgvector", "RAGSPINE_VECTOR_COLLECTION": "folder_vectors"}  # fmt: skip
    output = _ingest(folder, pg_url, env=env)
    with open_chunk_store(pg_url) as store:
        active = sorted(c.chunk_id for c in store.iter_chunks())
    model = DeterministicEmbeddingBackend().model_id
    with PgVectorStore(pg_url, "folder_vectors", 256, model) as vectors:
        assert vectors.ids() == active and f"embedded: {len(active)} chunk(s)" in output
        vectors.delete(active[:2])
    result = CliRunner().invoke(main, ["embed", "--db", pg_url], env=env)
    assert result.exit_code == 0, result.output
    assert "embedded 2 chunk(s)" in result.output and f"already embedded: {len(active) - 2}" in result.output
    with PgVectorStore(pg_url, "folder_vectors", 256, model) as vectors:
        assert vectors.ids() == active
    refused = CliRunner().invoke(main, ["embed", "--db", pg_url], env={**env, "RAGSPINE_VECTOR_STORE": "in_process"})
    assert refused.exit_code == 1 and "RAGSPINE_VECTOR_STORE=pgvector" in refused.output
