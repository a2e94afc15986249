"""The GPU against the CPU engine on a shared evaluation set: embedding speed, dense nDCG@10 and
their parity; then a cross-encoder rerank when one is on disk.

Run on a machine with a GPU, after `pip uninstall -y onnxruntime && pip install 'ragspine[gpu]'`
(no network is needed or used):

    PYTHONPATH=src:. python -m bench.gpu_bench --eval ../shared/eval --set scifact   # or `make bench-gpu`
    PYTHONPATH=src:. python -m bench.gpu_bench --devices cpu --docs 200 --queries 20  # no GPU: the CPU side alone

What it does, per device in `--devices` (default `cuda,cpu`; the first is compared with the last):
- embeds the corpus slice (every document judged relevant for the chosen queries, then the first
  others up to `--docs`; title + text, as `ragspine eval` indexes a BEIR document before
  chunking) as passages with the packaged multilingual-e5-small (`MultilingualE5EmbeddingBackend`,
  engine `--engine`, default onnx-fp32: e5's int8 graph has CPU-only quantisation kernels) on that
  device, after an untimed warm-up batch; passages/s is over the timed pass;
- ranks the slice for each query by cosine and scores nDCG@10 against the split's qrels;
- parity: each passage's cosine between the two devices' vectors (min, mean) and the nDCG@10 delta;
- reranks each query's dense top `--rerank-depth` with a cross-encoder (`--reranker`: a folder,
  or a hub id already in the hub cache; HF_HUB_OFFLINE is set, nothing is fetched) on each device:
  pairs/s, nDCG@10 after the rerank, and the largest score difference between the devices. No
  model on disk: the rerank is reported as skipped, with why.
Prints one JSON object. Device errors (`--devices cuda` with no GPU) are one line, exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.eval.dataset import BeirDataset, CorpusDoc, load_beir
from ragspine.eval.metrics import ndcg_at_k

K = 10


def corpus_slice(dataset: BeirDataset, docs: int | None, queries: int | None) -> tuple[list[CorpusDoc], list[str]]:
    """(documents, query ids): the first `queries` judged queries (by id), every document judged
    relevant for them, then the corpus's first others until `docs` documents."""
    qids = sorted(dataset.queries)[:queries] if queries else sorted(dataset.queries)
    needed = {doc for q in qids for doc, grade in dataset.qrels[q].items() if grade > 0}
    chosen = [d for d in dataset.corpus if d.doc_id in needed]
    limit = max(docs or len(dataset.corpus), len(chosen))
    chosen += [d for d in dataset.corpus if d.doc_id not in needed][: limit - len(chosen)]
    return chosen, qids


def embed(device: str, args: argparse.Namespace, texts: list[str], queries: list[str]) -> dict[str, Any]:
    """Passage and query vectors on `device`, and the passages/s of the timed pass."""
    from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend

    started = time.perf_counter()
    backend = MultilingualE5EmbeddingBackend(engine=args.engine, device=device, threads=args.threads,
                                             batch_size=args.batch_size, max_tokens=args.max_tokens)  # fmt: skip
    load_s = time.perf_counter() - started
    backend.embed_texts(texts[: args.batch_size])  # warm-up: kernels, allocator, CUDA graphs
    started = time.perf_counter()
    passages = np.asarray(backend.embed_texts(texts), dtype=np.float32)
    seconds = time.perf_counter() - started
    return {"device": backend.device, "engine": backend.engine, "model_id": backend.model_id,
            "load_s": round(load_s, 2), "passages": len(texts), "embed_s": round(seconds, 2),
            "passages_per_s": round(len(texts) / seconds, 1),
            "P": passages, "Q": np.asarray(backend.embed_queries(queries), dtype=np.float32)}  # fmt: skip


def rankings(passages: np.ndarray, queries: np.ndarray, doc_ids: list[str], depth: int) -> list[list[str]]:
    """Each query's top `depth` documents by cosine (unit vectors: the dot product)."""
    scores = queries @ passages.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    return [[doc_ids[i] for i in row] for row in top]


def mean_ndcg(ranked: list[list[str]], qids: list[str], qrels: dict[str, dict[str, int]]) -> float:
    return float(np.mean([ndcg_at_k(r, qrels[q], K) for r, q in zip(ranked, qids, strict=True)]))


