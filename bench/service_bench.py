"""HTTP search benchmark: requests/s and latency percentiles at 100k chunks, on loopback.

What it does, all bounded and local:
1. builds a synthetic store (fixed seed: same text every run) of DOCS x CHUNKS_PER_DOC chunks,
   written through `ChunkStore.replace_doc_chunks`, one transaction per document;
2. starts `python -m ragspine serve` on 127.0.0.1 as a separate process (API key required) and
   waits until the first search has built the index (warm-up, timed separately);
3. runs a closed-loop load generator (asyncio + httpx, CONCURRENCY connections) on loopback for
   at most --requests requests or --seconds seconds, whichever ends first: POST /search with
   2-3 word queries from the corpus vocabulary, half of them with an entity filter, top_k=10;
4. prints one table row: chunks, requests, errors, requests/s, p50, p95, p99 (milliseconds).

    .venv/bin/python bench/service_bench.py                # 100,000 chunks, 2,000 requests max
    .venv/bin/python bench/service_bench.py --chunks 20000 --requests 500 --seconds 20

The server and the load generator share the machine: on a 2-core box the figure is a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ragspine.retrieval.store.factory import open_chunk_store
from ragspine.retrieval.model import Chunk

SEED = 20241130
CHUNKS_PER_DOC = 100
WORDS_PER_CHUNK = 60
VOCABULARY = 20000
ENTITIES = [f"ENT{i:02d}" for i in range(20)]
API_KEY = "bench-key-0123456789abcdef"
CJK = "营收利润增长下滑出口订单市场成本毛利率现金流风险管理战略产品客户"


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(VOCABULARY * 2)}
    return sorted(words)[:VOCABULARY]


def build_store(path: Path | str, chunks: int) -> tuple[float, list[str]]:
    """Write `chunks` synthetic chunks into the store at `path` (a SQLite path or a
    postgresql:// URL); return (seconds, vocabulary)."""
    rng = random.Random(SEED)
    vocab = _vocabulary(rng)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))  # Zipf-like
    started = time.perf_counter()
    with open_chunk_store(str(path)) as store:
        store.init_schema()
        for doc in range((chunks + CHUNKS_PER_DOC - 1) // CHUNKS_PER_DOC):
            doc_id = f"doc{doc:06d}"
            entity = ENTITIES[doc % len(ENTITIES)]
            rows = []
            for seq in range(min(CHUNKS_PER_DOC, chunks - doc * CHUNKS_PER_DOC)):
                words = rng.choices(vocab, cum_weights=cumulative, k=WORDS_PER_CHUNK)
                cjk = "".join(rng.choice(CJK) for _ in range(12))
                text = " ".join(words) + " " + cjk
                rows.append(Chunk(f"{doc_id}:{seq:04d}", doc_id, seq, text, f"{doc_id}#p{seq + 1}@0-{len(text)}",
                                  title=doc_id, entity=entity, language="en"))  # fmt: skip
            store.replace_doc_chunks(doc_id, rows)
    return time.perf_counter() - started, vocab


def _queries(vocab: list[str], count: int) -> list[dict[str, object]]:
    rng = random.Random(SEED + 1)
    common = vocab[:2000]
    out = []
    for i in range(count):
        body: dict[str, object] = {"query": " ".join(rng.sample(common, rng.randint(2, 3))), "top_k": 10}
        if i % 2:
            body["filters"] = {"entity": rng.choice(ENTITIES)}
        out.append(body)
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _load(url: str, queries: list[dict[str, object]], concurrency: int, seconds: float) -> tuple[list[float], int, float]:
    latencies: list[float] = []
    errors = 0
    next_query = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": API_KEY}, limits=limits, timeout=60) as client:

        async def worker() -> None:
            nonlocal next_query, errors
            while next_query < len(queries) and time.perf_counter() < deadline:
                body = queries[next_query]
                next_query += 1
                start = time.perf_counter()
                response = await client.post("/search", json=body)
                latencies.append(time.perf_counter() - start)
                errors += response.status_code != 200

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, errors, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=2000, help="at most this many requests")
    parser.add_argument("--seconds", type=float, default=60.0, help="at most this long under load")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--warmup-timeout", type=float, default=600.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ragspine-bench-") as tmp:
        db = Path(tmp) / "chunks.db"
        build_s, vocab = build_store(db, args.chunks)
        print(f"built {args.chunks} chunks in {build_s:.1f} s", file=sys.stderr)
        port = _free_port()
        env = {**os.environ, "RAGSPINE_API_KEYS": API_KEY, "RAGSPINE_DB": str(db)}
        server = subprocess.Popen(
            [sys.executable, "-m", "ragspine", "serve", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "warning"], env=env,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            warm_s = _warm_up(url, server, args.warmup_timeout)
            print(f"server up; first search (index build) took {warm_s:.1f} s", file=sys.stderr)
            queries = _queries(vocab, args.requests)
            latencies, errors, elapsed = asyncio.run(_load(url, queries, args.concurrency, args.seconds))
        finally:
            server.terminate()
            server.wait(timeout=30)
    ms = sorted(x * 1000 for x in latencies)
    p = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    print("| chunks | concurrency | requests | errors | requests/s | p50 ms | p95 ms | p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.chunks:,} | {args.concurrency} | {len(ms)} | {errors} | {len(ms) / elapsed:.1f} "
          f"| {p[49]:.1f} | {p[94]:.1f} | {p[98]:.1f} |")  # fmt: skip


def _warm_up(url: str, server: subprocess.Popen[bytes], timeout: float) -> float:
    started = time.perf_counter()
    with httpx.Client(base_url=url, headers={"X-API-Key": API_KEY}, timeout=timeout) as client:
        while True:
            if server.poll() is not None:
                raise SystemExit("the server exited during start-up")
            try:
                client.get("/health")
                break
            except httpx.TransportError:
                if time.perf_counter() - started > timeout:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.2)
        first = time.perf_counter()
        response = client.post("/search", json={"query": "warm up", "top_k": 1})
        response.raise_for_status()
    return time.perf_counter() - first


if __name__ == "__main__":
    main()
