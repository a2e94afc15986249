"""Cold attach of the dense channel: a fresh process opens N persisted vectors and aligns them with
the lexical index (what every `ragspine search` / service start pays before its first query).

Run: `PYTHONPATH=. .venv/bin/python -m bench.dense_attach [--work DIR] [--scale 100k] [--runs 3]
[--before SRC]` (or `make bench-attach`).

The store is the synthetic corpus of `bench.prepare` (fixed seed). Every chunk gets a random unit
384-d vector (fixed seed; the values do not change the cost) written with `vector_metadata`, which
stores the language of the chunk's text; a second copy of the file has that key removed, as a
file written before languages were stored. Each row is a fresh child process (the runs
interleaved): open the store, load the lexical index (not timed), then time
`DenseChannel.attach` (read every vector, map positions to rows, find each position's language,
centring). `--before SRC` adds the same run with another checkout's `src` folder first on the
path (e.g. the commit before languages were stored), on the file with languages.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.dense_bench import DIM, RandomQueries
from bench.prepare import prepare


def write_vectors(db: Path, target: Path, *, languages: bool) -> float:
    """Write every chunk's vector (and metadata) to `target`; seconds taken."""
    from ragspine.retrieval.store.sqlite import ChunkStore
    from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors, vector_metadata

    started = time.perf_counter()
    rng = np.random.default_rng(7)
    with ChunkStore(db) as store, ChunkVectors(target, model_id=RandomQueries.model_id, dim=DIM) as vectors:
        chunks = list(store.iter_chunks())
        for i in range(0, len(chunks), 10_000):
            batch = chunks[i : i + 10_000]
            metas = [vector_metadata(c) for c in batch]
            if not languages:
                for meta in metas:
                    meta.pop("text_language", None)
            matrix = rng.standard_normal((len(batch), DIM)).astype(np.float32)
            vectors.upsert([c.chunk_id for c in batch], matrix, metas)
    return time.perf_counter() - started


def child(db: Path) -> None:
    """One cold attach in this process; prints JSON."""
    from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex, StoreChunks
    from ragspine.retrieval.store.sqlite import ChunkStore

    with ChunkStore(db) as store:
        index = NarrativeIndex(store, embedding_backend=RandomQueries())
        snapshot = index.lexical_index.snapshot()
        assert index.dense is not None
        started = time.perf_counter()
        index.dense.attach(snapshot, StoreChunks(store, snapshot))
        seconds = time.perf_counter() - started
        coverage = index.dense.coverage()
        index.close()
    print(json.dumps({"attach_s": seconds, "with_vector": coverage.with_vector}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragspine-bench"))
    parser.add_argument("--scale", default="100k")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None)
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    meta = prepare(args.work, args.scale)
    folder = args.work / args.scale
    db = folder / "chunks.db"
    files = {"with": folder / "vectors-with-languages.sqlite", "without": folder / "vectors-without-languages.sqlite"}
    for kind, path in files.items():
        if not path.exists():
            seconds = write_vectors(db, path, languages=kind == "with")
            print(f"wrote {path.name} in {seconds:.1f} s")
    here = str(Path(__file__).resolve().parents[1])
    rows = {
        "this code, vectors stored with their language": (files["with"], os.environ.get("PYTHONPATH", "")),
        "this code, vectors without a language (older file: detected)": (files["without"], os.environ.get("PYTHONPATH", "")),
    }
    if args.before is not None:
        rows = {
            f"before ({args.before}), same file with languages": (files["with"], f"{args.before}:{here}"),
            **rows,
        }
    times: dict[str, list[float]] = {name: [] for name in rows}
    beside = Path(f"{db}.vectors.sqlite")
    for _ in range(args.runs):
        for name, (path, pythonpath) in rows.items():
            shutil.copyfile(path, beside)
            env = {**os.environ, "PYTHONPATH": pythonpath}
            out = subprocess.run(
                [sys.executable, "-m", "bench.dense_attach", "--child", str(db)],
                env=env, cwd=here, check=True, capture_output=True, text=True,
            )  # fmt: skip
            result = json.loads(out.stdout.strip().splitlines()[-1])
            assert result["with_vector"] == meta["n_chunks"], result
            times[name].append(result["attach_s"])
            print(f"  {name}: {result['attach_s']:.2f} s", flush=True)
    print(f"corpus {args.scale}: {meta['n_chunks']:,} chunks, all with vectors; {args.runs} cold runs each")
    print("| dense channel cold attach | median s | min s |")
    print("|---|---:|---:|")
    for name, values in times.items():
        print(f"| {name} | {np.median(values):.2f} | {min(values):.2f} |")


if __name__ == "__main__":
    main()
