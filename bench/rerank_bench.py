"""Reranker quality and cost on the product path: nDCG@10 / R@100 / MRR@10 of the product's
search without a reranker and with RERANKER over the first N fused results, and the time per
query (p50 / p95, ms) on this machine. Each row is `ragspine eval DATASET --split SPLIT
[--mode MODE] --reranker RERANKER --reranker-top-n N` (one cached ingest serves every row).

    PYTHONPATH=src:. .venv/bin/python -m bench.rerank_bench ../shared/eval/scifact --split test \
        --mode bm25 --reranker splade --top-n 20,50 --cache /tmp/rerank-cache [--sample 500]

`--sample N` keeps the N judged queries whose ids have the smallest SHA-256 (a fixed,
content-independent subsample; the corpus is whole). "wins / losses" count the queries whose
nDCG@10 went up / down against the row without a reranker.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from ragspine.eval.dataset import BeirDataset, load_beir
from ragspine.eval.product import ProductOptions, run_product_eval


def subsample(dataset: BeirDataset, n: int | None) -> BeirDataset:
    """The dataset with only the `n` judged queries of smallest SHA-256(id) (all when None)."""
    if n is None or n >= len(dataset.queries):
        return dataset
    keep = sorted(dataset.queries, key=lambda q: hashlib.sha256(q.encode()).hexdigest())[:n]
    return dataclasses.replace(
        dataset,
        queries={q: dataset.queries[q] for q in keep},
        qrels={q: dataset.qrels[q] for q in keep if q in dataset.qrels},
    )


def _ndcg(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    return {q: next(v for k, v in m.items() if k.startswith("ndcg")) for q, m in per_query.items()}


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    dataset = subsample(load_beir(args.dataset, args.split), args.sample)
    rows: list[dict[str, Any]] = []
    base: dict[str, float] = {}
    for top_n in [None, *args.top_n]:
        options = ProductOptions(
            mode=args.mode, cache=args.cache, progress=False,
            reranker="none" if top_n is None else args.reranker, reranker_top_n=top_n,
        )  # fmt: skip
        report = run_product_eval(dataset, options)
        per = _ndcg(report.per_query)
        if top_n is None:
            base = per
        p50, p95 = report.latency_ms or (0.0, 0.0)
        row = {
            "dataset": f"{dataset.name} ({args.split}, {report.queries} queries)",
            "mode": report.mode,
            "reranker": "none" if top_n is None else f"{args.reranker}, top {top_n}",
            "ndcg@10": round(report.ndcg, 4), "recall@100": round(report.recall, 4), "mrr@10": round(report.mrr, 4),
            "ms_p50": round(p50, 1), "ms_p95": round(p95, 1),
            "wins": sum(per[q] > base.get(q, 0) + 1e-12 for q in per) if top_n else 0,
            "losses": sum(per[q] < base.get(q, 0) - 1e-12 for q in per) if top_n else 0,
        }  # fmt: skip
        rows.append(row)
        print(" | ".join(str(v) for v in row.values()), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--split", required=True)
    parser.add_argument("--mode", default=None, help="retrieval mode (default: the product's)")
    parser.add_argument("--reranker", default="splade")
    parser.add_argument("--top-n", default="20,50", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--cache", default=None, help="keep the ingested workspace here (reused)")
    parser.add_argument("--json", default=None, help="append the rows to this JSON-lines file")
    args = parser.parse_args()
    rows = run(args)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
