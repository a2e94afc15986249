"""The entity listing, the multi-hop trace and edges that lose their provenance, on a small
store made by a real workspace (SQLite, BM25): in Python, through `ragspine graph` (click's
runner) and over a real uvicorn server hit by httpx.

ACME and CYGNUS share no edge: ACME is BOREALIS's declared peer, and BOREALIS's report names
CYGNUS (a co_occurs_with edge). DRACO is named only by a RESTRICTED memo."""

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
from ragspine.workspace import Workspace

RELATIONS = """entities:
  - entity: ACME
    peers: [BOREALIS]
    aliases: [艾克美]
  - entity: ACME_HK
    parent: ACME
  - entity: CYGNUS
"""
DOCS = [  # doc_id, entity, text, sensitivity
    ("acme-2024", "ACME", "ACME group revenue rose 8% in 2024.", "PUBLIC"),
    ("acme-hk-2024", "ACME_HK", "ACME_HK grew Asian sales in 2024.", "PUBLIC"),
    ("borealis-2024", "BOREALIS", "BOREALIS shipped battery cells to CYGNUS all year.", "PUBLIC"),
    ("cygnus-2024", "CYGNUS", "CYGNUS opened a plant in Gdansk.", "PUBLIC"),
    ("eridanus-2024", "ERIDANUS", "ERIDANUS kept its dividend.", "PUBLIC"),
    ("draco-memo", "DRACO", "DRACO plans to take over CYGNUS in secret.", "RESTRICTED"),
]
KEY = "gR4ph-p4th-K9xQ-7wLm-2Zp"


def _open(root: Path, **extra: Any) -> Workspace:
    (root / "relations.yaml").write_text(RELATIONS, encoding="utf-8")
    env = {"RAGSPINE_EMBEDDING": "none", "RAGSPINE_GRAPH_RELATIONS": str(root / "relations.yaml"),
           "RAGSPINE_RELATION_EXTRACTOR": "cooccurrence"}  # fmt: skip
    return ragspine.open(root / "ws", env=env, **extra)


def _ingest(ws: Workspace) -> None:
    for doc_id, entity, text, sensitivity in DOCS:
        ws.ingest_text(text, doc_id, title=doc_id, entity=entity, period="2024", sensitivity=sensitivity)
    ws.graph.build()


def _relabel_restricted(ws: Workspace, doc_id: str) -> None:
    doc_id, entity, text, _ = next(d for d in DOCS if d[0] == doc_id)
    ws.ingest_text(text, doc_id, title=doc_id, entity=entity, period="2024", sensitivity="RESTRICTED")


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    with _open(tmp_path) as workspace:
        _ingest(workspace)
        yield workspace


def test_entities_lists_what_can_be_asked_about_never_a_restricted_name(ws: Workspace) -> None:
    listed = ws.graph.entities()
    names = {e["entity"]: e for e in listed["entities"]}
    assert set(names) == {"ACME", "ACME_HK", "BOREALIS", "CYGNUS", "ERIDANUS"} and listed["total"] == 5
    assert names["ACME"] == {"entity": "ACME", "aliases": ["艾克美"], "documents": 1}
    assert ws.graph.entities(contains="艾克")["entities"][0]["entity"] == "ACME"
    assert [e["entity"] for e in ws.graph.entities(contains="acme")["entities"]] == ["ACME", "ACME_HK"]
    assert ws.graph.entities(limit=2) == {"entities": listed["entities"][:2], "total": 5}
    with pytest.raises(ValueError, match="ragspine graph entities"):
        ws.graph.rollup("DRACO")  # the unknown-entity error points at the listing that exists


