"""Server memory after hostile request bodies (issue 40, item 5): RSS of a real `ragspine serve`
process before and after a series of 4-11 MB bodies.

What it does, all bounded and local:
1. ingests a few small documents into a fresh store in a temporary folder;
2. starts `python -m ragspine serve` on 127.0.0.1 as a separate process and sends 20 ordinary
   searches (the baseline RSS is read after them, from /proc/PID/status);
3. sends --bodies hostile bodies, cycling through: a 4-9 MB query string, a JSON array of a
   million small objects, a `where` list of 200,000 values (to /search), a 9 MB document text
   of junk fields (to /documents), an 11 MB body with its Content-Length, and an 11 MB body
   streamed without one (chunked);
4. prints each kind's status codes, then RSS before, peak seen, and after (MB), 2 s after the last.

    .venv/bin/python bench/body_memory.py                 # 50 bodies
    .venv/bin/python bench/body_memory.py --bodies 20

Linux only (reads /proc). The client shares the machine with the server.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

MB = 1 << 20


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bodies() -> Iterator[tuple[str, str, bytes | Iterator[bytes]]]:
    """(kind, route, body) forever: bytes are sent with a Content-Length, an iterator chunked."""
    n = 0
    while True:
        n += 1
        size = (4 + n % 6) * MB
        yield "long query", "/search", json.dumps({"query": "x" * size}).encode()
        yield "1M objects", "/search", ("[" + ",".join(['{"a":1}'] * (size // 8)) + "]").encode()
        values = [f"ENTITY_{i}" for i in range(200_000)]
        yield "200k where values", "/search", json.dumps({"query": "q", "where": {"entity": {"in": values}}}).encode()
        junk = {f"k{i}": [i, i, i] for i in range(size // 24)}
        yield "junk document", "/documents", json.dumps({"doc_id": "junk.txt", "text": "t", **junk}).encode()
        yield "11 MB declared", "/search", b"{" + b" " * (11 * MB) + b"}"
        yield "11 MB streamed", "/search", (b" " * MB for _ in range(11))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "chunks.db")
        docs = Path(tmp) / "docs"
        docs.mkdir()
        for i in range(20):
            (docs / f"d{i}.txt").write_text(f"Document {i}: revenue fell {i} points in the north.", "utf-8")
        env = {**os.environ, "RAGSPINE_EMBEDDING": "none", "RAGSPINE_RETRIEVAL_MODE": "bm25"}
        subprocess.run([sys.executable, "-m", "ragspine", "ingest", str(docs), "--db", db], env=env, check=True,
                       capture_output=True)  # fmt: skip
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "ragspine", "serve", "--db", db, "--port", str(port), "--log-level", "warning"],
            env=env, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=url, timeout=60) as client:
                for _ in range(200):
                    try:
                        if client.get("/health").status_code == 200:
                            break
                    except httpx.TransportError:
                        time.sleep(0.1)
                for i in range(20):
                    client.post("/search", json={"query": f"revenue {i}"}).raise_for_status()
                before, peak = _rss_mb(server.pid), 0.0
                codes: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
                for _, (kind, route, body) in zip(range(args.bodies), _bodies()):
                    try:
                        status = client.post(route, content=body, headers={"content-type": "application/json"}).status_code
                    except httpx.TransportError:
                        status = -1  # the server closed the connection while the body was sent
                    codes[kind][status] += 1
                    peak = max(peak, _rss_mb(server.pid))
                time.sleep(2)
                after = _rss_mb(server.pid)
                assert client.post("/search", json={"query": "revenue"}).status_code == 200
        finally:
            server.terminate()
            server.wait(timeout=20)
    for kind, counted in codes.items():
        print(f"{kind:<20} " + ", ".join(f"{code}: {n}" for code, n in sorted(counted.items())))
    print(f"bodies {args.bodies}: RSS before {before:.0f} MB, peak {peak:.0f} MB, after {after:.0f} MB")


if __name__ == "__main__":
    main()
