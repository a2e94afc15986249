"""Learned fusion: record the product path once, then train, validate leave-one-dataset-out, table.

    python -m bench.fusion_learn record ../shared/eval/scifact --split train --out DIR [--limit N]
    python -m bench.fusion_learn lodo DIR [--write-model src/ragspine/data/fusion-model-v1.json]
    python -m bench.fusion_learn latency ../shared/eval/drcd_simplified --split dev --cache DIR/ws
    python -m bench.fusion_learn check DIR
    python -m bench.fusion_learn speed ../shared/eval/drcd_simplified --split dev --cache DIR/ws
    python -m bench.fusion_learn windows DIR
    python -m bench.fusion_learn variants DIR

`record` runs `ragspine eval`'s default path (files -> `ragspine ingest` -> `Workspace.search`,
`run_product_eval` with `--cache DIR/ws`; mode hybrid, embedding e5, RAGSPINE_E5_ENGINE as set in
the environment) and, for every query, keeps what `HybridRetriever.search` handed the fusion:
its `QuerySignals` and the chunk rankings of both channels (every query variant), plus the
product's own document ranking (to check the offline fusion reproduces it). `--limit N` keeps the
first N judged queries by id (deterministic); the corpus is always whole.

`lodo` reads those records (train/dev splits to fit, test splits to report; never the other way):
the offline fusion is the retriever's weighted RRF (k=60, ties by chunk id, a zero weight a
tie-breaking 1e-6, documents by their best chunk) for a dense share a (weights 2(1-a), 2a). It
prints, per set, test nDCG@10 of BM25 alone, dense alone, plain RRF, static weights (the best
single share on the other sets' train/dev), the adaptive rule, the learned model fitted on the
other sets (LODO), and, for records that keep the channels' scores, score fusion (`zscore`) at the
dense share `zscore_share` picks on the other sets' train/dev and at the shipped share; it then
prints the share picked on every set's train/dev beside the shipped DEFAULT_DENSE_SHARE.
`--write-model` fits the shipped learned model on every set's train/dev. `speed` times
`ragspine search`'s call under several fusion methods, interleaved.
`latency` times `Fusion.weights_for` + the signals against the channels on the product path;
`check` replays each recorded query's fusion offline with the weights the product used and
counts how often its top 10 equals the product's. `variants` reads the train/dev records only
and prints, per set, BM25 / dense / RRF / adaptive under other rank fusions (RRF k, a dense depth
cut, documents fused instead of chunks) and the headroom of a per-query share.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pickle
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

RRF_K = 60
TIE = 1e-6
GRID = np.linspace(0.0, 1.0, 21)  # dense shares the training objective is read at
TRAIN_SPLITS = ("train", "dev")
L2 = 0.01  # ridge on the standardised coefficients
STEPS = 4000
BM25_MARGIN = 0.001  # every tuning set's decided queries must stay this far above BM25's order
FLOOR_PULL = 1.0
LEARNING_RATE = 0.05


# -- record -------------------------------------------------------------------------------------
def _best(score_maps: list[dict[str, float]]) -> dict[str, float]:
    """Each id's best score over the maps."""
    best: dict[str, float] = {}
    for scores in score_maps:
        for key, value in scores.items():
            best[key] = max(value, best.get(key, value))
    return best


def record(dataset_dir: Path, split: str, out: Path, limit: int | None) -> Path:
    """Run the product path over one split, keeping each query's fusion inputs."""
    from ragspine.eval.dataset import load_beir
    from ragspine.eval.product import ProductOptions, doc_id_of, run_product_eval
    from ragspine.retrieval.model import doc_id_of_chunk
    from ragspine.retrieval.pipeline.trace import Trace

    dataset = load_beir(dataset_dir, split)
    if limit is not None:
        keep = sorted(dataset.queries)[:limit]
        dataset = dataclasses.replace(
            dataset,
            queries={q: dataset.queries[q] for q in keep},
            qrels={q: dataset.qrels[q] for q in keep if q in dataset.qrels},
        )
    calls: dict[str, dict[str, Any]] = {}
    doc_of_chunk: dict[str, str] = {}

    def on_trace(text: str, trace: Trace) -> None:
        # the fusion stage's inputs, read off the search's detailed trace (its last search wins)
        fusion = trace.of("fusion")
        data = fusion[0].data if fusion else None
        if data is None or data["signals"] is None:  # one ranking alone, or fixed weights
            return
        lexical, dense = data["lexical"], data["dense"]
        for ranking in lexical["rankings"] + dense["rankings"]:
            doc_of_chunk.update({c: doc_id_of(doc_id_of_chunk(c)) for c in ranking})
        zscore = fusion[0].decisions["method"] == "zscore"
        calls[text] = {
            "signals": data["signals"],
            "weights": tuple(data["weights"]),
            "lexical": lexical["rankings"],
            "dense": dense["rankings"],
            # per ranking, chunk id -> score: every variant's under zscore; under RRF the first
            # variant's BM25 scores and the best cosine over the variants
            "lexical_scores": lexical["scores"] if zscore else lexical["scores"][:1],
            "dense_scores": dense["scores"] if zscore else [_best(dense["scores"])],
            "k": fusion[0].decisions["top_k"],
        }

    # Query vectors: one batched pass first (the numpy engine costs ~1 CPU-second per single
    # query and ~0.05 per query in batches of 64 on the shared machine); the retriever's own
    # calls then read them (same model and engine; batching changes a cosine by < 1e-5).
    from ragspine.retrieval.vector.embeddings.e5 import (
        MultilingualE5EmbeddingBackend as E5,
    )

    original_embed = E5.embed_queries
    texts = sorted({t for t in dataset.queries.values() if t.strip()}, key=lambda t: (len(t), t))
    vectors: dict[str, list[float]] = {}

    def embed_queries(self: Any, batch: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(batch) if t not in vectors]
        if missing and not vectors:
            missing = list(dict.fromkeys([*missing, *texts]))  # the whole split, once
        for start in range(0, len(missing), 64):
            part = missing[start : start + 64]
            vectors.update(zip(part, original_embed(self, part), strict=True))
        return [vectors[t] for t in batch]

    E5.embed_queries = embed_queries  # type: ignore[method-assign]
    try:
        report = run_product_eval(
            dataset,
            ProductOptions(mode="hybrid", embedding="e5", cache=str(out / "ws"), progress=False, on_trace=on_trace),
        )
    finally:
        E5.embed_queries = original_embed  # type: ignore[method-assign]
    queries = {}
    for qid, text in dataset.queries.items():
        if qid not in dataset.qrels or text not in calls:
            continue
        queries[qid] = {**calls[text], "product": [d for d, _ in report.run.get(qid, [])][:10]}
    data = {
        "name": dataset.name, "split": split, "limit": limit, "doc_of_chunk": doc_of_chunk,
        "qrels": {q: dataset.qrels[q] for q in queries}, "queries": queries,
        "embedding": report.embedding, "fusion": report.fusion, "settings": report.settings,
        "product_ndcg": report.ndcg, "judged_queries": len(dataset.qrels), "query_ms": report.query_ms,
    }  # fmt: skip
    path = out / "records" / f"{dataset.name}-{split}.pkl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
    print(
        f"{dataset.name}/{split}: {len(queries)} queries recorded, product nDCG@10 {report.ndcg:.4f} "
        f"({report.fusion}; {report.embedding}) -> {path}",
        flush=True,
    )
    return path


