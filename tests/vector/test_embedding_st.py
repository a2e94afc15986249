"""SentenceTransformerEmbeddingBackend over a stand-in `sentence_transformers` module (no PyTorch):
what the adapter passes to the model and what it makes of the answers."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from ragspine.retrieval.vector.embeddings.factory import (
    DeterministicEmbeddingBackend,
    SentenceTransformerEmbeddingBackend,
    make_embedding_backend,
)

from ragspine.testing.embedding_backend import EmbeddingBackendSuite

PROMPTS = {"query": "Instruct: find the reason\nQuery: "}


class FakeSentenceTransformer:
    """Records how it was built and called; embeds with the deterministic backend."""

    built: ClassVar[list[dict[str, Any]]] = []
    calls: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, path: str, **options: Any) -> None:
        self.built.append({"path": path, **options})
        self._inner = DeterministicEmbeddingBackend(dim=12)

    def get_sentence_embedding_dimension(self) -> int:
        return 12

    def encode(self, texts: list[str], **options: Any) -> np.ndarray:
        self.calls.append({"texts": list(texts), **options})
        prefix = options.get("prompt") or PROMPTS.get(options.get("prompt_name") or "", "")
        vectors = np.asarray(self._inner.embed_texts([prefix + t for t in texts]), dtype=np.float32)
        return vectors if options["normalize_embeddings"] else vectors * 3.0


@pytest.fixture
def fake_st(monkeypatch: pytest.MonkeyPatch) -> type[FakeSentenceTransformer]:
    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = FakeSentenceTransformer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    FakeSentenceTransformer.built, FakeSentenceTransformer.calls = [], []
    return FakeSentenceTransformer


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "Qwen3-Embedding-0.6B"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 12}', "utf-8")
    return folder


class TestSentenceTransformerBackend(EmbeddingBackendSuite):
    @pytest.fixture
    def backend(self, fake_st: Any, model_dir: Path) -> SentenceTransformerEmbeddingBackend:
        return SentenceTransformerEmbeddingBackend(model_dir)


def test_models_load_from_local_files_only(fake_st: Any, model_dir: Path) -> None:
    make_embedding_backend("st", model_path=model_dir, device="cpu")
    assert fake_st.built == [{"path": str(model_dir), "device": "cpu", "trust_remote_code": False,
                              "local_files_only": True}]  # fmt: skip


def test_qwen3_prompts_queries_and_not_passages(fake_st: Any, model_dir: Path) -> None:
    backend = make_embedding_backend("qwen3", model_path=model_dir)
    assert isinstance(backend, SentenceTransformerEmbeddingBackend)
    query = backend.embed_queries(["营收为什么下滑"])
    passage = backend.embed_texts(["营收为什么下滑"])
    assert fake_st.calls[0]["prompt_name"] == "query" and "prompt_name" not in fake_st.calls[1]
    assert query != passage
    assert fake_st.calls[0]["normalize_embeddings"] is True
    assert fake_st.calls[0]["show_progress_bar"] is False


def test_a_literal_query_prompt_replaces_the_named_one(fake_st: Any, model_dir: Path) -> None:
    backend = make_embedding_backend("qwen3", model_path=model_dir, query_prompt="query: ")
    backend.embed_queries(["x"])
    assert fake_st.calls[0]["prompt"] == "query: " and "prompt_name" not in fake_st.calls[0]
    with pytest.raises(ValueError, match="not both"):
        SentenceTransformerEmbeddingBackend(model_dir, query_prompt="q", query_prompt_name="query")


def test_model_id_fingerprints_the_folder_and_settings(fake_st: Any, model_dir: Path) -> None:
    first = SentenceTransformerEmbeddingBackend(model_dir).model_id
    assert first.startswith("st:Qwen3-Embedding-0.6B@")
    assert SentenceTransformerEmbeddingBackend(model_dir).model_id == first
    assert SentenceTransformerEmbeddingBackend(model_dir, normalize=False).model_id != first
    (model_dir / "model.safetensors").write_bytes(b"weights")
    assert SentenceTransformerEmbeddingBackend(model_dir).model_id != first
    assert SentenceTransformerEmbeddingBackend(model_dir, model_id="mine").model_id == "mine"
