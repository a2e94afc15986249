"""Hostile upstream replies (issue 34, item 9): a reply is read at most `MAX_REPLY_BYTES`, and a
request ends at its deadline even when the server trickles bytes, so the rerank guard's worker
thread does not outlive its timeout.

A real HTTP server on 127.0.0.1 that answers 60 MB (with or without a Content-Length) or one byte
per 0.3 s, and records how much it managed to send before the client left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from loopback import loopback

pytest.importorskip("httpx")

from ragspine.http_retry import MAX_REPLY_BYTES, EndpointError  # noqa: E402
from ragspine.llm.openai_compatible import OpenAICompatibleProvider  # noqa: E402
from ragspine.retrieval.model import Chunk  # noqa: E402
from ragspine.retrieval.rerank.guard import rerank_traced  # noqa: E402
from ragspine.retrieval.rerank.http import HttpReranker  # noqa: E402
from ragspine.retrieval.types import RetrievalResult  # noqa: E402

HUGE = 60 * 1024 * 1024
REPLY_TOO_LARGE, TIMEOUT = "reply_too_large", "timeout"  # the public codes
BLOCK = 64 * 1024


@dataclass
class Hostile:
    mode: str = "huge"  # huge | huge_chunked | trickle
    url: str = ""
    sent: list[int] = field(default_factory=list)  # bytes of body sent per request, when it ended
    done: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    state = Hostile()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the http.server hook
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if state.mode == "huge":
                self.send_header("Content-Length", str(HUGE))
            self.send_header("Connection", "close")
            self.end_headers()
            sent = 0
            try:
                if state.mode == "trickle":
                    for char in b'{"results": [' + b" " * 20:
                        self.wfile.write(bytes([char]))
                        self.wfile.flush()
                        sent += 1
                        time.sleep(0.3)
                else:
                    block = b" " * BLOCK
                    while sent < HUGE:
                        self.wfile.write(block)
                        sent += BLOCK
            except OSError:
                pass  # the client left
            finally:
                state.sent.append(sent)
                state.done.set()
                self.close_connection = True

        def log_message(self, *args: Any) -> None:
            pass

    with loopback(Handler) as state.url:
        yield state


def _results(n: int) -> list[RetrievalResult]:
    return [RetrievalResult(Chunk(f"c{i}", "d", i, f"text {i}", "d"), 0.0, None, 1.0 / (i + 1)) for i in range(n)]


@pytest.mark.parametrize("mode", ["huge", "huge_chunked"])
def test_a_60_mb_rerank_reply_is_refused_unread(hostile: Hostile, mode: str) -> None:
    hostile.mode = mode
    reranker = HttpReranker(hostile.url + "/rerank", timeout=20, max_retries=0)
    started = time.monotonic()
    try:
        with pytest.raises(EndpointError) as caught:
            reranker.rerank("q", ["a", "b"])
    finally:
        reranker.close()
    assert caught.value.code == REPLY_TOO_LARGE
    assert time.monotonic() - started < 10
    assert hostile.done.wait(10)
    # The server could not hand over the whole reply: the client stopped reading past the cap
    # (socket buffers hold a few MB at most).
    assert hostile.sent[0] < MAX_REPLY_BYTES + 8 * 1024 * 1024 < HUGE


def test_a_60_mb_llm_reply_is_refused(hostile: Hostile) -> None:
    hostile.mode = "huge_chunked"
    llm = OpenAICompatibleProvider(hostile.url + "/v1", "m", timeout=20, max_retries=0)
    try:
        with pytest.raises(EndpointError) as caught:
            llm.chat([{"role": "user", "content": "hi"}])
    finally:
        llm.close()
    assert caught.value.code == REPLY_TOO_LARGE
    assert hostile.done.wait(10) and hostile.sent[0] < HUGE


def test_a_trickling_server_ends_at_the_deadline(hostile: Hostile) -> None:
    """httpx's read timeout alone never fires: each read gets a byte within 0.3 s."""
    hostile.mode = "trickle"
    reranker = HttpReranker(hostile.url + "/rerank", timeout=1.5, max_retries=0)
    started = time.monotonic()
    try:
        with pytest.raises(EndpointError) as caught:
            reranker.rerank("q", ["a", "b"])
    finally:
        reranker.close()
    assert caught.value.code == TIMEOUT
    assert time.monotonic() - started < 1.5 + 1.0


def _rerank_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ragspine-rerank" and t.is_alive()]


def test_the_guard_timeout_ends_the_http_request_and_its_thread(hostile: Hostile) -> None:
    """The reranker's own timeout (and retries) would run for a minute; the guard's 1 s ends the
    request itself, so the worker thread is gone shortly after the timeout."""
    hostile.mode = "trickle"
    reranker = HttpReranker(hostile.url + "/rerank", timeout=30, max_retries=2, backoff=0.1)
    before = len(_rerank_threads())
    try:
        started = time.monotonic()
        ranked, lineage = rerank_traced("q", _results(3), reranker.rerank, timeout_s=1.0)
        assert time.monotonic() - started < 1.0 + 0.5
        assert lineage.fell_back and lineage.reason == "timeout"
        assert [r.chunk.chunk_id for r in ranked] == ["c0", "c1", "c2"]
        deadline = time.monotonic() + 1.5
        while len(_rerank_threads()) > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_rerank_threads()) == before
    finally:
        reranker.close()

