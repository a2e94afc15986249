"""One POST with bounded retries for OpenAI-compatible endpoints (chat completions, embeddings).

Invariants: at most `1 + max_retries` attempts; only a 429, a 5xx, a timeout or a connection
error is retried, after an exponential backoff (`backoff * 2**attempt`, or a numeric
Retry-After), each wait capped at MAX_BACKOFF_S; every failure is an `EndpointError` (or the
caller's subclass) naming the endpoint and the cause, never a credential.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ragspine.secret import Secret

MAX_BACKOFF_S = 8.0
EXCERPT_CHARS = 200
T = TypeVar("T")


class EndpointError(RuntimeError):
    """A remote endpoint gave no usable answer; `status` is the last HTTP status, if any."""

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


def post_with_retries(
    client: Any,
    httpx: Any,
    url: str,
    payload: dict[str, Any],
    *,
    label: str,
    timeout: float,
    max_retries: int,
    backoff: float,
    sleep: Callable[[float], None],
    parse: Callable[[Any], T | EndpointError],
    error: type[EndpointError],
    hints: Mapping[int, str] | None = None,
) -> T:
    """POST `payload` as JSON; `parse` turns a 200 response into the result (or an error)."""
    attempt = 0
    while True:
        outcome = _attempt(client, httpx, url, payload, label, timeout, parse, error, hints or {})
        if not isinstance(outcome, EndpointError):
            return outcome
        if not outcome.retryable or attempt == max_retries:
            break
        wait = outcome.retry_after
        sleep(min(MAX_BACKOFF_S, backoff * 2**attempt if wait is None else wait))
        attempt += 1
    if attempt:
        outcome.args = (f"{outcome} (after {attempt + 1} attempts)",)
    raise outcome


def json_client(httpx: Any, timeout: float, api_key: Secret | str | None, *, content_type: bool = False) -> Any:
    """An httpx client with the timeout and a JSON Accept header (or Content-Type), and the key,
    if any, only in a Bearer Authorization header."""
    headers = {"Content-Type" if content_type else "Accept": "application/json"}
    if api_key is not None:
        key = api_key if isinstance(api_key, Secret) else Secret(api_key)
        headers["Authorization"] = f"Bearer {key.reveal()}"
    return httpx.Client(timeout=httpx.Timeout(timeout), headers=headers)


def excerpt(response: Any) -> str:
    """The start of a response body on one line, for error messages."""
    text = " ".join(response.text.split())
    return text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "") or "(empty body)"


def _attempt(
    client: Any,
    httpx: Any,
    url: str,
    payload: dict[str, Any],
    label: str,
    timeout: float,
    parse: Callable[[Any], Any],
    error: type[EndpointError],
    hints: Mapping[int, str],
) -> Any:
    try:
        response = client.post(url, json=payload)
    except httpx.TimeoutException:
        return error(f"{label} {url}: timed out after {timeout:g} s", retryable=True)
    except httpx.TransportError as exc:
        return error(f"{label} {url}: request failed: {exc}", retryable=True)
    status = response.status_code
    if status == 200:
        return parse(response)
    return error(
        f"{label} {url}: HTTP {status}: {excerpt(response)}{hints.get(status, '')}",
        status=status,
        retryable=status == 429 or status >= 500,
        retry_after=_retry_after(response),
    )


def _retry_after(response: Any) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None
