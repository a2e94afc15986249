"""What the local model rerankers share: the model folder, an ONNX model with its tokenizer, and
scores → order.

Invariants: nothing is downloaded; a missing folder or file is an error naming
RAGSPINE_RERANKER_MODEL (the folder `model_dir=None` falls back to, read by `spec_from_env` as
the specification's `make_reranker("cross_encoder")` needs) and what the folder must hold.
`order_by_scores` breaks ties by the incoming position, so equal scores keep the fused order;
a NaN score is an error (the guard then keeps the fused order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.extras import require
from ragspine.registry import spec_from_env
from ragspine.retrieval.vector.embeddings.onnx import model_feed, pad_id, padded_feed

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
        self, model_dir: str | Path | None, *, what: str, extra: str, max_length: int, threads: int | None
    ) -> None:
        if max_length < 4:
            raise ValueError(f"max_length must be at least 4, got {max_length}")
        ort = require("onnxruntime", extra=extra, purpose=what)
        tokenizers = require("tokenizers", extra=extra, purpose=what)
        self.folder = model_folder(model_dir, what=what, holds="model.onnx + tokenizer.json")
        model = next((self.folder / n for n in ONNX_FILES if (self.folder / n).is_file()), None)
        tokenizer = self.folder / "tokenizer.json"
        for path, name in ((model, "model.onnx"), (tokenizer, "tokenizer.json")):
            if path is None or not path.is_file():
                raise FileNotFoundError(f"{what}: {name} is missing from the model folder {str(self.folder)!r}")
        assert model is not None
        self.model_path = model
        self.tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_length)
        self.pad = pad_id(self.tokenizer)
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.output = self.session.get_outputs()[0].name

    def run(self, encodings: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """(the first output as float32, the attention mask) for a batch of encodings."""
        feed = padded_feed(encodings, self.pad)
        (out, *_) = self.session.run([self.output], model_feed(feed, self.inputs, self.model_path))
        return np.asarray(out, dtype=np.float32), feed["attention_mask"]
