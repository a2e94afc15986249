"""The dense channel with and without its HNSW index (issue 20 part 3), side by side in one process.

Run: `PYTHONPATH=.:src .venv/bin/python -m bench.ann_bench --scale 100k` (also `make bench-ann`,
which runs 100k and 1M). Figures go to docs/dense.md and docs/benchmarks.md by hand.

The store is the synthetic corpus of `bench.prepare` (fixed seed). Every chunk gets a 384-d unit
vector drawn around one of n/100 random cluster centres (centre + N(0, 1) noise per coordinate,
so a vector's cosine to its centre is about 0.7: neighbourhoods, as embeddings have, not uniform
noise, on which no index has structure to find), written to `<db>.vectors.sqlite`. The query
backend maps a query text to a vector drawn the same way (seeded by the text), so queries have
near neighbours as real ones do. Embedding 1M chunks with a real model would take days here.
Every vector is stored with `text_language` "en" (the corpus is about half Chinese), so the
dense channel does not centre by language and asks the index for 1×, not 2×, the candidates.
`--languages detect` stores each vector with its chunk text's detected language instead and
shifts the two languages' vectors apart (±0.5 along one fixed direction, as real multilingual
embeddings lean by language), so the channel centres by language and asks for 2× the candidates.

Measured, in this order: writing the vectors (once; reused when present), opening the exact
channel (load + align), building the index (what `ragspine embed` does past the threshold),
reopening with the saved index (`--keep-index`: an earlier run's index is reused and no build is
timed), then per query,
interleaved: BM25 only, hybrid exact, hybrid ANN (`NarrativeIndex.retrieve(q, top_k=10,
rerank=False)`), and the dense channel alone (`DenseView.rank` at the pipeline's depth 100,
exact vs ANN) with recall@10 and @100 of ANN against exact; last, one upsert of 10 vectors and
the attach that adds them to the index. Memory: the process's RSS after each step (VmRSS).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from bench.prepare import prepare
from ragspine.retrieval.fusion.rrf import FUSION_METHODS, Fusion
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.vector.dense.ann import AnnConfig, ann_path
from ragspine.retrieval.vector.dense.channel import DenseView
from ragspine.retrieval.language import detect_language
from ragspine.retrieval.vector.dense.chunk_vectors import TEXT_LANGUAGE, ChunkVectors

DIM = 384
NOISE = 1.0
DEPTH = 100  # the pipeline's rank depth (hybrid.DEFAULT_RANK_DEPTH)


def _centres(n: int) -> np.ndarray:
    return np.random.default_rng(11).standard_normal((max(10, n // 100), DIM)).astype(np.float32)


class ClusteredQueries:
    """A bench-only backend: a query text's vector is a seeded draw around one cluster centre."""

    dim = DIM
    is_remote = False

    def __init__(self, centres: np.ndarray) -> None:
        self.centres = centres
        self.model_id = f"bench:clustered-{DIM}-{len(centres)}"

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            v = self.centres[rng.integers(len(self.centres))] + NOISE * rng.standard_normal(DIM).astype(np.float32)
            out.append((v / np.linalg.norm(v)).tolist())
        return out


