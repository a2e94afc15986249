"""What e5's query session costs: the resident memory it adds and the time to open it.

Run: `PYTHONPATH=.:src .venv/bin/python -m bench.e5_query_session --engine onnx` (and
`--engine onnx-fp32`). The engine is the product's (`MultilingualE5EmbeddingBackend`, default
threads, so queries get their own one-thread session, `E5OnnxEngine.query_threads`). A passage
and a query are first embedded on the passages' session (everything but the query session
warm); then the query session is opened by one query: its wall time, and the process's RSS
(/proc/self/statm) before and after. One process per engine: RSS is the process's.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend


def rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", default="onnx", help="onnx (int8) or onnx-fp32")
    args = parser.parse_args()
    backend = MultilingualE5EmbeddingBackend(engine=args.engine)
    engine = backend._model  # noqa: SLF001 - the sessions are what is measured
    threads = engine.query_threads
    engine.query_threads = None  # warm: the passages' session answers the query side too
    backend.embed_texts(["营收下滑的原因"])
    backend.embed_queries(["why did revenue fall"])
    engine.query_threads = threads
    before = rss_mb()
    started = time.perf_counter()
    backend.embed_queries(["why did revenue fall"])  # opens the query session
    first_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    backend.embed_queries(["why did revenue fall"])
    then_ms = (time.perf_counter() - started) * 1000
    print(json.dumps({
        "engine": args.engine, "query_threads": threads, "rss_before_mb": round(before, 1),
        "rss_added_mb": round(rss_mb() - before, 1), "first_query_ms": round(first_ms, 1),
        "next_query_ms": round(then_ms, 1), "open_ms": round(first_ms - then_ms, 1),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
