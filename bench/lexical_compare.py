"""ragspine's BM25 channel against bm25s 0.3.16, side by side in one process (issue 20 part 5).

Run: `PYTHONPATH=.:src .venv/bin/python -m bench.lexical_compare --scales scifact,1M`
(`make bench-lexical`). Corpora are `bench.prepare`'s (SciFact test queries; the synthetic 1M).

How each engine is called, per query, inside the timed region (top 10, k1 = 1.5, b = 0.75):
- ragspine: `NarrativeIndex.retrieve(q, top_k=10, rerank=False)` on an index opened from its
  persisted files, no query rewriter: it tokenises `q` (`ragspine.retrieval.lexical.tokenize.tokenize`),
  checks the snapshot, scores, and returns RetrievalResult objects with their Chunk read from
  SQLite (cached after first use).
- bm25s: `retriever.retrieve([tokenize(q) or [""]], k=10, show_progress=False)` on
  `bm25s.BM25(k1=1.5, b=0.75, method="lucene")` indexed from the same `tokenize` tokens of the
  same chunks (a `Tokenized` of ids and vocabulary); numpy backend, one query per call; it
  returns row numbers and scores (no chunk objects).
- ragspine core: `IndexSnapshot.search(tokenize(q), 10)`, the scoring alone (positions out).
- rank_bm25 0.2.2: `BM25Okapi(k1=1.5, b=0.75)` built from the same tokens; per query
  `get_scores(tokenize(q))` (every chunk scored, in numpy) and the top 10 by `np.argpartition`
  (`bench.engines.rank_bm25_top`). It is about 200× slower, so it answers only every
  `--rank-bm25-every`-th query (default 3: 100 of SciFact's 300) in the same interleaved passes;
  not at 1M (its per-document dicts would take gigabytes).
  Its idf is Okapi's (negative idf floored at 0.25 × the mean), not Lucene's, so its top 10 can
  differ: `rank_bm25_top10_overlap` is the mean share of its top 10 that `retrieve` also returns.
- with `--before REF` (e.g. `--before main`): the same two ragspine calls on git revision REF's
  package, loaded beside this one in the same process (`bench.before`), on the same store (its
  own lexical index files): before and after timed interleaved, under the same load.
Queries are interleaved (each query answered by every engine in turn), one warm-up pass, then
`--passes` timed passes (1 at 1M). Results: queries/s = answered / summed time, p50, p95.
`--profile` times nothing of the above: it prints `bench.lexical_profile`'s figures instead (the
postings per query and the share in common terms, tokenize's ASCII path, the data-version read).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.before import load_before
from bench.engines import _agreement, _bm25s_index, _open, _summary, _token_lists, rank_bm25_top, top10_overlap
from bench.prepare import prepare

K = 10
RANK_BM25 = "rank_bm25 BM25Okapi get_scores + top 10"
ROOT = Path(__file__).resolve().parent.parent


def compare(folder: Path, passes: int, before: str | None = None, rank_every: int = 0) -> dict[str, Any]:
    """Every engine on every query in turn (rank_bm25 on every `rank_every`-th; 0: not at all)."""
    from ragspine.retrieval.lexical.tokenize import tokenize

    queries = json.loads((folder / "queries.json").read_text())
    store, index = _open(folder)
    index.refresh()
    retriever, _, n = _bm25s_index(folder)
    snapshot = index.lexical_index.snapshot()
    engines: dict[str, Callable[[str], Any]] = {
        "ragspine NarrativeIndex.retrieve": lambda q: index.retrieve(q, top_k=K, rerank=False),
        "bm25s retrieve": lambda q: retriever.retrieve([tokenize(q) or [""]], k=K, show_progress=False),
        "ragspine IndexSnapshot.search": lambda q: snapshot.search(tokenize(q), K, k1=1.5, b=0.75),
    }
    if rank_every:
        from rank_bm25 import BM25Okapi

        okapi = BM25Okapi(_token_lists(folder), k1=1.5, b=0.75)
        engines[RANK_BM25] = lambda q: rank_bm25_top(okapi, tokenize(q))
    if before is not None:
        engines |= _before_engines(before, folder)
    times: dict[str, list[float]] = {name: [] for name in engines}
    for p in range(passes + 1):
        for i, q in enumerate(queries):
            for name, fn in engines.items():
                if name == RANK_BM25 and i % rank_every:
                    continue  # rank_bm25 answers every rank_every-th query only
                t = time.perf_counter()
                fn(q)
                if p:  # pass 0 warms every engine up
                    times[name].append(time.perf_counter() - t)
    tokens = [tokenize(q) or [""] for q in queries]
    agree = _agreement(index, retriever, queries, tokens, folder)
    out: dict[str, Any] = {"chunks": n, "queries": len(queries), "passes": passes, "top10_agreement": agree}
    if rank_every:
        top = lambda i: rank_bm25_top(okapi, tokenize(queries[i]))  # noqa: E731
        out |= {"rank_bm25_queries": len(queries[::rank_every]),
                "rank_bm25_top10_overlap": top10_overlap(index, top, queries, folder)}  # fmt: skip
    store.close()
    return out | {name: _summary(t) for name, t in times.items()}


def _before_engines(package: str, folder: Path) -> dict[str, Callable[[str], Any]]:
    """NarrativeIndex.retrieve and IndexSnapshot.search of the package `bench.before` loaded."""
    import importlib

    store_mod = importlib.import_module(f"{package}.retrieval.store.sqlite")
    index_mod = importlib.import_module(f"{package}.retrieval.pipeline.narrative_index")
    tokenize = importlib.import_module(f"{package}.retrieval.lexical.tokenize").tokenize
    store = store_mod.ChunkStore(folder / "chunks.db")
    store.init_schema()
    index = index_mod.NarrativeIndex(store)
    index.refresh()
    snapshot = index.lexical_index.snapshot()
    return {
        "before: NarrativeIndex.retrieve": lambda q: index.retrieve(q, top_k=K, rerank=False),
        "before: IndexSnapshot.search": lambda q: snapshot.search(tokenize(q), K, k1=1.5, b=0.75),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="scifact,1M")
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragspine-bench"))
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--rank-bm25-every", type=int, default=3, help="rank_bm25 answers every N-th query (0: never)")
    parser.add_argument("--before", metavar="REF", help="also time git revision REF's ragspine, same process")
    parser.add_argument("--profile", action="store_true", help="print bench.lexical_profile's figures instead")
    args = parser.parse_args()
    if args.profile:
        from bench.lexical_profile import profile

        for name in args.scales.split(","):
            prepare(args.work, name, args.scifact)
            print(json.dumps({name: profile(args.work / name) | {"load": os.getloadavg()}}), flush=True)
        return
    import bm25s

    before = load_before(args.before, args.work / "before") if args.before else None

    for name in args.scales.split(","):
        prepare(args.work, name, args.scifact)
        load = os.getloadavg()
        every = 0 if name == "1M" else args.rank_bm25_every  # rank_bm25 at 1M: gigabytes of dicts
        result = compare(args.work / name, 1 if name == "1M" else args.passes, before, every)
        result |= {"load_before": load, "load_after": os.getloadavg(), "bm25s": bm25s.__version__}
        ours, theirs = result["ragspine NarrativeIndex.retrieve"]["qps"], result["bm25s retrieve"]["qps"]
        result["retrieve_over_bm25s"] = ours / theirs
        if RANK_BM25 in result:
            result["retrieve_over_rank_bm25"] = ours / result[RANK_BM25]["qps"]
        if before is not None:
            old = result["before: NarrativeIndex.retrieve"]["qps"]
            result |= {"before_retrieve_over_bm25s": old / theirs, "retrieve_over_before": ours / old}
        print(json.dumps({name: result}), flush=True)


if __name__ == "__main__":
    main()
    os._exit(0)  # skip slow teardown of large heaps
