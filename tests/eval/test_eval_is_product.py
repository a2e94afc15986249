"""`ragspine eval` by default measures the product: its figures and rankings equal what a user
gets who writes the corpus as files, runs `ragspine ingest` and searches with `ragspine.open`.

The product side here is written independently of `ragspine.eval.product`: the test writes the
files itself, runs the real command line (click's CliRunner) and ranks documents from
`Workspace.search` itself. The corpus (Chinese and English, written for the project) has entries
long enough to be cut into several chunks, and one empty entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

import ragspine
from ragspine.cli import main
from ragspine.eval.dataset import load_beir
from ragspine.eval.metrics import evaluate_run
from ragspine.eval.product import ProductOptions, run_product_eval

LONG_EN = " ".join(
    f"Paragraph {i}: the coastal survey counted starfish, anemones and crabs in pool {i}, "
    "noting that warmer water shifted which species dominated the rocks."
    for i in range(30)
)
LONG_ZH = "\n\n".join(
    f"第{i}段：高速铁路的列车时速超过二百五十公里，沿线车站连接主要城市，客流在节假日明显增加。"
    for i in range(40)
)
CORPUS = [
    {"_id": "tide", "title": "Tide pools", "text": LONG_EN},
    {
        "_id": "bread",
        "title": "Sourdough bread",
        "text": "A sourdough starter ferments flour and water for days before baking.",
    },
    {
        "_id": "ovens",
        "title": "Baking ovens",
        "text": "Bakers preheat stone ovens; bread baked on stone gets a thicker crust.",
    },
    {
        "_id": "volcano",
        "title": "Volcanoes",
        "text": "Magma rises through the crust and erupts as lava from a volcano.",
    },
    {
        "_id": "tea",
        "title": "茶叶",
        "text": "绿茶不经发酵，红茶经过完全发酵，乌龙茶介于两者之间。",
    },
    {"_id": "rail", "title": "高速铁路", "text": LONG_ZH},
    {
        "_id": "metro/line 2",
        "title": "地铁",
        "text": "城市地铁的列车时速较低，站距短，适合市内通勤。",
    },
    {"_id": "empty", "title": "", "text": ""},
]
QUERIES = [
    {"_id": "q1", "text": "which species live in tide pools"},
    {"_id": "q2", "text": "how is sourdough bread baked"},
    {"_id": "q3", "text": "红茶是否发酵"},
    {"_id": "q4", "text": "高速列车的时速"},
    {"_id": "q5", "text": "lava from a volcano"},
    {"_id": "q6", "text": "   "},
    {"_id": "q7", "text": "地铁通勤"},
]
QRELS = {
    "test": [("q1", "tide", 1), ("q2", "bread", 2), ("q2", "ovens", 1), ("q3", "tea", 1),
             ("q4", "rail", 2), ("q4", "metro/line 2", 1), ("q5", "volcano", 1), ("q6", "tide", 1),
             ("q7", "metro/line 2", 1)],
}  # fmt: skip
TOP_K = 100


def product_path(beir: Path, work: Path) -> tuple[dict[str, list[str]], int]:
    """Files → `ragspine ingest` (CLI) → `ragspine.open(db).search`: the document ranking of
    every judged query (best snippet first), and the store's chunk count."""
    folder = work / "files"
    folder.mkdir(parents=True)
    for line in (beir / "corpus.jsonl").read_text("utf-8").splitlines():
        entry = json.loads(line)
        body = (
            f"{entry['title']}\n\n{entry['text']}"
            if entry["title"].strip()
            else entry["text"]
        )
        if body.strip():  # `ragspine ingest` refuses an empty file
            name = (
                entry["_id"].replace("%", "%25").replace("/", "%2F").replace(" ", "%20")
            )
            (folder / f"{name}.txt").write_text(body, encoding="utf-8")
    db = work / "chunks.db"
    result = CliRunner().invoke(
        main, ["ingest", str(folder), "--db", str(db)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    dataset = load_beir(beir, "test")
    run: dict[str, list[str]] = {}
    with ragspine.open(db) as workspace:
        chunks = workspace.stats()["chunks"]
        for qid, text in dataset.queries.items():
            ranking: list[str] = []
            if text.strip():
                for snippet in workspace.search(text, top_k=10_000):
                    doc = unquote(snippet["doc_id"].removesuffix(".txt"))
                    if doc not in ranking:
                        ranking.append(doc)
            run[qid] = ranking[:TOP_K]
    return run, chunks


def eval_cli(beir: Path, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(main, ["eval", str(beir), "--split", "test", *args, "--json", "-"],
                                catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "the product's: corpus entries as files" in result.output
    return json.loads(result.output[result.output.index("\n{") :])


def assert_eval_is_product(beir: Path, tmp_path: Path, mode: str) -> dict[str, object]:
    dataset = load_beir(beir, "test")
    expected, chunks = product_path(beir, tmp_path / "product")
    report = run_product_eval(dataset, ProductOptions(progress=False))
    assert report.mode == mode and report.path == "product"
    assert {
        q: [d for d, _ in r] for q, r in report.run.items()
    } == expected  # every ranking, in order
    figures = eval_cli(beir)
    metrics = evaluate_run(expected, dataset.qrels)
    assert figures["mode"] == mode and figures["chunks"] == chunks > len(
        CORPUS
    )  # entries were cut
    assert figures["empty_entries"] == 1 and figures["blank_queries"] == 1
    assert figures["ndcg@10"] == pytest.approx(metrics.ndcg, abs=1e-6)
    assert figures["recall@100"] == pytest.approx(metrics.recall, abs=1e-6)
    assert figures["mrr@10"] == pytest.approx(metrics.mrr, abs=1e-6)
    assert (
        figures["ndcg@10"] > 0.5
    )  # the corpus is easy: a broken path would not get here
    return figures


@pytest.fixture
def beir(make_beir: Callable[..., Path]) -> Path:
    return make_beir("mixed", corpus=CORPUS, queries=QUERIES, qrels=QRELS)


def test_bm25_eval_equals_files_ingest_open_search(beir: Path, tmp_path: Path) -> None:
    figures = assert_eval_is_product(beir, tmp_path, "bm25")
    settings = figures["settings"]
    assert isinstance(settings, dict)
    assert settings["index"] == (
        "RAGSPINE_ANALYZER=en-stem, RAGSPINE_CHUNKER=auto, RAGSPINE_CHUNK_CHARS=1000, RAGSPINE_CHUNK_OVERLAP=80, "
        "RAGSPINE_CONTEXTUAL=header"
    )
    assert (
        settings["query_rewriter"].startswith("glossary")
        and figures["glossary"] is True
    )


def test_hybrid_eval_equals_the_product_with_the_deterministic_backend(
    beir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "deterministic")
    figures = assert_eval_is_product(beir, tmp_path, "hybrid")
    assert figures["embedding"] and figures["embedded"] == figures["chunks"]


def test_product_settings_from_the_environment_reach_both_paths(
    beir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSPINE_CHUNK_CHARS", "120")
    monkeypatch.setenv("RAGSPINE_CHUNK_OVERLAP", "20")
    monkeypatch.setenv("RAGSPINE_ANALYZER", "spec")
    figures = assert_eval_is_product(beir, tmp_path, "bm25")
    assert figures["chunking"] == "120/20" and figures["analyzer"] == "spec"


def test_the_cache_is_reused_only_for_the_same_corpus_and_settings(
    beir: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = eval_cli(beir, "--cache", str(cache))
    again = eval_cli(beir, "--cache", str(cache))
    assert (first["reused_store"], again["reused_store"]) == (False, True)
    assert again["ndcg@10"] == first["ndcg@10"] and again["chunks"] == first["chunks"]
    rechunked = eval_cli(beir, "--cache", str(cache), "--chunk-chars", "200")
    assert rechunked["reused_store"] is False and rechunked["chunking"] == "200/80"
    assert len(list(cache.iterdir())) == 2  # one workspace per settings, never a mix


def test_the_cache_key_ignores_the_encoder_thread_count(beir: Path) -> None:
    """RAGSPINE_EMBED_THREADS changes speed, not vectors: a rerun with other threads reuses the
    workspace; any other embedding option still makes a new one."""
    from ragspine.assembly import index_settings_for, load_settings
    from ragspine.eval.product import cache_key

    dataset, asked = load_beir(beir, "test"), index_settings_for(load_settings())
    one = cache_key(dataset, asked, "e5", {"engine": "onnx", "threads": 1})
    assert one == cache_key(dataset, asked, "e5", {"engine": "onnx", "threads": 2})
    assert one == cache_key(dataset, asked, "e5", {"engine": "onnx"})
    assert one != cache_key(dataset, asked, "e5", {"engine": "onnx-fp32", "threads": 1})


def test_the_cache_key_follows_the_e5_engine_auto_resolves_to_and_its_revision(
    beir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unset engine means auto: the workspace of another engine (or of an older revision of
    the same engine's numerics) is never reused for it."""
    from ragspine.assembly import index_settings_for, load_settings
    from ragspine.eval.product import cache_key
    from ragspine.retrieval.vector.embeddings import e5

    dataset, asked = load_beir(beir, "test"), index_settings_for(load_settings())
    monkeypatch.setattr(e5, "resolve_engine", lambda engine: "onnx" if engine == "auto" else engine)
    auto = cache_key(dataset, asked, "e5", {})
    assert auto == cache_key(dataset, asked, "e5", {"engine": "onnx"})
    monkeypatch.setattr(e5, "resolve_engine", lambda engine: "numpy" if engine == "auto" else engine)
    numpy_key = cache_key(dataset, asked, "e5", {})
    assert numpy_key == cache_key(dataset, asked, "e5", {"engine": "numpy"}) != auto
    monkeypatch.setattr(e5, "ENGINE_REVISION", e5.ENGINE_REVISION + 1)
    assert cache_key(dataset, asked, "e5", {"engine": "numpy"}) != numpy_key


def test_whole_entry_runs_stay_available_and_say_so(beir: Path) -> None:
    result = CliRunner().invoke(
        main, ["eval", str(beir), "--split", "test", "--whole-entries", "--json", "-"]
    )
    assert result.exit_code == 0, result.output
    assert "--whole-entries: not the product path" in result.output
    data = json.loads(result.output[result.output.index("\n{") :])
    assert data["path"] == "whole entries" and data["chunking"] == "whole"
    assert data["chunks"] == len(CORPUS) - 1  # one chunk per non-empty entry
    misplaced = CliRunner().invoke(
        main, ["eval", str(beir), "--split", "test", "--glossary"]
    )
    assert (
        misplaced.exit_code == 2
        and "--glossary applies to --whole-entries runs" in misplaced.output
    )


@pytest.mark.slow
def test_default_settings_eval_equals_the_product(
    beir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No overrides at all: RAGSPINE_EMBEDDING=auto (e5 where installed: hybrid)."""
    monkeypatch.delenv("RAGSPINE_EMBEDDING")
    from ragspine.retrieval.vector.embeddings.factory import resolve_auto

    mode = "hybrid" if resolve_auto()[0] is not None else "bm25"
    assert_eval_is_product(beir, tmp_path, mode)
