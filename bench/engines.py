"""One benchmark measurement in its own process: `python -m bench.engines ENGINE FOLDER`.

Prints one JSON object. Peak RSS is this process's `ru_maxrss`. Engines:
  build      ragspine: build + persist the index from the store (tokenising every chunk)
  serve      ragspine: a fresh process loads the persisted index and answers the queries
             through NarrativeIndex.retrieve(top_k=10, rerank=False), no query rewriter
  core       ragspine: index built from the cached tokens; IndexSnapshot.search on tokens
  bm25s      bm25s.BM25(k1=1.5, b=0.75, method="lucene") on the cached tokens
  rank_bm25  rank_bm25.BM25Okapi(k1=1.5, b=0.75) on the cached tokens (a query sample at scale)
  compare    ragspine (public path) and bm25s in one process, queries interleaved, each query
             tokenised inside the timed call for both
  update     ragspine: one-document replacements on a copy of the store and index
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

K = 10
RANK_BM25_MAX_POSTINGS = 20_000_000  # beyond this rank_bm25 answers a sample of queries only


def main(engine: str, folder: Path, passes: int) -> dict[str, Any]:
    resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30))  # keep a runaway bounded
    queries = json.loads((folder / "queries.json").read_text())
    out = ENGINES[engine](folder, queries, passes)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


# -- ragspine -------------------------------------------------------------------------------
def _open(folder: Path):  # type: ignore[no-untyped-def]
    from ragspine.retrieval.store.sqlite import ChunkStore
    from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex

    store = ChunkStore(folder / "chunks.db")
    store.init_schema()
    return store, NarrativeIndex(store)


def build(folder: Path, queries: list[str], passes: int) -> dict[str, Any]:
    shutil.rmtree(f"{folder / 'chunks.db'}.bm25", ignore_errors=True)
    store, index = _open(folder)
    start = time.perf_counter()
    index.refresh()
    seconds = time.perf_counter() - start
    snap = index.lexical_index.snapshot()
    assert index.lexical_index.stats["builds"] == 1
    return {
        "docs": snap.n_active, "build_s": seconds, "docs_per_s": snap.n_active / seconds,
        "disk_mb": _tree_mb(Path(f"{folder / 'chunks.db'}.bm25")),
        "rss_after_build_mb": _rss_mb(),
    }  # fmt: skip


def serve(folder: Path, queries: list[str], passes: int) -> dict[str, Any]:
    start = time.perf_counter()
    store, index = _open(folder)
    index.refresh()
    load_s = time.perf_counter() - start
    stats = dict(index.lexical_index.stats)
    assert stats.get("loads") == 1 and not stats.get("builds"), stats
    retrieve = lambda q: index.retrieve(q, top_k=K, rerank=False)  # noqa: E731
    first = _latencies(retrieve, queries)
    steady = [x for _ in range(passes) for x in _latencies(retrieve, queries)]
    hybrid = index.retriever()
    search = lambda q: hybrid.search(q, top_k=K)  # noqa: E731
    steady_h = [x for _ in range(passes) for x in _latencies(search, queries)]
    return {"load_s": load_s, "rss_after_load_mb": None, "first_pass": _summary(first),
            "steady": _summary(steady), "hybrid_search": _summary(steady_h),
            "rss_after_queries_mb": _rss_mb()}  # fmt: skip


def core(folder: Path, queries: list[str], passes: int) -> dict[str, Any]:
    from ragspine.retrieval.lexical.index.segment import SegmentBuilder
    from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
    from ragspine.retrieval.lexical.tokenize import tokenize

    docs = _token_lists(folder)
    start = time.perf_counter()
    builder = SegmentBuilder()
    for lo in range(0, len(docs), 50_000):
        part = docs[lo : lo + 50_000]
        builder.add(part, chunk_ids=[str(i) for i in range(lo, lo + len(part))])
    snap = IndexSnapshot([builder.finish()])
    seconds = time.perf_counter() - start
    del docs
    tokens = [tokenize(q) for q in queries]
    run = lambda t: snap.search(t, K, k1=1.5, b=0.75)  # noqa: E731
    _latencies(run, tokens)
    steady = [x for _ in range(passes) for x in _latencies(run, tokens)]
    return {"build_s": seconds, "docs_per_s": snap.n_positions / seconds, "steady": _summary(steady)}


# -- others ---------------------------------------------------------------------------------
def _bm25s_index(folder: Path):  # type: ignore[no-untyped-def]
    import bm25s
    from bm25s.tokenization import Tokenized

    vocab = json.loads((folder / "vocab.json").read_text())
    ids = _id_lists(folder)
    mapping = {term: i for i, term in enumerate(vocab)}
    mapping[""] = len(vocab)  # bm25s's empty token, for queries with no known token
    start = time.perf_counter()
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index(Tokenized(ids=ids, vocab=mapping), show_progress=False)
    return retriever, time.perf_counter() - start, len(ids)


def bm25s_engine(folder: Path, queries: list[str], passes: int) -> dict[str, Any]:
    from ragspine.retrieval.lexical.tokenize import tokenize

    retriever, seconds, n = _bm25s_index(folder)
    tokens = [tokenize(q) or [""] for q in queries]
    run = lambda t: retriever.retrieve([t], k=K, show_progress=False)  # noqa: E731
    first = _latencies(run, tokens)
    steady = [x for _ in range(passes) for x in _latencies(run, tokens)]
    start = time.perf_counter()
    for _ in range(passes):
        retriever.retrieve(tokens, k=K, show_progress=False)
    batch_qps = passes * len(tokens) / (time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as tmp:
        retriever.save(tmp)
        disk = _tree_mb(Path(tmp))
    return {"build_s": seconds, "docs_per_s": n / seconds, "first_pass": _summary(first),
            "steady": _summary(steady), "batch_qps": batch_qps, "disk_mb": disk}  # fmt: skip


def rank_bm25_engine(folder: Path, queries: list[str], passes: int) -> dict[str, Any]:
    from rank_bm25 import BM25Okapi

    from ragspine.retrieval.lexical.tokenize import tokenize

    docs = _token_lists(folder)
    n_postings = sum(map(len, docs))
    start = time.perf_counter()
    model = BM25Okapi(docs, k1=1.5, b=0.75)
    seconds = time.perf_counter() - start
    del docs
    sample = queries if n_postings <= RANK_BM25_MAX_POSTINGS else queries[:: max(1, len(queries) // 10)]
    tokens = [tokenize(q) for q in sample]
    lat = _latencies(lambda t: rank_bm25_top(model, t), tokens)
    return {"build_s": seconds, "docs_per_s": model.corpus_size / seconds,
            "steady": _summary(lat), "queries_timed": len(tokens)}  # fmt: skip


def rank_bm25_top(model: Any, tokens: list[str]) -> np.ndarray:
    """Row numbers of rank_bm25's top K for `tokens`, best first (every document scored)."""
    scores = model.get_scores(tokens)
    top = np.argpartition(scores, len(scores) - K)[len(scores) - K :]
    return top[np.argsort(-scores[top], kind="stable")]