# -- offline fusion -----------------------------------------------------------------------------
@dataclasses.dataclass
class Query:
    """One recorded query, as arrays: every chunk either channel ranked, its ranks, its document."""

    features: np.ndarray
    crosses: bool  # the learned model's cross-language rule settles this query
    signals: dict[str, Any]
    lexical: np.ndarray  # (variants, chunks): 1 / (k + rank), 0 where unranked
    dense: np.ndarray
    order_key: np.ndarray  # chunk-id order, the tie break
    doc: np.ndarray  # document index per chunk
    gains: np.ndarray  # gain per document index
    ideal: float
    k: int
    product: list[str]
    docs: list[str]
    chunk_ids: list[str] = dataclasses.field(default_factory=list)  # the chunks `doc` is indexed by
    # per ranking, chunk id -> score (see `record`); empty in records made before they were kept
    lexical_scores: list[dict[str, float]] = dataclasses.field(default_factory=list)
    dense_scores: list[dict[str, float]] = dataclasses.field(default_factory=list)


def chunk_languages(folder: Path, name: str) -> dict[str, str]:
    """chunk_id -> the language stored with its vector (`text_language`), from the set's workspace."""
    import sqlite3

    out: dict[str, str] = {}
    for path in sorted((folder / "ws").glob(f"{name}-*/chunks.db*.vectors.sqlite")):
        with sqlite3.connect(path) as db:
            for chunk_id, meta in db.execute("SELECT chunk_id, meta FROM chunk_vector"):
                out.setdefault(chunk_id, json.loads(meta).get("text_language", ""))
    return out


def add_cross_share(record: dict[str, Any], languages: dict[str, str]) -> None:
    """Records made before `QuerySignals.cross_share` existed: compute it as `HybridRetriever`
    does (`languages_crossed` over the dense top CROSS_DEPTH, from the languages stored with the
    vectors) and check the recomputed top-1 flag equals the recorded `crosses` on every query."""
    from ragspine.retrieval.fusion.signals import CROSS_DEPTH
    from ragspine.retrieval.language import detect_language

    mismatched = 0
    for q in record["queries"].values():
        signals = q["signals"]
        if "cross_share" in signals:
            continue
        query_language = detect_language(signals["query"])
        head = q["dense"][0][:CROSS_DEPTH] if q["dense"] else []
        crossing = [bool(query_language and languages.get(c) and languages[c] != query_language) for c in head]
        signals["cross_share"] = sum(crossing) / len(crossing) if crossing else 0.0
        mismatched += bool(crossing) and crossing[0] != signals["crosses"]
    if mismatched:
        raise SystemExit(f"{record['name']}/{record['split']}: recomputed crossing differs on {mismatched} queries")


def load_queries(record: dict[str, Any]) -> list[Query]:
    from ragspine.retrieval.fusion.signals import QuerySignals, query_features

    doc_of_chunk = record["doc_of_chunk"]
    out = []
    for qid, q in record["queries"].items():
        chunks = sorted({c for r in q["lexical"] + q["dense"] for c in r})
        index = {c: i for i, c in enumerate(chunks)}
        docs = sorted({doc_of_chunk[c] for c in chunks})
        doc_index = {d: i for i, d in enumerate(docs)}

        def matrix(runs: list[list[str]], chunks: list[str] = chunks, index: dict[str, int] = index) -> np.ndarray:
            m = np.zeros((max(1, len(runs)), len(chunks)))
            for v, run in enumerate(runs):
                for rank, c in enumerate(run, start=1):
                    m[v, index[c]] = 1.0 / (RRF_K + rank)
            return m

        rel = record["qrels"][qid]
        gains = np.array([float(max(0, rel.get(d, 0))) for d in docs])
        ideal_gains = sorted((g for g in rel.values() if g > 0), reverse=True)[:10]
        signals = QuerySignals(**{**q["signals"], "lexical_top": tuple(q["signals"]["lexical_top"]),
                                  "dense_top": tuple(q["signals"]["dense_top"])})
        out.append(
            Query(
                features=np.array(query_features(signals)), crosses=signals.crossing,
                signals=q["signals"], lexical=matrix(q["lexical"]), dense=matrix(q["dense"]),
                order_key=np.arange(len(chunks)), doc=np.array([doc_index[doc_of_chunk[c]] for c in chunks]),
                gains=gains, ideal=sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains)),
                k=int(q["k"] or 100), product=q["product"], docs=docs, chunk_ids=chunks,
                lexical_scores=q.get("lexical_scores", []), dense_scores=q.get("dense_scores", []),
            )
        )
    return out


