"""RAPTOR on a BM25-only store (issue 37 item 2, review 5 finding 1): building a RAPTOR retriever
and searching with RAGSPINE_RAPTOR=on make no vectors file and embed no chunk; the leaves are
BM25's and the lineage says no tree is built (the empty tree file is opened, as before); `ragspine raptor build`
refuses there ("no vectors: run `ragspine embed` first") and writes nothing; after `ragspine
embed` it builds and the nodes are served. Real CLI (click's runner), real Workspace, real SQLite files; the deterministic
backend (hashed tokens) stands in for e5."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import ragspine
from ragspine.cli import main

ENV = {"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RAPTOR": "on", "RAGSPINE_RAPTOR_THRESHOLD": "0.3"}


def _cli(*args: str, env: dict[str, str]) -> str:
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def _listing(db: Path) -> list[str]:
    """The store folder's files, less the RAPTOR tree's (`s.db.raptor.sqlite`: opened, empty,
    by any RAPTOR retriever; it holds no vector)."""
    return sorted(p.name for p in db.parent.iterdir() if not p.name.startswith(db.name + ".raptor"))


def test_a_raptor_search_over_a_bm25_only_store_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nUnit {i} reported a harbour crane outage.\n", "utf-8")
    db = tmp_path / "store" / "s.db"
    _cli("ingest", str(folder), "--db", str(db), env={"RAGSPINE_EMBEDDING": "none"})
    before = _listing(db)
    assert not any("vectors" in name for name in before)

    out = json.loads(_cli("search", "harbour crane outage", "--db", str(db), "--json", env=ENV))
    assert out["snippets"] and all(s["scores"]["vector"] is None for s in out["snippets"])  # BM25's leaves
    assert {s["lineage"].get("raptor") for s in out["snippets"]} == {"no tree yet: run `ragspine raptor build`"}
    assert _listing(db) == before  # no vectors file

    with ragspine.open(db, embedding="deterministic", raptor="on") as ws:  # the Python path
        assert type(ws.retriever).__name__ == "RaptorRetriever"
        assert ws.search("harbour crane outage")
        assert ws.retriever.index.dense is None
    assert _listing(db) == before

    refused = CliRunner().invoke(main, ["raptor", "build", "--db", str(db)], env=ENV)  # no vectors to cluster
    assert refused.exit_code == 1 and "no vectors: run `ragspine embed` first" in refused.output
    assert _listing(db) == before  # the build made no vectors file either
    with ragspine.open(db, embedding="deterministic", raptor="on") as ws:
        assert ws.retriever.status()["built"] is False  # no empty tree marked current
    _cli("embed", "--db", str(db), env=ENV)
    built = _cli("raptor", "build", "--db", str(db), env=ENV)
    assert "3 leaves (0 without a vector)" in built
    nodes = {**ENV, "RAGSPINE_RAPTOR_MODE": "nodes"}
    out = json.loads(_cli("search", "harbour crane outage", "--db", str(db), "--json", env=nodes))
    assert out["snippets"] and all(s["is_synthesis"] for s in out["snippets"])  # ranked with the query vector
