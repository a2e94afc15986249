"""One POST with bounded retries for OpenAI-compatible endpoints (chat completions, embeddings).

Invariants: at most `1 + max_retries` attempts; only a 429, a 5xx, a timeout or a connection
error is retried, after an exponential backoff (`backoff * 2**attempt`, or a numeric
Retry-After), each wait capped at MAX_BACKOFF_S; every failure is an `EndpointError` (or the
caller's subclass) naming the endpoint (its URL redacted) and the cause, never a credential.
An upstream response body never enters an error message: an upstream that echoes the request
(its Authorization header) would hand the key to whoever sees the message. The body goes,
redacted (`secret.redact_text`), to the log; `public_error` is all a caller (an HTTP client, a
snippet's lineage, an answer's note) is told: a short code and the HTTP status.
`RetryingJsonClient` is the base of every client that POSTs this way: the httpx client and the
retry policy held once, each POST made with that policy, `close()` closing the client.
Hostile replies: every reply is streamed and read at most `MAX_REPLY_BYTES` (a longer one, or one
whose Content-Length says so, ends the request: `EndpointError` code `reply_too_large`), and each
attempt ends at its deadline (`timeout` for the whole attempt, connecting and reading included, not
only per read: a server trickling bytes ends with code `timeout`). A caller may set a tighter
overall deadline for every request made in its context (`request_deadline`; the rerank guard
does): no attempt or backoff runs past it, so no thread is left reading after it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ragspine.closing import Closeable
from ragspine.errors import RagspineError
from ragspine.secret import Secret, redact_text, redact_url

DEFAULT_MAX_RETRIES = 2  # the retry policy every HTTP client here starts from
DEFAULT_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
EXCERPT_CHARS = 200
T = TypeVar("T")
_LOG = logging.getLogger(__name__)
# The short codes `EndpointError.code` takes.
HTTP_ERROR, TIMEOUT, CONNECTION_ERROR, MALFORMED_RESPONSE = "http_error", "timeout", "connection_error", "malformed_response"
REPLY_TOO_LARGE = "reply_too_large"
MAX_REPLY_BYTES = 16 * 1024 * 1024  # the most of one reply that is read (16 MiB)
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("ragspine_http_deadline", default=None)


class EndpointError(RagspineError, RuntimeError):
    """A remote endpoint gave no usable answer; `status` is the last HTTP status, if any."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        code: str = MALFORMED_RESPONSE,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.code = code


def public_error(exc: BaseException) -> str:
    """What a caller is told about a failed upstream call: a short code and the HTTP status,
    never the upstream body or a URL (see the module docstring).

    >>> public_error(EndpointError("LLM http://x/v1: HTTP 401", status=401, code=HTTP_ERROR))
    'http_error (HTTP 401)'
    >>> public_error(ValueError("anything"))
    'ValueError'
    >>> public_error(TimeoutError("no answer within 0.3 s"))  # one cause, one code, whoever saw it
    'timeout'
    """
    if isinstance(exc, EndpointError):
        return f"{exc.code} (HTTP {exc.status})" if exc.status else exc.code
    if isinstance(exc, TimeoutError):  # a deadline passed: the same code as an upstream's timeout
        return TIMEOUT
    return type(exc).__name__


def log_body(label: str, url: str, response: Any) -> None:
    """Log an upstream response body, redacted, for the operator (never for a caller)."""
    _LOG.warning(
        "%s %s answered HTTP %s; body (redacted): %s",
        label, redact_url(url), response.status_code, redact_text(excerpt(response)),
    )  # fmt: skip


@contextlib.contextmanager
def request_deadline(seconds: float) -> Iterator[None]:
    """Every `post_with_retries` in this context (thread) ends, retries and backoff included,
    within `seconds` from now (or sooner: an outer, tighter deadline holds)."""
    outer = _DEADLINE.get()
    deadline = time.monotonic() + seconds
    token = _DEADLINE.set(deadline if outer is None else min(outer, deadline))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class Reply:
    """A reply read whole (at most `MAX_REPLY_BYTES`): the status, headers and body, with the
    `json()` / `text` an httpx response has."""

    def __init__(self, status_code: int, headers: Any, content: bytes, encoding: str | None) -> None:
        self.status_code, self.headers, self.content = status_code, headers, content
        self._encoding = encoding or "utf-8"

    @property
    def text(self) -> str:
        return self.content.decode(self._encoding, errors="replace")

    def json(self) -> Any:
        """The body as JSON; ValueError for a body that is not (or nests too deep to parse)."""
        try:
            return json.loads(self.content)
        except RecursionError as exc:
            raise ValueError("JSON nested too deep") from exc


