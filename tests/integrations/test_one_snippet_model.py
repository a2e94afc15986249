"""One snippet model and one request model on every surface (issue 33, item 7).

The same query through Python (`Workspace.search`), the real HTTP service, MCP (in process, the
SDK's own client), LangChain and LlamaIndex gives the same snippets: same keys, same values
(HTTP shows its schema's declared defaults, e.g. `scores.visual: null`, exactly as its model
derived from the one `Snippet` says). The string filter form works on each surface, and `top_k`
is checked the same way on each (`check_top_k`: `"3"`, `2.0` and `True` refused everywhere).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import ragspine
from ragspine.cli import main
from ragspine.errors import RagspineError
from ragspine.integrations import RemoteWorkspace, snippet_metadata
from ragspine.retrieval.pipeline.request import InvalidRequest, SearchRequest, check_top_k
from ragspine.retrieval.snippet import Snippet
from ragspine.retrieval.typed_model import fields_of
from ragspine.service import models as m
from ragspine.workspace import Workspace

from integration_helpers import AUTH, ENV, Demo, call_mcp

QUERY = "为什么营收下滑"
STRING_WHERE = "period>=2024 and entity=ACME_CN"
STRUCTURED_WHERE = {"and": [{"period": {"gte": "2024"}}, {"entity": "ACME_CN"}]}
BAD_TOP_K: list[Any] = ["3", 2.0, True, 0, -1]


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False))


def _http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
        yield client


@pytest.fixture
def http(demo_url: str) -> Iterator[httpx.Client]:
    yield from _http(demo_url)


def _passage_as_snippet(passage: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in passage.items() if k not in ("rank", "citation")}


def test_the_http_snippet_model_is_derived_from_the_one_snippet() -> None:
    defaults = ("version", "valid_as_of", "lineage")
    declared = [k for k, (_, _, required) in fields_of(Snippet).items() if required or k in defaults]
    assert list(m.Snippet.model_fields) == declared
    assert list(m.Citation.model_fields) == [*declared, "ref", "cited"]
    assert m.Snippet.model_fields["chunk_id"].description and m.Snippet.model_config.get("extra") == "allow"


def test_python_http_and_mcp_give_identical_snippets(demo_ws: Workspace, http: httpx.Client) -> None:
    python = _json(demo_ws.search(QUERY, where={"entity": "ACME_CN"}, top_k=3))
    assert python and all(s["entity"] == "ACME_CN" for s in python)
    body = {"query": QUERY, "where": {"entity": "ACME_CN"}, "top_k": 3}
    over_http = http.post("/search", json=body).json()["snippets"]
    # HTTP is the Python snippet in the model derived from it: the same keys and values, plus the
    # schema's declared defaults (scores.visual: null)
    assert over_http == [m.Snippet.model_validate(s).model_dump() for s in python]
    assert [set(s) for s in over_http] == [set(s) for s in python]
    assert [{k: v for k, v in s.items() if k != "scores"} for s in over_http] == [
        {k: v for k, v in s.items() if k != "scores"} for s in python
    ]
    assert [{k: v for k, v in s["scores"].items() if k != "visual"} for s in over_http] == [s["scores"] for s in python]
    (found,) = call_mcp(demo_ws, [("search", {"query": QUERY, "where": {"entity": "ACME_CN"}, "top_k": 3})])
    assert not found.is_error
    passages = found.structured_content["passages"]
    assert [p["rank"] for p in passages] == list(range(1, len(python) + 1))
    assert [_passage_as_snippet(p) for p in passages] == python


def test_langchain_and_llamaindex_metadata_is_the_one_conversion(demo_ws: Workspace) -> None:
    snippets = demo_ws.search(QUERY, top_k=3)
    langchain = pytest.importorskip("ragspine.integrations.langchain", reason="needs the `langchain` extra")
    docs = langchain.RAGSpineRetriever(searcher=demo_ws, top_k=3).invoke(QUERY)
    assert [d.metadata for d in docs] == [snippet_metadata(s) for s in snippets]
    assert [d.page_content for d in docs] == [s["text"] for s in snippets]
    llamaindex = pytest.importorskip("ragspine.integrations.llamaindex", reason="needs the `llamaindex` extra")
    nodes = llamaindex.RAGSpineRetriever(demo_ws, top_k=3).retrieve(QUERY)
    assert [n.node.metadata for n in nodes] == [snippet_metadata(s) for s in snippets]


def test_the_string_filter_form_works_on_every_surface(demo: Demo, demo_ws: Workspace, demo_url: str) -> None:
    structured = _json(demo_ws.search("annual report revenue", where=STRUCTURED_WHERE, top_k=10))
    assert structured and {(s["entity"], s["period"]) for s in structured} == {("ACME_CN", "2024")}
    ids = [s["chunk_id"] for s in structured]
    assert [s["chunk_id"] for s in demo_ws.search("annual report revenue", where=STRING_WHERE, top_k=10)] == ids
    assert [s["chunk_id"] for s in demo_ws.search("annual report revenue", where=[STRING_WHERE], top_k=10)] == ids
    for client in _http(demo_url):
        body = {"query": "annual report revenue", "where": STRING_WHERE, "top_k": 10}
        assert [s["chunk_id"] for s in client.post("/search", json=body).json()["snippets"]] == ids
        bad = client.post("/search", json={"query": "x", "where": "no operator here"})
        assert bad.status_code == 400 and "FIELD OP VALUE" in bad.json()["message"]
    with RemoteWorkspace(demo_url, api_key=AUTH["Authorization"].split()[1]) as remote:
        assert [s["chunk_id"] for s in remote.search("annual report revenue", where=STRING_WHERE, top_k=10)] == ids
    (found,) = call_mcp(demo_ws, [("search", {"query": "annual report revenue", "where": STRING_WHERE, "top_k": 10})])
    assert [p["chunk_id"] for p in found.structured_content["passages"]] == ids
    langchain = pytest.importorskip("ragspine.integrations.langchain", reason="needs the `langchain` extra")
    docs = langchain.RAGSpineRetriever(searcher=demo_ws, where=STRING_WHERE, top_k=10).invoke("annual report revenue")
    assert [d.id for d in docs] == ids
    result = CliRunner().invoke(main, ["search", "annual report revenue", "--db", str(demo.path), "--json",
                                       "--top-k", "10", "--where", STRING_WHERE], env=ENV)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [s["chunk_id"] for s in json.loads(result.output)["snippets"]] == ids


def test_top_k_is_checked_the_same_way_on_every_surface(demo_ws: Workspace, demo_url: str) -> None:
    for bad in BAD_TOP_K:
        with pytest.raises(InvalidRequest, match="top_k") as raised:
            check_top_k(bad)
        message = str(raised.value)
        assert isinstance(raised.value, RagspineError) and isinstance(raised.value, ValueError)
        with pytest.raises(InvalidRequest, match="top_k"):
            demo_ws.search(QUERY, top_k=bad)
        with pytest.raises(InvalidRequest, match="top_k"):
            SearchRequest(QUERY, top_k=bad)
        for client in _http(demo_url):
            answer = client.post("/search", json={"query": QUERY, "top_k": bad})
            assert answer.status_code == 422 and message in answer.json()["message"], answer.text
        with RemoteWorkspace(demo_url) as remote, pytest.raises(InvalidRequest, match="top_k"):
            remote.search(QUERY, top_k=bad)
        (refused,) = call_mcp(demo_ws, [("search", {"query": QUERY, "top_k": bad})])
        assert refused.is_error and message in refused.content[0].text
        langchain = pytest.importorskip("ragspine.integrations.langchain", reason="needs the `langchain` extra")
        with pytest.raises(ValueError, match="top_k"):
            langchain.RAGSpineRetriever(searcher=demo_ws, top_k=bad)
        llamaindex = pytest.importorskip("ragspine.integrations.llamaindex", reason="needs the `llamaindex` extra")
        with pytest.raises(InvalidRequest, match="top_k"):
            llamaindex.RAGSpineRetriever(demo_ws, top_k=bad)
    assert check_top_k(3) == 3 and len(demo_ws.search(QUERY, top_k=2)) == 2


def test_the_request_model_refuses_what_no_surface_runs() -> None:
    with pytest.raises(InvalidRequest, match="query is empty"):
        SearchRequest("   ")
    with pytest.raises(InvalidRequest, match="FIELD OP VALUE"):
        SearchRequest("x", where="no operator here")
    with pytest.raises(InvalidRequest, match="where must be"):
        SearchRequest("x", where=42)
    with pytest.raises(InvalidRequest, match="<= 20"):
        SearchRequest("x", top_k=21, max_top_k=20)
    assert SearchRequest("x", where="").where is None
    assert SearchRequest("x", where={"entity": "A"}).where == {"entity": "A"}, "the structured form goes on as given"


def test_ragspine_open_in_memory_search_returns_plain_dicts() -> None:
    with ragspine.open(":memory:", env=ENV) as ws:
        ws.ingest("营收下滑的原因是出口减少。", doc_id="r1", entity="ACME_CN", period="2024")
        (snippet,) = ws.search("营收", where="entity=ACME_CN and period>=2024")
    assert type(snippet) is dict and json.loads(json.dumps(snippet)) == snippet
    assert set(Snippet.__required_keys__) <= set(snippet)
