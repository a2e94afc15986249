"""`HttpReranker`: a rerank server over httpx (how teams run cross-encoders on a GPU box).
The `[service]` / `[llm]` extras (httpx).

    api="cohere" (Cohere, Jina, Infinity, vLLM's /rerank):  POST url {"query", "documents", "top_n"}
        → {"results": [{"index", "relevance_score"}, ...]}
    api="tei" (Hugging Face text-embeddings-inference):     POST url {"query", "texts", "truncate"}
        → [{"index", "score"}, ...]

Invariants: the same retry/timeout policy as the LLM client (`http_retry.post_with_retries`: at
most 1 + max_retries attempts, only 429/5xx/timeouts/connection errors retried); the request
body holds only the query and the texts the guard passed (never a RESTRICTED one); an answer
whose indexes are out of range, repeated, or whose scores are not numbers is a `RerankerError`
(the guard then keeps the fused order); candidates a server leaves out (a smaller top_n) follow
in their incoming order. The API key goes only into the Authorization header.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ragspine.extras import require
from ragspine.http_retry import DEFAULT_BACKOFF_S, DEFAULT_MAX_RETRIES, EndpointError, RetryingJsonClient, check_retry_policy, log_body
from ragspine.retrieval.rerank.models import order_by_scores
from ragspine.secret import Secret, redact_url

APIS = ("cohere", "tei")
DEFAULT_TIMEOUT_S = 10.0
_HINTS = {401: " (check RAGSPINE_RERANKER_API_KEY)", 404: " (check RAGSPINE_RERANKER_URL: the full rerank path)"}


class RerankerError(EndpointError):
    """A rerank server gave no usable answer."""


class HttpReranker(RetryingJsonClient):
    """Asks a rerank server to order the candidates.

    >>> reranker = HttpReranker("http://gpu-box:8080/rerank", api="tei")  # doctest: +SKIP
    >>> reranker.rerank("why did revenue fall", ["sunny week", "demand weakened"])  # doctest: +SKIP
    [1, 0]
    """

    name = "http"
    is_remote = True

    def __init__(
        self,
        url: str,
        *,
        api: str = "cohere",
        model: str | None = None,
        api_key: Secret | str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        httpx = require("httpx", extra="llm", purpose="HttpReranker")
        if api not in APIS:
            raise ValueError(f"unknown rerank API {api!r}; valid: {', '.join(APIS)}")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"rerank server URL must start with http:// or https://, got {url!r}")
        check_retry_policy(timeout, max_retries, backoff)
        self.url, self.api, self.model = url, api, model
        self._open(httpx, api_key, timeout=timeout, max_retries=max_retries, backoff=backoff, sleep=sleep)

    def payload(self, query: str, candidates: list[str]) -> dict[str, Any]:
        """The request body for `api`."""
        if self.api == "tei":
            body: dict[str, Any] = {"query": query, "texts": list(candidates), "truncate": True}
        else:
            body = {"query": query, "documents": list(candidates), "top_n": len(candidates)}
        if self.model:
            body["model"] = self.model
        return body

    def rerank(self, query: str, candidates: list[str]) -> list[int]:
        if not candidates:
            return []
        scores = self._post(
            self.url, self.payload(query, candidates), label="reranker",
            parse=lambda response: self._scores(response, len(candidates)), error=RerankerError, hints=_HINTS,
        )  # fmt: skip
        listed = sorted(scores)
        ranked = [listed[j] for j in order_by_scores([scores[i] for i in listed])]
        return ranked + [i for i in range(len(candidates)) if i not in scores]

    def _scores(self, response: Any, n: int) -> dict[int, float] | RerankerError:
        """{candidate index: score} from a 200 response, or the error saying what is wrong."""
        try:
            body = response.json()
            items = body if self.api == "tei" else body["results"]
            key = "score" if self.api == "tei" else "relevance_score"
            pairs = [(item["index"], item[key]) for item in items]
        except (ValueError, KeyError, TypeError):
            log_body("reranker", self.url, response)  # the body to the log only, redacted (docs/security.md)
            return RerankerError(f"reranker {redact_url(self.url)}: malformed {self.api} response (body in the log)")
        scores: dict[int, float] = {}
        for index, score in pairs:
            ok_index = isinstance(index, int) and not isinstance(index, bool) and 0 <= index < n
            ok_score = isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score)
            if not ok_index or not ok_score or index in scores:
                return RerankerError(
                    f"reranker {redact_url(self.url)}: bad result (index {index!r}, score {score!r}) for {n} documents"
                )
            scores[index] = float(score)
        return scores

    def __repr__(self) -> str:
        return f"HttpReranker({redact_url(self.url)!r}, api={self.api!r})"
