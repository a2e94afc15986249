"""Honest filters on every surface (issue 35, items 1 and 3).

A filter that matches nothing gives nothing under the product default (RAGSPINE_FILTER_FALLBACK
`strict`), and under `retry` gives the unfiltered results with `filters_dropped` naming the
dropped fields at the top level of the response: Python, the CLI (`--json` and text), the real
HTTP service, MCP (in process, the SDK's client), LangChain, LlamaIndex and the HTTP client
`RemoteWorkspace`. A request's `filter_fallback` overrides the setting both ways. LlamaIndex
`MetadataFilters` are translated (and written back), the operators RAGSpine cannot honour
refused by name; the string form works through LlamaIndex too (the other surfaces:
`test_one_snippet_model.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from click.testing import CliRunner

import ragspine
from ragspine.cli import main
from ragspine.integrations import RemoteWorkspace
from ragspine.retrieval.filters import parse_filter
from ragspine.retrieval.pipeline.request import FILTER_FALLBACKS, InvalidRequest
from ragspine.service import running_server
from ragspine.settings.choices import FILTER_FALLBACKS as SETTING_CHOICES
from ragspine.workspace import Workspace

from integration_helpers import API_KEY, AUTH, ENV, Demo, call_mcp

QUERY = "为什么营收下滑"
NOBODY = {"entity": "NOBODY"}  # no document is labelled with it
NOBODY_2024 = "entity=NOBODY and period>=2024"


@pytest.fixture
def retry_ws(demo: Demo) -> Iterator[Workspace]:
    with ragspine.open(demo.path, env=ENV, filter_fallback="retry") as ws:
        yield ws


def test_the_fallback_names_are_declared_once_each_side() -> None:
    # the same order too: typing caches equal Literals, so the schemas would depend on import order
    assert FILTER_FALLBACKS == SETTING_CHOICES == ("strict", "retry")


def test_python_strict_by_default_retry_when_asked(demo_ws: Workspace, retry_ws: Workspace) -> None:
    assert demo_ws.settings.filter_fallback == "strict"
    strict = demo_ws.search(QUERY, where=NOBODY)
    assert strict == [] and strict.filters_dropped == []
    widened = demo_ws.search(QUERY, where=NOBODY_2024, filter_fallback="retry")
    assert widened and widened.filters_dropped == ["entity", "period"]
    assert all(s["entity"] != "NOBODY" and s["lineage"]["retried_without_filters"] for s in widened)
    retried = retry_ws.search(QUERY, where=NOBODY)
    assert retried and retried.filters_dropped == ["entity"]
    assert retry_ws.search(QUERY, where=NOBODY, filter_fallback="strict") == []
    matched = retry_ws.search(QUERY, where="entity=ACME_CN and period>=2024")
    assert matched and matched.filters_dropped == [] and {s["entity"] for s in matched} == {"ACME_CN"}
    answer = retry_ws.ask(QUERY, where=NOBODY).to_dict()
    assert answer["filters_dropped"] == ["entity"] and answer["citations"]
    assert demo_ws.ask(QUERY, where=NOBODY).to_dict()["filters_dropped"] == []
    with pytest.raises(InvalidRequest, match="filter_fallback must be one of strict, retry, got 'widen'"):
        demo_ws.search(QUERY, filter_fallback="widen")


def test_cli_json_and_text_say_what_was_dropped(demo: Demo) -> None:
    run = CliRunner().invoke
    base = ["search", QUERY, "--db", str(demo.path), "--where", "entity=NOBODY"]
    strict = run(main, [*base, "--json"], env=ENV)
    assert strict.exit_code == 0, strict.output
    assert json.loads(strict.stdout) == {"filters_dropped": [], "snippets": []}
    retried = run(main, [*base, "--json", "--filter-fallback", "retry"], env=ENV)
    body = json.loads(retried.stdout)
    assert list(body) == ["filters_dropped", "snippets"] and body["filters_dropped"] == ["entity"] and body["snippets"]
    from_env = run(main, base, env={**ENV, "RAGSPINE_FILTER_FALLBACK": "retry"})
    assert from_env.exit_code == 0 and from_env.output.startswith("filters dropped: entity matched nothing")
    assert run(main, base, env=ENV).output.strip() == "no results"
    asked = run(main, ["ask", QUERY, "--db", str(demo.path), "--filter", "entity=NOBODY", "--filter-fallback", "retry"],
                env=ENV)  # fmt: skip
    assert asked.exit_code == 0 and "note: filters dropped: entity matched nothing" in asked.stderr
    bad = run(main, [*base, "--filter-fallback", "widen"], env=ENV)
    assert bad.exit_code == 2 and "'widen' is not one of 'strict', 'retry'" in bad.output


def test_http_carries_filters_dropped_at_the_top(demo: Demo) -> None:
    with ragspine.open(demo.path, env=ENV, api_keys=[API_KEY]) as ws, running_server(ws) as url:
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
            strict = client.post("/search", json={"query": QUERY, "where": NOBODY}).json()
            assert strict["filters_dropped"] == [] and strict["snippets"] == []
            retried = client.post("/search", json={"query": QUERY, "where": NOBODY_2024, "filter_fallback": "retry"})
            assert retried.status_code == 200 and retried.json()["filters_dropped"] == ["entity", "period"]
            assert retried.json()["snippets"]
            exact = client.post("/search", json={"query": QUERY, "filters": NOBODY, "filter_fallback": "retry"}).json()
            assert exact["filters_dropped"] == ["entity"]
            answer = client.post("/ask", json={"question": QUERY, "where": NOBODY, "filter_fallback": "retry"}).json()
            assert answer["filters_dropped"] == ["entity"] and answer["citations"]
            bad = client.post("/search", json={"query": QUERY, "filter_fallback": "widen"})
            assert bad.status_code == 422 and "filter_fallback" in bad.text
        with RemoteWorkspace(url, api_key=API_KEY) as remote:
            assert remote.search(QUERY, where=NOBODY) == [] and remote.search(QUERY, where=NOBODY).filters_dropped == []
            found = remote.search(QUERY, where=NOBODY, filter_fallback="retry")
            assert found and found.filters_dropped == ["entity"]
            assert remote.ask(QUERY, where=NOBODY, filter_fallback="retry")["filters_dropped"] == ["entity"]


def test_mcp_carries_filters_dropped_at_the_top(demo_ws: Workspace, retry_ws: Workspace) -> None:
    strict, retried, asked, bad = call_mcp(demo_ws, [
        ("search", {"query": QUERY, "where": NOBODY}),
        ("search", {"query": QUERY, "where": NOBODY_2024, "filter_fallback": "retry"}),
        ("ask", {"question": QUERY, "where": NOBODY, "filter_fallback": "retry"}),
        ("search", {"query": QUERY, "filter_fallback": "widen"}),
    ])  # fmt: skip
    assert strict.structured_content["filters_dropped"] == [] and strict.structured_content["passages"] == []
    assert retried.structured_content["filters_dropped"] == ["entity", "period"]
    assert retried.structured_content["passages"]
    assert asked.structured_content["filters_dropped"] == ["entity"]
    assert bad.is_error and "filter_fallback" in bad.content[0].text
    (by_setting,) = call_mcp(retry_ws, [("search", {"query": QUERY, "where": "entity=NOBODY"})])
    assert by_setting.structured_content["filters_dropped"] == ["entity"]


def test_langchain_metadata_says_what_was_dropped(demo_ws: Workspace, retry_ws: Workspace) -> None:
    langchain = pytest.importorskip("ragspine.integrations.langchain", reason="needs the `langchain` extra")
    assert langchain.RAGSpineRetriever(searcher=demo_ws, where="entity=NOBODY").invoke(QUERY) == []
    docs = langchain.RAGSpineRetriever(searcher=demo_ws, where="entity=NOBODY", filter_fallback="retry").invoke(QUERY)
    assert docs and {d.metadata["filters_dropped"] for d in docs} == {"entity"}
    docs = langchain.RAGSpineRetriever(searcher=retry_ws, where=NOBODY_2024).invoke(QUERY)
    assert docs and {d.metadata["filters_dropped"] for d in docs} == {"entity,period"}
    kept = langchain.RAGSpineRetriever(searcher=retry_ws, where="entity=ACME_CN").invoke(QUERY)
    assert kept and {d.metadata["filters_dropped"] for d in kept} == {""}
    with pytest.raises(ValueError, match="filter_fallback must be one of"):
        langchain.RAGSpineRetriever(searcher=demo_ws, filter_fallback="widen")


def test_llamaindex_metadata_filters_round_trip_and_refusals(demo_ws: Workspace, retry_ws: Workspace) -> None:
    llamaindex = pytest.importorskip("ragspine.integrations.llamaindex", reason="needs the `llamaindex` extra")
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
    )

    string = "period>=2024 and entity=ACME_CN"
    for spec in (string, {"or": [{"entity": {"in": ["ACME_CN", "BOREALIS"]}}, {"period": {"between": ["2023", "2024"]}}]},
                 {"entity": {"nin": ["A", "B"]}, "period": {"lt": "2025"}, "doc_id": {"ne": "x"}}):  # fmt: skip
        written = llamaindex.to_metadata_filters(spec)
        assert isinstance(written, MetadataFilters)
        assert parse_filter(llamaindex.from_metadata_filters(written)) == _between_split(parse_filter(spec))
    acme_2024 = MetadataFilters(filters=[MetadataFilter(key="entity", value="ACME_CN"),
                                         MetadataFilter(key="period", value="2024", operator=FilterOperator.GTE)])  # fmt: skip
    by_filters = llamaindex.RAGSpineRetriever(demo_ws, filters=acme_2024, top_k=5).retrieve(QUERY)
    by_string = llamaindex.RAGSpineRetriever(demo_ws, where=string, top_k=5).retrieve(QUERY)
    expected = [s["chunk_id"] for s in demo_ws.search(QUERY, where=string, top_k=5)]
    assert expected and [n.node.node_id for n in by_filters] == [n.node.node_id for n in by_string] == expected
    both = llamaindex.RAGSpineRetriever(demo_ws, where="period>=2024", filters=MetadataFilters(
        filters=[MetadataFilter(key="entity", value=["ACME_CN"], operator=FilterOperator.ANY)]), top_k=5)  # fmt: skip
    assert [n.node.node_id for n in both.retrieve(QUERY)] == expected
    for operator in ("ALL", "CONTAINS", "TEXT_MATCH", "TEXT_MATCH_INSENSITIVE", "IS_EMPTY"):
        refused = MetadataFilters(filters=[MetadataFilter(key="title", value="x", operator=FilterOperator[operator])])
        with pytest.raises(ValueError, match=f"operator '{FilterOperator[operator].value}' on 'title' is not supported"):
            llamaindex.RAGSpineRetriever(demo_ws, filters=refused)
    negated = MetadataFilters(filters=[MetadataFilter(key="entity", value="A")], condition=FilterCondition.NOT)
    with pytest.raises(ValueError, match="condition 'not' is not supported"):
        llamaindex.RAGSpineRetriever(demo_ws, filters=negated)
    nobody = MetadataFilters(filters=[MetadataFilter(key="entity", value="NOBODY")])
    assert llamaindex.RAGSpineRetriever(demo_ws, filters=nobody).retrieve(QUERY) == []
    widened = llamaindex.RAGSpineRetriever(retry_ws, filters=nobody).retrieve(QUERY)
    assert widened and {n.node.metadata["filters_dropped"] for n in widened} == {"entity"}


def test_adapter_metadata_is_flat_for_vector_stores(demo_ws: Workspace) -> None:
    llamaindex = pytest.importorskip("ragspine.integrations.llamaindex", reason="needs the `llamaindex` extra")
    from llama_index.core.vector_stores.utils import node_to_metadata_dict

    nodes = llamaindex.RAGSpineRetriever(demo_ws, top_k=3).retrieve(QUERY)
    for hit in nodes:
        node_to_metadata_dict(hit.node, flat_metadata=True)  # LlamaIndex's own check: ValueError when nested
        meta = hit.node.metadata
        assert json.loads(meta["lineage_json"])["filters"] == {} and meta["filters_dropped"] == ""
        assert json.loads(meta["scores_json"])["fused"] == meta["score_fused"] and meta["score_bm25"] > 0


def _between_split(spec: object) -> object:
    """`spec` as `to_metadata_filters` writes it: `between` as `gte` and `lte` AND-ed."""
    from ragspine.retrieval.filters import And, Or, Predicate

    if isinstance(spec, And | Or):
        return type(spec)(tuple(_between_split(item) for item in spec.items))  # type: ignore[misc]
    if isinstance(spec, Predicate) and spec.op == "between":
        return And((Predicate(spec.field, "gte", spec.value[0]), Predicate(spec.field, "lte", spec.value[1])))
    return spec


def test_langchain_structured_query_translates_into_the_filter_language(demo_ws: Workspace) -> None:
    langchain = pytest.importorskip("ragspine.integrations.langchain", reason="needs the `langchain` extra")
    from langchain_core.structured_query import Comparator, Comparison, Operation, Operator, StructuredQuery

    acme_2024 = Operation(operator=Operator.AND, arguments=[
        Comparison(comparator=Comparator.EQ, attribute="entity", value="ACME_CN"),
        Comparison(comparator=Comparator.GTE, attribute="period", value="2024"),
    ])  # fmt: skip
    query, kwargs = langchain.StructuredQueryTranslator().visit_structured_query(
        StructuredQuery(query=QUERY, filter=acme_2024, limit=3)
    )
    assert kwargs == {"where": {"and": [{"entity": {"eq": "ACME_CN"}}, {"period": {"gte": "2024"}}]}, "top_k": 3}
    assert parse_filter(kwargs["where"]) == parse_filter("entity=ACME_CN and period>=2024")
    expected = [s["chunk_id"] for s in demo_ws.search(QUERY, where="entity=ACME_CN and period>=2024", top_k=3)]
    assert expected and [s["chunk_id"] for s in demo_ws.search(query, **kwargs)] == expected
    docs = langchain.RAGSpineRetriever(searcher=demo_ws, **kwargs).invoke(query)
    assert [d.id for d in docs] == expected
    like = StructuredQuery(query=QUERY, filter=Comparison(comparator=Comparator.LIKE, attribute="title", value="A%"))
    with pytest.raises(ValueError, match="comparator 'like' on 'title' is not supported"):
        langchain.StructuredQueryTranslator().visit_structured_query(like)
    negated = StructuredQuery(query=QUERY, filter=Operation(operator=Operator.NOT, arguments=[acme_2024]))
    with pytest.raises(ValueError, match="operator 'not' is not supported"):
        langchain.StructuredQueryTranslator().visit_structured_query(negated)


def test_a_searcher_of_ones_own_needs_no_filter_fallback(demo_ws: Workspace) -> None:
    langchain = pytest.importorskip("ragspine.integrations.langchain", reason="needs the `langchain` extra")

    class Plain:
        """A searcher written before `filter_fallback` existed."""

        def search(self, query: str, *, where: object = None, top_k: int = 5) -> list:
            return demo_ws.search(query, where=where, top_k=top_k)

    docs = langchain.RAGSpineRetriever(searcher=Plain(), where="entity=ACME_CN", top_k=2).invoke(QUERY)
    assert docs and {d.metadata["entity"] for d in docs} == {"ACME_CN"}
    assert {d.metadata["filters_dropped"] for d in docs} == {""}
