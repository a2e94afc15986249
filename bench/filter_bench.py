"""Filtered vs unfiltered search at 100k chunks, side by side in one process.

Run: `PYTHONPATH=. .venv/bin/python -m bench.filter_bench [--work DIR] [--scale 100k]`.
The store is the synthetic corpus of `bench.prepare` (fixed seed). Each query runs through the
public `NarrativeIndex.retrieve(q, top_k=10, rerank=False)` with no query rewriter, once
unfiltered, once with an exact 1% filter (topic + period keywords) and once with the same
filter in the typed language (`where`), interleaved so machine noise hits all rows alike.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.prepare import prepare
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex

EXACT = {"topic": "revenue", "period": "2020"}
VARIANTS = {
    "unfiltered": {},
    "exact filter topic+period (kwargs)": {"kwargs": EXACT},
    "typed where topic+period": {"where": {"topic": "revenue", "period": "2020"}},
    "typed where period>=2023 (OR entity in 2 of 50)": {
        "where": {"or": [{"period": {"gte": "2023"}}, {"entity": {"in": ["ENT01", "ENT02"]}}]}
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragspine-bench"))
    parser.add_argument("--scale", default="100k")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    meta = prepare(args.work, args.scale)
    folder = args.work / args.scale
    queries = json.loads((folder / "queries.json").read_text())
    with ChunkStore(folder / "chunks.db") as store:
        store.init_schema()
        index = NarrativeIndex(store)
        index.refresh()
        n_active = index.lexical_index.snapshot().n_active
        share = {}
        for name, spec in VARIANTS.items():
            allowed = index.retriever().index.allowed_positions(spec.get("kwargs"), index.retriever().check_where(spec.get("where")))
            share[name] = len(allowed) / n_active
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(args.passes):
            for query in queries:
                for name, spec in VARIANTS.items():
                    start = time.perf_counter()
                    index.retrieve(query, top_k=10, rerank=False, where=spec.get("where"), **spec.get("kwargs", {}))
                    times[name].append(time.perf_counter() - start)
    base = np.median(times["unfiltered"])
    print(f"corpus {args.scale}: {meta['n_chunks']:,} chunks, {len(queries)} queries x {args.passes} passes")
    print("| search | share of chunks allowed | p50 ms | p95 ms | p50 vs unfiltered |")
    print("|---|---:|---:|---:|---:|")
    for name, values in times.items():
        p50, p95 = np.median(values) * 1000, np.percentile(values, 95) * 1000
        print(f"| {name} | {share[name]:.2%} | {p50:.2f} | {p95:.2f} | {np.median(values) / base:.2f}x |")


if __name__ == "__main__":
    main()