def test_trace_finds_the_shortest_typed_path_with_each_edges_provenance(ws: Workspace) -> None:
    traced = ws.graph.trace("ACME", "CYGNUS")
    assert traced["hops"] == 2 and traced["path"] == ["entity:ACME", "entity:BOREALIS", "entity:CYGNUS"]
    peer, cooc = traced["edges"]
    assert (peer["type"], peer["hop"], cooc["type"], cooc["hop"]) == ("peer_of", 1, "co_occurs_with", 2)
    assert peer["provenance"][0]["file"].endswith("relations.yaml") and peer["provenance"][0]["line"] == 2
    (cited,) = cooc["provenance"][0]["chunks"]
    assert cited["doc_id"] == "borealis-2024" and ws.chunk(cited["chunk_id"])["source_locator"] == cited["source_locator"]
    direct = ws.graph.trace("ACME_HK", "ACME")  # an edge joins them: every edge, with supporting chunks
    assert direct["hops"] == 1 and [e["type"] for e in direct["edges"]] == ["subsidiary_of"]
    assert "supporting" in direct["edges"][0]
    up_and_across = ws.graph.trace("ACME_HK", "BOREALIS")
    assert [(e["type"], e["hop"]) for e in up_and_across["edges"]] == [("subsidiary_of", 1), ("peer_of", 2)]
    with pytest.raises(ValueError, match="no subsidiary_of edge or path"):
        ws.graph.trace("ACME", "CYGNUS", "subsidiary_of")
    with pytest.raises(ValueError, match="at most 1 edges"):
        ws.graph.trace("ACME", "CYGNUS", max_hops=1)
    for bad in (0, True, "2"):
        with pytest.raises(ValueError, match="max_hops must be a whole number"):
            ws.graph.trace("ACME", "CYGNUS", max_hops=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="limit must be a whole number"):
            ws.graph.entities(limit=bad)  # type: ignore[arg-type]


def test_an_edge_whose_provenance_is_gone_is_dropped_not_kept_verified(ws: Workspace) -> None:
    _relabel_restricted(ws, "borealis-2024")  # the co_occurs_with edge's only chunk
    _relabel_restricted(ws, "eridanus-2024")  # ERIDANUS's only document
    assert ws.graph.show()["stale"]
    near = ws.graph.neighbors("CYGNUS")["edges"]
    assert all(e["type"] != "co_occurs_with" for e in near) and all(e["provenance"] for e in near)
    with pytest.raises(ValueError, match="no edge or path"):
        ws.graph.trace("ACME", "CYGNUS")
    names = {e["entity"]: e["documents"] for e in ws.graph.entities()["entities"]}
    assert names == {"ACME": 1, "ACME_HK": 1, "BOREALIS": 0, "CYGNUS": 1}  # declared, or still seen
    assert [r["entity"] for r in ws.graph.peers("ACME")["rows"]] == ["ACME", "BOREALIS"]  # declared peer


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["graph", *args], env={"RAGSPINE_EMBEDDING": "none"})
    return result.exit_code, result.output


def test_the_command_line(tmp_path: Path) -> None:
    with _open(tmp_path) as ws:
        _ingest(ws)
    folder = str(tmp_path / "ws")  # --db takes the folder, as ragspine.open does
    code, out = _cli("entities", "--db", folder, "--contains", "acme")
    assert code == 0 and [e["entity"] for e in json.loads(out)["entities"]] == ["ACME", "ACME_HK"]
    code, out = _cli("trace", "ACME", "CYGNUS", "--db", folder)
    assert code == 0 and json.loads(out)["path"][1] == "entity:BOREALIS"
    code, out = _cli("trace", "ACME", "CYGNUS", "--db", folder, "--max-hops", "1")
    assert code == 1 and out.count("\n") == 1 and "at most 1 edges" in out
    code, out = _cli("peers", "DRACO", "--db", folder)
    assert code == 1 and "ragspine graph entities" in out and "Traceback" not in out


def test_the_http_routes(tmp_path: Path) -> None:
    with _open(tmp_path, api_keys=[KEY]) as ws, running_server(ws) as url:
        _ingest(ws)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as client:
            listed = client.get("/graph/entities").json()
            assert listed["total"] == 5 and "DRACO" not in json.dumps(listed)
            assert client.get("/graph/entities", params={"contains": "cyg"}).json()["entities"][0]["documents"] == 1
            traced = client.get("/graph/trace", params={"source": "ACME", "target": "CYGNUS"}).json()
            assert traced["hops"] == 2 and [e["type"] for e in traced["edges"]] == ["peer_of", "co_occurs_with"]
            unknown = client.get("/graph/trace", params={"source": "ACME", "target": "DRACO"})
            assert unknown.status_code == 400 and "GET /graph/entities" in unknown.json()["message"]
            assert client.get("/graph/entities", params={"limit": 0}).status_code == 422
            _relabel_restricted(ws, "borealis-2024")
            gone = client.get("/graph/trace", params={"source": "ACME", "target": "CYGNUS"})
            assert gone.status_code == 400 and "no edge or path" in gone.json()["message"]
        assert httpx.get(f"{url}/graph/entities").status_code == 401  # behind the API key
