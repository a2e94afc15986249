"""Replica start-up over PostgreSQL: how long a fresh process takes to have its BM25 index, and its peak RSS.

A replica over PostgreSQL builds its lexical index from the server when it starts (pages of
20,000 active rows, tokenised and indexed). This benchmark fills a PostgreSQL (the `pgserver`
wheel, `ragspine.testing.postgres`) with the synthetic chunks of `bench/service_bench.py`
(fixed seed), then starts fresh processes that each open the store and bring the index up to
date (`NarrativeIndex.refresh()`, what a replica's first search does), timing it and reading the
process's peak RSS:

- `rebuild`: no local index cache (the default): the index is built from the server;
- `cache, cold`: with RAGSPINE_INDEX_CACHE set and the cache empty: built, then written there;
- `cache, warm`: the next start: the index is loaded from the cache (memory-mapped) after
  checking it against the store (store uid, data_version, epoch, row count and row-id sum),
  then caught up with the writes made since (none here, then one document);
- `SQLite rebuild (control)`, with --sqlite-control: the same chunks in a SQLite file whose
  index files were deleted, rebuilt the same way (what a single node pays).

    make bench-startup                                   # 100,000 chunks
    PYTHONPATH=.:src .venv/bin/python -m bench.startup_bench --chunks 1000000

The numbers are for one process on a 2-core machine shared with other work and with the
PostgreSQL server itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.service_bench import build_store

CHILD = r"""
import json, resource, sys, time
started = time.perf_counter()
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.factory import open_chunk_store
url, cache = sys.argv[1], sys.argv[2] or None
store = open_chunk_store(url, cache_dir=cache) if cache else open_chunk_store(url)
index = NarrativeIndex(store)  # the spec tokenizer (CJK unigrams + bigrams), no dense channel
imported = time.perf_counter() - started
index.refresh()
ready = time.perf_counter() - started
hits = index.retrieve("revenue 营收", top_k=3)
print(json.dumps({"import_s": imported, "ready_s": ready, "action": index.lexical_index.last_action,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rows": len(index.lexical_index.snapshot().active_positions())}))
store.close()
"""


def start(url: str, cache: str = "") -> dict[str, float | str]:
    out = subprocess.run([sys.executable, "-c", CHILD, url, cache], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    result: dict[str, float | str] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--pg-url", default=None, help="a PostgreSQL to fill (default: start one)")
    parser.add_argument("--no-cache", action="store_true", help="measure the rebuild only")
    parser.add_argument("--sqlite-control", action="store_true",
                        help="also rebuild the same chunks from a SQLite file (the single-node start)")
    parser.add_argument("--skip-plain", action="store_true",
                        help="skip the start without a cache (the cold cache start also rebuilds)")
    args = parser.parse_args()
    from ragspine.testing.postgres import LocalPostgres

    with tempfile.TemporaryDirectory(prefix="ragspine-startup-") as tmp:
        server = None if args.pg_url else LocalPostgres()
        url = args.pg_url or server.__enter__()  # type: ignore[union-attr]
        try:
            from ragspine.retrieval.store.factory import open_chunk_store

            with open_chunk_store(url) as store:
                store.init_schema()
                held = store.counts().chunks
            if held != args.chunks:  # a --pg-url filled by an earlier run is used as it is
                if held:
                    raise SystemExit(f"{url} holds {held:,} chunks, not {args.chunks:,}: give an empty database")
                fill_s, _ = build_store(url, args.chunks)
                print(f"filled {args.chunks:,} chunks in {fill_s:.1f} s", file=sys.stderr)
            rows = [] if args.skip_plain and not args.no_cache else [("rebuild", start(url))]
            if not args.no_cache:
                cache = str(Path(tmp) / "cache")
                rows.append(("cache, cold", start(url, cache)))
                rows.append(("cache, warm", start(url, cache)))
                from ragspine.retrieval.model import Chunk

                with open_chunk_store(url) as store:
                    store.replace_doc_chunks("late", [Chunk("late:0", "late", 0, "a late write 营收", "late#p1")])
                rows.append(("cache, warm + 1 write", start(url, cache)))
                with open_chunk_store(url) as store:
                    store.replace_doc_chunks("late", [])  # the database as it was, for a rerun
            if args.sqlite_control:  # the same chunks in a SQLite file, its index deleted: a rebuild
                lite = Path(tmp) / "control.db"
                build_store(lite, args.chunks)
                shutil.rmtree(str(lite) + ".bm25", ignore_errors=True)
                rows.append(("SQLite rebuild (control)", start(str(lite))))
        finally:
            if server is not None:
                server.__exit__(None, None, None)
    print("| start | chunks | ready s | of which imports s | peak RSS MB | how |")
    print("|---|---:|---:|---:|---:|---|")
    for name, row in rows:
        print(f"| {name} | {row['rows']:,} | {row['ready_s']:.1f} | {row['import_s']:.1f} | {row['rss_mb']:.0f} | {row['action']} |")


if __name__ == "__main__":
    os.environ.pop("RAGSPINE_DB", None)
    main()
