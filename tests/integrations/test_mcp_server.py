"""The MCP server, driven by the official SDK's own client: over stdio (`ragspine mcp`, a real
subprocess), over streamable HTTP (/mcp of the real uvicorn service, behind its API keys) and
in process (the property test). Nothing is mocked."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragspine

pytest.importorskip("mcp", reason="the MCP tests need the `mcp` extra")

import httpx2  # noqa: E402 - the MCP SDK's HTTP client, installed with it
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from ragspine.extras import MissingExtraError  # noqa: E402
from ragspine.integrations.mcp_server import build_mcp_server  # noqa: E402

from integration_helpers import API_KEY, AUTH, ENV, MEMO, Demo, ingest_demo  # noqa: E402

TOOLS = {"search", "ask", "list_libraries", "get_chunk"}
SRC = str(Path(ragspine.__file__).resolve().parents[1])


def _stdio(db: Path, *extra: str) -> StdioServerParameters:
    env = {**os.environ, **ENV, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    return StdioServerParameters(command=sys.executable, args=["-m", "ragspine", "mcp", "--db", str(db), *extra], env=env)


def _run(server: Any, check: Callable[[Client], Awaitable[None]]) -> None:
    async def session() -> None:
        async with Client(server, read_timeout_seconds=60) as client:
            await check(client)

    asyncio.run(session())


async def _check_tools(client: Client, demo: Demo) -> None:
    """What every transport must show: schemas, structured cited results, tool errors, no RESTRICTED."""
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == TOOLS
    search_schema = listed["search"].input_schema
    assert search_schema["required"] == ["query"]
    assert {"query", "where", "top_k", "library"} <= set(search_schema["properties"])
    assert listed["get_chunk"].input_schema["required"] == ["chunk_id"]
    assert all(tool.output_schema and tool.output_schema.get("type") == "object" for tool in listed.values())

    result = await client.call_tool("search", {"query": "为什么营收下滑", "where": {"entity": "ACME_CN"}, "top_k": 3})
    assert not result.is_error
    found = result.structured_content["passages"]
    assert found and found[0]["doc_id"] == "acme_cn_2024_annual_report"
    first = found[0]
    assert first["rank"] == 1 and first["citation"].endswith(f"[{first['source_locator']}]")
    assert set(first["scores"]) >= {"bm25", "fused"} and first["lineage"]["filters"] == {"entity": "ACME_CN"}
    assert {p["entity"] for p in found} == {"ACME_CN"}

    # The memo is the best raw match for this query: it is never shown, nor is its text.
    nightjar = await client.call_tool("search", {"query": "Project Nightjar layoffs and plant closure plan"})
    assert not nightjar.is_error
    assert all(p["doc_id"] != MEMO for p in nightjar.structured_content["passages"])
    assert not demo.leaks(nightjar.structured_content)

    typed = await client.call_tool("search", {"query": "annual report", "where": "period>=2024", "top_k": 10})
    assert {p["period"] for p in typed.structured_content["passages"]} <= {"2024"}

    chunk = await client.call_tool("get_chunk", {"chunk_id": first["chunk_id"]})
    assert not chunk.is_error and chunk.structured_content["text"] == first["text"]
    assert chunk.structured_content["citation"] == first["citation"]

    refused = await client.call_tool("get_chunk", {"chunk_id": demo.restricted_ids[0]})
    absent = await client.call_tool("get_chunk", {"chunk_id": demo.restricted_ids[0][:-2] + "zz"})
    assert refused.is_error and not demo.leaks(refused.content[0].text)
    # a RESTRICTED chunk is answered exactly as one that does not exist: no existence oracle
    assert refused.content[0].text.replace(demo.restricted_ids[0], "ID") == absent.content[0].text.replace(
        demo.restricted_ids[0][:-2] + "zz", "ID"
    )
    for unknown, needle in [(first["chunk_id"][:-2] + "zz", "no active chunk"), ("no-colons", "DOC_ID:SEQ:DIGEST")]:
        missing = await client.call_tool("get_chunk", {"chunk_id": unknown})
        assert missing.is_error and needle in missing.content[0].text

    for bad, needle in [({"query": "x", "where": {"nosuchfield": 1}}, "nosuchfield"),
                        ({"query": "x", "library": "nope"}, "unknown library"),
                        ({"query": ""}, "query"), ({"query": "x", "top_k": 0}, "top_k")]:  # fmt: skip
        answer = await client.call_tool("search", bad)
        assert answer.is_error and needle in answer.content[0].text and "Traceback" not in answer.content[0].text

    asked = await client.call_tool("ask", {"question": "What caused Borealis's gross margin to fall in 2024?"})
    assert not asked.is_error
    body = asked.structured_content
    assert body["mode"] == "extractive" and "[1]" in body["answer"]
    assert body["citations"][0]["doc_id"] == "borealis_2024_annual_report" and body["citations"][0]["citation"]

    libraries = (await client.call_tool("list_libraries", {})).structured_content["libraries"]
    # 6 documents, one a RESTRICTED memo: it is not counted (issue 34 #6)
    assert libraries[0] == {"name": "default", "description": "the served store", "documents": 5,
                            "chunks": libraries[0]["chunks"], "retrieval": "bm25"}  # fmt: skip


@pytest.mark.integration
def test_stdio_transport_ragspine_mcp(demo: Demo, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with ragspine.open(other, env=ENV) as ws:
        ws.ingest_text("Tidal turbines in the fjord produced 4 GWh.", "tidal", title="Tidal note", entity="FJORD")

    async def check(client: Client) -> None:
        await _check_tools(client, demo)
        libraries = (await client.call_tool("list_libraries", {})).structured_content["libraries"]
        assert [lib["name"] for lib in libraries] == ["default", "fjord"]
        hit = await client.call_tool("search", {"query": "tidal turbines", "library": "fjord"})
        assert [p["doc_id"] for p in hit.structured_content["passages"]] == ["tidal"]

    _run(_stdio(demo.path, "--library", f"fjord={other}"), check)


@pytest.mark.integration
def test_streamable_http_transport_behind_the_api_keys(demo: Demo, demo_url: str) -> None:
    async def session() -> None:
        async with httpx2.AsyncClient(headers=AUTH, timeout=60) as http:
            async with Client(streamable_http_client(f"{demo_url}/mcp", http_client=http)) as client:
                await _check_tools(client, demo)

    asyncio.run(session())
    # No key, a wrong key: 401 before the MCP layer, never echoing what was sent.
    for headers in ({}, {"Authorization": "Bearer wrong-key-wrong-key-wrong"}, {"X-API-Key": "nope"}):
        response = httpx.post(f"{demo_url}/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert response.status_code == 401 and "wrong-key" not in response.text
    ok = httpx.post(f"{demo_url}/mcp", headers={"X-API-Key": API_KEY, "Accept": "application/json, text/event-stream"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"})  # fmt: skip
    assert ok.status_code != 401


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)
    with ragspine.open(":memory:", env=ENV) as ws, pytest.raises(MissingExtraError, match=r"ragspine\[mcp\]"):
        build_mcp_server(ws)


QUERIES = st.one_of(
    st.sampled_from(["Project Nightjar", "夜鹰计划 裁员", "restructuring memo layoffs plant closure",
                     "confidential steering group", "ACME China", "营收下滑 原因", "gross margin"]),  # fmt: skip
    st.text(alphabet=st.sampled_from(list("夜鹰计划裁员工厂关闭营收毛利 NightjarProjectlayoffsmemo")), min_size=1, max_size=24),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=QUERIES, top_k=st.integers(1, 20), tool=st.sampled_from(["search", "ask"]))
def test_no_tool_ever_returns_restricted_text(demo_server: Any, demo: Demo, query: str, top_k: int, tool: str) -> None:
    async def check(client: Client) -> None:
        key = "query" if tool == "search" else "question"
        result = await client.call_tool(tool, {key: query, "top_k": top_k})
        assert not demo.leaks(result.structured_content)
        assert not demo.leaks(result.content[0].text.replace(query, ""))  # the text form, less the echo

    _run(demo_server, check)


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An in-process MCP server over an in-memory copy of the demo corpus."""
    ws = ragspine.open(":memory:", env=ENV)
    ingest_demo(ws)
    yield build_mcp_server(ws)
    ws.close()


def test_served_mcp_without_the_extra_answers_501_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragspine.service import running_server

    monkeypatch.setitem(sys.modules, "mcp.server.streamable_http_manager", None)
    with ragspine.open(":memory:", env=ENV) as ws, running_server(ws) as url:
        response = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert response.status_code == 501 and "pip install 'ragspine[mcp]'" in response.json()["message"]
        assert httpx.get(f"{url}/health").status_code == 200  # the rest of the service is unaffected
