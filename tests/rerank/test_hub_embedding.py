"""RAGSPINE_EMBEDDING=hub:ORG/NAME[@REV], against the loopback hub (conftest's `hub`) serving a
tiny ONNX token encoder (rerank_models.colbert_folder: one-hot token vectors): the spelling in
the settings, the family conventions (E5's "query: " / "passage: ", BGE-M3's [CLS] pooling), a
repo's own sentence-transformers config winning over the family, the pinned revision, and the
vectors file bound to the model id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_hub import LocalHub
from rerank_models import colbert_folder

pytest.importorskip("onnxruntime")
pytest.importorskip("huggingface_hub")

from ragspine.assembly import load_settings, make_embedding  # noqa: E402
from ragspine.retrieval.chunking.chunking import chunk_document  # noqa: E402
from ragspine.retrieval.model import DocumentMeta  # noqa: E402
from ragspine.retrieval.store.sqlite import ChunkStore  # noqa: E402
from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors, embed_chunks  # noqa: E402
from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend  # noqa: E402
from ragspine.retrieval.vector.errors import VectorModelMismatch  # noqa: E402
from ragspine.settings.errors import ConfigError  # noqa: E402


def _publish(hub: LocalHub, tmp_path: Path, repo: str, *, st_config: dict[str, object] | None = None,
             pooling: str | None = None) -> str:  # fmt: skip
    folder = colbert_folder(tmp_path / "built" / repo.replace("/", "--"))
    if st_config is not None:
        (folder / "config_sentence_transformers.json").write_text(json.dumps(st_config))
    if pooling is not None:
        (folder / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))  # fmt: skip
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(
            {"pooling_mode_cls_token": pooling == "cls", "pooling_mode_mean_tokens": pooling == "mean"}))  # fmt: skip
    return hub.add(repo, folder)


def test_the_hub_spelling_sets_the_backend_and_its_model() -> None:
    settings = load_settings({"RAGSPINE_EMBEDDING": "hub:intfloat/multilingual-e5-base@v1"})
    assert (settings.embedding, settings.embedding_model) == ("hub", "intfloat/multilingual-e5-base@v1")
    same = load_settings({"RAGSPINE_EMBEDDING": "hub:BAAI/bge-m3", "RAGSPINE_EMBEDDING_MODEL": "BAAI/bge-m3"})
    assert same.embedding_model == "BAAI/bge-m3"
    upper = load_settings({"RAGSPINE_EMBEDDING": " HUB:BAAI/bge-m3"})  # the prefix in any case, as the factory takes it
    assert (upper.embedding, upper.embedding_model) == ("hub", "BAAI/bge-m3")
    with pytest.raises(ConfigError, match=r"'Hub:BAAI' is not a hub id"):
        load_settings({"RAGSPINE_EMBEDDING": "Hub:BAAI"})
    with pytest.raises(ConfigError, match="names another; set only one"):
        load_settings({"RAGSPINE_EMBEDDING": "hub:BAAI/bge-m3", "RAGSPINE_EMBEDDING_MODEL": "me/other"})
    with pytest.raises(ConfigError, match=r"RAGSPINE_EMBEDDING='hub'.*needs a hub id: spell it RAGSPINE_EMBEDDING=hub:ORG/NAME"):
        load_settings({"RAGSPINE_EMBEDDING": "hub"})
    with pytest.raises(ValueError, match="embedding backend 'hub' needs a hub id"):
        make_embedding_backend("hub")


def test_family_conventions_e5_prefixes_and_bge_m3_cls(hub: LocalHub, tmp_path: Path) -> None:
    _publish(hub, tmp_path, "me/multilingual-e5-tiny")
    _publish(hub, tmp_path, "me/bge-m3-tiny")
    e5 = make_embedding_backend("hub:me/multilingual-e5-tiny", threads=1)
    assert (e5.query_prefix, e5.passage_prefix, e5.pooling) == ("query: ", "passage: ", "mean")
    bge = make_embedding_backend("hub:me/bge-m3-tiny", threads=1)
    assert (bge.query_prefix, bge.passage_prefix, bge.pooling) == ("", "", "cls")
    # the one-hot encoder: [CLS] pooling is the [CLS] row whatever the text; mean pooling sees the words
    assert bge.embed_texts(["revenue fell"]) == bge.embed_texts(["sunny week"])
    assert e5.embed_texts(["revenue fell"]) != e5.embed_texts(["sunny week"])
    assert e5.embed_queries(["revenue"]) != e5.embed_texts(["revenue"]), "query: and passage: differ"


def test_the_repos_sentence_transformers_config_wins_over_the_family(hub: LocalHub, tmp_path: Path) -> None:
    _publish(hub, tmp_path, "me/e5-declared", st_config={"prompts": {"query": "search_query: ", "document": "doc: "}},
             pooling="cls")  # fmt: skip
    backend = make_embedding_backend("hub:me/e5-declared", threads=1)
    assert (backend.query_prefix, backend.passage_prefix, backend.pooling) == ("search_query: ", "doc: ", "cls")
    given = make_embedding_backend("hub:me/e5-declared", threads=1, query_prefix="q: ", pooling="mean")
    assert (given.query_prefix, given.passage_prefix, given.pooling) == ("q: ", "doc: ", "mean")
    fetched = {path.rsplit("/resolve/", 1)[1].split("/", 1)[1] for method, path, _ in hub.requests
               if method == "GET" and "/resolve/" in path}  # fmt: skip
    assert {"config_sentence_transformers.json", "modules.json", "1_Pooling/config.json"} <= fetched


def test_a_vectors_file_stays_bound_to_the_hub_model(hub: LocalHub, tmp_path: Path) -> None:
    first = _publish(hub, tmp_path, "me/multilingual-e5-tiny")
    _publish(hub, tmp_path, "me/bge-m3-tiny")
    settings = load_settings({"RAGSPINE_EMBEDDING": f"hub:me/multilingual-e5-tiny@{first}",
                              "RAGSPINE_EMBED_THREADS": "1"})  # fmt: skip
    e5 = make_embedding(settings)
    assert e5 is not None and e5.model_id.startswith("onnx:me/multilingual-e5-tiny;sha256=")
    assert "qp='query: '" in e5.model_id and "pool=mean" in e5.model_id
    with ChunkStore(tmp_path / "chunks.db") as store:
        store.init_schema()
        store.replace_doc_chunks("a", chunk_document("revenue fell because demand weakened", DocumentMeta("a")))
        with ChunkVectors.beside(store, model_id=e5.model_id) as vectors:
            assert embed_chunks(store, vectors, e5, progress=False).embedded == 1
        bge = make_embedding_backend("hub:me/bge-m3-tiny", threads=1)
        assert bge.model_id != e5.model_id
        with pytest.raises(VectorModelMismatch, match="--reembed"):
            with ChunkVectors.beside(store, model_id=bge.model_id) as other:
                embed_chunks(store, other, bge, progress=False)
