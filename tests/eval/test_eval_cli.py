"""`ragspine eval --whole-entries` end to end on a tiny BEIR folder the tests write themselves."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ragspine.cli import main
from ragspine.eval.dataset import load_beir
from ragspine.eval.runner import ingest_corpus, whole_document_budget
from ragspine.eval.store import IngestFingerprint, StoreState, mark_ingest, open_store
from ragspine.retrieval.lexical.retrieval import NarrativeIndex
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.store.sqlite import ChunkStore

REQUIRED_KEYS = {"dataset", "split", "mode", "docs", "queries", "ndcg@10", "recall@100", "mrr@10", "queries_per_s"}


def invoke(*args: object) -> Result:
    """`ragspine eval --whole-entries ...` (the product path: test_eval_is_product.py)."""
    return CliRunner().invoke(main, ["eval", "--whole-entries", *map(str, args)], catch_exceptions=False)


def json_of(result: Result) -> dict[str, object]:
    """The --json - object printed after the table."""
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("\n{") :])


def test_table_and_json(beir_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "toy.json"
    out.parent.mkdir()
    result = invoke(beir_dir, "--split", "test", "--analyzer", "spec", "--json", out)
    assert result.exit_code == 0, result.output
    assert "ragspine eval  toy / test" in result.output
    assert "bm25 (auto: no embedding backend" in result.output
    assert "1 blank (empty ranking, scored 0)" in result.output
    for label in ("nDCG@10", "Recall@100", "MRR@10", "queries/s"):
        assert label in result.output
    data = json.loads(out.read_text("utf-8"))
    assert REQUIRED_KEYS <= data.keys()
    assert (data["dataset"], data["split"], data["mode"], data["analyzer"]) == ("toy", "test", "bm25", "spec")
    assert (data["docs"], data["chunks"], data["queries"], data["blank_queries"]) == (6, 5, 5, 1)
    # q1-q4 find their document first; the blank q5 scores 0
    assert data["mrr@10"] == pytest.approx(0.8) and data["recall@100"] == pytest.approx(0.8)
    assert data["chunking"] == "whole" and data["reused_store"] is False


def test_json_to_stdout_and_graded_dev_split(beir_dir: Path) -> None:
    result = invoke(beir_dir, "--split", "dev", "--json", "-", "--top-k", "2", "--analyzer", "spec")
    assert result.exit_code == 0, result.output
    data = json_of(result)
    assert data["queries"] == 1 and data["ndcg@10"] == pytest.approx(1.0) and data["top_k"] == 2


def test_db_is_reused_and_a_different_corpus_is_an_error(
    beir_dir: Path, make_beir: Callable[..., Path], tmp_path: Path
) -> None:
    db = tmp_path / "eval.db"
    first = invoke(beir_dir, "--split", "test", "--db", db, "--json", "-")
    assert first.exit_code == 0, first.output
    assert "ingested 6 docs" in first.output
    second = invoke(beir_dir, "--split", "dev", "--db", db, "--json", "-")
    assert second.exit_code == 0, second.output
    assert "reused: ingest skipped" in second.output
    assert json_of(second)["reused_store"] is True
    other_analyzer = json_of(invoke(beir_dir, "--split", "test", "--db", db, "--analyzer", "spec", "--json", "-"))
    assert other_analyzer["reused_store"] is True and other_analyzer["analyzer"] == "spec"
    assert other_analyzer["ndcg@10"] == json_of(first)["ndcg@10"]  # the toy set has no stemming effect

    corpus = [json.loads(line) for line in (beir_dir / "corpus.jsonl").read_text("utf-8").splitlines()]
    other = make_beir("other", corpus=[*corpus[:5], {"_id": "new", "title": "", "text": "changed"}])
    mixed = invoke(other, "--split", "test", "--db", db)
    assert mixed.exit_code == 1
    assert "holds the eval store of a different corpus (toy, 6 docs" in mixed.output
    rechunked = invoke(beir_dir, "--split", "test", "--db", db, "--chunk-chars", "40")
    assert rechunked.exit_code == 1
    assert "ingested with chunking whole" in rechunked.output and "asks for chunking 40/80" in rechunked.output


def test_a_store_not_built_by_eval_is_refused(beir_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "user.db"
    with ChunkStore(db) as store:
        store.init_schema()
        store.replace_doc_chunks("memo", [Chunk("memo:0", "memo", 0, "a memo", "memo#p1@0-6")])
    result = invoke(beir_dir, "--split", "test", "--db", db)
    assert result.exit_code == 1
    assert "did not build" in result.output
    (tmp_path / "junk.db").write_text("not sqlite")
    junk = invoke(beir_dir, "--split", "test", "--db", tmp_path / "junk.db")
    assert junk.exit_code == 1 and "not a RAGSpine chunk store" in junk.output


def test_an_interrupted_ingest_resumes(beir_dir: Path, tmp_path: Path) -> None:
    fresh = json_of(invoke(beir_dir, "--split", "test", "--json", "-"))
    db = tmp_path / "eval.db"
    dataset = load_beir(beir_dir, "test")
    fingerprint = IngestFingerprint("toy", dataset.corpus_sha256, 6, "whole")
    store = open_store(str(db))  # as if a run had stopped after two documents
    try:
        mark_ingest(store, fingerprint, StoreState.PARTIAL)
        index = NarrativeIndex(store, max_chars=whole_document_budget(dataset), overlap_chars=0)
        ingest_corpus(index, dataset.corpus[:2], progress=False)
    finally:
        store.close()
    resumed = json_of(invoke(beir_dir, "--split", "test", "--db", db, "--json", "-"))
    assert resumed["reused_store"] is False and resumed["chunks"] == 5
    assert resumed["ndcg@10"] == fresh["ndcg@10"]
    assert "reused: ingest skipped" in invoke(beir_dir, "--split", "test", "--db", db).output


@pytest.mark.parametrize("mode", ["hybrid", "vector", "HYBRID"])
def test_modes_without_a_dense_backend_fail_clearly(beir_dir: Path, mode: str) -> None:
    result = invoke(beir_dir, "--split", "test", "--mode", mode, "--embedding", "none")
    assert result.exit_code == 1
    assert f"--mode {mode.lower()} needs a dense embedding backend" in result.output
    assert "nDCG" not in result.output


def test_unknown_embedding_and_bad_options(beir_dir: Path) -> None:
    result = invoke(beir_dir, "--split", "test", "--embedding", "word2vec")
    assert result.exit_code == 1 and "no such embedding backend" in result.output
    assert "valid: none, auto, onnx" in result.output
    auto = invoke(beir_dir, "--split", "test", "--embedding", "auto", "--mode", "bm25")
    assert auto.exit_code == 0 and "bm25 (bm25: requested)" in auto.output
    overlap = invoke(beir_dir, "--split", "test", "--overlap-chars", "10")
    assert overlap.exit_code == 2 and "--overlap-chars needs --chunk-chars" in overlap.output
    assert invoke(beir_dir).exit_code == 2  # --split is required


def test_hybrid_and_vector_modes_embed_once_and_reuse_vectors(beir_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "eval.db"
    args = ("--split", "test", "--embedding", "deterministic", "--db", str(db), "--json", "-")
    first = json_of(invoke(beir_dir, *args, "--mode", "hybrid"))
    assert first["mode"] == "hybrid" and first["embedding"].startswith("deterministic")
    assert first["embedded"] == first["chunks"] > 0
    assert (tmp_path / "eval.db.vectors.sqlite").is_file(), "vectors are kept beside the store"
    again = json_of(invoke(beir_dir, *args, "--mode", "vector"))
    assert again["mode"] == "vector" and again["embedded"] == 0, "stored vectors are never recomputed"
    assert 0.0 <= again["ndcg@10"] <= 1.0
    auto = invoke(beir_dir, "--split", "test", "--embedding", "deterministic")
    assert auto.exit_code == 0 and "hybrid (auto: hybrid (--embedding deterministic))" in auto.output


def test_layout_errors_name_the_file_and_line(beir_dir: Path) -> None:
    missing = invoke(beir_dir, "--split", "validation")
    assert missing.exit_code == 1 and "missing qrels/validation.tsv" in missing.output
    with (beir_dir / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("{broken\n")
    broken = invoke(beir_dir, "--split", "test")
    assert broken.exit_code == 1
    assert "corpus.jsonl line 7: not valid JSON" in broken.output
    assert "Traceback" not in broken.output


def test_chunked_documents_are_ranked_by_their_best_chunk(beir_dir: Path) -> None:
    result = invoke(beir_dir, "--split", "test", "--chunk-chars", "30", "--overlap-chars", "0", "--json", "-")
    assert result.exit_code == 0, result.output
    data = json_of(result)
    assert data["chunks"] > data["docs"] and data["chunking"] == "30/0"
    assert data["recall@100"] == pytest.approx(0.8)


def test_stemming_analyzer(beir_dir: Path) -> None:
    pytest.importorskip("Stemmer")
    result = invoke(beir_dir, "--split", "test", "--analyzer", "en-stem", "--json", "-")
    assert result.exit_code == 0, result.output
    assert json_of(result)["analyzer"] == "en-stem"
