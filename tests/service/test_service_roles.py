"""Issue 34 #5, #6, #7 over a real uvicorn server hit by a real HTTP client: API-key roles (read,
write, admin), a POST onto a taken doc_id that answers the same whatever its label and never
replaces the owner's text, counts and versions that cover only what a caller may see, no server
path to a non-admin key, and a served relation graph that follows its file."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_helpers import ADMIN, ADMIN_KEY, API_KEY, READ, READ_KEY, doc

import ragspine
from ragspine.settings.api_keys import ApiKey
from ragspine.settings.config import ConfigError
from ragspine.settings.load import load_settings

SECRET_WORD = "quetzalsecret"  # only in the owner's RESTRICTED document


def _owner_restricted(served: Any, doc_id: str = "owner/plan.md") -> None:
    """What the owner ingests with the store in hand (Python), RESTRICTED."""
    served.ws.ingest_text(f"Plan {SECRET_WORD}: close the Lyon plant.", doc_id, sensitivity="RESTRICTED")


def test_a_key_spec_names_its_role_and_a_bare_key_is_a_write_key() -> None:
    keys = load_settings({"RAGSPINE_API_KEYS": f"read:{READ_KEY}, admin:{ADMIN_KEY},{API_KEY}"}).api_keys
    assert [k.role for k in keys if isinstance(k, ApiKey)] == ["read", "admin", "write"]
    assert keys[0].matches(READ_KEY) and not keys[0].matches(f"read:{READ_KEY}")
    assert ApiKey.parse(f"reader:{READ_KEY}").role == "write"  # not a role name: part of the key
    with pytest.raises(ConfigError) as weak:
        load_settings({"RAGSPINE_API_KEYS": f"read:{READ_KEY},admin:aaaaaaaaaaaaaaaaaaaa"})
    assert "key 2 is too weak" in str(weak.value) and "aaaaaaaa" not in str(weak.value)
    with pytest.raises(ConfigError) as twice:  # one key, two roles: refused, not guessed
        load_settings({"RAGSPINE_API_KEYS": f"read:{READ_KEY},admin:{READ_KEY}"})
    assert "key 2 repeats an earlier key" in str(twice.value) and READ_KEY not in str(twice.value)



@pytest.mark.parametrize("spec", ["READ:{k}", "Read:{k}", "read :{k}", "read: {k}", " Admin :{k}"])
def test_a_role_prefix_misspelt_is_refused_not_made_a_write_key(spec: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings({"RAGSPINE_API_KEYS": spec.format(k=READ_KEY)})
    assert "lowercase with no space" in str(refused.value) and READ_KEY not in str(refused.value)

def test_each_route_needs_its_role(serve: Any) -> None:
    served = serve()
    read = httpx.Client(base_url=served.url, headers=READ, timeout=30)
    admin = httpx.Client(base_url=served.url, headers=ADMIN, timeout=30)
    assert served.client.post("/documents", json=doc("a.md", "Borealis margin fell.")).status_code == 201
    writes = [("POST", "/documents", {"json": doc("b.md", "x")}),
              ("POST", "/documents/upload", {"files": {"file": ("c.md", b"Borealis.")}}),
              ("DELETE", "/documents/a.md", {}), ("POST", "/graph/build", {"json": {}})]  # fmt: skip
    for method, path, body in writes:
        refused = read.request(method, path, **body)
        assert refused.status_code == 403, (path, refused.text)
        assert "needs a write key" in refused.json()["message"] and READ_KEY not in refused.text
    assert served.client.get("/documents/a.md/chunks").status_code == 200, "the read key changed nothing"
    for client in (read, served.client, admin):  # every role reads
        assert client.post("/search", json={"query": "Borealis margin"}).json()["snippets"]
        assert client.get("/fields").status_code == 200 and client.get("/graph").status_code == 200
    assert read.post("/mcp", json={}).status_code not in (401, 403)  # MCP's tools only read
    assert httpx.post(f"{served.url}/mcp", json={}).status_code == 401
    assert admin.delete("/documents/a.md").status_code == 200  # admin is above write


def test_stats_and_graph_internals_only_for_admin_keys(serve: Any, tmp_path: Path) -> None:
    served = serve()
    served.client.post("/documents", json=doc("a.md", "Borealis margin fell.", entity="BOREALIS"))
    _owner_restricted(served)
    assert served.client.post("/graph/build", json={}).status_code == 200
    for headers in (READ, {}):  # the client's own key is a bare (write) key
        stats = served.client.get("/stats", headers=headers)
        graph = served.client.get("/graph", headers=headers)
        assert str(tmp_path) not in stats.text + graph.text and "chunks.db" not in stats.text + graph.text
        body = stats.json()
        assert (body["documents"], body["chunks"]) == (1, 1), "the RESTRICTED document is not counted"
        assert body["channels"] == {} and body.get("raptor") is None
        assert body["index"] | {"retrieval": None} == {"data_version": None, "retrieval": None,
                                                      "embedding_model": None, "embedding_device": None,
                                                      "dense": None,
                                                      "vector_store": None, "visual": None}  # fmt: skip
        shown = graph.json()
        assert shown["built"] is True and (shown.get("path"), shown.get("stale")) == (None, None) and "meta" not in shown
    stats = served.client.get("/stats", headers=ADMIN).json()
    assert stats["channels"]["reranker"] == "none" and stats["index"]["data_version"] >= 2
    assert stats["documents"] == 2  # the operator's view (admin keys) counts the RESTRICTED one
    shown = served.client.get("/graph", headers=ADMIN).json()
    assert shown["path"].endswith(".graph.json") and shown["stale"] is False and "data_version" in shown["meta"]



def test_graph_counts_move_with_nothing_a_read_key_cannot_see(serve: Any) -> None:
    """GET /graph's counts (non-admin) are those the queries show: a document relabelled
    RESTRICTED after the build is no longer counted (they were the build's, 1 document and
    1 entity, while every query already hid both)."""
    served = serve()
    served.client.post("/documents", json=doc("a.md", "Borealis margin fell.", entity="BOREALIS"))
    assert served.client.post("/graph/build", json={}).status_code == 200
    before = served.client.get("/graph", headers=READ).json()
    assert (before["nodes"], before["edges"]) == ({"document": 1, "entity": 1}, {"mentions": 1})
    served.ws.ingest_text("Borealis margin fell, now restricted.", "a.md", entity="BOREALIS", sensitivity="RESTRICTED")
    after = served.client.get("/graph", headers=READ).json()
    assert (after["nodes"], after["edges"], after.get("stale")) == ({}, {}, None)
    assert served.client.get("/graph/entities", headers=READ).json()["total"] == 0
    operator = served.client.get("/graph", headers=ADMIN).json()
    assert operator["stale"] is True and operator["nodes"] == {"document": 1, "entity": 1}

def test_a_post_onto_a_taken_doc_id_answers_the_same_whatever_its_label(serve: Any) -> None:
    served = serve()
    _owner_restricted(served)
    assert served.client.post("/documents", json=doc("open.md", "Open notes on Lyon.")).status_code == 201
    unused = served.client.post("/documents", json=doc("fresh.md", "Fresh notes on Lyon."))
    assert unused.status_code == 201 and unused.json()["version"] == 1 and unused.json()["warnings"] == []

    def post(doc_id: str, **extra: Any) -> httpx.Response:
        return served.client.post("/documents", json=doc(doc_id, "Caller text about Lyon.", sensitivity="PUBLIC", **extra))

    for extra in ({}, {"replace": False}):
        on_restricted, on_open = post("owner/plan.md", **extra), post("open.md", **extra)
        assert on_restricted.status_code == on_open.status_code == 409
        assert on_restricted.json()["message"] == on_open.json()["message"].replace("open.md", "owner/plan.md")
        assert on_restricted.headers.keys() == on_open.headers.keys()
    refused = post("owner/plan.md", replace=True)
    assert refused.status_code == 409 and refused.json() == post("owner/plan.md").json()
    for response in (refused, post("owner/plan.md")):
        assert "RESTRICTED" not in response.text and SECRET_WORD not in response.text
    assert [c.text for c in served.ws.store.iter_chunks(doc_id="owner/plan.md")] == [
        f"Plan {SECRET_WORD}: close the Lyon plant."
    ], "the owner's text stays"
    assert all(s["doc_id"] != "owner/plan.md" for s in
               served.client.post("/search", json={"query": "caller text Lyon"}).json()["snippets"])  # fmt: skip
    replaced = post("open.md", replace=True)
    assert replaced.status_code == 201 and replaced.json()["version"] == 2


def test_raptor_lineage_version_ignores_restricted_writes(serve: Any) -> None:
    served = serve(embedding="deterministic", raptor="on", raptor_mode="nodes", raptor_threshold=0.3,
                   raptor_max_cluster=4)  # fmt: skip
    for doc_id, text in {"a": "Exports to Europe fell and revenue dropped.",
                         "b": "Revenue dropped as exports to Europe fell."}.items():  # fmt: skip
        assert served.client.post("/documents", json=doc(doc_id, text, sensitivity="PUBLIC")).status_code == 201

    def node_version() -> str:
        served.ws.retriever.build()  # what `ragspine raptor build` runs
        found = served.client.post("/search", json={"query": "exports Europe revenue"}).json()["snippets"]
        (node,) = [s for s in found if s.get("is_synthesis")]
        version: str = node["lineage"]["tree_data_version"]
        return version

    before, store_version = node_version(), served.ws.store.data_version()
    served.ws.ingest_text("Exports to Europe fell: secret layoffs planned.", "s", sensitivity="RESTRICTED")
    assert served.ws.store.data_version() > store_version
    assert node_version() == before, "a RESTRICTED write does not move the version a caller sees"
    served.client.post("/documents", json=doc("c", "Exports to Europe fell; revenue dropped again.", sensitivity="PUBLIC"))
    assert node_version() != before


@pytest.fixture
def graph_served(serve: Any) -> Any:
    served = serve()
    for doc_id, entity in (("zephyr.md", "ZEPHYR"), ("acme.md", "ACME")):
        body = doc(doc_id, f"{entity} annual report: revenue rose.", entity=entity, sensitivity="PUBLIC")
        assert served.client.post("/documents", json=body).status_code == 201
    assert served.client.post("/graph/build", json={}).status_code == 200
    return served


def _zephyr(served: Any) -> dict[str, Any] | None:
    """The served graph's answer for the node ZEPHYR; None when it has no such node (400)."""
    found = served.client.get("/graph/neighbors", params={"node": "ZEPHYR"})
    assert found.status_code in (200, 400), found.text
    return found.json() if found.status_code == 200 else None


