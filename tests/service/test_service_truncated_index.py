"""A live `ragspine serve` whose memory-mapped BM25 postings file is truncated under it keeps
answering every search, with the same snippets, and logs one WARNING (it used to die of SIGBUS)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from service_helpers import API_KEY, BM25_ENV

import ragspine

# Each query is new to the server after the truncation (a searched term's scores are cached).
QUERIES = ["common " + " ".join(f"x{i} w{i % 700}" for i in range(s, 3000, 150)) for s in range(0, 150, 10)]

# `ragspine serve` with every index file memory-mapped (the product reads files under 1 MiB
# into memory; this store's are smaller).
_SERVE = """
import sys
try:
    from ragspine.retrieval.lexical.index import mapped
    mapped.MAP_MIN_BYTES = 0
except ImportError:
    pass
from ragspine.cli import main
main(["serve", "--port", sys.argv[1]])
"""


def _ids(snippets: list[dict]) -> list[tuple[str | None, float]]:
    return [(s["chunk_id"], round(s["scores"]["bm25"], 9)) for s in snippets]


def test_search_survives_a_postings_file_truncated_under_the_server(tmp_path: Path) -> None:
    db = str(tmp_path / "served.db")
    with ragspine.open(db, env=BM25_ENV) as ws:
        for d in range(300):
            text = "\n\n".join(
                f"common w{i % 700} x{i} y{i * 7 % 1999} filler words here" for i in range(d * 10, d * 10 + 10)
            )
            ws.ingest(text, doc_id=f"d{d}")
        expected = [_ids(ws.search(q, top_k=20)) for q in QUERIES]  # builds and writes the index
    assert all(len(answer) == 20 for answer in expected)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, **BM25_ENV, "RAGSPINE_API_KEYS": API_KEY, "RAGSPINE_DB": db}
    process = subprocess.Popen([sys.executable, "-c", _SERVE, str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    headers = {"X-API-Key": API_KEY}

    def search(query: str) -> list[tuple[str | None, float]]:
        reply = httpx.post(f"{base}/search", json={"query": query, "top_k": 20}, headers=headers, timeout=60)
        assert reply.status_code == 200, reply.text
        return _ids(reply.json()["snippets"])

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/health", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()  # type: ignore[union-attr]
                time.sleep(0.1)
        assert search(QUERIES[0]) == expected[0]  # the server has loaded (mapped) the index
        (postings,) = Path(db + ".bm25").glob("*/seg-*/docs.npy")
        os.truncate(postings, postings.stat().st_size // 2)
        answers = []
        for query in QUERIES[1:]:
            try:
                answers.append(search(query))
            except httpx.TransportError:
                raise AssertionError(f"the server died: exit {process.wait(timeout=15)}") from None
        assert answers == expected[1:]
        assert process.poll() is None
    finally:
        process.terminate()
        _, err = process.communicate(timeout=15)
    log = " ".join(err.decode().split())  # the log handler may wrap long lines
    assert log.count("changed under this process") == 1 and "(docs.npy)" in log, log[-3000:]