def fused_docs(q: Query, w_lexical: float, w_dense: float, top: int = 10) -> np.ndarray:
    """Document indexes of the top documents (best chunk first), as the retriever would rank them."""
    score = w_lexical * q.lexical.sum(axis=0) + w_dense * q.dense.sum(axis=0)
    ranked = score > 0
    idx = np.nonzero(ranked)[0]
    order = idx[np.lexsort((q.order_key[idx], -score[idx]))][: q.k]
    docs = q.doc[order]
    _, first = np.unique(docs, return_index=True)
    return docs[np.sort(first)][:top]


def ndcg(q: Query, w_lexical: float, w_dense: float) -> float:
    if q.ideal == 0:
        return 0.0
    docs = fused_docs(q, w_lexical, w_dense)
    return float(np.sum(q.gains[docs] / np.log2(np.arange(len(docs)) + 2)) / q.ideal)


def zscore_docs(
    q: Query, w_lexical: float, w_dense: float, top: int = 10, windows: tuple[int, int] | None = None
) -> list[int]:
    """Document indexes of the top documents under the product's score fusion (`zscore_fuse` over
    the recorded scores, chunks by (-fused, chunk id), documents by their best chunk); `windows`:
    (BM25's, the cosines') instead of the shipped WINDOW for both."""
    from ragspine.retrieval.fusion.zscore import WINDOW, zscore_fuse

    lexical_window, dense_window = windows or (WINDOW, WINDOW)
    runs = [(scores, w_lexical, lexical_window) for scores in q.lexical_scores]
    fused = zscore_fuse(runs + [(scores, w_dense, dense_window) for scores in q.dense_scores])
    position = {c: i for i, c in enumerate(q.chunk_ids)}
    docs: list[int] = []
    for chunk in sorted(fused, key=lambda c: (-fused[c], c))[: q.k]:
        doc = int(q.doc[position[chunk]])
        if doc not in docs:
            docs.append(doc)
            if len(docs) == top:
                break
    return docs


def zscore_ndcg(q: Query, share: float, windows: tuple[int, int] | None = None) -> float:
    """nDCG@10 of one query under zscore fusion at dense share `share` (the product's weights,
    the cross-language rule included)."""
    from ragspine.retrieval.fusion.rrf import Fusion

    if q.ideal == 0:
        return 0.0
    weights = _tie(Fusion(method="zscore", dense_share=share).weights_for(signals_of(q)))
    docs = zscore_docs(q, *weights, windows=windows)
    return float(np.sum(q.gains[docs] / np.log2(np.arange(len(docs)) + 2)) / q.ideal)


def grid_index(share: float) -> int:
    """The GRID column of a dense share."""
    return int(round(share * (len(GRID) - 1)))


def zscore_margins(sets: Sequence[SetData], curves: Sequence[np.ndarray] | None = None) -> tuple[int, np.ndarray, np.ndarray]:
    """(the GRID column picked, the worst set's slack per share, the mean nDCG@10 per share) over
    the sets with train/dev records: slack = min(nDCG@10 − BM25's order, and where dense alone
    beats BM25, nDCG@10 − (plain RRF − 0.003)); the share with the largest smallest slack (ties:
    the larger mean). `curves`: each such set's mean zscore nDCG@10 per share (default: the
    shipped window's, `SetData.zscore_train`)."""
    tuned = [s for s in sets if s.train and s.zscore_train is not None]
    if curves is None:
        curves = [s.zscore_train.mean(axis=0) for s in tuned if s.zscore_train is not None]
    slacks = []
    for s, curve in zip(tuned, curves, strict=True):
        bm25, rrf, dense = (s.train_grid[:, grid_index(a)].mean() for a in (0.0, 0.5, 1.0))  # 0.5: weights 1, 1
        slack = curve - bm25
        if dense > bm25:
            slack = np.minimum(slack, curve - (rrf - 0.003))
        slacks.append(slack)
    worst, mean = np.min(slacks, axis=0), np.mean(curves, axis=0)
    return max(range(len(GRID)), key=lambda i: (round(float(worst[i]), 9), float(mean[i]))), worst, mean


def zscore_share(sets: Sequence[SetData]) -> float:
    """The zscore dense share `zscore_margins` picks."""
    return float(GRID[zscore_margins(sets)[0]])


WINDOWS = ((100, 100), (300, 100), (100, 300), (300, 300))  # (BM25's, the cosines') compared


