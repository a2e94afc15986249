"""Relation graph build and query cost on a generated corpus of company groups (`make bench-graph`).

    PYTHONPATH=src:. .venv/bin/python -m bench.graph_bench --chunks 10000 100000

The corpus is `ragspine.testing.graph_corpus` scaled up (deterministic: groups of one parent, 4
subsidiaries each with one subsidiary, 4 periods, 5 chunks per report, every 5th report RESTRICTED),
written straight into a SQLite chunk store (`replace_doc_chunks`; the lexical index is not built:
the graph reads chunks only). For each size it reports the build time with the cooccurrence
extractor (read + build + write), the graph file's size, the load time of each GraphStore, and the
median / p95 latency of roll-up, peers and trace over 200 entities (every k-th entity in name order).
Roll-up with a narrative search adds one filtered search, measured by the search benchmarks.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ragspine.graph import GraphQueries, build_relation_graph, make_graph_store, make_relation_extractor
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.testing.graph_corpus import GraphCorpus, graph_corpus

PER_GROUP = (1 + 2 * 4) * 4 * 5  # entities per group * periods * chunks per report
QUERIES = 200


def corpus_for(chunks: int) -> GraphCorpus:
    return graph_corpus(groups=max(1, round(chunks / PER_GROUP)), subsidiaries=4,
                        periods=("2021", "2022", "2023", "2024"), chunks_per_report=5)  # fmt: skip


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"{statistics.median(ordered) * 1000:.2f} / {ordered[int(len(ordered) * 0.95)] * 1000:.2f}"


def run(chunks: int, folder: Path) -> None:
    corpus = corpus_for(chunks)
    db = folder / f"chunks-{chunks}.db"
    start = time.perf_counter()
    reuse = db.is_file()  # a store kept by an earlier run with --dir: the same corpus (deterministic)
    store = ChunkStore(str(db))
    store.init_schema()
    if not reuse or store.counts().chunks != corpus.chunks:
        corpus.ingest(store)
    ingest_s = time.perf_counter() - start
    rel = corpus.relations_csv(folder / f"relations-{chunks}.csv")
    start = time.perf_counter()
    graph = build_relation_graph(store, rel, extractor=make_relation_extractor("cooccurrence"))
    built_s = time.perf_counter() - start
    path = str(db) + ".graph.json"
    start = time.perf_counter()
    make_graph_store("in_process", path=path).replace(graph)
    write_s = time.perf_counter() - start
    print(f"\n{corpus.chunks} chunks, {len(corpus.docs)} reports, {len(corpus.parent) + len(corpus.rollup_docs)} "
          f"entities (store {'reused' if reuse else 'written'} in {ingest_s:.1f}s)")  # fmt: skip
    print(f"  build (cooccurrence): {built_s:.2f}s; write: {write_s:.2f}s; {len(graph.nodes)} nodes, "
          f"{len(graph.edges)} edges, file {Path(path).stat().st_size / 1e6:.1f} MB")  # fmt: skip
    entities = sorted(n.removeprefix("entity:") for n in graph.nodes if n.startswith("entity:"))
    picked = entities[:: max(1, len(entities) // QUERIES)][:QUERIES]
    roots = sorted(corpus.rollup_docs)[:: max(1, len(corpus.rollup_docs) // QUERIES)][:QUERIES]
    for kind in ("in_process", "networkx"):
        start = time.perf_counter()
        gs = make_graph_store(kind, path=path)
        load_s = time.perf_counter() - start
        q = GraphQueries(gs, store)
        timings: dict[str, list[float]] = {"rollup": [], "peers": [], "trace": []}
        for name, calls in (("rollup", [lambda r=r: q.rollup(r) for r in roots]),
                            ("peers", [lambda r=r: q.peers(r, period="2024") for r in roots]),
                            ("trace", [lambda e=e: q.trace(e, corpus.parent[e], "subsidiary_of")
                                       for e in picked if e in corpus.parent])):  # fmt: skip
            for call in calls:
                t = time.perf_counter()
                call()
                timings[name].append(time.perf_counter() - t)
        print(f"  {kind:<10} load {load_s:.2f}s; median / p95 ms: roll-up {_ms(timings['rollup'])}, "
              f"peers {_ms(timings['peers'])}, trace {_ms(timings['trace'])}")  # fmt: skip
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--dir", type=Path, default=None, help="Keep the stores here, and reuse them on the next run (default: a temporary folder).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for chunks in args.chunks:
            run(chunks, folder)


if __name__ == "__main__":
    main()
