"""multilingual-e5-small's encoder layers compiled by OpenVINO for the CPU, from the same float32
ONNX graph as the ONNX Runtime float32 engine (`e5_onnx`, `GRAPH_REVISIONS["fp32"]`).

The graph is compiled with OpenVINO's bf16 inference-precision hint where the CPU has bf16
units (OpenVINO lists "BF16" in the CPU's optimization capabilities: AMX or AVX-512 BF16), and in
float32 elsewhere; `inference_precision()` says which, before any model is built.

Invariants:
- Tokenisation, the embedding lookup, batching by length and pooling are `E5Engine`'s own (this
  class is an `E5Engine` whose `_forward` runs the layers in OpenVINO), as in `E5OnnxEngine`.
- No per-run activation scale: a text's vector does not depend on its batch mates beyond float
  rounding (padded keys are masked before the softmax and out of the pooling), so texts run
  batched by length.
- The float32 ONNX file is the one `E5OnnxEngine(precision="fp32")` builds and caches (same
  name, same atomic write): building either engine once serves both.
- One infer request, behind a lock: calls from several threads (a search embedding its query
  while a background job embeds passages) take turns.
- `openvino` is imported lazily; without it the error names the `[embed-e5-openvino]` extra
  (and `onnx`, needed to build the graph on first use, the same extra).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.retrieval.vector.embeddings.e5_engine import E5Engine, pool
from ragspine.retrieval.vector.embeddings.e5_onnx import GRAPH_REVISIONS, cached_graph
from ragspine.retrieval.vector.embeddings.support import require

log = logging.getLogger(__name__)

EXTRA = "embed-e5-openvino"
PRECISIONS = ("bf16", "fp32")


@functools.lru_cache(maxsize=1)
def inference_precision() -> str:
    """"bf16" when OpenVINO reports bf16 units on this CPU, else "fp32" (also when openvino is
    not installed: the tag an engine built here would carry is then moot)."""
    if importlib.util.find_spec("openvino") is None:
        return "fp32"
    ov = require("openvino", extra=EXTRA, backend="E5OpenVinoEngine")
    capabilities = ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    return "bf16" if "BF16" in capabilities else "fp32"


def graph_tag() -> str:
    """The `engine=` tag of the vectors this machine's OpenVINO engine makes:
    `openvino-<precision>-g<float32 graph revision>`."""
    return f"openvino-{inference_precision()}-g{GRAPH_REVISIONS['fp32']}"


class E5OpenVinoEngine(E5Engine):
    """`E5Engine` with its encoder layers compiled by OpenVINO. `encode(texts, is_query)` →
    (n, 384) float32 unit rows."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        max_tokens: int = 512,
        cache_dir: str | Path | None = None,
        threads: int | None = None,
    ) -> None:
        ov = require("openvino", extra=EXTRA, backend="E5OpenVinoEngine")
        self.precision = inference_precision()
        self.weights_sha256, self.onnx_path = cached_graph(model_path, "fp32", cache_dir, extra=EXTRA)
        super().__init__(model_path, max_tokens=max_tokens, layers=False)
        config: dict[str, Any] = {
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "bf16" if self.precision == "bf16" else "f32",
        }
        if threads is not None:
            config["INFERENCE_NUM_THREADS"] = threads
        core = ov.Core()
        compiled = core.compile_model(core.read_model(str(self.onnx_path)), "CPU", config)
        self._request = compiled.create_infer_request()
        self._lock = threading.Lock()  # one infer request: calls from several threads take turns

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        x, mask = self._embeddings(batch)
        with self._lock:
            result = self._request.infer({"embeddings": x, "mask": mask.astype(np.float32)})
            hidden = np.array(result["hidden"], dtype=np.float32)  # a copy: the request reuses its buffer
        return pool(hidden, mask)
