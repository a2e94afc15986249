"""What the dense channel adds to a query at 100k chunks, beyond embedding the query.

Run: `PYTHONPATH=. .venv/bin/python -m bench.dense_bench [--work DIR] [--scale 100k]`.

The store is the synthetic corpus of `bench.prepare` (fixed seed). Every chunk gets a random
unit 384-d vector in `<db>.vectors.sqlite` (the values do not change the cost of exact cosine
ranking; embedding 100k chunks with a real model would take hours here). The backend returns
a seeded random query vector (about 20 µs), so the figure excludes a model's query embedding,
which is measured separately (embedding throughput rows in docs/benchmarks.md). Each query runs through
the public `NarrativeIndex.retrieve(q, top_k=10, rerank=False)` of a BM25-only index and of a
hybrid index over the same store, interleaved, plus hybrid with a typed filter.
"""

from __future__ import annotations

import argparse
import json
import time
import zlib
from pathlib import Path

import numpy as np

from bench.prepare import prepare
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors

DIM = 384


class RandomQueries:
    """A test-only backend: a fixed random unit vector per text (no model in the timing)."""

    model_id = "bench:random-384"
    dim = DIM
    is_remote = False

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            v = rng.standard_normal(DIM).astype(np.float32)
            out.append((v / np.linalg.norm(v)).tolist())
        return out


def fill_vectors(store: ChunkStore, vectors: ChunkVectors) -> float:
    ids = [c.chunk_id for c in store.iter_chunks()]
    missing = vectors.missing(ids)
    started = time.perf_counter()
    rng = np.random.default_rng(7)
    for i in range(0, len(missing), 10_000):
        batch = missing[i : i + 10_000]
        matrix = rng.standard_normal((len(batch), DIM)).astype(np.float32)
        vectors.add(batch, matrix)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragspine-bench"))
    parser.add_argument("--scale", default="100k")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    meta = prepare(args.work, args.scale)
    folder = args.work / args.scale
    queries = json.loads((folder / "queries.json").read_text())
    backend = RandomQueries()
    with ChunkStore(folder / "chunks.db") as store:
        store.init_schema()
        with ChunkVectors.beside(store, model_id=backend.model_id, dim=DIM) as vectors:
            fill_s = fill_vectors(store, vectors)
        lexical = NarrativeIndex(store)
        lexical.refresh()
        hybrid = NarrativeIndex(store, embedding_backend=backend)
        started = time.perf_counter()
        hybrid.refresh()  # loads the vectors and aligns them with the lexical index
        load_s = time.perf_counter() - started
        dense = hybrid.dense
        assert dense is not None
        rows = {
            "bm25 only": lambda q: lexical.retrieve(q, top_k=10, rerank=False),
            "hybrid (bm25 + dense, adaptive rrf)": lambda q: hybrid.retrieve(q, top_k=10, rerank=False),
            "hybrid + typed where topic+period": lambda q: hybrid.retrieve(
                q, top_k=10, rerank=False, where={"topic": "revenue", "period": "2020"}
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.passes):
            for query in queries:
                for name, run in rows.items():
                    start = time.perf_counter()
                    run(query)
                    times[name].append(time.perf_counter() - start)
        coverage = dense.coverage()
    base = np.median(times["bm25 only"])
    print(
        f"corpus {args.scale}: {meta['n_chunks']:,} chunks, {coverage.with_vector:,} with vectors; "
        f"{len(queries)} queries x {args.passes} passes; vectors written in {fill_s:.1f} s, "
        f"loaded and aligned in {load_s:.2f} s"
    )
    print("| search | p50 ms | p95 ms | p50 added vs bm25 |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        p50, p95 = np.median(values) * 1000, np.percentile(values, 95) * 1000
        print(f"| {name} | {p50:.2f} | {p95:.2f} | {(np.median(values) - base) * 1000:+.2f} ms |")


if __name__ == "__main__":
    main()
