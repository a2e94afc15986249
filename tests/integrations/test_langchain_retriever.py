"""The LangChain retriever against the real `langchain-core`: local workspace and the real HTTP
service, sync and async, inside a chain; never a RESTRICTED document."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain_core", reason="the LangChain tests need the `langchain` extra")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402

from ragspine.integrations import RemoteWorkspace  # noqa: E402
from ragspine.integrations.langchain import RAGSpineRetriever  # noqa: E402
from ragspine.workspace import Workspace  # noqa: E402

from integration_helpers import API_KEY, MEMO, Demo  # noqa: E402

METADATA = {"doc_id", "title", "source_locator", "chunk_id", "version", "entity", "period", "sensitivity",
            "score_bm25", "score_fused", "scores_json", "lineage_json", "filters_dropped"}  # fmt: skip


def _cited(docs: list[Document]) -> str:
    return "\n".join(f"[{n}] {d.page_content[:40]} ({d.metadata['source_locator']})" for n, d in enumerate(docs, 1))


def test_local_retriever_sync_async_and_in_a_chain(demo_ws: Workspace) -> None:
    retriever = RAGSpineRetriever(searcher=demo_ws, where={"entity": "ACME_CN"}, top_k=3)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("为什么营收下滑")
    assert docs and all(isinstance(d, Document) for d in docs)
    first = docs[0]
    assert first.metadata["doc_id"] == "acme_cn_2024_annual_report" and METADATA <= set(first.metadata)
    assert first.id == first.metadata["chunk_id"] and json.loads(first.metadata["lineage_json"])["filters"] == {"entity": "ACME_CN"}
    assert first.metadata["score_bm25"] > 0 and {d.metadata["entity"] for d in docs} == {"ACME_CN"}
    assert all(isinstance(v, str | int | float | bool) for d in docs for v in d.metadata.values())  # flat
    expected = demo_ws.search("为什么营收下滑", where={"entity": "ACME_CN"}, top_k=3)
    assert [d.page_content for d in docs] == [s["text"] for s in expected]

    assert [d.page_content for d in asyncio.run(retriever.ainvoke("为什么营收下滑"))] == [s["text"] for s in expected]
    context = (retriever | RunnableLambda(_cited)).invoke("为什么营收下滑")
    assert context.startswith("[1] ") and first.metadata["source_locator"] in context
    assert retriever.batch(["营收", "毛利率"]) and len(retriever.batch(["营收", "毛利率"])) == 2


def test_remote_retriever_over_the_http_api(demo_url: str, demo_ws: Workspace) -> None:
    remote = RemoteWorkspace(demo_url, api_key=API_KEY)
    retriever = RAGSpineRetriever(searcher=remote, top_k=4)
    question = "What caused Borealis's gross margin to fall in 2024?"
    local = [d.page_content for d in RAGSpineRetriever(searcher=demo_ws, top_k=4).invoke(question)]
    assert [d.page_content for d in retriever.invoke(question)] == local
    assert [d.page_content for d in asyncio.run(retriever.ainvoke(question))] == local
    with pytest.raises(PermissionError, match="API key"):
        RAGSpineRetriever(searcher=RemoteWorkspace(demo_url, api_key="wrong-wrong-wrong-wrong")).invoke(question)
    with pytest.raises(ValueError, match="nosuch"):
        RAGSpineRetriever(searcher=remote, where={"nosuch": "x"}).invoke(question)


def test_rejects_what_is_not_a_searcher() -> None:
    with pytest.raises(TypeError, match="searcher must be"):
        RAGSpineRetriever(searcher="http://127.0.0.1:1").invoke("x")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.sampled_from(["Project Nightjar layoffs", "夜鹰计划", "restructuring memo plant closure",
                              "steering group confidential", "ACME China 2025"]),  # fmt: skip
       top_k=st.integers(1, 30))
def test_never_a_restricted_document(demo_ws: Workspace, demo: Demo, query: str, top_k: int) -> None:
    docs = RAGSpineRetriever(searcher=demo_ws, top_k=top_k).invoke(query)
    assert all(d.metadata["doc_id"] != MEMO for d in docs)
    assert not demo.leaks([{"text": d.page_content, **d.metadata} for d in docs])


@pytest.mark.parametrize(("module", "dependency", "extra"), [
    ("ragspine.integrations.langchain", "langchain_core.retrievers", "langchain"),
    ("ragspine.integrations.llamaindex", "llama_index.core.retrievers", "llamaindex"),
])  # fmt: skip
def test_a_missing_framework_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, dependency: str, extra: str
) -> None:
    import importlib
    import sys

    from ragspine.extras import MissingExtraError

    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, dependency, None)
    with pytest.raises(MissingExtraError, match=rf"pip install 'ragspine\[{extra}\]'"):
        importlib.import_module(module)


def test_remote_workspace_keeps_one_connection_pool_until_closed(demo_url: str) -> None:
    with RemoteWorkspace(demo_url, api_key=API_KEY) as remote:
        first = remote.search("营收", top_k=2)
        pool = remote._pool()
        assert remote.search("营收", top_k=2) == first and remote._pool() is pool
        remote.close()
        assert pool.is_closed
        assert remote.search("营收", top_k=2) == first  # a call after close opens a new pool
        assert remote._pool() is not pool
    assert remote._client is None