def windows(folder: Path) -> None:
    """For the train/dev records only: per (BM25, cosine) z-score window, the share
    `zscore_margins` picks, the worst set's margin there and the mean over sets. The records
    must rank at least as deep as the largest window (record with this code)."""
    from ragspine.retrieval.fusion.zscore import WINDOW

    sets = [s for s in load_sets(folder) if s.train and s.zscore_train is not None]
    for pair in WINDOWS:
        curves = [
            s.zscore_train.mean(axis=0) if pair == (WINDOW, WINDOW) and s.zscore_train is not None
            else np.array([[zscore_ndcg(q, a, pair) for a in GRID] for q in s.train]).mean(axis=0)
            for s in sets
        ]  # fmt: skip
        best, worst, mean = zscore_margins(sets, curves)
        around = ", ".join(f"{GRID[i]:.2f}: {worst[i]:+.4f}" for i in range(max(0, best - 2), min(len(GRID), best + 3)))
        print(f"windows BM25 {pair[0]} / cosines {pair[1]}: best share {GRID[best]:.2f}, worst set {worst[best]:+.4f}, "
              f"mean nDCG@10 over sets {mean[best]:.4f}; worst set around it: {around}", flush=True)  # fmt: skip


def share_weights(share: float) -> tuple[float, float]:
    """The retriever's weights for a dense share (a zero weight is a tie-breaking one)."""
    return max(2.0 * (1.0 - share), TIE), max(2.0 * share, TIE)


def at_share(q: Query, share: float) -> float:
    return ndcg(q, *share_weights(share))


@dataclasses.dataclass
class SetData:
    name: str
    train: list[Query]
    test: list[Query]
    train_grid: np.ndarray  # (queries, GRID): nDCG@10 at each dense share
    meta: dict[str, Any]
    zscore_train: np.ndarray | None = None  # (queries, GRID): zscore fusion at each dense share
    zscore_test: np.ndarray | None = None


def load_sets(folder: Path) -> list[SetData]:
    records: dict[str, dict[str, dict[str, Any]]] = {}
    for path in sorted((folder / "records").glob("*.pkl")):
        data = pickle.loads(path.read_bytes())
        if any("cross_share" not in q["signals"] for q in data["queries"].values()):
            add_cross_share(data, chunk_languages(folder, data["name"]))
        records.setdefault(data["name"], {})[data["split"]] = data
    sets = []
    for name, splits in sorted(records.items()):
        train_split = next((s for s in TRAIN_SPLITS if s in splits), None)
        if "test" not in splits:
            print(f"{name}: skipped (no test split recorded)")
            continue
        train = load_queries(splits[train_split]) if train_split else []  # test-only: never trained on
        test = load_queries(splits["test"])
        grid = np.array([[at_share(q, a) for a in GRID] for q in train]).reshape(len(train), len(GRID))
        used = [s for s in (train_split, "test") if s]
        meta = {"train_split": train_split or "none (test only)", "embedding": splits["test"]["embedding"],
                "limits": {s: splits[s]["limit"] for s in used},
                "judged": {s: splits[s]["judged_queries"] for s in used},
                "product_test": splits["test"]["product_ndcg"], "product_fusion": splits["test"]["fusion"]}  # fmt: skip
        # zscore replays need records the score fusion made (every variant's scores, 300 deep)
        scored = all(str(splits[x]["fusion"]).startswith("zscore") for x in used)
        z_train = np.array([[zscore_ndcg(q, a) for a in GRID] for q in train]).reshape(len(train), len(GRID)) if scored else None
        z_test = np.array([[zscore_ndcg(q, a) for a in GRID] for q in test]).reshape(len(test), len(GRID)) if scored else None
        sets.append(SetData(name, train, test, grid, meta, z_train, z_test))
        print(f"{name}: {len(train)} {train_split or 'train/dev'} / {len(test)} test queries", flush=True)
    return sets


# -- the model ------------------------------------------------------------------------------------
def fit(sets: Sequence[SetData]) -> Any:
    """A logistic dense share, fitted by gradient ascent on the mean over sets of the mean nDCG@10
    (read off each query's grid, linear between points) minus a small ridge, plus a pull on any
    set whose mean falls below its BM25 order + BM25_MARGIN (the issue's "never below BM25"); the queries the
    cross-language rule settles keep their place in their set's mean but do not move the model.
    Deterministic: zero start, full batch, fixed steps."""
    from ragspine.retrieval.fusion.learned import LearnedFusion

    sets = [s for s in sets if s.train]
    xs, grids, weights, members = [], [], [], []
    for s in sets:
        keep = [i for i, q in enumerate(s.train) if not q.crosses]
        if not keep:
            continue
        xs.append(np.array([s.train[i].features for i in keep]))
        grids.append(s.train_grid[keep])
        weights.append(np.full(len(keep), 1.0 / (len(s.train) * len(sets))))  # each set's mean over all its queries
        members.append(np.full(len(keep), len(members)))
    x, grid, w = np.vstack(xs), np.vstack(grids), np.concatenate(weights)
    member = np.concatenate(members)
    # the floor: each set's mean over the queries the model decides must stay BM25_MARGIN above
    # that set's BM25 order (share 0); a set below it pulls with weight FLOOR_PULL
    counts = np.bincount(member).astype(float)
    floor = np.bincount(member, weights=grid[:, 0]) / counts + BM25_MARGIN
    mean = np.average(x, axis=0, weights=w)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
    scale = np.where(scale > 1e-9, scale, 1.0)
    z = (x - mean) / scale
    coef, bias = np.zeros(x.shape[1]), 0.0
    m_c, v_c, m_b, v_b = np.zeros_like(coef), np.zeros_like(coef), 0.0, 0.0
    steps = len(GRID) - 1
    for t in range(1, STEPS + 1):
        share = 1.0 / (1.0 + np.exp(-(z @ coef + bias)))
        pos = np.minimum(share * steps, steps - 1e-9)
        lo = np.floor(pos).astype(int)
        rows = np.arange(len(lo))
        slope = (grid[rows, lo + 1] - grid[rows, lo]) * steps
        value = grid[rows, lo] + (pos - lo) * (grid[rows, lo + 1] - grid[rows, lo])
        below = np.bincount(member, weights=value) / counts < floor
        pull = np.where(below[member], FLOOR_PULL / counts[member], 0.0)
        d_logit = (w + pull) * slope * share * (1.0 - share)
        g_c = z.T @ d_logit - 2 * L2 * coef
        g_b = float(d_logit.sum())
        m_c, v_c = 0.9 * m_c + 0.1 * g_c, 0.999 * v_c + 0.001 * g_c**2
        m_b, v_b = 0.9 * m_b + 0.1 * g_b, 0.999 * v_b + 0.001 * g_b**2
        correction = math.sqrt(1 - 0.999**t) / (1 - 0.9**t)
        coef = coef + LEARNING_RATE * correction * m_c / (np.sqrt(v_c) + 1e-8)
        bias = bias + LEARNING_RATE * correction * m_b / (math.sqrt(v_b) + 1e-8)
    return LearnedFusion(
        coef=tuple(round(float(c), 6) for c in coef), intercept=round(bias, 6),
        mean=tuple(round(float(m), 6) for m in mean), scale=tuple(round(float(s), 6) for s in scale),
    )  # fmt: skip


