"""OpenAIEmbeddingBackend against a stub OpenAI-compatible server on loopback (http.server)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("httpx")

from ragspine.retrieval.vector.embeddings.factory import (
    DeterministicEmbeddingBackend,
    EmbeddingBackendError,
    OpenAIEmbeddingBackend,
    can_embed,
    make_embedding_backend,
)

from ragspine.testing.embedding_backend import EmbeddingBackendSuite

KEY = "sk-test-secret-key-0123456789"
REFERENCE = DeterministicEmbeddingBackend(dim=16)


class StubServer(ThreadingHTTPServer):
    """Answers POST /v1/embeddings; `script` holds (status, body, headers, delay) for the next
    requests, after which it answers with REFERENCE's vectors (in reversed `data` order)."""

    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), StubHandler)
        self.script: list[tuple[int, Any, dict[str, str], float]] = []
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class StubHandler(BaseHTTPRequestHandler):
    server: StubServer

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, dict(self.headers), payload))
        if self.server.script:
            status, body, headers, delay = self.server.script.pop(0)
            time.sleep(delay)
        else:
            status, headers = 200, {}
            vectors = REFERENCE.embed_texts(payload["input"])
            body = {"object": "list", "model": payload["model"],
                    "data": [{"object": "embedding", "index": i, "embedding": v}
                             for i, v in reversed(list(enumerate(vectors)))]}  # fmt: skip
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        try:
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout test)
            pass

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[StubServer]:
    stub = StubServer()
    thread = threading.Thread(target=stub.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield stub
    stub.shutdown()
    stub.server_close()


@pytest.fixture
def stub(server: StubServer) -> StubServer:
    server.script.clear()
    server.requests.clear()
    return server


def _backend(stub: StubServer, **options: Any) -> OpenAIEmbeddingBackend:
    sleeps = options.pop("sleeps", [])
    backend = make_embedding_backend("openai", base_url=stub.base_url, model="e5-small", api_key=KEY,
                                     sleep=sleeps.append, **options)  # fmt: skip
    assert isinstance(backend, OpenAIEmbeddingBackend)
    return backend


class TestOpenAIBackend(EmbeddingBackendSuite):
    @pytest.fixture
    def backend(self, stub: StubServer) -> Iterator[OpenAIEmbeddingBackend]:
        with _backend(stub) as backend:
            yield backend


def test_vectors_come_back_in_input_order_in_batches(stub: StubServer) -> None:
    texts = [f"text {i} 营收" for i in range(5)]
    with _backend(stub, batch_size=2) as backend:
        assert backend.embed_texts(texts) == REFERENCE.embed_texts(texts)
    assert [len(p["input"]) for _, _, p in stub.requests] == [2, 2, 1]
    path, headers, payload = stub.requests[0]
    assert path == "/v1/embeddings"
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert payload == {"model": "e5-small", "input": texts[:2], "encoding_format": "float"}
    assert backend.dim == 16 and backend.model_id == "openai:e5-small"


def test_prefixes_and_dimensions_are_sent(stub: StubServer) -> None:
    with _backend(stub, query_prefix="query: ", passage_prefix="passage: ", dimensions=16) as backend:
        backend.embed_queries(["q"])
        backend.embed_texts(["p"])
    assert [p["input"] for _, _, p in stub.requests] == [["query: q"], ["passage: p"]]
    assert stub.requests[0][2]["dimensions"] == 16
    assert backend.model_id == "openai:e5-small;dim=16;qp='query: ';pp='passage: '"


def test_429_and_5xx_are_retried_with_backoff(stub: StubServer) -> None:
    stub.script = [(503, "busy", {}, 0.0), (429, "slow down", {"Retry-After": "0"}, 0.0)]
    sleeps: list[float] = []
    with _backend(stub, sleeps=sleeps, max_retries=2, backoff=0.25) as backend:
        assert backend.embed_texts(["a"]) == REFERENCE.embed_texts(["a"])
    assert len(stub.requests) == 3
    assert sleeps == [0.25, 0.0]


def test_retries_are_bounded(stub: StubServer) -> None:
    stub.script = [(500, "boom", {}, 0.0)] * 3
    with _backend(stub, max_retries=2) as backend, pytest.raises(EmbeddingBackendError) as info:
        backend.embed_texts(["a"])
    assert len(stub.requests) == 3
    assert "HTTP 500" in str(info.value) and "after 3 attempts" in str(info.value)


def test_client_errors_are_not_retried_and_never_show_the_key(stub: StubServer) -> None:
    stub.script = [(401, {"error": "bad key"}, {}, 0.0)]
    with _backend(stub) as backend, pytest.raises(EmbeddingBackendError) as info:
        backend.embed_texts(["a"])
    assert len(stub.requests) == 1 and info.value.status == 401
    assert "check the API key" in str(info.value)
    assert KEY not in str(info.value) and KEY not in repr(backend)


def test_timeouts_are_retried_then_reported(stub: StubServer) -> None:
    stub.script = [(200, {}, {}, 0.6)] * 2
    with _backend(stub, timeout=0.15, max_retries=1) as backend, pytest.raises(EmbeddingBackendError) as info:
        backend.embed_texts(["a"])
    assert "timed out after 0.15 s" in str(info.value) and "after 2 attempts" in str(info.value)


def test_connection_errors_are_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    backend = OpenAIEmbeddingBackend(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, sleep=sleeps.append)
    with backend, pytest.raises(EmbeddingBackendError, match="request failed"):
        backend.embed_texts(["a"])
    assert len(sleeps) == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}]}, "1 vectors for 2 texts"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}, "dimensions"),
        ('{"data": [{"index": 0, "embedding": [NaN]}, {"index": 1, "embedding": [1.0]}]}', "NaN"),
        ({"unexpected": True}, "malformed"),
        ("not json", "malformed"),
    ],
)
def test_malformed_responses_are_errors(stub: StubServer, body: Any, message: str) -> None:
    stub.script = [(200, body, {}, 0.0)]
    with _backend(stub) as backend, pytest.raises(EmbeddingBackendError, match=message):
        backend.embed_texts(["a", "b"])
    assert len(stub.requests) == 1  # a malformed answer is not retried


def test_a_dimension_other_than_requested_is_an_error(stub: StubServer) -> None:
    with _backend(stub, dimensions=8) as backend, pytest.raises(EmbeddingBackendError, match="expected 8"):
        backend.embed_texts(["a"])


def test_it_is_remote_so_restricted_chunks_stay_lexical(stub: StubServer) -> None:
    with _backend(stub) as backend:
        assert backend.is_remote is True
        assert not can_embed(backend, "RESTRICTED") and can_embed(backend, "PUBLIC")


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="http"):
        OpenAIEmbeddingBackend("127.0.0.1:8080", "m")
    with pytest.raises(ValueError, match="model"):
        OpenAIEmbeddingBackend("http://127.0.0.1:8080/v1", "")