def test_the_served_graph_follows_its_file(graph_served: Any) -> None:
    served = graph_served
    shown = _zephyr(served)
    assert shown is not None and shown["edges"], "ZEPHYR is in the graph while its report is open"
    # the owner, in another process (here: another workspace on the same store), relabels the
    # report RESTRICTED and rebuilds the graph; the running server must not keep the old one
    with ragspine.open(served.ws.settings.db, env={"RAGSPINE_EMBEDDING": "none"}) as owner:
        owner.ingest_text("ZEPHYR annual report: revenue rose.", "zephyr.md", entity="ZEPHYR", sensitivity="RESTRICTED")
        owner.graph.build()
    deadline = time.monotonic() + 5
    while _zephyr(served) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _zephyr(served) is None, "the RESTRICTED-only entity left the served graph"
    assert served.client.get("/graph/neighbors", params={"node": "ACME"}).json()["edges"]


def test_an_unreadable_graph_file_keeps_the_graph_served(graph_served: Any, caplog: pytest.LogCaptureFixture) -> None:
    served = graph_served
    path = Path(served.ws.graph.graph.path)
    with caplog.at_level(logging.WARNING, logger="ragspine.graph.stores"):
        path.write_bytes(b"{not a graph")
        time.sleep(0.3)  # past RELOAD_CHECK_S
        assert _zephyr(served) is not None, "the graph loaded before is still served"
    assert any("cannot be read" in r.getMessage() and "still serving" in r.getMessage() for r in caplog.records)


