"""Request bodies are bounded (issue 40, item 5), against the real server with a raw socket
client: a body over its route's limit is a 413 that arrives while the body is still incomplete
(refused by its Content-Length, or once the bytes streamed pass the limit: the rest is never
read); query routes take RAGSPINE_MAX_QUERY_BODY_BYTES, document routes RAGSPINE_MAX_BODY_BYTES;
and (slow) a server's memory comes back after 50 hostile 4-11 MB bodies."""

from __future__ import annotations

import json
import re
import select
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from service_helpers import API_KEY

CHUNK = 64 * 1024


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    return sock


def _head(path: str, extra: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {API_KEY}\r\n"
            f"Content-Type: application/json\r\n{extra}\r\n").encode()  # fmt: skip


def _status(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of the response on `sock` (read until the body is complete)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split()[1]), json.loads(body[:length])


def _stream_until_answered(sock: socket.socket, total: int) -> int:
    """Send a chunked body of `total` bytes (never its last chunk) until the server answers;
    the bytes sent by then."""
    sent = 0
    frame = f"{CHUNK:x}\r\n".encode() + b" " * CHUNK + b"\r\n"
    while sent < total:
        if select.select([sock], [], [], 0)[0]:
            break
        try:
            sock.sendall(frame)
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += CHUNK
    return sent


@pytest.mark.parametrize("path", ["/search", "/ask", "/documents"])
def test_a_declared_length_over_the_limit_is_413_before_the_body_is_sent(serve: Any, path: str) -> None:
    served = serve(max_body_bytes=64 * 1024, max_query_body_bytes=8 * 1024)
    with _connect(served.url) as sock:
        sock.sendall(_head(path, f"Content-Length: {50 << 20}\r\n") + b'{"query": "')  # 50 MB announced, 11 bytes sent
        status, body = _status(sock)
    setting = "RAGSPINE_MAX_BODY_BYTES" if path == "/documents" else "RAGSPINE_MAX_QUERY_BODY_BYTES"
    assert status == 413 and setting in body["message"], body
    assert served.client.get("/health").status_code == 200


@pytest.mark.parametrize(("path", "limit"), [("/search", 8 * 1024), ("/documents", 64 * 1024)])
def test_a_streamed_body_is_refused_once_it_passes_the_limit_and_the_rest_is_never_read(
    serve: Any, path: str, limit: int
) -> None:
    served = serve(max_body_bytes=64 * 1024, max_query_body_bytes=8 * 1024)
    total = 64 << 20  # 64 MB that would be sent if the server read on
    with _connect(served.url) as sock:
        sock.sendall(_head(path, "Transfer-Encoding: chunked\r\n"))
        sent = _stream_until_answered(sock, total)
        status, body = _status(sock)
    assert status == 413 and str(limit) in body["message"], body
    assert sent < total, "the answer came while the body was still being sent"
    assert served.client.post("/search", json={"query": "revenue"}).status_code == 200


def test_a_query_body_within_the_limit_is_served_and_a_document_may_be_larger(serve: Any) -> None:
    served = serve(max_query_body_bytes=8 * 1024)
    client = served.client
    def where(n: int) -> dict[str, Any]:
        return {"query": "revenue", "where": {"entity": {"in": [f"ENTITY_{i:04d}" for i in range(n)]}}}

    assert client.post("/search", json=where(400)).status_code == 200  # 6 KB
    assert client.post("/search", json=where(1000)).status_code == 413  # 14 KB
    big = {"doc_id": "big.txt", "text": "Revenue grew in the north. " * 2000}  # 54 KB
    assert client.post("/documents", json=big).status_code == 201


@pytest.mark.slow
def test_memory_comes_back_after_hostile_bodies() -> None:
    """bench/body_memory.py: a real `ragspine serve` process, 50 bodies of 4-11 MB."""
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, str(root / "bench" / "body_memory.py"), "--bodies", "50"],
        capture_output=True, text=True, timeout=600, check=False, cwd=root,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r"RSS before (\d+) MB, peak (\d+) MB, after (\d+) MB", result.stdout)
    assert found is not None, result.stdout
    before, _, after = map(int, found.groups())
    assert after <= before + 50, result.stdout  # 106 -> 598 MB was the figure