def compare(folder: Path, queries: list[str], passes: int) -> dict[str, Any]:
    """ragspine's public path and bm25s answering the same queries alternately."""
    from ragspine.retrieval.lexical.tokenize import tokenize

    store, index = _open(folder)
    index.refresh()
    retriever, _, _ = _bm25s_index(folder)
    hybrid = index.retriever()
    tokens = [tokenize(q) or [""] for q in queries]
    engines: dict[str, Callable[[int], Any]] = {
        "ragspine_retrieve": lambda i: index.retrieve(queries[i], top_k=K, rerank=False),
        "ragspine_hybrid_search": lambda i: hybrid.search(queries[i], top_k=K),
        # the query is tokenised inside the timed call, as NarrativeIndex.retrieve does (issue 20)
        "bm25s": lambda i: retriever.retrieve([tokenize(queries[i]) or [""]], k=K, show_progress=False),
    }
    times: dict[str, list[float]] = {name: [] for name in engines}
    for p in range(passes + 1):
        for i in range(len(queries)):
            for name, fn in engines.items():
                t = time.perf_counter()
                fn(i)
                if p:  # pass 0 warms every engine up
                    times[name].append(time.perf_counter() - t)
    agree = _agreement(index, retriever, queries, tokens, folder)
    return {name: _summary(t) for name, t in times.items()} | {"top10_agreement": agree}


