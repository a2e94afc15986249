"""Issue 34 #4: a snippet's `lineage.rerank.reason` carries only the public code
(`http_retry.public_error`), never the rerank server's endpoint (its URL, credentials included) or values from its reply; the details go to
the server log, redacted.

A real HttpReranker against the loopback rerank server (tests/rerank/conftest.py), inside the
real pipeline (build_narrative_retriever).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever, build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.rerank.guard import rerank_traced
from ragspine.retrieval.rerank.http import HttpReranker
from ragspine.testing.reranker import results

PASSWORD, TOKEN, REPLY_VALUE = "rr-password-71", "rr-token-72", "REPLY-VALUE-73"


@pytest.fixture
def retriever(rerank_server: Any) -> Iterator[NarrativeIndexRetriever]:
    url = rerank_server.url.replace("http://", f"http://ops:{PASSWORD}@") + f"?token={TOKEN}"
    reranker = HttpReranker(url, max_retries=0, sleep=lambda s: None)
    made, store = build_narrative_retriever(":memory:", reranker=reranker, query_rewriter=None)
    for i in range(4):
        made.index.ingest(f"revenue fell in region {i} " + "demand " * i, DocumentMeta(f"d{i}", sensitivity="PUBLIC"))
    try:
        yield made
    finally:
        store.close()
        reranker.close()


def _reason(retriever: NarrativeIndexRetriever) -> str:
    snippets = retriever.retrieve("revenue demand", top_k=4)
    rerank = snippets[0]["lineage"]["rerank"]
    assert rerank["fell_back"] is True
    everything = json.dumps([s["lineage"] for s in snippets], ensure_ascii=False)  # not only the reason
    for leaked in (PASSWORD, TOKEN, REPLY_VALUE, "127.0.0.1", "ops"):
        assert leaked not in everything, everything
    return str(rerank["reason"])


def test_a_reply_value_never_reaches_the_rerank_reason(
    retriever: NarrativeIndexRetriever, rerank_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    rerank_server.answer = lambda body: (200, {"results": [{"index": REPLY_VALUE, "relevance_score": 1.0}]})
    with caplog.at_level(logging.WARNING):
        assert _reason(retriever) == "malformed_response"
    assert PASSWORD not in caplog.text and TOKEN not in caplog.text


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [("500", "http_error (HTTP 500)"), ("garbage", "malformed_response")],
)  # fmt: skip
def test_an_upstream_failure_names_no_endpoint(
    retriever: NarrativeIndexRetriever, rerank_server: Any, behaviour: str, reason: str
) -> None:
    rerank_server.default = behaviour
    assert _reason(retriever) == reason


def test_the_guard_never_quotes_a_reranker_answer() -> None:
    out, lineage = rerank_traced("q", results(["PUBLIC"] * 3), lambda q, texts: [7731, 0, 1])
    assert lineage.fell_back and lineage.reason == "ValueError" and "7731" not in json.dumps(lineage.as_dict())


def test_an_in_process_reranker_failure_is_only_its_code(caplog: pytest.LogCaptureFixture) -> None:
    """The exception text of an in-process reranker (which may quote a model path, a candidate
    or a secret) goes to the log, redacted; the lineage has the exception's type only."""

    def boom(query: str, texts: list[str]) -> list[int]:
        raise RuntimeError(f"model /srv/models/private failed on {texts[0]!r} token={TOKEN}")

    with caplog.at_level(logging.WARNING):
        _, lineage = rerank_traced("q", results(["PUBLIC"] * 3), boom, name="local")
    assert lineage.fell_back and lineage.reason == "RuntimeError"
    assert "/srv/models/private failed" in caplog.text and TOKEN not in caplog.text
