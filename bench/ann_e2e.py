"""Warm hybrid search end to end at scale: the real e5 query encoder inside every timed call.

Run (after `bench.ann_bench` has built the store and saved its HNSW index in the same `--work`):
`PYTHONPATH=.:src .venv/bin/python -m bench.ann_e2e --work /tmp/ragspine-bench --scale 1M`.
It never builds an index (it refuses a store without one: an hour at 1M on two cores).

The store, its synthetic vectors and the query draw are `bench.ann_bench`'s. The query backend
here (`E5ThenDraw`) runs the product's default e5 engine (`MultilingualE5EmbeddingBackend()`:
engine `auto`, int8 ONNX Runtime, default threads, as `ragspine search` gets it) on the query
text, "query: " prefix and all, then throws that vector away and returns the seeded clustered
draw: the stored vectors are synthetic, so a real e5 vector would be out of distribution for the
index (its neighbours meaningless, its graph search unlike a real one). The encoder's cost is
real; the ranking is the synthetic one.

Timed per query, interleaved (each query runs every variant before the next query):
- `retrieve`: `NarrativeIndex.retrieve(q, top_k=10, rerank=False)` (BM25 + dense ANN, the
  default `zscore` fusion, no extra channel), the query embedded by e5;
- `search`: the public `Workspace.search(q, top_k=10)` over the same store: the query stage
  (gate), the link, snippets and citations; its index is built from the default settings
  (fusion, analyzer, the extra channels: the lexical bridge, which fires on this half-Chinese
  corpus), with the same e5-then-draw backend;
- `embed only`: e5's `embed_queries([q])` alone; `retrieve, drawn vector`: `retrieve` with the
  draw and no encoder (what `bench.ann_bench` times); `bm25 only`.
`--before` adds each of `retrieve` and `search` as the code was before the query was embedded
while BM25 ranks (`DenseRanker.ahead` off), on its own one-thread ONNX Runtime session
(`query_threads` None: the passages' session), and before the unfiltered candidate set was one
read-only array counted once per view (a fresh writable copy per query brings the old count
back), so before and after run side by side under the same load. Results are checked equal.
"embed only" times the encoder as `ragspine search` now runs it (the query session);
`identical_query_vectors` says whether its vectors equal the passages' session's (the "before"
row) bit for bit on every timed query (the e5 vector is thrown away by every other row).
`--profile` instead runs the drawn-vector `retrieve` (no encoder) under cProfile on `--queries`
queries after the warm-up and prints, per query, the cumulative milliseconds of the ragspine
functions that take the most, and the functions with the most time of their own (C calls
included: the HNSW search, the row reads); nothing else is timed.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import os
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from bench.ann_bench import ClusteredQueries, _centres, rss_mb, summary
from bench.prepare import prepare
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.pipeline.channels import DenseRanker
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.vector.dense.ann import AnnConfig, ann_path
from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors

_UNFILTERED = IndexSnapshot.allowed_positions


class E5ThenDraw(ClusteredQueries):
    """Runs the real e5 encoder on each query (its cost), then returns `ClusteredQueries`' draw."""

    def __init__(self, centres: np.ndarray, encoder: Any) -> None:
        super().__init__(centres)
        self.encoder, self.encode = encoder, True  # encode False: the draw alone (`drawn`)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        if self.encode:
            self.encoder.embed_queries(texts)
        return self.embed_texts(texts)

    def drawn(self, run: Callable[[str], Any]) -> Callable[[str], Any]:
        """`run` with the draw alone (no encoder): what `bench.ann_bench` times."""

        def without(q: str) -> Any:
            self.encode = False
            try:
                return run(q)
            finally:
                self.encode = True

        return without


@contextmanager
def before(encoder: Any) -> Iterator[None]:
    """The code as it was: the query embedded after BM25, on the passages' ONNX Runtime session
    (default threads), the candidates counted every query."""

    def fresh(self: IndexSnapshot, filters: Any, where: Any = None) -> np.ndarray:
        return np.array(_UNFILTERED(self, filters, where))  # writable: counted again, as before

    engine = encoder._model  # noqa: SLF001 - the bench switches the engine's query session off
    threads = getattr(engine, "query_threads", None)
    DenseRanker.ahead = False
    IndexSnapshot.allowed_positions = fresh  # type: ignore[method-assign]
    engine.query_threads = None
    try:
        yield
    finally:
        DenseRanker.ahead = True
        IndexSnapshot.allowed_positions = _UNFILTERED  # type: ignore[method-assign]
        engine.query_threads = threads