def fill_vectors(store: ChunkStore, vectors: ChunkVectors, centres: np.ndarray, languages: str = "en") -> float:
    """Write the missing vectors; each stored with language "en" (`languages="en"`: centring
    off) or with its chunk text's detected language (`"detect"`: a mixed corpus, centred)."""
    found = store.execute_read("SELECT chunk_id, text FROM narrative_chunk WHERE active = 1 ORDER BY row_id")
    text_of = {r[0]: r[1] for r in found}
    missing = vectors.missing(list(text_of))
    started = time.perf_counter()
    rng = np.random.default_rng(7)
    for i in range(0, len(missing), 20_000):
        batch = missing[i : i + 20_000]
        rows = centres[rng.integers(0, len(centres), len(batch))] + NOISE * rng.standard_normal((len(batch), DIM)).astype(np.float32)
        if languages == "detect":
            meta = [{TEXT_LANGUAGE: detect_language(text_of[c])} for c in batch]
            offset = np.where(np.array([m[TEXT_LANGUAGE] == "zh" for m in meta])[:, None], 0.5, -0.5).astype(np.float32)
            rows = rows + offset * centres[0] / np.linalg.norm(centres[0])  # each language leans its own way
        else:
            meta = [{TEXT_LANGUAGE: "en"}] * len(batch)
        vectors.upsert(batch, rows, meta)
    return time.perf_counter() - started


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def summary(seconds: list[float]) -> dict[str, float]:
    a = np.asarray(seconds) * 1e3
    return {"p50_ms": float(np.percentile(a, 50)), "p95_ms": float(np.percentile(a, 95)), "n": len(a)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragspine-bench"))
    parser.add_argument("--scale", default="100k")
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--ef-search", type=int, default=AnnConfig().ef_search)
    parser.add_argument("--languages", choices=("en", "detect"), default="en",
                        help="store every vector as English (centring off) or with its chunk's detected language (centred)")  # fmt: skip
    parser.add_argument("--keep-index", action="store_true",
                        help="reuse the saved index of an earlier run (no build timed): query latency and recall only")  # fmt: skip
    parser.add_argument("--compare-fusion", choices=FUSION_METHODS,
                        help="also time the hybrid ANN search under this fusion method (another index opened beside)")  # fmt: skip
    args = parser.parse_args()
    load = os.getloadavg()
    meta = prepare(args.work, args.scale)
    folder = args.work / args.scale
    queries = json.loads((folder / "queries.json").read_text())[: args.queries]
    out: dict[str, Any] = {"scale": args.scale, "chunks": meta["n_chunks"], "load_before": load,
                           "cpus": os.cpu_count(), "python": platform.python_version()}  # fmt: skip
    centres = _centres(meta["n_chunks"])
    backend = ClusteredQueries(centres)
    with ChunkStore(folder / "chunks.db") as store:
        store.init_schema()
        with ChunkVectors.beside(store, model_id=backend.model_id, dim=DIM) as vectors:
            out["vectors_written_s"] = fill_vectors(store, vectors, centres, args.languages)
            out["languages"] = args.languages
            index_file = ann_path(vectors.path)
        assert index_file is not None
        keep = args.keep_index and Path(index_file).is_file()
        if not keep:
            Path(index_file).unlink(missing_ok=True)  # the build is measured from nothing
        out["index_reused"] = keep
        out["rss_start_mb"] = rss_mb()
        lexical = NarrativeIndex(store)
        lexical.refresh()
        out["rss_lexical_mb"] = rss_mb()

        def opened(config: AnnConfig, fusion: Fusion | None = None) -> tuple[NarrativeIndex, float]:
            started = time.perf_counter()
            index = NarrativeIndex(store, embedding_backend=backend, ann=config, fusion=fusion)
            index.refresh()
            return index, time.perf_counter() - started

        exact, out["open_exact_s"] = opened(AnnConfig(min_vectors=None))
        out["rss_exact_mb"] = rss_mb()
        config = AnnConfig(min_vectors=0, ef_search=args.ef_search)
        if not keep:
            ann, out["open_and_build_s"] = opened(config)
            out["rss_exact_plus_ann_mb"] = rss_mb()
            assert ann.dense is not None and ann.dense.ann_stats["builds"] == 1, ann.dense and ann.dense.ann_stats
            del ann
        out["index_file_mb"] = Path(index_file).stat().st_size / 2**20
        ann, out["open_with_saved_index_s"] = opened(config)
        assert ann.dense is not None and ann.dense.ann_stats["loads"] == 1, ann.dense.ann_stats
        out["rss_after_reopen_mb"] = rss_mb()

        views = {name: index.retriever().dense for name, index in (("exact", exact), ("ann", ann))}
        assert isinstance(views["exact"], DenseView) and isinstance(views["ann"], DenseView)
        assert views["exact"].ann is None and views["ann"].ann is not None
        allowed = exact.retriever().index.active_positions()
        vectors_of = {q: np.asarray(v, dtype=np.float32) for q, v in zip(queries, backend.embed_texts(queries), strict=True)}
        runs = {
            "bm25 only": lambda q: lexical.retrieve(q, top_k=10, rerank=False),
            "hybrid exact": lambda q: exact.retrieve(q, top_k=10, rerank=False),
            "hybrid ANN": lambda q: ann.retrieve(q, top_k=10, rerank=False),
            "dense exact (rank 100)": lambda q: views["exact"].rank(vectors_of[q], allowed, DEPTH),
            "dense ANN (rank 100)": lambda q: views["ann"].rank(vectors_of[q], allowed, DEPTH),
        }
        if args.compare_fusion:
            other, _ = opened(config, Fusion(method=args.compare_fusion))
            runs[f"hybrid ANN, fusion {args.compare_fusion}"] = lambda q: other.retrieve(q, top_k=10, rerank=False)
            out["fusion"] = Fusion().method
        for run in runs.values():  # one warm-up query each
            run(queries[0])
        times: dict[str, list[float]] = {name: [] for name in runs}
        answers: dict[str, dict[str, Any]] = {name: {} for name in runs}
        for _ in range(args.passes):
            for q in queries:
                for name, run in runs.items():
                    started = time.perf_counter()
                    answers[name][q] = run(q)
                    times[name].append(time.perf_counter() - started)
        out["latency"] = {name: summary(t) for name, t in times.items()}
        recall10, recall100, hybrid_agree = [], [], []
        for q in queries:
            e, a = answers["dense exact (rank 100)"][q][0], answers["dense ANN (rank 100)"][q][0]
            recall10.append(len(set(e[:10]) & set(a[:10])) / 10)
            recall100.append(len(set(e) & set(a)) / max(1, len(e)))
            he = {r.chunk.chunk_id for r in answers["hybrid exact"][q]}
            ha = {r.chunk.chunk_id for r in answers["hybrid ANN"][q]}
            hybrid_agree.append(len(he & ha) / max(1, len(he)))
        out["dense_recall_at_10"] = float(np.mean(recall10))
        out["dense_recall_at_100"] = float(np.mean(recall100))
        out["hybrid_top10_agreement"] = float(np.mean(hybrid_agree))
        # One incremental update: 10 vectors rewritten (as `ragspine embed` or a re-ingest writes
        # them), then the attach that reads them and adds them to the index.
        with ChunkVectors.beside(store, model_id=backend.model_id, dim=DIM) as writer:
            some = writer.ids()[:10]
            rows, _ = writer.get(some)
            writer.delete(some)
            writer.upsert(some, rows, [{TEXT_LANGUAGE: "en"}] * len(some))
        for name, index in (("exact", exact), ("ann", ann)):
            dense = index.dense
            assert dense is not None
            snapshot = index.lexical_index.snapshot()
            started = time.perf_counter()
            dense.attach(snapshot, index.retriever()._source)  # noqa: SLF001 - the bench times the channel alone
            out[f"update_10_vectors_attach_{name}_ms"] = (time.perf_counter() - started) * 1e3
        assert ann.dense is not None
        out["ann_stats"] = dict(ann.dense.ann_stats)
        out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
    os._exit(0)  # skip slow teardown of large heaps