def best_static(sets: Sequence[SetData]) -> float:
    """The single dense share with the best mean over sets of train/dev nDCG@10."""
    means = np.mean([s.train_grid.mean(axis=0) for s in sets if s.train], axis=0)
    return float(GRID[int(np.argmax(means))])


def policy_scores(queries: Sequence[Query], policy: Callable[[Query], tuple[float, float]]) -> float:
    return float(np.mean([ndcg(q, *policy(q)) for q in queries]))


def signals_of(q: Query) -> Any:
    from ragspine.retrieval.fusion.signals import QuerySignals

    s = q.signals
    return QuerySignals(**{**s, "lexical_top": tuple(s["lexical_top"]), "dense_top": tuple(s["dense_top"])})


def lodo(folder: Path, write_model: Path | None) -> None:
    from ragspine.retrieval.fusion.rrf import Fusion

    from ragspine.retrieval.fusion.rrf import DEFAULT_DENSE_SHARE

    sets = load_sets(folder)
    adaptive = Fusion(method="adaptive")
    scored = all(s.zscore_test is not None for s in sets)
    rows = []
    for held in sets:
        others = [s for s in sets if s is not held and s.train]
        model = fit(others)
        static = best_static(others)
        test = held.test
        z_share = zscore_share(others) if scored else None
        row = {
            "set": held.name,
            "fitted_on": ", ".join(f"{s.name} {s.meta['train_split']}" for s in others),
            "queries": len(test),
            "bm25": policy_scores(test, lambda q: (1.0, 0.0)),
            "dense": policy_scores(test, lambda q: (0.0, 1.0)),
            "rrf": policy_scores(test, lambda q: (1.0, 1.0)),
            "static": policy_scores(test, lambda q, static=static: share_weights(static)),
            "static_share": static,
            "adaptive_top1": policy_scores(test, lambda q: _tie(adaptive_top1(adaptive, signals_of(q)))),
            "adaptive": policy_scores(test, lambda q: _tie(adaptive.weights_for(signals_of(q)))),
            "learned": policy_scores(test, lambda q, model=model: _tie(model.weights(signals_of(q)))),
            "meta": held.meta,
        }
        if held.zscore_test is not None and z_share is not None:
            row["zscore"] = float(held.zscore_test[:, grid_index(z_share)].mean())
            row["zscore_share"] = z_share
            row["zscore_shipped"] = float(np.mean([zscore_ndcg(q, DEFAULT_DENSE_SHARE) for q in test]))
        rows.append(row)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "meta"}), flush=True)
    print_table(rows)
    if scored:
        for s in sets:
            if s.train and s.zscore_train is not None:
                curve = s.zscore_train.mean(axis=0)
                print(f"zscore on {s.name} {s.meta['train_split']}: best share {GRID[int(np.argmax(curve))]:.2f} "
                      f"({curve.max():.4f}); at {DEFAULT_DENSE_SHARE:g} {curve[grid_index(DEFAULT_DENSE_SHARE)]:.4f}; "
                      f"BM25 order {s.train_grid[:, 0].mean():.4f}")  # fmt: skip
        share = zscore_share(sets)
        print(f"zscore: the share chosen on every set's train/dev is {share:.2f}; the package ships "
              f"DEFAULT_DENSE_SHARE = {DEFAULT_DENSE_SHARE:g}{'' if abs(share - DEFAULT_DENSE_SHARE) < 1e-9 else ' (differs!)'}")  # fmt: skip
    if write_model is not None:
        model = fit(sets)
        provenance = {
            "trained_on": {s.name: {"split": s.meta["train_split"], "queries": len(s.train),
                                    "embedding": s.meta["embedding"]} for s in sets if s.train},
            "command": f"python -m bench.fusion_learn lodo {folder} --write-model {write_model}",
        }
        model = dataclasses.replace(
            model, description="dense share = sigmoid(intercept + coef . standardised features); "
            "fitted on train/dev splits only (bench/fusion_learn.py)")  # fmt: skip
        write_model.write_text(json.dumps(model.to_json(**provenance), indent=1, ensure_ascii=False) + "\n", "utf-8")
        print(f"wrote {write_model}")
        for s in sets:
            print(f"{s.name}: shipped model on test {policy_scores(s.test, lambda q: _tie(model.weights(signals_of(q)))):.4f}")