def _workspace(store: ChunkStore, backend: E5ThenDraw, config: AnnConfig) -> Any:
    """`Workspace` over `store` with the default settings' query side and `backend`."""
    from ragspine.assembly import (make_analyzer, make_channels_for, make_fusion, make_query_plan_for,
                                   make_query_rewriter_for)  # fmt: skip
    from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever
    from ragspine.settings.config import load_settings
    from ragspine.workspace import Workspace

    settings = load_settings({}, flags={"RAGSPINE_DB": str(store.db_path)})
    index = NarrativeIndex(store, embedding_backend=backend, ann=config, fusion=make_fusion(settings),
                           analyzer=make_analyzer(settings.analyzer), extra_channels=make_channels_for(settings),
                           query_rewriter=make_query_rewriter_for(settings))  # the glossary's variants, as ragspine search  # fmt: skip
    index.refresh()
    retriever = NarrativeIndexRetriever(index, plan=make_query_plan_for(settings, None),
                                        retry_without_filters=settings.filter_fallback == "retry")  # fmt: skip
    return Workspace(settings, retriever, store, None), settings


def _key(result: Any) -> Any:
    """What must not change: the ranked chunk ids and their scores (results or snippets)."""
    if result and isinstance(result[0], dict):  # snippets
        return [(s["chunk_id"], s["scores"], s["relevance"]) for s in result]
    return [(r.chunk.chunk_id, r.fused_score) for r in result]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragspine-bench"))
    parser.add_argument("--scale", default="1M")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warm", type=int, default=10, help="warm-up queries, each variant, not timed")
    parser.add_argument("--ef-search", type=int, default=AnnConfig().ef_search)
    parser.add_argument("--before", action="store_true", help="also time the code before this change, interleaved")
    parser.add_argument("--no-search", action="store_true", help="skip the public Workspace.search runs")
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile summary of the drawn-vector retrieve (ms a query), nothing else")  # fmt: skip
    args = parser.parse_args()
    out: dict[str, Any] = {"scale": args.scale, "load_before": os.getloadavg(), "cpus": os.cpu_count(),
                           "python": platform.python_version()}  # fmt: skip
    meta = prepare(args.work, args.scale)
    folder = args.work / args.scale
    queries = json.loads((folder / "queries.json").read_text())
    from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend

    encoder = MultilingualE5EmbeddingBackend()  # the product's default: engine auto, default threads
    out["encoder"] = {"engine": encoder.engine, "model_id": encoder.model_id}
    centres = _centres(meta["n_chunks"])
    backend = E5ThenDraw(centres, encoder)
    config = AnnConfig(min_vectors=0, ef_search=args.ef_search)
    with ChunkStore(folder / "chunks.db") as store:
        with ChunkVectors.beside(store, model_id=backend.model_id, dim=backend.dim) as vectors:
            index_file = ann_path(vectors.path)
            assert len(vectors.ids()) == meta["n_chunks"], "run bench.ann_bench on this --work first"
        if index_file is None or not Path(index_file).is_file():
            raise SystemExit(f"no saved HNSW index at {index_file}: run bench.ann_bench --work {args.work} first")
        started = time.perf_counter()
        lexical = NarrativeIndex(store)
        lexical.refresh()

        def retriever() -> Callable[[str], Any]:
            index = NarrativeIndex(store, embedding_backend=backend, ann=config)
            index.refresh()
            assert index.dense is not None and index.dense.ann_stats["builds"] == 0, "the saved index must be reused"
            return lambda q: index.retrieve(q, top_k=10, rerank=False)

        def searcher() -> Callable[[str], Any]:
            workspace, settings = _workspace(store, backend, config)
            out["search_settings"] = {"fusion": settings.fusion, "lexical_bridge": settings.lexical_bridge,
                                      "extra_channels": settings.extra_channels}  # fmt: skip
            return lambda q: workspace.search(q, top_k=10)

        if args.profile:
            _profile(backend.drawn(retriever()), queries, args.warm, args.queries)
            return
        # Every timed variant searches its own index: a query's second search on one index would
        # find its terms and chunks in that index's caches, and be faster for it.
        runs: dict[str, Callable[[str], Any]] = {
            "embed only (e5)": lambda q: encoder.embed_queries([q]),
            "embed only (e5), before: the passages' session": _as_before(lambda q: encoder.embed_queries([q]), encoder),
            "bm25 only": lambda q: lexical.retrieve(q, top_k=10, rerank=False),
            "retrieve, drawn vector (no encoder)": backend.drawn(retriever()),
            "retrieve (e5 + hybrid ANN)": retriever(),
        }
        if not args.no_search:
            runs["search (Workspace.search, e5 + hybrid ANN + snippets)"] = searcher()
        if args.before:
            runs["BEFORE retrieve (e5 + hybrid ANN)"] = _as_before(retriever(), encoder)
            if not args.no_search:
                runs["BEFORE search (Workspace.search, e5 + hybrid ANN + snippets)"] = _as_before(searcher(), encoder)
        out["open_s"] = time.perf_counter() - started
        out["rss_mb"] = rss_mb()
        times, answers = _timed(runs, queries, args.warm, args.queries)
        out["latency"] = {name: summary(t) for name, t in times.items()}
        out["p50_ratio_before_over_after"] = {
            name: out["latency"][f"BEFORE {name}"]["p50_ms"] / out["latency"][name]["p50_ms"]
            for name in runs if f"BEFORE {name}" in runs
        }  # fmt: skip
        out["identical_before_after"] = {
            name: all(_key(a) == _key(b) for a, b in zip(answers[name], answers[f"BEFORE {name}"], strict=True))
            for name in runs if f"BEFORE {name}" in runs
        }  # fmt: skip
        query_session = answers["embed only (e5)"]
        passages_session = answers["embed only (e5), before: the passages' session"]
        out["identical_query_vectors"] = all(
            np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(query_session, passages_session, strict=True)
        )
        out["identical_e5_vs_drawn"] = all(
            _key(a) == _key(b) for a, b in zip(answers["retrieve (e5 + hybrid ANN)"],
                                               answers["retrieve, drawn vector (no encoder)"], strict=True)
        )  # fmt: skip
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


