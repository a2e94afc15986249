"""The LlamaIndex retriever against the real `llama-index-core`: local workspace and the real HTTP
service, sync and async, inside a `RetrieverQueryEngine`; never a RESTRICTED node.

The query engine's LLM is LlamaIndex's own `MockLLM` (it echoes the prompt): a stand-in for the
model a user would configure, which these tests cannot run; the retrieval under it is real."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("llama_index.core", reason="the LlamaIndex tests need the `llamaindex` extra")

from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore  # noqa: E402

from ragspine.integrations import RemoteWorkspace  # noqa: E402
from ragspine.integrations.llamaindex import RAGSpineRetriever  # noqa: E402
from ragspine.workspace import Workspace  # noqa: E402

from integration_helpers import API_KEY, MEMO, Demo  # noqa: E402


def test_local_retriever_sync_async(demo_ws: Workspace) -> None:
    retriever = RAGSpineRetriever(demo_ws, where={"entity": "ACME_CN"}, top_k=3)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("为什么营收下滑")
    assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
    expected = demo_ws.search("为什么营收下滑", where={"entity": "ACME_CN"}, top_k=3)
    assert [n.node.get_content() for n in nodes] == [s["text"] for s in expected]
    assert [n.score for n in nodes] == [s["relevance"] for s in expected]  # issue 35: the bounded relevance
    first = nodes[0].node
    assert first.node_id == expected[0]["chunk_id"] and first.metadata["doc_id"] == "acme_cn_2024_annual_report"
    assert {"source_locator", "scores_json", "lineage_json", "title", "filters_dropped"} <= set(first.metadata)
    assert [n.node.node_id for n in asyncio.run(retriever.aretrieve("为什么营收下滑"))] == [n.node.node_id for n in nodes]


def test_query_engine_cites_the_passages(demo_ws: Workspace) -> None:
    engine = RetrieverQueryEngine.from_args(RAGSpineRetriever(demo_ws, top_k=2), llm=MockLLM())
    response = engine.query("What caused Borealis's gross margin to fall in 2024?")
    assert response.source_nodes[0].node.metadata["doc_id"] == "borealis_2024_annual_report"
    prompt = str(response)  # MockLLM echoes its prompt: the passages with what to cite them by
    locator = response.source_nodes[0].node.metadata["source_locator"]
    assert f"source_locator: {locator}" in prompt and "lineage" not in prompt


def test_remote_retriever_over_the_http_api(demo_url: str, demo_ws: Workspace) -> None:
    question = "营收下滑的原因"
    local = [n.node.node_id for n in RAGSpineRetriever(demo_ws, top_k=4).retrieve(question)]
    remote = RAGSpineRetriever(RemoteWorkspace(demo_url, api_key=API_KEY), top_k=4)
    assert [n.node.node_id for n in remote.retrieve(question)] == local
    assert [n.node.node_id for n in asyncio.run(remote.aretrieve(question))] == local


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.sampled_from(["Project Nightjar layoffs", "夜鹰计划 裁员", "restructuring memo plant closure",
                              "steering group confidential", "ACME China 2025"]),  # fmt: skip
       top_k=st.integers(1, 30))
def test_never_a_restricted_node(demo_ws: Workspace, demo: Demo, query: str, top_k: int) -> None:
    nodes = RAGSpineRetriever(demo_ws, top_k=top_k).retrieve(query)
    assert all(n.node.metadata["doc_id"] != MEMO for n in nodes)
    assert not demo.leaks([{"text": n.node.get_content(), **n.node.metadata} for n in nodes])