def adaptive_top1(fusion: Any, signals: Any) -> tuple[float, float]:
    """The adaptive rule before `cross_share`: only the best dense hit's language counted."""
    return fusion.weights(0.0 if signals.crosses else signals.match, signals.gap)


def _tie(weights: tuple[float, float]) -> tuple[float, float]:
    return max(weights[0], TIE), max(weights[1], TIE)


def print_table(rows: list[dict[str, Any]]) -> None:
    cols = ["bm25", "dense", "rrf", "static", "adaptive_top1", "adaptive", "learned"]
    cols += [c for c in ("zscore", "zscore_shipped") if all(c in r for r in rows)]
    print("| set (test) | queries | " + " | ".join(cols) + " |")
    print("|---|---:|" + "---:|" * len(cols))
    for r in rows:
        print(f"| {r['set']} | {r['queries']} | " + " | ".join(f"{r[c]:.4f}" for c in cols) + " |")
    print("| mean | | " + " | ".join(f"{statistics.mean(r[c] for r in rows):.4f}" for c in cols) + " |")
    for c in ("rrf", "static", "adaptive_top1", "adaptive", "learned", "zscore", "zscore_shipped"):
        if c in cols:
            print(f"{c}: " + "; ".join(issue_conditions(rows, c)))
    for r in rows:
        m = r["meta"]
        z = f"zscore share {r['zscore_share']:.2f}; " if "zscore_share" in r else ""
        print(f"{r['set']}: fitted on {r['fitted_on']}; static share {r['static_share']:.2f}; {z}"
              f"train split {m['train_split']}; limits {m['limits']} (judged {m['judged']}); vectors {m['embedding']}; "
              f"product test run with {m['product_fusion']}: {m['product_test']:.4f}")  # fmt: skip


def issue_conditions(rows: list[dict[str, Any]], c: str) -> list[str]:
    """Issue 16's bars for a fusion column: >= BM25 on every set; >= plain RRF - 0.003 where
    dense alone beats BM25; the mean above both; >= 90% of dense alone on xling_ntrex_zh_en."""
    out = []
    below = [r["set"] for r in rows if r[c] < r["bm25"]]
    out.append("≥ BM25 everywhere ✓" if not below else f"below BM25 on {', '.join(below)} ✗")
    behind = [r["set"] for r in rows if r["dense"] > r["bm25"] and r[c] < r["rrf"] - 0.003]
    out.append("≥ RRF − 0.003 where dense > BM25 ✓" if not behind else f"behind RRF on {', '.join(behind)} ✗")
    mean = statistics.mean(r[c] for r in rows)
    beats = mean > statistics.mean(r["bm25"] for r in rows) and mean > statistics.mean(r["rrf"] for r in rows)
    out.append(f"mean {mean:.4f} {'beats' if beats else 'does not beat'} BM25 and RRF {'✓' if beats else '✗'}")
    for r in rows:
        if r["set"] == "xling_ntrex_zh_en":
            kept = r[c] / r["dense"] if r["dense"] else 0.0
            out.append(f"xling keeps {kept:.1%} of dense {'✓' if kept >= 0.9 else '✗'}")
    return out


# -- rank-fusion variants (train/dev only) -------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Variant:
    """An offline change to how the two channels' rankings are fused: the RRF constant `k`, a cut
    of the dense rankings at `dense_depth`, and `level` chunk (the product: chunks fused, then
    documents by their best chunk) or doc (each channel's chunk ranking first turned into a
    document ranking by best chunk, then the documents fused)."""

    label: str
    k: int = RRF_K
    dense_depth: int | None = None
    level: str = "chunk"


VARIANTS = (
    Variant("product: chunks, k 60"),
    *(Variant(f"k {k}", k=k) for k in (10, 20, 30, 100)),
    *(Variant(f"dense top {d} only", dense_depth=d) for d in (10, 20, 50)),
    Variant("documents fused, k 60", level="doc"),
    Variant("documents fused, k 20", k=20, level="doc"),
)


def ranks_of(contributions: np.ndarray) -> np.ndarray:
    """The ranks (from 1; 0 where unranked) behind a `Query`'s 1 / (RRF_K + rank) matrix."""
    ranks = np.zeros(contributions.shape, dtype=np.int64)
    ranked = contributions > 0
    ranks[ranked] = np.rint(1.0 / contributions[ranked] - RRF_K).astype(np.int64)
    return ranks


def document_ranks(ranks: np.ndarray, doc: np.ndarray, n_docs: int) -> np.ndarray:
    """Per variant row, each document's rank by its best chunk (from 1; 0 where unranked)."""
    out = np.zeros((ranks.shape[0], n_docs), dtype=np.int64)
    for v, row in enumerate(ranks):
        ranked = np.nonzero(row)[0]
        docs = doc[ranked[np.argsort(row[ranked], kind="stable")]]
        _, first = np.unique(docs, return_index=True)
        out[v, docs[np.sort(first)]] = np.arange(1, len(first) + 1)
    return out


