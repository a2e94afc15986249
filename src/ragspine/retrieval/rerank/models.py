"""What the local model rerankers share: the model folder, an ONNX model with its tokenizer, and
scores → order (`ScoredReranker`).

Invariants: nothing is downloaded; a missing folder or file is an error naming
RAGSPINE_RERANKER_MODEL (the folder `model_dir=None` falls back to, read by `spec_from_env` as
the specification's `make_reranker("cross_encoder")` needs) and what the folder must hold.
`order_by_scores` breaks ties by the incoming position, so equal scores keep the fused order;
a NaN score is an error (the guard then keeps the fused order).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.extras import require
from ragspine.registry import spec_from_env
from ragspine.retrieval.vector.arrays import batches
from ragspine.retrieval.vector.embeddings.onnx import cpu_session, load_tokenizer, model_feed, pad_id, padded_feed

MODEL_SETTING = "RAGSPINE_RERANKER_MODEL"
ONNX_FILES = ("model.onnx", "onnx/model.onnx")


def order_by_scores(scores: Sequence[float]) -> list[int]:
    """Indexes by descending score, ties in the given order.

    >>> order_by_scores([0.1, 0.9, 0.1])
    [1, 0, 2]
    """
    values = [float(s) for s in scores]
    if any(math.isnan(v) for v in values):
        raise ValueError("the model returned NaN scores")
    return sorted(range(len(values)), key=lambda i: (-values[i], i))


class ScoredReranker:
    """The base of a reranker that scores each candidate: `rerank` is the order of its `scores`,
    best first, ties in the given order (`order_by_scores`)."""

    def scores(self, query: str, candidates: list[str]) -> list[float]:
        """One relevance score per candidate (each subclass says how)."""
        raise NotImplementedError(f"{type(self).__name__} must define scores()")

    def rerank(self, query: str, candidates: list[str]) -> list[int]:
        return order_by_scores(self.scores(query, candidates))


def model_folder(model_dir: str | Path | None, *, what: str, holds: str) -> Path:
    """The model folder: `model_dir`, else RAGSPINE_RERANKER_MODEL; a clear error when neither
    names an existing folder."""
    given = str(model_dir) if model_dir is not None else spec_from_env((MODEL_SETTING,), "")
    if not given:
        raise ValueError(
            f"{what} needs a model folder ({holds}): pass model_dir= or set {MODEL_SETTING}; "
            "nothing is downloaded"
        )
    folder = Path(given).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{what}: model folder {given!r} ({MODEL_SETTING}) is not a folder")
    return folder


class OnnxModel:
    """An ONNX model folder (model.onnx + tokenizer.json) on ONNX Runtime's CPU provider."""

    def __init__(
        self, model_dir: str | Path | None, *, what: str, extra: str, max_length: int, batch_size: int,
        threads: int | None,
    ) -> None:  # fmt: skip
        if max_length < 4 or batch_size < 1:
            raise ValueError(f"max_length must be at least 4 and batch_size at least 1, got {max_length}, {batch_size}")
        ort = require("onnxruntime", extra=extra, purpose=what)
        tokenizers = require("tokenizers", extra=extra, purpose=what)
        self.folder = model_folder(model_dir, what=what, holds="model.onnx + tokenizer.json")
        model = next((self.folder / n for n in ONNX_FILES if (self.folder / n).is_file()), None)
        tokenizer = self.folder / "tokenizer.json"
        for path, name in ((model, "model.onnx"), (tokenizer, "tokenizer.json")):
            if path is None or not path.is_file():
                raise FileNotFoundError(f"{what}: {name} is missing from the model folder {str(self.folder)!r}")
        assert model is not None
        self.model_path, self.batch_size = model, batch_size
        self.tokenizer = load_tokenizer(tokenizers, tokenizer, max_length)
        self.pad = pad_id(self.tokenizer)
        self.session = cpu_session(ort, model, threads)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.output = self.session.get_outputs()[0].name

    def run_batches(self, inputs: list[Any]) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        """Tokenize `inputs` (texts or (text, text) pairs) and run them batched by length:
        (the inputs' indexes, the first output as float32, the attention mask) per batch."""
        encodings = self.tokenizer.encode_batch(inputs)
        order = sorted(range(len(inputs)), key=lambda i: len(encodings[i].ids))
        for batch in batches(order, self.batch_size):
            feed = padded_feed([encodings[i] for i in batch], self.pad)
            (out, *_) = self.session.run([self.output], model_feed(feed, self.inputs, self.model_path))
            yield list(batch), np.asarray(out, dtype=np.float32), feed["attention_mask"]
