"""RAPTOR benchmark (issue 19): build time and size, incremental update, added query latency,
and whether synthesis nodes bring relevant documents.

    PYTHONPATH=src:. .venv/bin/python -m bench.raptor_bench ../shared/eval/scifact --docs 2100 [--embedding deterministic]
    PYTHONPATH=src:. .venv/bin/python -m bench.raptor_bench --synthetic 100000 [--queries 100]

Deterministic: the first --docs corpus entries in file order (title, blank line, text) are
ingested into a fresh SQLite store with the paragraph chunker (480/80) and embedded with
--embedding; the queries are the --split queries, in file order, whose judged documents are all
among those entries. Latency: median over those queries of `retrieve(top_k=10)` in leaves mode
(the plain pipeline) and in collapsed mode. Node recall: the share of queries for which the top-3
nodes' member documents include a judged document (and the same for the top-3 leaves).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.raptor import RaptorConfig, make_raptor_retriever
from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path, nargs="?")
    parser.add_argument("--synthetic", type=int, default=0, help="chunks of the synthetic corpus instead of a dataset")
    parser.add_argument("--queries", type=int, default=100, help="synthetic queries to time")
    parser.add_argument("--docs", type=int, default=2100)
    parser.add_argument("--split", default="test")
    parser.add_argument("--embedding", default="deterministic")
    parser.add_argument("--threshold", type=float, default=RaptorConfig().threshold)
    parser.add_argument("--max-cluster", type=int, default=8)
    parser.add_argument("--levels", type=int, default=3)
    args = parser.parse_args()
    if args.synthetic:
        synthetic(args)
        return
    if args.dataset is None:
        parser.error("give a dataset folder or --synthetic N")
    entries = [json.loads(line) for line in (args.dataset / "corpus.jsonl").read_text("utf-8").splitlines() if line.strip()]
    entries = entries[: args.docs]
    ids = {e["_id"] for e in entries}
    qrels: dict[str, set[str]] = {}
    for line in (args.dataset / "qrels" / f"{args.split}.tsv").read_text("utf-8").splitlines()[1:]:
        qid, did, score = line.split("\t")
        if float(score) > 0:
            qrels.setdefault(qid, set()).add(did)
    queries = [
        (q["_id"], q["text"])
        for q in map(json.loads, (args.dataset / "queries.jsonl").read_text("utf-8").splitlines())
        if q["_id"] in qrels and qrels[q["_id"]] <= ids and q["text"].strip()
    ]
    backend = make_embedding_backend(args.embedding)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "chunks.db"
        base, store = build_narrative_retriever(db, embedding_backend=backend, embed_on_write=False, query_rewriter=None)
        try:
            started = time.perf_counter()
            for e in entries:
                base.index.ingest(f"{e['title']}\n\n{e['text']}", DocumentMeta(e["_id"], title=e["title"], sensitivity="PUBLIC"))
            ingest_s = time.perf_counter() - started
            raptor, embed_s = _embed_and_build(base, args, Path(tmp))
            print(f"{args.dataset.name}: {len(entries)} documents, {store.counts().chunks} chunks (ingest {ingest_s:.1f}s, "
                  f"embedding {args.embedding} {embed_s:.1f}s)")  # fmt: skip
            first = entries[0]
            base.index.ingest(f"{first['title']}\n\n{first['text']} Updated.", DocumentMeta(first["_id"], title=first["title"], sensitivity="PUBLIC"))
            base.index.embed_pending(progress=False)
            update = raptor.build()
            print(f"update after one changed document: {update.seconds:.2f}s, {update.summarised} nodes re-summarised")
            timings: dict[str, list[float]] = {"leaves": [], "collapsed": []}
            hits = {"leaves": 0, "nodes": 0}
            for qid, text in queries:
                for mode in ("leaves", "collapsed"):
                    raptor.mode = mode
                    t = time.perf_counter()
                    raptor.retrieve(text, top_k=10)
                    timings[mode].append(time.perf_counter() - t)
                raptor.mode = "nodes"
                nodes = raptor.retrieve(text, top_k=3)
                hits["nodes"] += bool({d for n in nodes for d in n["lineage"]["doc_ids"]} & qrels[qid])
                raptor.mode = "leaves"
                hits["leaves"] += bool({s["doc_id"] for s in raptor.retrieve(text, top_k=3)} & qrels[qid])
            n = max(len(queries), 1)
            print(f"{len(queries)} {args.split} queries: median retrieve leaves {1000 * statistics.median(timings['leaves']):.1f} ms, "
                  f"collapsed {1000 * statistics.median(timings['collapsed']):.1f} ms; a judged document among the "
                  f"top-3 nodes' members {hits['nodes'] / n:.1%}, among the top-3 leaves {hits['leaves'] / n:.1%}")  # fmt: skip
            raptor.close()
        finally:
            base.index.close()
            store.close()


def _embed_and_build(base: Any, args: argparse.Namespace, folder: Path) -> tuple[Any, float]:
    """Embed the store's chunks, then a full build with the bench's settings (printed); the
    RAPTOR retriever (collapsed) and the embedding seconds."""
    started = time.perf_counter()
    base.index.embed_pending(progress=False)
    embed_s = time.perf_counter() - started
    raptor = make_raptor_retriever(base, mode="collapsed", config=RaptorConfig(args.threshold, args.max_cluster, args.levels))
    report = raptor.build(full=True)
    status = raptor.status()
    store_bytes = sum(p.stat().st_size for p in folder.glob("chunks.db*") if "raptor" not in p.name and p.is_file())
    print(f"full build: {report.seconds:.1f}s; nodes per level {report.nodes}; "
          f"tree file {status['bytes'] / 1e6:.1f} MB (store + vectors {store_bytes / 1e6:.1f} MB)")  # fmt: skip
    return raptor, embed_s


def synthetic(args: argparse.Namespace) -> None:
    """Cost at scale on the synthetic corpus: ingest (bulk), embed, full build, one update, latency."""
    from bench.corpus import synthetic_chunks, synthetic_queries
    from bench.prepare import _ingest_synthetic

    backend = make_embedding_backend(args.embedding)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "chunks.db"
        started = time.perf_counter()
        _ingest_synthetic(db, args.synthetic, bulk=True)
        ingest_s = time.perf_counter() - started
        base, store = build_narrative_retriever(db, embedding_backend=backend, embed_on_write=False, query_rewriter=None)
        try:
            raptor, embed_s = _embed_and_build(base, args, Path(tmp))
            print(f"synthetic: {store.counts().chunks} chunks (bulk ingest {ingest_s:.1f}s, embedding {args.embedding} {embed_s:.1f}s)")
            first = next(synthetic_chunks(1))
            base.index.ingest(first.text + " Updated.", DocumentMeta(first.doc_id, title=first.doc_id, sensitivity="PUBLIC"))
            base.index.embed_pending(progress=False)
            update = raptor.build()
            print(f"update after one changed document: {update.seconds:.2f}s, {update.summarised} nodes re-summarised")
            texts = [c.text for c in store.iter_chunks()]
            timings: dict[str, list[float]] = {"leaves": [], "collapsed": []}
            for text in synthetic_queries(texts, args.queries):
                for mode in ("leaves", "collapsed"):
                    raptor.mode = mode
                    t = time.perf_counter()
                    raptor.retrieve(text, top_k=10)
                    timings[mode].append(time.perf_counter() - t)
            print(f"{args.queries} queries: median retrieve leaves {1000 * statistics.median(timings['leaves']):.1f} ms, "
                  f"collapsed {1000 * statistics.median(timings['collapsed']):.1f} ms")  # fmt: skip
            raptor.close()
        finally:
            base.index.close()
            store.close()


if __name__ == "__main__":
    main()