class _ReplyTooLarge(Exception):
    """The reply passed `MAX_REPLY_BYTES`."""


class _PastDeadline(Exception):
    """The attempt's deadline passed while the reply was read."""


def read_reply(client: Any, httpx: Any, url: str, payload: dict[str, Any], deadline: float, limit: int) -> Reply:
    """POST `payload` and read the reply under `deadline` (time.monotonic) and `limit` bytes:
    _PastDeadline, _ReplyTooLarge, or httpx's own errors."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _PastDeadline
    with client.stream("POST", url, json=payload, timeout=httpx.Timeout(remaining)) as response:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _ReplyTooLarge
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise _ReplyTooLarge
            if time.monotonic() > deadline:
                raise _PastDeadline
            chunks.append(chunk)
        return Reply(response.status_code, response.headers, b"".join(chunks), response.encoding)


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
    hinted = hints or {}
    overall = _DEADLINE.get()

    def one_try() -> T | EndpointError:
        """One POST: the parsed result, or the error it gave (retryable or not)."""
        deadline = time.monotonic() + timeout
        final = overall is not None and overall <= deadline
        try:
            response = read_reply(client, httpx, url, payload, min(deadline, overall or deadline), MAX_REPLY_BYTES)
        except (httpx.TimeoutException, _PastDeadline):
            message = f"{label} {redact_url(url)}: timed out after {timeout:g} s"
            return error(message, retryable=not final, code=TIMEOUT)
        except _ReplyTooLarge:
            message = f"{label} {redact_url(url)}: reply larger than {MAX_REPLY_BYTES} bytes (not read)"
            return error(message, code=REPLY_TOO_LARGE)
        except httpx.TransportError as exc:
            message = f"{label} {redact_url(url)}: request failed: {redact_text(str(exc))}"
            return error(message, retryable=True, code=CONNECTION_ERROR)
        status = response.status_code
        if status == 200:
            return parse(response)
        log_body(label, url, response)
        return error(
            f"{label} {redact_url(url)}: HTTP {status} (body in the log){hinted.get(status, '')}",
            status=status,
            retryable=status == 429 or status >= 500,
            retry_after=_retry_after(response),
            code=HTTP_ERROR,
        )

    attempt = 0
    while True:
        outcome = one_try()
        if not isinstance(outcome, EndpointError):
            return outcome
        if not outcome.retryable or attempt == max_retries:
            break
        wait = min(MAX_BACKOFF_S, backoff * 2**attempt if outcome.retry_after is None else outcome.retry_after)
        if overall is not None and time.monotonic() + wait >= overall:
            break  # no attempt could finish before the caller's deadline
        sleep(wait)
        attempt += 1
    if attempt:
        outcome.args = (f"{outcome} (after {attempt + 1} attempts)",)
    raise outcome


def check_retry_policy(timeout: float, max_retries: int, backoff: float) -> None:
    """Refuse (ValueError) a timeout that is not positive, or a negative retry count or backoff."""
    if max_retries < 0 or timeout <= 0 or backoff < 0:
        raise ValueError("timeout must be > 0, max_retries and backoff >= 0")


class RetryingJsonClient(Closeable):
    """An httpx JSON client (`json_client`) and the retry policy each of its POSTs follows
    (`post_with_retries`); a subclass calls `_open` in its `__init__` and `_post` per request."""

    timeout: float
    max_retries: int
    backoff: float

    def _open(
        self,
        httpx: Any,
        api_key: Secret | str | None,
        *,
        timeout: float,
        max_retries: int,
        backoff: float,
        sleep: Callable[[float], None],
        content_type: bool = False,
    ) -> None:
        """Hold the retry policy and open the client (the key only in its Authorization header)."""
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff
        self._sleep = sleep
        self._httpx = httpx
        self._client = json_client(httpx, timeout, api_key, content_type=content_type)

    def _post(
        self,
        url: str,
        payload: dict[str, Any],
        *,
        label: str,
        parse: Callable[[Any], T | EndpointError],
        error: type[EndpointError],
        hints: Mapping[int, str],
    ) -> T:
        """`post_with_retries` with this client and its policy."""
        return post_with_retries(
            self._client, self._httpx, url, payload, label=label, timeout=self.timeout,
            max_retries=self.max_retries, backoff=self.backoff, sleep=self._sleep,
            parse=parse, error=error, hints=hints,
        )  # fmt: skip

    def close(self) -> None:
        self._client.close()


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


def _retry_after(response: Any) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None