def update(folder: Path, queries: list[str], passes: int) -> dict[str, Any]:
    """Replace one document (its text re-chunked, ~10 chunks) at a time in a copy of the store
    and index: the store's write, then the index brought up to date (persisted)."""
    from bench.corpus import synthetic_chunks
    from ragspine.retrieval.chunking.chunking import chunk_document
    from ragspine.retrieval.model import DocumentMeta

    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        copy = Path(tmp)
        shutil.copy(folder / "chunks.db", copy / "chunks.db")
        shutil.copytree(f"{folder / 'chunks.db'}.bm25", f"{copy / 'chunks.db'}.bm25")
        store, index = _open(copy)
        index.refresh()
        rows = store.execute_read("SELECT DISTINCT doc_id FROM narrative_chunk WHERE active = 1 LIMIT 2000")
        doc_ids = [r[0] for r in rows][:: max(1, len(rows) // 20)][:20]
        fresh = [c.text for c in synthetic_chunks(200)]
        total, index_only, sizes = [], [], []
        for i, doc_id in enumerate(doc_ids):
            meta = DocumentMeta(doc_id, topic="updated")
            chunks = chunk_document("\n\n".join(fresh[i * 10 : i * 10 + 10]), meta)
            t0 = time.perf_counter()
            store.replace_doc_chunks(doc_id, chunks)
            t1 = time.perf_counter()
            index.refresh()
            t2 = time.perf_counter()
            total.append(t2 - t0)
            index_only.append(t2 - t1)
            sizes.append(len(chunks))
        t0 = time.perf_counter()
        store.replace_doc_chunks(doc_ids[0], [])
        t1 = time.perf_counter()
        index.refresh()
        withdraw = {"total_s": time.perf_counter() - t0, "index_s": time.perf_counter() - t1}
        stats = dict(index.lexical_index.stats)
        ok = all(r.chunk.doc_id != doc_ids[0] for r in index.retrieve(queries[0], top_k=K, rerank=False))
        # What the update that crosses the compaction threshold pays on top: merging every
        # segment without the tombstones, and writing the result.
        from ragspine.retrieval.lexical.index.storage import IndexFolder

        t0 = time.perf_counter()
        compacted = index.lexical_index.snapshot().compacted()
        t1 = time.perf_counter()
        IndexFolder(copy / "compacted").write_segment(compacted.segments[0])
        compaction = {"merge_s": t1 - t0, "write_s": time.perf_counter() - t1}
        store.close()
    return {"update": _summary(total), "index_update": _summary(index_only),
            "chunks_per_update": sum(sizes) / len(sizes), "withdraw": withdraw, "stats": stats,
            "withdrawn_gone": ok, "compaction": compaction}  # fmt: skip


# -- helpers --------------------------------------------------------------------------------
def _latencies(fn: Callable[[Any], Any], items: list[Any]) -> list[float]:
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - t)
    return out


def _summary(seconds: list[float]) -> dict[str, float]:
    a = np.array(seconds)
    return {"n": len(a), "p50_ms": float(np.percentile(a, 50) * 1e3),
            "p95_ms": float(np.percentile(a, 95) * 1e3), "qps": float(len(a) / a.sum())}  # fmt: skip


def _token_lists(folder: Path) -> list[list[str]]:
    vocab = json.loads((folder / "vocab.json").read_text())  # shared str objects: compact
    tokens = np.load(folder / "tokens.npy", mmap_mode="r")
    offsets = np.load(folder / "offsets.npy")
    get = vocab.__getitem__
    return [list(map(get, tokens[offsets[i] : offsets[i + 1]].tolist())) for i in range(len(offsets) - 1)]


def _id_lists(folder: Path) -> list[list[int]]:
    tokens = np.load(folder / "tokens.npy", mmap_mode="r")
    offsets = np.load(folder / "offsets.npy")
    ints = list(range(int(tokens.max()) + 1 if len(tokens) else 0))  # shared int objects
    get = ints.__getitem__
    return [list(map(get, tokens[offsets[i] : offsets[i + 1]].tolist())) for i in range(len(offsets) - 1)]


def _agreement(index, retriever, queries, tokens, folder) -> float:  # type: ignore[no-untyped-def]
    """Mean share of bm25s's top-10 (float32 scores) that ragspine's top-10 also returns."""
    top = lambda i: retriever.retrieve([tokens[i]], k=K, show_progress=False).documents[0].tolist()  # noqa: E731
    return top10_overlap(index, top, queries, folder)


def top10_overlap(index, top, queries, folder) -> float:  # type: ignore[no-untyped-def]
    """Mean share of another engine's top-10 (`top(i)`: row numbers of the token cache, for
    `queries[i]`) that ragspine's NarrativeIndex.retrieve top-10 also returns."""
    row_of = {}
    offsets_n = len(np.load(folder / "offsets.npy")) - 1
    rows = index.store.execute_read("SELECT row_id FROM narrative_chunk WHERE active = 1 ORDER BY row_id")
    assert len(rows) == offsets_n
    for position, (row_id,) in enumerate(rows):
        row_of[position] = row_id
    shares = []
    for i, q in enumerate(queries):
        ours = {r.chunk.chunk_id for r in index.retrieve(q, top_k=K, rerank=False)}
        docs = [int(d) for d in top(i)]
        theirs = {c.chunk_id for c in index.store.chunks_by_row_ids([row_of[d] for d in docs]) if c}
        shares.append(len(ours & theirs) / max(1, len(theirs)))
    return float(np.mean(shares))


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _tree_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


ENGINES: dict[str, Callable[[Path, list[str], int], dict[str, Any]]] = {
    "build": build, "serve": serve, "core": core, "bm25s": bm25s_engine,
    "rank_bm25": rank_bm25_engine, "compare": compare, "update": update,
}  # fmt: skip

if __name__ == "__main__":
    result = main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 3)
    print(json.dumps(result))
    os._exit(0)  # skip slow teardown of large heaps
