"""Time the visual channel on an accelerator: page embedding and query embedding with a real
ColPali / ColQwen2 checkpoint on CUDA (or the CPU), then search over the page index.

Run on a machine with a GPU, the weights in a local folder and `pip install 'ragspine[colpali]'`:

    PYTHONPATH=src:. python -m bench.visual_gpu --model-dir models/colqwen2-v1.0 --family colqwen2 \
        --device cuda --pages 64 --index-pages 1000,10000 --queries 20

Without a checkpoint (`--model-dir` not given) it times the scorer alone: MaxSim of ColPali-shaped
random vectors (1030 patches x 128; bfloat16 on CUDA) with torch on `--device`, beside the numpy
scorer the index uses. The torch figure is what an on-device scorer would cost: the shipped index
does not have one (`VisualIndex.search` scores with numpy on the CPU, whatever the device).
Pages are a generated PDF (fpdf2, fixed text) rendered at `--dpi` by pypdfium2. Prints one JSON
object. This measures cost only: quality needs a labelled set (docs/visual.md).
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

from bench.visual_bench import QUERIES, folder_bytes, make_pdf


def sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_ms(times: list[float]) -> float:
    return round(statistics.median(times) * 1000, 2)


def model_run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Embed rendered pages and queries with the real model, build an index, time searches."""
    from ragspine.ingest.loaders.pdf_pages import open_pdf_pages
    from ragspine.retrieval.visual.channel import VisualChannel
    from ragspine.retrieval.visual.factory import make_visual_embedder
    from ragspine.retrieval.visual.index import VisualIndex
    from ragspine.retrieval.visual.protocol import PageRecord

    started = time.perf_counter()
    embedder = make_visual_embedder(args.family, model_dir=args.model_dir, device=args.device, batch_size=args.batch_size)
    assert embedder is not None
    out["load_s"] = round(time.perf_counter() - started, 1)
    with tempfile.TemporaryDirectory() as tmp:
        data = make_pdf(Path(tmp) / "bench.pdf", args.pages)
        with open_pdf_pages(data, dpi=args.dpi) as pdf:
            images = [pdf.render(n) for n in range(1, len(pdf) + 1)]
        embedder.embed_pages(images[: args.batch_size])  # warm-up: kernels, allocator
        started = time.perf_counter()
        vectors = embedder.embed_pages(images)
        seconds = time.perf_counter() - started
        out["embed_pages"] = {"pages": len(images), "pages_per_s": round(len(images) / seconds, 2),
                              "patches_per_page": int(np.median([len(v) for v in vectors])), "dim": embedder.dim}  # fmt: skip
        queries = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
        times = []
        for q in queries:
            t = time.perf_counter()
            embedder.embed_queries([q])
            times.append(time.perf_counter() - t)
        out["embed_query_median_ms"] = median_ms(times)
        for n in [int(x) for x in args.index_pages.split(",") if x]:
            folder = Path(tmp) / f"idx{n}"
            index = VisualIndex(folder, model_id=embedder.model_id, dim=embedder.dim)
            for start in range(0, n, 256):
                index.write([(PageRecord(f"d{i}.pdf", 1, "INTERNAL", version=1), vectors[i % len(vectors)])
                             for i in range(start, min(n, start + 256))])  # fmt: skip
            channel = VisualChannel(embedder, index)
            times = []
            for q in queries:
                t = time.perf_counter()
                channel.search(q, 10)
                times.append(time.perf_counter() - t)
            out[f"search_{n}_pages"] = {"median_ms": median_ms(times), "bytes_per_page": round(folder_bytes(folder) / n)}


def scorer_run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """MaxSim of ColPali-shaped vectors on the device with torch, and with the index's numpy scorer."""
    import torch

    from ragspine.retrieval.vector.late_interaction import maxsim_packed

    rng = np.random.default_rng(3)
    for n in [int(x) for x in args.index_pages.split(",") if x]:
        pages = rng.standard_normal((n * 1030, 128)).astype(np.float32)
        q = rng.standard_normal((20, 128)).astype(np.float32)
        dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
        on_device = torch.from_numpy(pages).to(args.device, dtype=dtype)
        tq = torch.from_numpy(q).to(args.device, dtype=dtype)
        times = []
        for _ in range(args.queries):
            sync(torch, args.device)
            t = time.perf_counter()
            scores = (on_device @ tq.T).view(n, 1030, 20).amax(dim=1).sum(dim=1)
            torch.topk(scores.float(), 10)
            sync(torch, args.device)
            times.append(time.perf_counter() - t)
        offsets = np.arange(0, n * 1030 + 1, 1030)
        t = time.perf_counter()
        maxsim_packed(q, pages, offsets)
        out[f"scorer_{n}_pages"] = {"torch_median_ms": median_ms(times), "numpy_one_query_ms": round((time.perf_counter() - t) * 1000, 1),
                                    "device": args.device, "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", default=None, help="local ColPali/ColQwen2 folder (none: scorer only)")
    parser.add_argument("--family", default="colqwen2", choices=("colpali", "colqwen2"))
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--pages", type=int, default=64, help="pages of the generated PDF to embed")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--dpi", type=int, default=96)
    parser.add_argument("--index-pages", default="1000,10000")
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    out: dict[str, Any] = {"device": args.device}
    (model_run if args.model_dir else scorer_run)(args, out)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