def rerank(device: str, args: argparse.Namespace, qtexts: list[str], ranked: list[list[str]],
           text_of: dict[str, str], qids: list[str], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:  # fmt: skip
    """The dense top `--rerank-depth` of each query reranked by the cross-encoder on `device`."""
    from ragspine.models.hub import ModelNotPulled
    from ragspine.retrieval.rerank.onnx_cross_encoder import CrossEncoderReranker

    try:
        model = CrossEncoderReranker(args.reranker, device=device, threads=args.threads)
    except (ModelNotPulled, FileNotFoundError, ImportError) as exc:
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    pairs, scores, reordered = 0, [], []
    model.scores(qtexts[0], [text_of[d] for d in ranked[0][:2]])  # warm-up
    started = time.perf_counter()
    for query, docs in zip(qtexts, ranked, strict=True):
        found = model.scores(query, [text_of[d] for d in docs])
        pairs += len(docs)
        scores.append(found)
        reordered.append([docs[i] for i in np.argsort(-np.asarray(found), kind="stable")])
    seconds = time.perf_counter() - started
    return {"model": args.reranker, "device": model.device, "pairs": pairs, "pairs_per_s": round(pairs / seconds, 1),
            f"ndcg@{K}": round(mean_ndcg(reordered, qids, qrels), 4), "scores": scores}  # fmt: skip


def parity(first: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
    """How far the first device's results are from the last's."""
    cos = np.sum(first["P"] * last["P"], axis=1)
    out = {"devices": f"{first['device']} vs {last['device']}", "passage_cosine_min": round(float(cos.min()), 6),
           "passage_cosine_mean": round(float(cos.mean()), 6),
           f"ndcg@{K}_delta": round(first[f"ndcg@{K}"] - last[f"ndcg@{K}"], 4)}  # fmt: skip
    a, b = first.get("rerank", {}), last.get("rerank", {})
    if "scores" in a and "scores" in b:
        diff = max(float(np.max(np.abs(np.subtract(x, y)))) for x, y in zip(a["scores"], b["scores"], strict=True))
        out["rerank_score_max_abs_diff"] = round(diff, 6)
        out[f"rerank_ndcg@{K}_delta"] = round(a[f"ndcg@{K}"] - b[f"ndcg@{K}"], 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval"), help="the shared BEIR sets")
    parser.add_argument("--set", default="scifact")
    parser.add_argument("--split", default="test")
    parser.add_argument("--docs", type=int, default=None, help="corpus slice size (default: the whole corpus)")
    parser.add_argument("--queries", type=int, default=None, help="judged queries used (default: all)")
    parser.add_argument("--devices", default="cuda,cpu", help="comma-separated; the first is compared with the last")
    parser.add_argument("--engine", default="onnx-fp32", choices=("onnx-fp32", "onnx"))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime intra-op threads on the CPU")
    parser.add_argument("--reranker", default=None, help="cross-encoder folder or cached hub id (default: the spec's)")
    parser.add_argument("--rerank-depth", type=int, default=20)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"  # no network: a hub id must already be in the cache
    from ragspine.models.device import DeviceUnavailable
    from ragspine.models.known import DEFAULT_CROSS_ENCODER

    args.reranker = args.reranker or DEFAULT_CROSS_ENCODER
    dataset = load_beir(args.eval / args.set, args.split)
    docs, qids = corpus_slice(dataset, args.docs, args.queries)
    doc_ids, texts = [d.doc_id for d in docs], [d.indexed_text for d in docs]
    qtexts = [dataset.queries[q] for q in qids]
    text_of = dict(zip(doc_ids, texts, strict=True))
    out: dict[str, Any] = {"set": args.set, "split": args.split, "docs": len(docs), "queries": len(qids), "runs": []}
    try:
        for device in [d.strip() for d in args.devices.split(",") if d.strip()]:
            run = embed(device, args, texts, qtexts)
            ranked = rankings(run["P"], run["Q"], doc_ids, max(K, args.rerank_depth))
            run[f"ndcg@{K}"] = round(mean_ndcg(ranked, qids, dataset.qrels), 4)
            run["rerank"] = rerank(device, args, qtexts, [r[: args.rerank_depth] for r in ranked], text_of, qids,
                                   dataset.qrels)  # fmt: skip
            out["runs"].append(run)
    except DeviceUnavailable as exc:
        sys.exit(f"gpu_bench: {exc}")
    if len(out["runs"]) > 1:
        out["parity"] = parity(out["runs"][0], out["runs"][-1])
    for run in out["runs"]:
        for key in ("P", "Q"):
            run.pop(key)
        run["rerank"].pop("scores", None)
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
