"""OpenAICompatibleProvider against the loopback stub LLM (see conftest.py: a mock server)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from service_helpers import LLM_KEY, STUB_ANSWER

from ragspine.agent.agent import LLMProvider
from ragspine.assembly import make_provider as make_llm_provider
from ragspine.llm import LLMProviderError, OpenAICompatibleProvider
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.settings.config import Settings, load_settings

MESSAGES = [{"role": "user", "content": "why?"}]


def _provider(stub: Any, **kwargs: Any) -> tuple[OpenAICompatibleProvider, list[float]]:
    waits: list[float] = []
    options = {"timeout": 0.5, "max_retries": 2, "backoff": 0.01, "sleep": waits.append, **kwargs}
    return OpenAICompatibleProvider(stub.base_url, "stub-model", LLM_KEY, **options), waits


def test_chat_sends_model_messages_options_and_key(stub_llm: Any) -> None:
    provider, _ = _provider(stub_llm)
    assert isinstance(provider, LLMProvider)
    assert provider.chat(MESSAGES, temperature=0) == STUB_ANSWER
    assert stub_llm.requests == [{"temperature": 0, "model": "stub-model", "messages": MESSAGES}]
    assert stub_llm.headers[0]["Authorization"] == f"Bearer {LLM_KEY}"
    assert LLM_KEY not in repr(provider)
    provider.close()


def test_retries_429_and_5xx_with_backoff_then_succeeds(stub_llm: Any) -> None:
    provider, waits = _provider(stub_llm)
    stub_llm.script = ["500", "429"]
    assert provider.chat(MESSAGES) == STUB_ANSWER
    assert len(stub_llm.requests) == 3
    assert waits == [0.01, 0.0], "exponential backoff, then the server's Retry-After: 0"


def test_gives_up_after_bounded_retries_with_a_clear_error(stub_llm: Any, caplog: pytest.LogCaptureFixture) -> None:
    provider, waits = _provider(stub_llm)
    stub_llm.default = "500"
    with pytest.raises(LLMProviderError, match=r"HTTP 500 \(body in the log\).*\(after 3 attempts\)") as info:
        provider.chat(MESSAGES)
    assert info.value.status == 500 and len(stub_llm.requests) == 3 and waits == [0.01, 0.02]
    assert LLM_KEY not in str(info.value)
    # issue 14 #8: the upstream body goes to the log (redacted), never into the message
    assert "the model crashed" not in str(info.value) and "the model crashed" in caplog.text


def test_timeout_is_an_error_not_a_hang(stub_llm: Any) -> None:
    provider, _ = _provider(stub_llm, timeout=0.2, max_retries=1)
    stub_llm.default, stub_llm.slow_s = "slow", 1.0
    with pytest.raises(LLMProviderError, match=r"timed out after 0.2 s \(after 2 attempts\)"):
        provider.chat(MESSAGES)


def test_client_errors_are_not_retried_and_say_what_to_check(stub_llm: Any) -> None:
    provider, _ = _provider(stub_llm)
    provider.url = provider.url.replace("/v1/", "/v2/")  # the stub answers 404 off its route
    with pytest.raises(LLMProviderError, match="HTTP 404.*RAGSPINE_LLM_BASE_URL") as info:
        provider.chat(MESSAGES)
    assert not info.value.retryable and len(stub_llm.requests) == 1


def test_malformed_reply_and_unreachable_server(stub_llm: Any) -> None:
    provider, _ = _provider(stub_llm, max_retries=0)
    stub_llm.script = ["garbage"]
    with pytest.raises(LLMProviderError, match="malformed chat-completions response"):
        provider.chat(MESSAGES)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    closed = OpenAICompatibleProvider(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, sleep=lambda _: None)
    with pytest.raises(LLMProviderError, match="request failed"):
        closed.chat(MESSAGES)


def test_factory_follows_the_settings(stub_llm: Any) -> None:
    assert make_llm_provider(Settings()) is None
    settings = load_settings({"RAGSPINE_LLM_BASE_URL": stub_llm.base_url + "/", "RAGSPINE_LLM_MODEL": "m",
                              "RAGSPINE_LLM_TIMEOUT": "2.5", "RAGSPINE_LLM_MAX_RETRIES": "0"})  # fmt: skip
    provider = make_llm_provider(settings)
    assert provider is not None and (provider.base_url, provider.model) == (stub_llm.base_url, "m")
    assert (provider.timeout, provider.max_retries) == (2.5, 0)
    assert provider.chat(MESSAGES) == STUB_ANSWER
    assert "Authorization" not in stub_llm.headers[-1], "no key configured, none sent"


@pytest.mark.parametrize("behaviour", ["500", "slow"])
def test_build_narrative_retriever_uses_the_provider_as_judge_and_falls_back(stub_llm: Any, behaviour: str) -> None:
    texts = {"a": "revenue fell sharply", "b": "revenue fell", "c": "revenue"}
    provider, _ = _provider(stub_llm, timeout=0.3, max_retries=0)
    rrf_retriever, rrf_store = build_narrative_retriever(":memory:")
    judged, store = build_narrative_retriever(":memory:", provider=provider)
    try:
        for doc_id, text in texts.items():
            rrf_retriever.index.ingest(text, DocumentMeta(doc_id))
            judged.index.ingest(text, DocumentMeta(doc_id))
        rrf = [s["doc_id"] for s in rrf_retriever.retrieve("revenue fell sharply")]
        assert [s["doc_id"] for s in judged.retrieve("revenue fell sharply")] == rrf[::-1]
        stub_llm.default = behaviour
        assert [s["doc_id"] for s in judged.retrieve("revenue fell sharply")] == rrf
    finally:
        rrf_store.close()
        store.close()
