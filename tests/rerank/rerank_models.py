"""Tiny real models for the reranker tests, built here: a word-level `tokenizers` tokenizer and
ONNX graphs made with the `onnx` package (no PyTorch, no download), run by ONNX Runtime.

- cross-encoder: logit = Σ over the passage's tokens (token type 1) of WEIGHTS[token];
- ColBERT: each token's vector is its one-hot row, so MaxSim counts the query's tokens the
  passage has.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

WORDS = [
    "why", "did", "revenue", "fall", "fell", "because", "overseas", "demand", "weakened", "the",
    "weather", "was", "sunny", "all", "week", "passage", "secret", "ceo", "salary", "plan",
]  # fmt: skip
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
VOCAB = {token: i for i, token in enumerate(SPECIALS + WORDS)}
WEIGHTS = {"revenue": 3.0, "demand": 2.0, "fell": 1.0, "weakened": 1.0}


def write_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", VOCAB["[CLS]"]), ("[SEP]", VOCAB["[SEP]"])],
    )  # fmt: skip
    tok.save(str(folder / "tokenizer.json"))


def _save(graph: object, folder: Path) -> None:
    import onnx

    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))


def _inputs() -> list[object]:
    from onnx import TensorProto, helper

    return [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
            for n in ("input_ids", "attention_mask", "token_type_ids")]  # fmt: skip


def cross_encoder_folder(folder: Path, *, two_logits: bool = False, weights: dict[str, float] | None = None) -> Path:
    """A cross-encoder model folder; `two_logits`: a (batch, 2) head (class 0 logit 0);
    `weights`: other word weights than WEIGHTS."""
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    width = 2 if two_logits else 1
    table = np.zeros((len(VOCAB), width), dtype=np.float32)
    for word, weight in (WEIGHTS if weights is None else weights).items():
        table[VOCAB[word], width - 1] = weight
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["emb"]),
        helper.make_node("Mul", ["attention_mask", "token_type_ids"], ["second"]),
        helper.make_node("Cast", ["second"], ["secondf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["secondf", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["logits"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "tiny-cross-encoder", _inputs(),
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", width])],
        initializer=[numpy_helper.from_array(table, "table"),
                     numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
                     numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")],
    )  # fmt: skip
    _save(graph, folder)
    write_tokenizer(folder)
    return folder


def colbert_folder(folder: Path) -> Path:
    """A ColBERT-shaped model folder: (batch, tokens, dim) one-hot token vectors."""
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    table = np.eye(len(VOCAB), dtype=np.float32)
    table[VOCAB["[PAD]"]] = 0.0
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"])],
        "tiny-colbert", _inputs()[:1],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", len(VOCAB)])],
        initializer=[numpy_helper.from_array(table, "table")],
    )  # fmt: skip
    _save(graph, folder)
    write_tokenizer(folder)
    return folder
