"""pgvector (HNSW) vs the in-process store at 100k vectors: recall@10 against exact, query p50.

Run: `PYTHONPATH=. .venv/bin/python -m bench.vector_bench [--n 100000] [--queries 200]`.
It starts a throwaway PostgreSQL with pgvector from the `pgserver` wheel (the same helper the
server tests use; `--url` uses an existing server instead). Vectors: 384-d, 1,000 Gaussian
clusters plus noise from a fixed seed, unit length; queries: perturbed stored vectors. Exact
top-10 comes from `InProcessVectorStore` (brute-force cosine); both stores answer the same queries
in one process, interleaved.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "server"))

from ragspine.retrieval.vector.stores.pgvector import PgVectorStore  # noqa: E402
from ragspine.retrieval.vector.stores.inprocess import InProcessVectorStore  # noqa: E402

DIM, SEED, CLUSTERS = 384, 20261130, 1000


def vectors(n: int) -> np.ndarray:
    rng = np.random.default_rng(SEED)
    centers = rng.normal(size=(CLUSTERS, DIM))
    data = centers[rng.integers(CLUSTERS, size=n)] + 0.6 * rng.normal(size=(n, DIM))
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--url", default="")
    args = parser.parse_args()
    data = vectors(args.n)
    ids = [f"c{i:07d}" for i in range(args.n)]
    meta = [{"doc_id": f"d{i // 10:06d}"} for i in range(args.n)]
    rng = np.random.default_rng(SEED + 1)
    picks = rng.integers(args.n, size=args.queries)
    queries = data[picks] + 0.05 * rng.normal(size=(args.queries, DIM)).astype(np.float32)

    server = None
    url = args.url
    if not url:
        from conftest import _Server  # the server tests' throwaway PostgreSQL

        server = _Server()
        url = server.start()
    try:
        exact = InProcessVectorStore(DIM, model_id="bench")
        start = time.perf_counter()
        exact.upsert(ids, data, meta)
        t_mem = time.perf_counter() - start
        pg = PgVectorStore(url, "bench_vectors", DIM, model_id="bench")
        start = time.perf_counter()
        for lo in range(0, args.n, 5_000):
            pg.upsert(ids[lo : lo + 5_000], data[lo : lo + 5_000], meta[lo : lo + 5_000])
        t_pg = time.perf_counter() - start
        times: dict[str, list[float]] = {"in-process (exact)": [], "pgvector (HNSW)": []}
        recall = []
        for q in queries:
            start = time.perf_counter()
            truth = [i for i, _ in exact.query(q, k=10)]
            times["in-process (exact)"].append(time.perf_counter() - start)
            start = time.perf_counter()
            got = [i for i, _ in pg.query(q, k=10)]
            times["pgvector (HNSW)"].append(time.perf_counter() - start)
            recall.append(len(set(truth) & set(got)) / 10)
        print(f"{args.n:,} vectors x {DIM}-d, {args.queries} queries; load: in-process {t_mem:.1f} s, "
              f"pgvector {t_pg:.1f} s (inserts with the HNSW index maintained)")  # fmt: skip
        print("| store | recall@10 vs exact | query p50 ms | p95 ms |")
        print("|---|---:|---:|---:|")
        for name, values in times.items():
            r = 1.0 if name.startswith("in-process") else float(np.mean(recall))
            print(f"| {name} | {r:.3f} | {np.median(values) * 1000:.2f} | {np.percentile(values, 95) * 1000:.2f} |")
    finally:
        if server is not None:
            server.stop()
            server.remove()


if __name__ == "__main__":
    main()
