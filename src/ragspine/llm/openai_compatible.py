"""`OpenAICompatibleProvider`: the agent's `LLMProvider` over an OpenAI-compatible chat API.

Invariants:
- One `POST {base_url}/chat/completions` per attempt, at most `1 + max_retries` attempts; only a
  429, a 5xx, a timeout or a connection error is retried, after an exponential backoff (a numeric
  `Retry-After` is honoured), each wait capped at `http_retry.MAX_BACKOFF_S`.
- Every failure raises `LLMProviderError` naming the endpoint and the cause, never the API key
  (the key is revealed only into the Authorization header).
- httpx is imported when a provider is built; without it the error names the extra to install.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragspine.extras import require
from ragspine.http_retry import DEFAULT_BACKOFF_S, DEFAULT_MAX_RETRIES, EndpointError, RetryingJsonClient, check_retry_policy, log_body
from ragspine.secret import Secret, redact_url

if TYPE_CHECKING:
    import httpx


DEFAULT_TIMEOUT_S = 30.0
_HINTS = {
    401: "; check RAGSPINE_LLM_API_KEY",
    403: "; check RAGSPINE_LLM_API_KEY",
    404: "; check RAGSPINE_LLM_BASE_URL and RAGSPINE_LLM_MODEL",
}


class LLMProviderError(EndpointError):
    """The LLM endpoint gave no usable answer; `status` is the last HTTP status, if any."""


class OpenAICompatibleProvider(RetryingJsonClient):
    """Chat completions from any OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, hosted).

    >>> provider = OpenAICompatibleProvider("http://127.0.0.1:11434/v1", "qwen2.5")  # doctest: +SKIP
    >>> provider.chat([{"role": "user", "content": "Say hi"}], temperature=0)  # doctest: +SKIP
    'Hi!'
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: Secret | str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        httpx = require("httpx", extra="llm", purpose="OpenAICompatibleProvider")
        if not model:
            raise ValueError("model must be a non-empty model name")
        check_retry_policy(timeout, max_retries, backoff)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.url = f"{self.base_url}/chat/completions"
        self._open(httpx, api_key, timeout=timeout, max_retries=max_retries, backoff=backoff, sleep=sleep)

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        """The assistant's reply to `messages`; `options` (temperature, max_tokens…) are sent as is."""
        payload = {**options, "model": self.model, "messages": messages}
        return self._post(
            self.url, payload, label="LLM", parse=lambda response: _reply(self.url, response),
            error=LLMProviderError, hints=_HINTS,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"OpenAICompatibleProvider(base_url={self.base_url!r}, model={self.model!r})"


def _reply(url: str, response: httpx.Response) -> str | LLMProviderError:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        log_body("LLM", url, response)
        return LLMProviderError(f"LLM {redact_url(url)}: malformed chat-completions response (body in the log)")
    if not isinstance(content, str):
        return LLMProviderError(f"LLM {redact_url(url)}: the reply has no text content")
    return content
