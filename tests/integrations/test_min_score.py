"""`min_score` cuts the same snippets on every surface (issue 35, item 2): Python
(`Workspace.search`), the CLI (`--min-score`, and RAGSPINE_MIN_SCORE), the real HTTP service
(and `RemoteWorkspace`), MCP (in process, the SDK's client), LangChain (metadata["relevance"])
and LlamaIndex (`NodeWithScore.score` is the relevance). Every snippet carries a relevance in
[0, 1] that never increases down the list; a bad `min_score` is refused on each surface. `ask`
takes the same floor on its surfaces (Python, CLI, HTTP and `RemoteWorkspace`, MCP): its sources
are the snippets search keeps."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import ragspine
from ragspine.answer import NO_SOURCES
from ragspine.cli import main
from ragspine.integrations import RemoteWorkspace
from ragspine.retrieval.pipeline.request import InvalidRequest, SearchRequest
from ragspine.workspace import Workspace

from integration_helpers import API_KEY, AUTH, ENV, Demo

QUERY = "annual report revenue"
BAD: list[Any] = [1.5, -0.1, "0.3", True]


def _mcp_search(ws: Workspace, args: dict[str, Any], tool: str = "search") -> Any:
    pytest.importorskip("mcp", reason="the MCP checks need the `mcp` extra")
    from mcp import Client

    from ragspine.integrations.mcp_server import build_mcp_server

    async def session() -> Any:
        async with Client(build_mcp_server(ws), read_timeout_seconds=60) as client:
            return await client.call_tool(tool, args)

    return asyncio.run(session())


@pytest.fixture
def floor(demo_ws: Workspace) -> Iterator[tuple[float, list[str]]]:
    """A floor between two distinct relevances of the query's top 10, and the ids it keeps."""
    found = demo_ws.search(QUERY, top_k=10, min_score=0.0)
    values = [s["relevance"] for s in found]
    assert all(0.0 <= v <= 1.0 for v in values) and values == sorted(values, reverse=True), values
    cuts = [(a + b) / 2 for a, b in zip(values, values[1:]) if a > b]
    assert cuts, f"the demo query's relevances are all equal: {values}"
    cut = cuts[len(cuts) // 2]
    kept = [s["chunk_id"] for s in found if s["relevance"] >= cut]
    assert 0 < len(kept) < len(found)
    yield round(cut, 6), kept


def test_every_surface_cuts_the_same_snippets(
    demo: Demo, demo_ws: Workspace, demo_url: str, floor: tuple[float, list[str]]
) -> None:
    cut, kept = floor
    assert [s["chunk_id"] for s in demo_ws.search(QUERY, top_k=10, min_score=cut)] == kept
    with httpx.Client(base_url=demo_url, headers=AUTH, timeout=60) as client:
        body = client.post("/search", json={"query": QUERY, "top_k": 10, "min_score": cut}).json()
        assert [s["chunk_id"] for s in body["snippets"]] == kept
        assert all(s["relevance"] >= cut for s in body["snippets"])
    with RemoteWorkspace(demo_url, api_key=API_KEY) as remote:
        assert [s["chunk_id"] for s in remote.search(QUERY, top_k=10, min_score=cut)] == kept
    found = _mcp_search(demo_ws, {"query": QUERY, "top_k": 10, "min_score": cut})
    assert not found.is_error and [p["chunk_id"] for p in found.structured_content["passages"]] == kept
    args = ["search", QUERY, "--db", str(demo.path), "--json", "--top-k", "10"]
    result = CliRunner().invoke(main, [*args, "--min-score", str(cut)], env=ENV)
    assert result.exit_code == 0, result.output
    assert [s["chunk_id"] for s in json.loads(result.output)["snippets"]] == kept
    result = CliRunner().invoke(main, args, env={**ENV, "RAGSPINE_MIN_SCORE": str(cut)})
    assert result.exit_code == 0 and [s["chunk_id"] for s in json.loads(result.output)["snippets"]] == kept
    langchain = pytest.importorskip("ragspine.integrations.langchain", reason="needs the `langchain` extra")
    docs = langchain.RAGSpineRetriever(searcher=demo_ws, top_k=10, min_score=cut).invoke(QUERY)
    assert [d.id for d in docs] == kept and all(d.metadata["relevance"] >= cut for d in docs)
    llamaindex = pytest.importorskip("ragspine.integrations.llamaindex", reason="needs the `llamaindex` extra")
    nodes = llamaindex.RAGSpineRetriever(demo_ws, top_k=10, min_score=cut).retrieve(QUERY)
    assert [n.node.id_ for n in nodes] == kept
    assert [n.score for n in nodes] == [s["relevance"] for s in demo_ws.search(QUERY, top_k=10, min_score=cut)]


def test_the_setting_is_the_default_and_a_request_overrides_it(demo: Demo) -> None:
    with ragspine.open(demo.path, env={**ENV, "RAGSPINE_MIN_SCORE": "1"}) as ws:
        assert ws.search(QUERY, top_k=10) == [], "no passage is certain: a floor of 1 keeps none"
        assert len(ws.search(QUERY, top_k=10, min_score=0.0)) == 10


def test_a_bad_min_score_is_refused_on_every_surface(demo: Demo, demo_ws: Workspace, demo_url: str) -> None:
    for bad in BAD:
        with pytest.raises(InvalidRequest, match="min_score must be a number from 0 to 1"):
            SearchRequest(QUERY, min_score=bad)
        with pytest.raises(InvalidRequest, match="min_score"):
            demo_ws.search(QUERY, min_score=bad)
        with httpx.Client(base_url=demo_url, headers=AUTH, timeout=60) as client:
            answer = client.post("/search", json={"query": QUERY, "min_score": bad})
            assert answer.status_code == 422 and "min_score must be a number from 0 to 1" in answer.json()["message"]
        with RemoteWorkspace(demo_url) as remote, pytest.raises(InvalidRequest, match="min_score"):
            remote.search(QUERY, min_score=bad)
        refused = _mcp_search(demo_ws, {"query": QUERY, "min_score": bad})
        assert refused.is_error and "min_score must be a number from 0 to 1" in refused.content[0].text
        langchain = pytest.importorskip("ragspine.integrations.langchain", reason="needs the `langchain` extra")
        with pytest.raises(ValueError, match="min_score"):
            langchain.RAGSpineRetriever(searcher=demo_ws, min_score=bad)
        llamaindex = pytest.importorskip("ragspine.integrations.llamaindex", reason="needs the `llamaindex` extra")
        with pytest.raises(InvalidRequest, match="min_score"):
            llamaindex.RAGSpineRetriever(demo_ws, min_score=bad)
    result = CliRunner().invoke(main, ["search", QUERY, "--db", str(demo.path), "--min-score", "1.5"], env=ENV)
    assert result.exit_code == 2 and "--min-score" in result.output


def test_ask_answers_from_the_snippets_the_floor_keeps_on_every_surface(
    demo: Demo, demo_ws: Workspace, demo_url: str, floor: tuple[float, list[str]]
) -> None:
    cut, kept = floor
    answer = demo_ws.ask(QUERY, top_k=10, min_score=cut)
    assert [c["chunk_id"] for c in answer.citations] == kept and answer.mode == "extractive"
    assert len(demo_ws.ask(QUERY, top_k=10, min_score=0.0).citations) == 10  # the floor, not top_k, cut them
    with httpx.Client(base_url=demo_url, headers=AUTH, timeout=60) as client:
        body = client.post("/ask", json={"question": QUERY, "top_k": 10, "min_score": cut}).json()
        assert [c["chunk_id"] for c in body["citations"]] == kept
    with RemoteWorkspace(demo_url, api_key=API_KEY) as remote:
        assert [c["chunk_id"] for c in remote.ask(QUERY, top_k=10, min_score=cut)["citations"]] == kept
    found = _mcp_search(demo_ws, {"question": QUERY, "top_k": 10, "min_score": cut}, tool="ask")
    assert not found.is_error and [c["chunk_id"] for c in found.structured_content["citations"]] == kept
    args = ["ask", QUERY, "--db", str(demo.path), "--json", "--top-k", "10"]
    result = CliRunner().invoke(main, [*args, "--min-score", str(cut)], env=ENV)
    assert result.exit_code == 0, result.output
    assert [c["chunk_id"] for c in json.loads(result.output)["citations"]] == kept
    result = CliRunner().invoke(main, args, env={**ENV, "RAGSPINE_MIN_SCORE": str(cut)})
    assert result.exit_code == 0 and [c["chunk_id"] for c in json.loads(result.output)["citations"]] == kept


def test_ask_with_no_source_over_the_floor_says_so(demo: Demo, demo_url: str) -> None:
    with ragspine.open(demo.path, env={**ENV, "RAGSPINE_MIN_SCORE": "1"}) as ws:
        answer = ws.ask(QUERY, top_k=10)
        assert answer.citations == [] and answer.text == NO_SOURCES
        assert answer.note == "no grounded answer: no passage reached min_score 1"
        assert len(ws.ask(QUERY, top_k=10, min_score=0.0).citations) == 10  # a request overrides the setting
    with httpx.Client(base_url=demo_url, headers=AUTH, timeout=60) as client:
        body = client.post("/ask", json={"question": QUERY, "min_score": 1}).json()
        assert body["citations"] == [] and "min_score 1" in body["note"]


def test_a_bad_min_score_is_refused_by_ask_on_every_surface(demo: Demo, demo_ws: Workspace, demo_url: str) -> None:
    for bad in BAD:
        with pytest.raises(InvalidRequest, match="min_score"):
            demo_ws.ask(QUERY, min_score=bad)
        with httpx.Client(base_url=demo_url, headers=AUTH, timeout=60) as client:
            answer = client.post("/ask", json={"question": QUERY, "min_score": bad})
            assert answer.status_code == 422 and "min_score must be a number from 0 to 1" in answer.json()["message"]
        with RemoteWorkspace(demo_url) as remote, pytest.raises(InvalidRequest, match="min_score"):
            remote.ask(QUERY, min_score=bad)
        refused = _mcp_search(demo_ws, {"question": QUERY, "min_score": bad}, tool="ask")
        assert refused.is_error and "min_score must be a number from 0 to 1" in refused.content[0].text
    result = CliRunner().invoke(main, ["ask", QUERY, "--db", str(demo.path), "--min-score", "1.5"], env=ENV)
    assert result.exit_code == 2 and "--min-score" in result.output
