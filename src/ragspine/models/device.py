"""Where a model runs: RAGSPINE_DEVICE's value (`auto`, `cpu`, `cuda`) turned into ONNX Runtime's
execution providers (`onnx_session`, the one place an ONNX Runtime session is made) or PyTorch's
device (`torch_device`, the visual models).

Invariants:
- The providers come from `onnx_device(device, available)`, where `available` is what ONNX
  Runtime reports (`get_available_providers()`): `cpu` is the CPU provider alone; `cuda` and
  `auto` put CUDAExecutionProvider first (the CPU provider after it, for the operators CUDA
  lacks) when ONNX Runtime offers it (the `onnxruntime-gpu` build, the `[gpu]` extra).
- ONNX Runtime lists the CUDA provider whenever the GPU build is installed, even with no GPU or
  no CUDA libraries, and then quietly runs on the CPU: the providers a session really got are
  read back from it (`session.get_providers()`), so a missing GPU is seen too.
- `auto` without CUDA runs on the CPU and logs why in one line, once per process and reason
  (INFO without GPU support installed, WARNING when it is installed but cannot start); `cuda`
  without CUDA is a `DeviceUnavailable` whose one line names what is missing.
- Nothing here reads a setting: assembly passes the device down as a parameter.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspine.errors import RagspineError

log = logging.getLogger(__name__)

DEVICES = ("auto", "cpu", "cuda")
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
GPU_EXTRA = "gpu"
GPU_INSTALL = "pip uninstall -y onnxruntime && pip install 'ragspine[gpu]' (onnxruntime-gpu)"
_LOGGED: set[str] = set()
_LOGGED_LOCK = threading.Lock()


class DeviceUnavailable(RagspineError, ValueError):
    """RAGSPINE_DEVICE=cuda, but the runtime has no CUDA provider or sees no GPU; one line."""


@dataclass(frozen=True)
class OnnxDevice:
    """The device a session is asked to run on, the providers that ask for it, and (for `auto`
    on the CPU) why it is not the GPU."""

    device: str  # "cuda" | "cpu"
    providers: tuple[str, ...]
    why: str = ""


def check_device(device: str) -> str:
    """`device` lower-cased, or ValueError listing the valid ones.

    >>> check_device("CUDA")
    'cuda'
    """
    name = device.strip().lower()
    if name not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid: {', '.join(DEVICES)}")
    return name


def onnx_device(device: str, available: Sequence[str]) -> OnnxDevice:
    """The providers for `device` given the providers ONNX Runtime reports (`available`).

    >>> onnx_device("auto", ["CUDAExecutionProvider", "CPUExecutionProvider"]).providers
    ('CUDAExecutionProvider', 'CPUExecutionProvider')
    >>> onnx_device("cpu", ["CUDAExecutionProvider", "CPUExecutionProvider"]).providers
    ('CPUExecutionProvider',)
    >>> onnx_device("auto", ["CPUExecutionProvider"]).device
    'cpu'
    """
    name = check_device(device)
    if name == "cpu":
        return OnnxDevice("cpu", (CPU,))
    if CUDA in available:
        return OnnxDevice("cuda", (CUDA, CPU))
    why = f"the installed onnxruntime offers no {CUDA} (it has {', '.join(available) or 'none'})"
    if name == "cuda":
        raise DeviceUnavailable(f"RAGSPINE_DEVICE=cuda: {why}: {GPU_INSTALL}, on a machine with an NVIDIA GPU")
    return OnnxDevice("cpu", (CPU,), f"{why}; for the GPU: {GPU_INSTALL}")


def fallback(why: str, level: int = logging.INFO) -> None:
    """The one log line of `auto` staying on the CPU (once per process per reason): INFO when
    the runtime has no GPU support at all (the usual CPU install), WARNING when it has but the
    GPU could not be used."""
    with _LOGGED_LOCK:
        if why in _LOGGED:
            return
        _LOGGED.add(why)
    log.log(level, "RAGSPINE_DEVICE=auto runs on the CPU: %s", why)


def onnx_session(
    ort: Any, model: str | Path | bytes, *, device: str = "cpu", threads: int | None = None, options: Any = None,
    what: str = "model", **kwargs: Any,
) -> Any:  # fmt: skip
    """An `ort.InferenceSession` for `model` on `device` (`threads` intra-op threads when given;
    `options`: SessionOptions the caller prepared; `kwargs` go to InferenceSession)."""
    choice = onnx_device(device, ort.get_available_providers())
    if options is None:
        options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    source = model if isinstance(model, bytes) else str(model)
    session = ort.InferenceSession(source, options, providers=list(choice.providers), **kwargs)
    if choice.device == "cuda" and CUDA not in session.get_providers():
        why = (f"onnxruntime could not start its {CUDA} for {what} (no GPU visible, or the CUDA 12 / cuDNN 9 "
               "libraries are missing)")  # fmt: skip
        if check_device(device) == "cuda":
            raise DeviceUnavailable(f"RAGSPINE_DEVICE=cuda: {why}")
        fallback(why, logging.WARNING)
    elif choice.why:
        fallback(choice.why)
    return session


def session_device(session: Any) -> str:
    """"cuda" when the session runs on ONNX Runtime's CUDA provider, else "cpu"."""
    return "cuda" if CUDA in session.get_providers() else "cpu"


def planned_onnx_device(device: str) -> OnnxDevice:
    """What `onnx_session` would ask for here (ONNX Runtime imported to ask it; without it, the
    CPU), for `config show` and /stats; a missing GPU behind a listed provider is seen only when
    a session is made."""
    available = onnx_providers()
    if available is None:
        return OnnxDevice("cpu", (CPU,), "onnxruntime is not installed")
    try:
        return onnx_device(device, available)
    except DeviceUnavailable as exc:
        return OnnxDevice("none", (), str(exc))


def onnx_providers() -> tuple[str, ...] | None:
    """The providers ONNX Runtime reports here (imported to ask it); None without it."""
    try:
        onnxruntime: Any = importlib.import_module("onnxruntime")
    except ImportError:
        return None
    return tuple(onnxruntime.get_available_providers())


def torch_device(torch: Any, device: str) -> str:
    """PyTorch's device for `device` (auto, cpu, cuda, cuda:N): auto is cuda when PyTorch sees a
    GPU, else cpu (logged once); cuda without one is a `DeviceUnavailable`."""
    name = device.strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda"
        fallback("PyTorch sees no CUDA device (torch.cuda.is_available() is False)")
        return "cpu"
    if name == "cpu":
        return name
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        if not torch.cuda.is_available():
            raise DeviceUnavailable(
                f"device {device!r}: PyTorch sees no CUDA device here (a CPU-only torch build, or no GPU); "
                "use cpu or auto, or install a CUDA build of torch"
            )
        return name
    raise ValueError(f"unknown device {device!r}; valid: auto, cpu, cuda, cuda:N")