def variant_ndcg(q: Query, w_lexical: float, w_dense: float, variant: Variant) -> float:
    """nDCG@10 of one query fused as `variant` says (ties by chunk id, or by document id)."""
    if q.ideal == 0:
        return 0.0
    lexical, dense = ranks_of(q.lexical), ranks_of(q.dense)
    if variant.level == "doc":
        lexical, dense = document_ranks(lexical, q.doc, len(q.docs)), document_ranks(dense, q.doc, len(q.docs))
    if variant.dense_depth is not None:
        dense = np.where(dense <= variant.dense_depth, dense, 0)

    def part(ranks: np.ndarray) -> np.ndarray:
        return np.where(ranks > 0, 1.0 / (variant.k + np.maximum(ranks, 1)), 0.0).sum(axis=0)

    w_lexical, w_dense = _tie((w_lexical, w_dense))
    score = w_lexical * part(lexical) + w_dense * part(dense)
    idx = np.nonzero(score > 0)[0]
    order = idx[np.lexsort((idx, -score[idx]))]
    if variant.level == "doc":
        docs = order[:10]
    else:
        docs = q.doc[order[: q.k]]
        _, first = np.unique(docs, return_index=True)
        docs = docs[np.sort(first)][:10]
    return float(np.sum(q.gains[docs] / np.log2(np.arange(len(docs)) + 2)) / q.ideal)


def variants(folder: Path) -> None:
    """For every set's train/dev records (never test): nDCG@10 of BM25, dense, plain RRF and the
    adaptive rule under each `VARIANTS` entry, and (product fusion) the best single dense share
    and the per-query best share (the headroom any per-query policy has)."""
    from ragspine.retrieval.fusion.rrf import Fusion

    adaptive = Fusion(method="adaptive")
    for path in sorted((folder / "records").glob("*.pkl")):
        data = pickle.loads(path.read_bytes())
        if data["split"] not in TRAIN_SPLITS:
            continue
        if any("cross_share" not in q["signals"] for q in data["queries"].values()):
            add_cross_share(data, chunk_languages(folder, data["name"]))
        queries = load_queries(data)
        grid = np.array([[at_share(q, a) for a in GRID] for q in queries])
        print(f"{data['name']}/{data['split']}, {len(queries)} queries: best single share "
              f"{GRID[int(np.argmax(grid.mean(axis=0)))]:.2f} ({grid.mean(axis=0).max():.4f}); "
              f"per-query best share {grid.max(axis=1).mean():.4f}")  # fmt: skip
        policies: dict[str, Callable[[Query], tuple[float, float]]] = {
            "bm25": lambda q: (1.0, 0.0), "dense": lambda q: (0.0, 1.0), "rrf": lambda q: (1.0, 1.0),
            "adaptive": lambda q: adaptive.weights_for(signals_of(q)),
        }  # fmt: skip
        for variant in VARIANTS:
            scores = {name: np.mean([variant_ndcg(q, *policy(q), variant) for q in queries]) for name, policy in policies.items()}
            print(f"  {variant.label:<24} " + "  ".join(f"{n} {v:.4f}" for n, v in scores.items()), flush=True)


def check_replay(folder: Path) -> None:
    """Offline fusion with each query's recorded weights against the product's document ranking."""
    for path in sorted((folder / "records").glob("*.pkl")):
        data = pickle.loads(path.read_bytes())
        queries = load_queries(data)
        fuse = zscore_docs if str(data["fusion"]).startswith("zscore") else fused_docs
        same = sum(
            [q.docs[i] for i in fuse(q, *_tie(tuple(data["queries"][qid]["weights"])))] == q.product
            for q, qid in zip(queries, data["queries"], strict=True)
        )
        print(f"{path.name}: offline == product top 10 on {same}/{len(queries)} queries")


def cached_workspace(dataset_dir: Path, split: str, cache: Path) -> tuple[Any, Any]:
    """(the split, the default settings pointed at its workspace under `cache`) as `record` left it."""
    from ragspine.assembly import load_settings
    from ragspine.eval.dataset import load_beir
    from ragspine.eval.product import ProductOptions, workspace_key

    dataset = load_beir(dataset_dir, split)
    settings = load_settings(flags=ProductOptions(mode="hybrid", embedding="e5").flags())
    root = cache / f"{dataset.name}-{workspace_key(dataset, settings)}"
    if not (root / "chunks.db").is_file():
        raise SystemExit(f"no ingested workspace at {root}: run `record` (or ragspine eval --cache) first")
    return dataset, dataclasses.replace(settings, db=str(root / "chunks.db"))


def latency(dataset_dir: Path, split: str, cache: Path, queries: int, method: str) -> None:
    """Per query on the product path: what the fusion policy adds (building `QuerySignals` and
    `Fusion.weights_for`, timed alone on the inputs the search handed it) against the whole
    `HybridRetriever.search` (both channels, query embedding included)."""
    from ragspine.retrieval.fusion.rrf import Fusion
    from ragspine.retrieval.pipeline import hybrid as hybrid_module
    from ragspine.workspace import Workspace

    dataset, settings = cached_workspace(dataset_dir, split, cache)
    fusion = Fusion(method=method)
    captured: list[tuple[Any, tuple[Any, ...]]] = []
    original = hybrid_module.HybridRetriever._signals

    def spy(self: Any, *args: Any) -> Any:
        captured.append((self, args))
        return original(self, *args)

    texts = [t for _, t in sorted(dataset.queries.items()) if t.strip()][:queries]
    with Workspace.from_settings(settings) as workspace:
        retriever = workspace.retriever.index.retriever()
        retriever.fusion = fusion
        retriever.search(texts[0], top_k=10)  # warm: model file, caches
        search_ms = []
        hybrid_module.HybridRetriever._signals = spy  # type: ignore[method-assign]
        try:
            for text in texts:
                began = time.perf_counter()
                retriever.search(text, top_k=100)
                search_ms.append((time.perf_counter() - began) * 1000)
        finally:
            hybrid_module.HybridRetriever._signals = original  # type: ignore[method-assign]
        policy_ms, before_ms = [], []
        for owner, args in captured:
            began = time.perf_counter()
            for _ in range(20):
                owner.fusion.weights_for(original(owner, *args))
            policy_ms.append((time.perf_counter() - began) * 1000 / 20)
            # what the fusion read before QuerySignals: lexical_match, the top-1 language check, weights
            query, (tokens, top), _, dense, _, view, _ = args
            began = time.perf_counter()
            for _ in range(20):
                best = sorted(top.values(), reverse=True)[:2]
                match = owner.lexical_match(tokens, best[0] if best else 0.0)
                crossing = bool(dense and dense[0]) and view.languages_crossed(query, dense[0][:1])[0]
                Fusion(method="adaptive").weights(0.0 if crossing else match, 1.0)
            before_ms.append((time.perf_counter() - began) * 1000 / 20)
    print(
        f"{dataset.name}/{split}, {len(texts)} queries, RAGSPINE_FUSION={method}: search median "
        f"{statistics.median(search_ms):.2f} ms (both channels, e5 query embedding included); "
        f"signals + weights median {statistics.median(policy_ms):.3f} ms, p95 "
        f"{sorted(policy_ms)[int(0.95 * (len(policy_ms) - 1))]:.3f} ms; what the adaptive fusion "
        f"read before (match, top-1 language, weights) median {statistics.median(before_ms):.3f} ms; "
        f"added per query median {statistics.median(np.subtract(policy_ms, before_ms)):.3f} ms"
    )


