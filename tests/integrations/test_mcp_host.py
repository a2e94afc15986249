"""`ragspine mcp` as an LLM host meets it: launched from a bare environment by the venv's
absolute `ragspine` (the documented host config) with --db a folder, driven by the MCP SDK's own
client over stdio; the text the model reads (compact, numbered, cited, the filters' fate on its
first line); one-line errors; and the basic install without the `mcp` extra (one line naming it)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ragspine
from ragspine.integrations.mcp_text import answer_text, search_text

from integration_helpers import ENV, Demo

SRC = str(Path(ragspine.__file__).resolve().parents[1])
VENV_RAGSPINE = Path(sys.executable).parent / "ragspine"
# What a host gives a server it launches: no activated venv, no shell profile.
BARE_ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, **ENV}
BLOCKER = '''
import importlib.abc, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mcp", "mcp_types", "pydantic", "pydantic_core"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Block())
'''


def test_the_text_shows_dropped_filters_and_relevance_first() -> None:
    response = {
        "library": "default", "query": "为什么营收下滑", "where": {"entity": "NOBODY"},
        "filters_dropped": ["entity"],
        "passages": [
            {"rank": 1, "title": "艾克美中国 2024 年报", "doc_id": "acme", "source_locator": "acme#p1@0-29",
             "chunk_id": "acme:0000:89c8", "relevance": 0.8149, "text": "营收下滑的主要原因是出口订单减少。\n\n\n价格竞争加剧。",
             "scores": {"bm25": 17.006433952968855, "vector": None, "fused": 2.3712}, "lineage": {"why": "x" * 500}},
            {"rank": 2, "title": "", "doc_id": "memo-2", "source_locator": "memo-2#p3@0-10", "chunk_id": "memo-2:0002:aa",
             "text": "Revenue fell.", "scores": {"fused": -1.38712}},
        ],
    }  # fmt: skip
    text = search_text(response)
    first, rest = text.split("\n", 1)
    assert first == "2 passages, NOT filtered: no passage matched the filter on entity, so it was dropped."
    assert "[1] 艾克美中国 2024 年报 [acme#p1@0-29] · relevance 0.81 · chunk_id acme:0000:89c8\n" in rest
    assert "营收下滑的主要原因是出口订单减少。\n\n价格竞争加剧。" in rest  # blank-line runs closed up
    assert "[2] memo-2 [memo-2#p3@0-10] · score -1.39 · chunk_id memo-2:0002:aa\nRevenue fell." in rest
    assert "17.006" not in text and "lineage" not in text and "{" not in text  # no JSON, no raw floats
    held = search_text({**response, "filters_dropped": [], "passages": response["passages"][:1]})
    assert held.startswith('1 passage, filtered by {"entity":"NOBODY"}.\n')
    assert search_text({"where": "period>=2030", "passages": []}) == "No passage matched, filtered by period>=2030.\n"
    asked = answer_text({"answer": "出口订单减少 [1]。", "mode": "extractive", "note": "", "filters_dropped": ["entity", "period"],
                         "citations": [{**response["passages"][0], "ref": 1}]})  # fmt: skip
    assert asked.startswith("Answer (extractive) from 1 passage, NOT filtered: no passage matched the filter on "
                            "entity, period, so they were dropped.\n")  # fmt: skip
    assert asked.endswith("Sources:\n[1] 艾克美中国 2024 年报 [acme#p1@0-29] · relevance 0.81 · chunk_id acme:0000:89c8")


@pytest.mark.integration
@pytest.mark.skipif(not VENV_RAGSPINE.is_file(), reason="needs the venv's ragspine script")
def test_a_host_launches_the_venvs_ragspine_with_a_folder(demo: Demo, tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the MCP host test needs the `mcp` extra")
    from mcp import Client, StdioServerParameters

    folder = tmp_path / "store"  # --db takes a folder holding chunks.db, as ragspine.open does
    folder.mkdir()
    (folder / "chunks.db").write_bytes(demo.path.read_bytes())
    args = ["mcp", "--db", str(folder), "--library", f"copy={folder}"]  # a library may be a folder too
    server = StdioServerParameters(command=str(VENV_RAGSPINE), args=args, env=BARE_ENV, cwd=str(tmp_path))

    async def session() -> None:
        async with Client(server, read_timeout_seconds=60) as client:
            held = await client.call_tool("search", {"query": "为什么营收下滑", "where": {"entity": "ACME_CN"}, "top_k": 3})
            text, passages = held.content[0].text, held.structured_content["passages"]
            assert text.startswith('3 passages, filtered by {"entity":"ACME_CN"}.\n')
            assert held.structured_content["filters_dropped"] == []
            for n, p in enumerate(passages, start=1):
                assert f"[{n}] {p['citation']} · relevance {p['relevance']:.2f} · " in text and p["text"].splitlines()[-1] in text
            body = sum(len(p["text"]) for p in passages)
            assert len(text) < body + 200 * len(passages)  # the text is the passages, not their JSON

            strict = await client.call_tool("search", {"query": "为什么营收下滑", "where": {"entity": "NOBODY"}})
            assert strict.content[0].text.startswith('No passage matched, filtered by {"entity":"NOBODY"}.')
            assert strict.structured_content["passages"] == [] and strict.structured_content["filters_dropped"] == []
            widened = await client.call_tool("search", {"query": "为什么营收下滑", "where": {"entity": "NOBODY"},
                                                        "filter_fallback": "retry"})  # fmt: skip
            assert widened.content[0].text.split("\n")[0].endswith("NOT filtered: no passage matched the filter on "
                                                                  "entity, so it was dropped.")  # fmt: skip
            assert widened.structured_content["filters_dropped"] == ["entity"]
            assert not demo.leaks(widened.content[0].text)

            for bad, message in [({"query": "x", "top_k": 0}, "invalid arguments for search: top_k must be >= 1, got 0"),
                                 ({"query": "x", "top_k": "3"}, "top_k must be a whole number, got '3' (str)"),
                                 ({"query": "x", "where": 5}, "where: Input should be a valid dictionary or a valid string"),
                                 ({"query": "x", "where": "nosuch>=2024"}, "nosuch")]:  # fmt: skip
                refused = await client.call_tool("search", bad)
                line = refused.content[0].text
                assert refused.is_error and message in line and "\n" not in line and "pydantic.dev" not in line

            chunk = await client.call_tool("get_chunk", {"chunk_id": passages[0]["chunk_id"]})
            assert chunk.content[0].text.startswith(f"{passages[0]['citation']} · chunk_id {passages[0]['chunk_id']}\n")
            libraries = await client.call_tool("list_libraries", {})
            assert libraries.content[0].text.startswith("default: the served store (5 documents")  # the RESTRICTED one is not counted
            assert "\ncopy: " in libraries.content[0].text

    asyncio.run(session())


def _basic_install(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`args` run in a Python where `mcp` and `pydantic` cannot be imported (a `make demo` venv)."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    env = {**BARE_ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path), SRC])}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_on_the_basic_install_ragspine_mcp_names_the_extra_in_one_line(demo: Demo, tmp_path: Path) -> None:
    blocked = _basic_install(tmp_path, "-c", "import pydantic")
    assert blocked.returncode == 1 and "No module named 'pydantic'" in blocked.stderr  # the simulation holds
    done = _basic_install(tmp_path, "-m", "ragspine", "mcp", "--db", str(demo.path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "Error: The MCP server needs the optional package 'mcp': pip install 'ragspine[mcp]'"
    ]


def test_serve_without_the_extra_answers_501_on_mcp_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from ragspine.service import running_server

    monkeypatch.delitem(sys.modules, "ragspine.integrations.mcp_server", raising=False)
    monkeypatch.setitem(sys.modules, "mcp", None)  # as on an install without ragspine[mcp]
    with ragspine.open(":memory:", env=ENV) as ws, running_server(ws) as url:
        response = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert response.status_code == 501 and "pip install 'ragspine[mcp]'" in response.json()["message"]
        assert httpx.get(f"{url}/health").status_code == 200
