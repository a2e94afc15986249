"""`OpenAICompatibleProvider`: the agent's `LLMProvider` over an OpenAI-compatible chat API.

Invariants:
- One `POST {base_url}/chat/completions` per attempt, at most `1 + max_retries` attempts; only a
  429, a 5xx, a timeout or a connection error is retried, after an exponential backoff (a numeric
  `Retry-After` is honoured), each wait capped at MAX_BACKOFF_S.
- Every failure raises `LLMProviderError` naming the endpoint and the cause, never the API key
  (the key is revealed only into the Authorization header).
- httpx is imported when a provider is built; without it the error names the extra to install.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ragspine.secret import Secret

if TYPE_CHECKING:
    import httpx

    from ragspine.config import Settings

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
_EXCERPT_CHARS = 200


class LLMProviderError(RuntimeError):
    """The LLM endpoint gave no usable answer; `status` is the last HTTP status, if any."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class OpenAICompatibleProvider:
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
        httpx = _import_httpx()
        if not model:
            raise ValueError("model must be a non-empty model name")
        if max_retries < 0 or timeout <= 0 or backoff < 0:
            raise ValueError("timeout must be > 0, max_retries and backoff >= 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff
        self.url = f"{self.base_url}/chat/completions"
        self._sleep = sleep
        headers = {"Accept": "application/json"}
        if api_key is not None:
            key = api_key if isinstance(api_key, Secret) else Secret(api_key)
            headers["Authorization"] = f"Bearer {key.reveal()}"
        self._httpx = httpx
        self._client = httpx.Client(timeout=httpx.Timeout(timeout), headers=headers)

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleProvider:
        """A provider from RAGSPINE_LLM_* (the caller checked `settings.llm_configured`)."""
        if settings.llm_base_url is None or settings.llm_model is None:
            raise ValueError("no LLM configured: set RAGSPINE_LLM_BASE_URL and RAGSPINE_LLM_MODEL")
        return cls(
            settings.llm_base_url,
            settings.llm_model,
            settings.llm_api_key,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
        )

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        """The assistant's reply to `messages`; `options` (temperature, max_tokens…) are sent as is."""
        payload = {**options, "model": self.model, "messages": messages}
        for attempt in range(self.max_retries + 1):
            outcome = self._attempt(payload)
            if isinstance(outcome, str):
                return outcome
            if not outcome.retryable or attempt == self.max_retries:
                break
            delay = outcome.retry_after
            self._sleep(min(MAX_BACKOFF_S, self.backoff * 2**attempt if delay is None else delay))
        if attempt:
            outcome.args = (f"{outcome} (after {attempt + 1} attempts)",)
        raise outcome

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAICompatibleProvider:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAICompatibleProvider(base_url={self.base_url!r}, model={self.model!r})"

    def _attempt(self, payload: dict[str, Any]) -> str | LLMProviderError:
        """The reply text, or the error of this one attempt."""
        httpx = self._httpx
        try:
            response = self._client.post(self.url, json=payload)
        except httpx.TimeoutException:
            return LLMProviderError(f"LLM {self.url}: timed out after {self.timeout:g} s", retryable=True)
        except httpx.TransportError as exc:
            return LLMProviderError(f"LLM {self.url}: request failed: {exc}", retryable=True)
        if response.status_code == 200:
            return _reply(self.url, response)
        status = response.status_code
        hint = "; check RAGSPINE_LLM_API_KEY" if status in (401, 403) else ""
        hint = "; check RAGSPINE_LLM_BASE_URL and RAGSPINE_LLM_MODEL" if status == 404 else hint
        return LLMProviderError(
            f"LLM {self.url}: HTTP {status}: {_excerpt(response)}{hint}",
            status=status,
            retryable=status == 429 or status >= 500,
            retry_after=_retry_after(response),
        )


def make_llm_provider(settings: Settings) -> OpenAICompatibleProvider | None:
    """The configured provider, or None when RAGSPINE_LLM_BASE_URL is unset."""
    return OpenAICompatibleProvider.from_settings(settings) if settings.llm_configured else None


def _reply(url: str, response: httpx.Response) -> str | LLMProviderError:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return LLMProviderError(f"LLM {url}: malformed chat-completions response: {_excerpt(response)}")
    if not isinstance(content, str):
        return LLMProviderError(f"LLM {url}: the reply has no text content")
    return content


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


def _excerpt(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    return text[:_EXCERPT_CHARS] + ("…" if len(text) > _EXCERPT_CHARS else "") or "(empty body)"


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "OpenAICompatibleProvider needs httpx: pip install 'ragspine[llm]' (or 'ragspine[service]')"
        ) from exc
    return httpx