def cached_query_vectors() -> tuple[Any, Any]:
    """Serve each query's vector from memory after its first embedding; returns (class, original)."""
    from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend as E5

    original = E5.embed_queries
    vectors: dict[str, list[float]] = {}

    def embed_queries(self: Any, batch: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(batch) if t not in vectors]
        if missing:
            vectors.update(zip(missing, original(self, missing), strict=True))
        return [vectors[t] for t in batch]

    E5.embed_queries = embed_queries  # type: ignore[method-assign]
    return E5, original


def speed(dataset_dir: Path, split: str, cache: Path, queries: int, methods: Sequence[str]) -> None:
    """`ragspine search`'s own call (`HybridRetriever.search`, top_k 10) under each fusion method,
    one process, the methods interleaved query by query. Each query's vector is made once first
    and served from memory, so the timings hold the channels and the fusion, not the encoder."""
    from ragspine.workspace import Workspace

    dataset, settings = cached_workspace(dataset_dir, split, cache)
    texts = [t for _, t in sorted(dataset.queries.items()) if t.strip()][:queries]
    E5, original = cached_query_vectors()
    methods = list(methods)
    timings: dict[str, list[float]] = {m: [] for m in methods}
    try:
        with Workspace.from_settings(settings) as workspace:
            retriever = workspace.retriever.index.retriever()
            for text in texts:
                retriever.search(text, top_k=10)  # embeds the query once, warms every cache
                for method in methods:
                    retriever.fusion = fusion_of(method)
                    began = time.perf_counter()
                    retriever.search(text, top_k=10)
                    timings[method].append((time.perf_counter() - began) * 1000)
                methods = [*methods[1:], methods[0]]  # the next query starts with the next method
    finally:
        E5.embed_queries = original  # type: ignore[method-assign]
    first = next(iter(timings))
    parts = [f"{m} median {statistics.median(t):.2f} ms, p95 {sorted(t)[int(0.95 * (len(t) - 1))]:.2f} ms" for m, t in timings.items()]
    diffs = [f"{m} − {first} median {statistics.median(np.subtract(t, timings[first])):+.2f} ms" for m, t in timings.items() if m != first]
    print(f"{dataset.name}/{split}, {len(texts)} queries, search top_k 10 without the query embedding: " + "; ".join(parts + diffs))


def fusion_of(spec: str) -> Any:
    """`Fusion(method=spec)`; "zscore@K1" is zscore with its BM25 at k1 K1 (e.g. zscore@1.5)."""
    from ragspine.retrieval.fusion.rrf import Fusion

    method, _, k1 = spec.partition("@")
    return Fusion(method=method, lexical_k1=float(k1)) if k1 else Fusion(method=method)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("dataset", type=Path)
    rec.add_argument("--split", required=True)
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--limit", type=int)
    lo = sub.add_parser("lodo")
    lo.add_argument("folder", type=Path)
    lo.add_argument("--write-model", type=Path)
    va = sub.add_parser("variants")
    va.add_argument("folder", type=Path)
    ch = sub.add_parser("check")
    ch.add_argument("folder", type=Path)
    wi = sub.add_parser("windows")
    wi.add_argument("folder", type=Path)
    for name, fusion, about in (("latency", "learned", "the fusion method"),
                                ("speed", "adaptive,zscore", "comma-separated methods, the first the reference; zscore@K1: BM25 at k1 K1")):  # fmt: skip
        timed = sub.add_parser(name)
        timed.add_argument("dataset", type=Path)
        timed.add_argument("--split", required=True)
        timed.add_argument("--cache", type=Path, required=True, help="the folder `record --out` used, + /ws")
        timed.add_argument("--queries", type=int, default=200)
        timed.add_argument("--fusion", default=fusion, help=about)
    args = parser.parse_args()
    if args.command == "record":
        record(args.dataset, args.split, args.out, args.limit)
    elif args.command == "lodo":
        lodo(args.folder, args.write_model)
    elif args.command == "variants":
        variants(args.folder)
    elif args.command == "latency":
        latency(args.dataset, args.split, args.cache, args.queries, args.fusion)
    elif args.command == "windows":
        windows(args.folder)
    elif args.command == "speed":
        speed(args.dataset, args.split, args.cache, args.queries, args.fusion.split(","))
    else:
        check_replay(args.folder)


if __name__ == "__main__":
    main()
