"""The visual channel's engineering cost on a CPU, with the tiny model (no quality is measured:
the tiny model has random weights; see docs/visual.md for how to measure quality).

Run: `PYTHONPATH=src:. .venv/bin/python -m bench.visual_bench [--pages 1000,10000] [--queries 50]
[--pdf-pages 40] [--colpali-shape 1000]` (or `make bench-visual`).

What it measures, each on this machine:
1. render: a generated PDF of `--pdf-pages` text pages (fpdf2, fixed text) rendered by pypdfium2
   at 96 dpi (pages/s);
2. embed: the tiny model over those rendered pages (pages/s);
3. index: for each size in `--pages`, a page index in a temporary folder built from the rendered
   pages' vectors, page i taking page (i mod pdf-pages)'s vectors plus a fixed-seed perturbation
   (the cost depends on the shapes, not the values): write time, bytes per page on disk;
4. search: `--queries` fixed queries (embedding included), median and p95 latency (wall) and the
   median CPU time of this process, unfiltered and with an `entity` filter that keeps a tenth of
   the pages;
5. with `--colpali-shape N`: the same search over N pages of ColPali-shaped random vectors
   (1030 patches x 128 dims, float32 as stored): the scorer's cost at a real model's size, no model run.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

QUERIES = ["quarterly revenue by region", "营收下滑的原因", "board minutes acquisition", "cash flow chart",
           "why did margins fall", "海外需求减弱", "headcount table 2024", "risk factors"]  # fmt: skip


def make_pdf(path: Path, pages: int) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for i in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 7, f"Page {i + 1}. " + "Revenue fell because overseas demand weakened. " * (5 + i % 20))
    pdf.output(str(path))
    return path.read_bytes()


def timed(fn: Any) -> tuple[Any, float, float]:
    """(result, wall seconds, CPU seconds of this process): on a shared machine the CPU time is
    what the work costs, the wall time also what the neighbours took."""
    started, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - started, time.process_time() - cpu


def latencies(fn: Any, queries: list[str]) -> dict[str, float]:
    fn(queries[0])  # warm: first map of the segments
    wall, cpu = [], []
    for q in queries:
        _, w, c = timed(lambda: fn(q))
        wall.append(w * 1000)
        cpu.append(c * 1000)
    wall.sort()
    return {"median_ms": round(statistics.median(wall), 2), "p95_ms": round(wall[int(0.95 * (len(wall) - 1))], 2),
            "median_cpu_ms": round(statistics.median(cpu), 2)}  # fmt: skip


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


def build(folder: Path, model_id: str, dim: int, base: list[np.ndarray], n: int) -> tuple[Any, float, float]:
    from ragspine.retrieval.visual.index import VisualIndex
    from ragspine.retrieval.visual.protocol import PageRecord

    rng = np.random.default_rng(11)
    index = VisualIndex(folder, model_id=model_id, dim=dim)
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(0, n, 256):  # as the ingest pass writes: about 256 pages per segment
        batch = []
        for i in range(start, min(n, start + 256)):
            v = base[i % len(base)] + 0.05 * rng.standard_normal(base[0].shape).astype(np.float32)
            fields = {"entity": "ACME" if i % 10 == 0 else "OTHER"}
            batch.append((PageRecord(f"doc{i // 20}.pdf", i % 20 + 1, "INTERNAL", version=1, fields=fields), v))
        index.write(batch)
    return index, time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", default="1000,10000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--pdf-pages", type=int, default=40)
    parser.add_argument("--colpali-shape", type=int, default=0, help="pages of ColPali-shaped vectors (0: skip)")
    args = parser.parse_args()

    from ragspine.ingest.loaders.pdf_pages import open_pdf_pages
    from ragspine.retrieval.filters import parse_filter
    from ragspine.retrieval.visual.channel import VisualChannel
    from ragspine.retrieval.visual.index import VisualIndex
    from ragspine.retrieval.visual.protocol import PageRecord
    from ragspine.retrieval.visual.tiny import TinyVisualEmbedder

    queries = [QUERIES[i % len(QUERIES)] + ("" if i < len(QUERIES) else f" {i}") for i in range(args.queries)]
    embedder = TinyVisualEmbedder()
    out: dict[str, Any] = {"model": embedder.model_id}
    with tempfile.TemporaryDirectory() as tmp:
        data = make_pdf(Path(tmp) / "bench.pdf", args.pdf_pages)
        with open_pdf_pages(data, dpi=96) as pdf:
            images, seconds, cpu = timed(lambda: [pdf.render(n) for n in range(1, len(pdf) + 1)])
        out["render_96dpi"] = {"pages": len(images), "pages_per_s": round(len(images) / seconds, 1),
                               "pages_per_cpu_s": round(len(images) / cpu, 1), "size": list(images[0].shape)}  # fmt: skip
        vectors, seconds, cpu = timed(lambda: embedder.embed_pages(images))
        out["embed"] = {"pages_per_s": round(len(images) / seconds, 1), "pages_per_cpu_s": round(len(images) / cpu, 1),
                        "patches": len(vectors[0])}  # fmt: skip
        for n in [int(x) for x in args.pages.split(",") if x]:
            folder = Path(tmp) / f"idx{n}"
            index, write_s, write_cpu = build(folder, embedder.model_id, embedder.dim, vectors, n)
            channel = VisualChannel(embedder, index)
            keep = parse_filter({"entity": "ACME"})
            out[f"pages_{n}"] = {
                "write_s": round(write_s, 2),
                "write_cpu_s": round(write_cpu, 2),
                "bytes_per_page": round(folder_bytes(folder) / n),
                "search": latencies(lambda q: channel.search(q, 10), queries),
                "search_filtered_10pct": latencies(lambda q: channel.search(q, 10, keep), queries),
            }
        if args.colpali_shape:
            n = args.colpali_shape
            folder = Path(tmp) / "colpali"
            index = VisualIndex(folder, model_id="colpali-shape", dim=128)
            rng = np.random.default_rng(5)
            for start in range(0, n, 64):
                batch = []
                for i in range(start, min(n, start + 64)):
                    v = rng.standard_normal((1030, 128)).astype(np.float32)
                    batch.append((PageRecord(f"d{i}.pdf", 1, "INTERNAL", version=1), v / np.linalg.norm(v, axis=1, keepdims=True)))
                index.write(batch)
            q = rng.standard_normal((20, 128)).astype(np.float32)  # ~20 query tokens, as ColPali's
            q /= np.linalg.norm(q, axis=1, keepdims=True)
            out[f"colpali_shape_{n}"] = {
                "bytes_per_page": round(folder_bytes(folder) / n),
                "search_without_query_embedding": latencies(lambda _q: index.search(q, 10), queries[:10]),
            }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
