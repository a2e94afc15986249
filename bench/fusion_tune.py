"""Tune the dense/lexical fusion on train/dev splits (never test) of BEIR folders.

    python -m bench.fusion_tune collect ../shared/eval/scifact --split train --db /tmp/rsb/e5/scifact.db
    python -m bench.fusion_tune grid /tmp/rsb/tune/*.pkl

`collect` reads an eval store (built by `ragspine eval --db`, vectors by `ragspine eval --mode
hybrid` or `embed_chunks`), ranks every query of the split once per channel (BM25 top 200 with
the eval's analyzer, dense top 200 with the configured embedding backend; only queries are
embedded here), records each query's lexical `match`, and pickles the rankings beside
`--out`. `grid` fuses those rankings with `Fusion.weights` + `weighted_rrf` exactly as
`HybridRetriever` does, for a grid of settings, and prints nDCG@10 per set (and BM25 alone,
dense alone), best settings first: those keeping every set at least MIN_GAIN above BM25, by
mean gain.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import time
from pathlib import Path

import numpy as np

DEPTH = 200
MIN_GAIN = 0.001  # nDCG@10 over BM25 that every tuning set must keep


def collect(dataset_dir: Path, split: str, db: str, out: Path, embedding: str) -> None:
    from ragspine.eval.dataset import load_beir
    from ragspine.retrieval.store.sqlite import ChunkStore
    from ragspine.retrieval.lexical.analyzers import make_analyzer
    from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
    from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend

    dataset = load_beir(dataset_dir, split)
    store = ChunkStore(db)
    backend = make_embedding_backend(embedding)
    index = NarrativeIndex(store, embedding_backend=backend, analyzer=make_analyzer("auto"), embed_on_write=False)
    retriever = index.retriever()
    assert retriever.dense is not None
    coverage = index.dense.coverage() if index.dense else None
    print(f"{dataset.name}/{split}: {len(dataset.queries)} queries, dense coverage {coverage}", flush=True)
    qids = [q for q, text in dataset.queries.items() if text.strip()]
    started = time.perf_counter()
    vectors = np.asarray(backend.embed_queries([dataset.queries[q] for q in qids]), dtype=np.float32)  # type: ignore[union-attr]
    print(f"embedded {len(qids)} queries in {time.perf_counter() - started:.1f} s", flush=True)
    snap = retriever.index
    allowed = snap.active_positions()
    doc_of = dict(zip(allowed.tolist(), (c.doc_id for c in retriever._source.chunks_at(allowed.tolist())), strict=True))
    records = {}
    for qid, qv in zip(qids, vectors, strict=True):
        tokens = retriever.analyzer(dataset.queries[qid])
        lexical = snap.search(tokens, DEPTH, k1=retriever.k1, b=retriever.b)
        qv = retriever.dense.centre_query(qv / max(np.linalg.norm(qv), 1e-12), dataset.queries[qid])
        dense, scores = retriever.dense.rank(qv, allowed, DEPTH)
        match = retriever.lexical_match(tokens, lexical[0][1] if lexical else 0.0)
        records[qid] = {  # whole-document chunks: one chunk per document
            "lexical": [(doc_of[p], s) for p, s in lexical],
            "dense": [(doc_of[p], scores[p]) for p in dense],
            "match": match,
        }
    with open(out, "wb") as fh:
        pickle.dump({"dataset": dataset.name, "split": split, "qrels": dataset.qrels, "records": records}, fh)
    print(f"wrote {out}", flush=True)


def fuse(record: dict, fusion) -> list[str]:  # type: ignore[no-untyped-def]
    from ragspine.retrieval.fusion.rrf import weighted_rrf

    from ragspine.retrieval.fusion.signals import lexical_gap

    w_lex, w_dense = fusion.weights(record["match"], lexical_gap([s for _, s in record["lexical"][:2]]))
    runs = [([d for d, _ in record["lexical"][:100]], w_lex), ([d for d, _ in record["dense"][:100]], w_dense)]
    fused = weighted_rrf([(r, w) for r, w in runs if w > 0], k=fusion.k)
    return sorted(fused, key=lambda d: (-fused[d], d))[:100]


def ndcg(sets: list[dict], ranker) -> list[float]:  # type: ignore[no-untyped-def]
    from ragspine.eval.metrics import evaluate_run

    out = []
    for data in sets:
        run = {q: ranker(r) for q, r in data["records"].items()}
        out.append(evaluate_run(run, data["qrels"]).ndcg)
    return out


def grid(paths: list[Path]) -> None:
    from ragspine.retrieval.fusion.rrf import Fusion

    sets = [pickle.loads(p.read_bytes()) for p in paths]
    names = [f"{d['dataset']}/{d['split']}" for d in sets]
    bm25 = ndcg(sets, lambda r: [d for d, _ in r["lexical"]][:100])
    dense = ndcg(sets, lambda r: [d for d, _ in r["dense"]][:100])
    print("sets        " + "  ".join(f"{n:>22}" for n in names))
    print("bm25        " + "  ".join(f"{v:>22.4f}" for v in bm25))
    print("dense       " + "  ".join(f"{v:>22.4f}" for v in dense))
    for data, name in zip(sets, names, strict=True):
        describe_signals(data, name)
    fixed = [
        ("plain rrf", Fusion(method="rrf")),
        *((f"weighted dense={w}", Fusion(method="weighted", dense_weight=w)) for w in (0.1, 0.2, 0.5)),
        ("adaptive (the Fusion defaults)", Fusion()),
    ]
    for label, f in fixed:
        print(f"{label:<32}" + "  ".join(f"{v:>22.4f}" for v in ndcg(sets, lambda r, f=f: fuse(r, f))))
    rows = []
    names_ = ("dense_low", "dense_mid", "dense_high", "match_low", "match_high", "gap_high", "lexical_low")
    grid_values = itertools.product(
        (0.0, 0.05), (0.4, 0.5, 0.6, 0.8, 1.0), (2.0,), (0.15, 0.25), (0.35,), (0.1, 0.12, 0.15), (0.0, 0.2)
    )
    for values in grid_values:
        f = Fusion(method="adaptive", **dict(zip(names_, values, strict=True)))
        rows.append(("adaptive " + ",".join(f"{v:g}" for v in values), ndcg(sets, lambda r, f=f: fuse(r, f))))
    # The rule the defaults were chosen by: every set at least MIN_GAIN above BM25, then the
    # largest mean gain.
    rows.sort(
        key=lambda row: (
            min(v - b for v, b in zip(row[1], bm25)) >= MIN_GAIN,
            float(np.mean(row[1]) - np.mean(bm25)),
        ),
        reverse=True,
    )
    for label, values in rows[:25]:
        gains = [v - b for v, b in zip(values, bm25)]
        print(f"{label:<44}" + "  ".join(f"{v:.4f}({g:+.4f})" for v, g in zip(values, gains)))


def describe_signals(data: dict, name: str) -> None:  # type: ignore[type-arg]
    """Quantiles of `match` and `gap`, and how often each channel's first hit is relevant per
    quartile of `gap` (the evidence behind the adaptive fusion's shape)."""
    from ragspine.retrieval.fusion.signals import lexical_gap

    matches, gaps, lex1, dense1 = [], [], [], []
    for qid, r in data["records"].items():
        relevant = {d for d, g in data["qrels"].get(qid, {}).items() if g > 0}
        matches.append(r["match"])
        gaps.append(lexical_gap([s for _, s in r["lexical"][:2]]))
        lex1.append(bool(r["lexical"]) and r["lexical"][0][0] in relevant)
        dense1.append(bool(r["dense"]) and r["dense"][0][0] in relevant)
    quantiles = lambda x, q: " ".join(f"{v:.2f}" for v in np.quantile(x, q))  # noqa: E731
    print(f"{name}: match quantiles (10/25/50/75/90%) {quantiles(matches, [0.1, 0.25, 0.5, 0.75, 0.9])}")
    edges = np.quantile(gaps, [0.25, 0.5, 0.75])
    quartile = np.digitize(gaps, edges)
    shares = [
        f"Q{q + 1}: bm25 {np.mean(np.array(lex1)[quartile == q]):.2f} dense {np.mean(np.array(dense1)[quartile == q]):.2f}"
        for q in range(4)
        if np.any(quartile == q)
    ]
    print(f"{name}: gap quartile edges {quantiles(gaps, [0.25, 0.5, 0.75])}; first hit relevant: " + "; ".join(shares))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("dataset_dir", type=Path)
    c.add_argument("--split", required=True)
    c.add_argument("--db", required=True)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--embedding", default="e5")
    g = sub.add_parser("grid")
    g.add_argument("paths", type=Path, nargs="+")
    args = parser.parse_args()
    if args.command == "collect":
        if args.split == "test":
            parser.error("tune on train/dev splits only")
        collect(args.dataset_dir, args.split, args.db, args.out, args.embedding)
    else:
        grid(args.paths)


if __name__ == "__main__":
    main()
