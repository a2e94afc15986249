"""Fixtures for the reranker tests: tiny model folders and a loopback rerank server.

The rerank server is a mock of what a user runs on a GPU box (TEI, Infinity, Cohere): a real
HTTP server on 127.0.0.1 that scores by word overlap and can be told to fail, stall or answer
garbage; the reranker under test talks to it with its real httpx client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from local_hub import LocalHub, running_hub
from loopback import loopback
from rerank_models import colbert_folder, cross_encoder_folder

from ragspine.models.known import DEFAULT_CROSS_ENCODER


class RerankServer:
    """State of the loopback server: requests seen, and what to answer next."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.script: list[str] = []  # one behaviour per request, then `default`
        self.default = "ok"  # ok | 500 | garbage | bad_index | slow | short
        self.slow_s = 1.0
        self.url = ""

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        behaviour = self.script.pop(0) if self.script else self.default
        texts = body.get("documents", body.get("texts", []))
        query = set(str(body.get("query", "")).lower().split())
        scores = [len(query & set(str(t).lower().replace(".", " ").split())) for t in texts]
        if behaviour == "500":
            return 500, {"error": "the GPU fell over"}
        if behaviour == "garbage":
            return 200, "<html>not json"
        if behaviour == "slow":
            time.sleep(self.slow_s)
        items = [{"index": i, "score": float(s)} for i, s in enumerate(scores)]
        if behaviour == "bad_index":
            items.append({"index": len(texts) + 3, "score": 1.0})
        if behaviour == "short":
            items = sorted(items, key=lambda x: -x["score"])[:1]
        if "texts" in body:
            return 200, items
        return 200, {"results": [{"index": x["index"], "relevance_score": x["score"]} for x in items]}


@pytest.fixture
def rerank_server() -> Iterator[RerankServer]:
    state = RerankServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server hook
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            status, payload = state.answer(body)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except OSError:
                pass  # the client timed out and left

        def log_message(self, *args: Any) -> None:
            pass

    with loopback(Handler) as url:
        state.url = f"{url}/rerank"
        yield state


@pytest.fixture(scope="session")
def ce_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cross_encoder_folder(tmp_path_factory.mktemp("ce") / "tiny-ce")


@pytest.fixture(scope="session")
def ce2_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cross_encoder_folder(tmp_path_factory.mktemp("ce2") / "tiny-ce2", two_logits=True)


@pytest.fixture(scope="session")
def colbert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return colbert_folder(tmp_path_factory.mktemp("colbert") / "tiny-colbert")


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalHub]:
    """A loopback hub (local_hub.py) serving the tiny cross-encoder as the default model, with
    HF_ENDPOINT and a fresh HF_HUB_CACHE pointed at it (huggingface_hub imported here: the
    tests that use it skip without it)."""
    import huggingface_hub.constants

    with running_hub() as served:
        served.add(DEFAULT_CROSS_ENCODER, cross_encoder_folder(tmp_path / "built" / "ce"))
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
        monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("RAGSPINE_RERANKER_MODEL", raising=False)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
        yield served
