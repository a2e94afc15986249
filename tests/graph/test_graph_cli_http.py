"""`ragspine graph build|show|neighbors|trace|rollup|peers` and the /graph routes, on a store made
by a real workspace: the CLI through click's runner, the HTTP API through a real uvicorn server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import ragspine
from ragspine.cli import main
from ragspine.service import running_server
from ragspine.testing.graph_corpus import SECRET, GraphCorpus, graph_corpus

ENV = {"RAGSPINE_EMBEDDING": "none", "RAGSPINE_MIN_SCORE": "0"}
KEY = "gR4ph-t3st-K9xQ-7wLm-2Zp"


@pytest.fixture(scope="module")
def corpus() -> GraphCorpus:
    return graph_corpus(groups=2, subsidiaries=2, chunks_per_report=3)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, corpus: GraphCorpus) -> Path:
    root: Path = tmp_path_factory.mktemp("cli")
    with ragspine.open(root / "chunks.db", env=ENV) as ws:
        corpus.ingest_texts(ws)
    corpus.relations_csv(root / "relations.csv")
    return root / "chunks.db"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["graph", *args], env=ENV)
    return result.exit_code, result.output


def _json(*args: str) -> Any:
    code, out = _run(*args)
    assert code == 0, out
    return json.loads(out)


def test_every_graph_command_has_help() -> None:
    for command in ("build", "show", "neighbors", "trace", "rollup", "peers", "global"):
        code, out = _run(command, "--help")
        assert code == 0 and "--db" in out and "--config" in out


def test_build_then_query_from_the_command_line(db: Path, corpus: GraphCorpus) -> None:
    rel = str(db.parent / "relations.csv")
    (db.parent / "graph.toml").write_text(f'RAGSPINE_GRAPH_RELATIONS = "{rel}"\nRAGSPINE_RELATION_EXTRACTOR = "cooccurrence"\n')
    code, out = _run("build", "--db", str(db), "--config", str(db.parent / "graph.toml"))
    assert code == 0 and "extractor cooccurrence" in out and Path(f"{db}.graph.json").is_file()
    shown = _json("show", "--db", str(db))
    assert shown["edges"]["subsidiary_of"] == 8 and shown["edges"]["co_occurs_with"] > 0
    rolled = _json("rollup", "G1", "--db", str(db))
    assert {d["doc_id"] for d in rolled["documents"]} == corpus.rollup_docs["G1"]
    searched = _json("rollup", "G1_S1", "--db", str(db), "--query", "revenue", "--period", "2024")
    assert searched["snippets"] and {s["entity"] for s in searched["snippets"]} <= {"G1_S1", "G1_S1_U"}
    assert {s["period"] for s in searched["snippets"]} == {"2024"}
    peers = _json("peers", "G1", "--db", str(db), "--period", "2023")
    assert [r["entity"] for r in peers["rows"]] == ["G1", "G2"]
    traced = _json("trace", "G1_S2", "G1", "--db", str(db), "--type", "subsidiary_of")
    assert (traced["source"], traced["target"]) == ("entity:G1_S2", "entity:G1")
    assert traced["edges"][0]["provenance"][0]["file"] == rel
    near = _json("neighbors", "G1", "--db", str(db), "--type", "peer_of")
    assert [e["type"] for e in near["edges"]] == ["peer_of"]
    for out in (rolled, searched, peers, traced, near, shown):
        assert SECRET not in json.dumps(out)


def test_bad_input_is_a_one_line_error(db: Path) -> None:
    code, out = _run("trace", "G1", "NOBODY", "--db", str(db))
    assert code == 1 and "has no node 'entity:NOBODY'" in out and "Traceback" not in out
    code, out = _run("build", "--db", str(db), "--extractor", "spacy")
    assert code == 1 and "cooccurrence" in out
    code, out = _run("show", "--db", str(db.parent / "missing.db"))
    assert code == 1 and "no chunk store" in out


@pytest.fixture
def served(tmp_path: Path, corpus: GraphCorpus) -> Iterator[httpx.Client]:
    rel = corpus.relations_csv(tmp_path / "relations.csv")
    env = {**ENV, "RAGSPINE_GRAPH_RELATIONS": str(rel), "RAGSPINE_RELATION_EXTRACTOR": "cooccurrence"}
    with ragspine.open(tmp_path / "ws", env=env, api_keys=[KEY]) as ws:
        corpus.ingest_texts(ws)
        with running_server(ws) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as client:
            yield client


def test_the_http_routes(served: httpx.Client, corpus: GraphCorpus) -> None:
    assert served.get("/graph/rollup", params={"entity": "G1"}).status_code == 400  # not built yet
    built = served.post("/graph/build", json={})
    assert built.status_code == 200 and built.json()["edges"] > 0
    rolled = served.get("/graph/rollup", params={"entity": "G2", "query": "exports", "top_k": 50}).json()
    assert {d["doc_id"] for d in rolled["documents"]} == corpus.rollup_docs["G2"]
    assert {s["doc_id"] for s in rolled["snippets"]} == corpus.rollup_docs["G2"]
    peers = served.get("/graph/peers", params={"entity": "G2", "period": "2024"}).json()
    assert [r["entity"] for r in peers["rows"]] == ["G2", "G1"]
    traced = served.get("/graph/trace", params={"source": "G2_S1", "target": "G2", "type": "subsidiary_of"}).json()
    assert traced["edges"][0]["supporting"]
    assert served.get("/graph/neighbors", params={"node": "G2"}).json()["node"] == "entity:G2"
    assert served.get("/graph").json()["built"] is True
    bad = served.get("/graph/neighbors", params={"node": "G2", "type": "owns"})
    assert bad.status_code == 400 and "subsidiary_of" in bad.json()["message"]
    assert httpx.get(f"{served.base_url}/graph").status_code == 401  # behind the API key
    for body in (rolled, peers, traced):
        assert SECRET not in json.dumps(body)