def _as_before(run: Callable[[str], Any], encoder: Any) -> Callable[[str], Any]:
    def old(q: str) -> Any:
        with before(encoder):
            return run(q)

    return old


def _profile(run: Callable[[str], Any], queries: list[str], warm: int, n: int, top: int = 25) -> None:
    """`run` on `warm` untimed queries, then on `n` under cProfile; the summary, ms a query."""
    for q in queries[:warm]:
        run(" ".join(reversed(q.split())) + " ")
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(n):
        run(queries[i % len(queries)])
    profiler.disable()
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [(where, name, calls, own, cumulative) for (where, _, name), (_, calls, own, cumulative, _) in stats.items()]
    print(f"cProfile of {n} drawn-vector retrieve calls, ms a query (profiling overhead included)")
    print(f"{'cumulative':>10} {'own':>7} {'calls':>6}  function (ragspine's, by cumulative time)")
    ours = [r for r in rows if "ragspine" in r[0]]
    for where, name, calls, own, cumulative in sorted(ours, key=lambda r: -r[4])[:top]:
        print(f"{cumulative * 1000 / n:10.2f} {own * 1000 / n:7.2f} {calls / n:6.1f}  {_short(where)}:{name}")
    print(f"{'own':>10} {'':>7} {'calls':>6}  function (any, C calls included, by own time)")
    for where, name, calls, own, _ in sorted(rows, key=lambda r: -r[3])[:top]:
        print(f"{own * 1000 / n:10.2f} {'':>7} {calls / n:6.1f}  {_short(where)}:{name}")


def _short(where: str) -> str:
    """A profiled function's file, from the package down (`~` for a C call)."""
    for root in ("ragspine/", "site-packages/"):
        if root in where:
            return where.split(root, 1)[1]
    return where


def _timed(
    runs: dict[str, Callable[[str], Any]], queries: list[str], warm: int, n: int
) -> tuple[dict[str, list[float]], dict[str, list[Any]]]:
    """Each run on `warm` untimed queries (the first ones with their words reversed: texts no
    timed query repeats), then on `n` timed ones (cycling through `queries`), every run per
    query before the next query, in an order rotated by one each query (each run goes first as
    often); the times and answers per run."""
    for q in queries[:warm]:
        for run in runs.values():
            run(" ".join(reversed(q.split())) + " ")
    times: dict[str, list[float]] = {name: [] for name in runs}
    answers: dict[str, list[Any]] = {name: [] for name in runs}
    names = list(runs)
    for i in range(n):
        q = queries[i % len(queries)]
        for name in names[i % len(names) :] + names[: i % len(names)]:
            run = runs[name]
            started = time.perf_counter()
            answers[name].append(run(q))
            times[name].append(time.perf_counter() - started)
    return times, answers


if __name__ == "__main__":
    main()
    os._exit(0)  # skip slow teardown of large heaps