def test_the_served_raptor_tree_follows_the_owners_rebuild(serve: Any) -> None:
    options = {"embedding": "deterministic", "raptor": "on", "raptor_threshold": 0.3, "raptor_max_cluster": 4}
    served = serve(raptor_mode="nodes", **options)
    texts = {"a": "Exports to Europe fell and revenue dropped.", "b": "Revenue dropped as exports to Europe fell.",
             "c": "Exports to Europe fell; revenue dropped again."}  # fmt: skip
    for doc_id, text in texts.items():
        assert served.client.post("/documents", json=doc(doc_id, text, sensitivity="PUBLIC")).status_code == 201
    served.ws.retriever.build()

    def node_docs() -> set[str]:
        found = served.client.post("/search", json={"query": "exports Europe revenue"}).json()["snippets"]
        return {d for s in found if s.get("is_synthesis") for d in s["lineage"]["doc_ids"]}

    assert node_docs() == {"a", "b", "c"}
    # the owner, in another process (another workspace on the same store), relabels "a"
    # RESTRICTED and rebuilds the tree: the running server serves the new tree, no restart
    with ragspine.open(served.ws.settings.db, env={"RAGSPINE_EMBEDDING": "none"}, **options) as owner:
        owner.ingest_text(texts["a"], "a", sensitivity="RESTRICTED")
        owner.retriever.build()  # type: ignore[attr-defined]  # a RaptorRetriever (raptor=on)
    assert node_docs() == {"b", "c"}
