"""A stub OpenAI-compatible chat server on 127.0.0.1, shared by every test that drives an LLM.

It is a mock: a small real HTTP server speaking the chat-completions protocol, standing in for
the vLLM / Ollama / hosted endpoint users point RAGSPINE_LLM_BASE_URL at (never run here). It can
answer, fail with 500 or 429, stall past the client's timeout, or send garbage, one scripted
behaviour per request; its answers come from `responder` (the request body -> the reply text);
it records every request, so tests can check what reached a prompt.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback import loopback


@dataclass
class StubLLM:
    """The stub's knobs and what it saw. `script`: behaviours for the next requests, in order
    ("ok", "500", "429", "slow", "garbage", "echo": a 401 whose body echoes the request headers,
    Authorization included, as some upstreams do); once empty, `default` applies."""

    responder: Callable[[dict[str, Any]], str] = lambda body: "ok"
    base_url: str = ""
    script: list[str] = field(default_factory=list)
    default: str = "ok"
    slow_s: float = 1.5
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_behaviour(self) -> str:
        with self.lock:
            return self.script.pop(0) if self.script else self.default

    def prompts(self) -> str:
        """Every message text the stub was sent, joined."""
        with self.lock:
            return "\n".join(m["content"] for r in self.requests for m in r.get("messages", []))


def _handler(stub: StubLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with stub.lock:
                stub.requests.append(body)
                stub.headers.append(dict(self.headers))
            behaviour = stub.next_behaviour()
            if self.path != "/v1/chat/completions":
                return self._send(404, {"error": {"message": "no such route"}})
            if behaviour == "slow":
                time.sleep(stub.slow_s)
            if behaviour == "500":
                return self._send(500, {"error": {"message": "the model crashed"}})
            if behaviour == "429":
                return self._send(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})
            if behaviour == "echo":
                echoed = {"authorization": self.headers.get("Authorization"), "request_headers": dict(self.headers)}
                return self._send(401, {"error": {"message": "invalid key", **echoed}})
            if behaviour == "garbage":
                return self._send(200, {"unexpected": True})
            content = stub.responder(body)
            self._send(200, {"id": "stub", "object": "chat.completion", "model": body.get("model"),
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                          "finish_reason": "stop"}]})  # fmt: skip

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                pass

        def log_message(self, *_: Any) -> None:
            pass

    return Handler


@contextmanager
def LLMStubServer(stub: StubLLM) -> Iterator[StubLLM]:  # noqa: N802 - named like the server it runs
    """Serve `stub` on 127.0.0.1 (its `base_url` set) until the block ends."""
    with loopback(_handler(stub)) as url:
        stub.base_url = f"{url}/v1"
        yield stub
