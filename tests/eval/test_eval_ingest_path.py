"""Eval ingests through the one ingest path (`IngestPipeline`) and stores exactly the chunks it
stored before: the whole-entries run the chunks `NarrativeIndex.ingest` makes, the default run
the chunks (and registry rows) of `ragspine ingest` on the same files. The corpus is the bundled
sample corpus, one BEIR entry per report."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import ragspine
from ragspine.cli import main
from ragspine.eval.dataset import load_beir
from ragspine.eval.product import CORPUS_FOLDER, STORE_FILE, ProductOptions, run_product_eval
from ragspine.eval.runner import ingest_corpus, whole_document_budget
from ragspine.ingest.registry import DocumentRegistry
from ragspine.retrieval.lexical.retrieval import NarrativeIndex
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.store.sqlite import ChunkStore

SAMPLE = Path(ragspine.__file__).parent / "data" / "sample_corpus"
REGISTRY_FIELDS = ("doc_id", "content_hash", "ingest_key", "version", "chunks", "status", "loader", "encoding",
                   "pages", "size_bytes", "metadata")  # fmt: skip


def _sample_beir(make_beir: Callable[..., Path]) -> Path:
    """The sample corpus as a BEIR set: title from the manifest, text = the report."""
    manifest = json.loads((SAMPLE / "manifest.json").read_text("utf-8"))
    corpus = [
        {"_id": d["doc_id"], "title": d["title"], "text": (SAMPLE / d["file"]).read_text("utf-8")}
        for d in manifest["documents"]
    ]
    queries = [{"_id": f"q{i}", "text": q["query"]} for i, q in enumerate(manifest["questions"])]
    qrels = {"test": [(f"q{i}", q["expect_doc_id"], 1) for i, q in enumerate(manifest["questions"])]}
    return make_beir("sample", corpus=corpus, queries=queries, qrels=qrels)


def _chunks(store: ChunkStore) -> list[dict[str, Any]]:
    rows = [{k: v for k, v in asdict(c).items() if k != "ingested_at"} for c in store.iter_chunks()]
    return sorted(rows, key=lambda c: c["chunk_id"])


def _rows(db: str) -> list[dict[str, Any]]:
    with DocumentRegistry(db) as registry:
        return [{name: getattr(row, name) for name in REGISTRY_FIELDS} for row in registry.all()]


def test_whole_entries_store_the_chunks_narrative_index_ingest_makes(
    make_beir: Callable[..., Path], tmp_path: Path
) -> None:
    dataset = load_beir(_sample_beir(make_beir), "test")
    budget = whole_document_budget(dataset)
    stored = []
    for name, through_the_pipeline in (("pipeline.db", True), ("primitive.db", False)):
        with ChunkStore(tmp_path / name) as store:
            store.init_schema()
            index = NarrativeIndex(store, max_chars=budget, overlap_chars=0)  # as `run_eval` builds it
            if through_the_pipeline:
                written = ingest_corpus(index, dataset.corpus, progress=False)
            else:  # what eval ran before the one ingest path
                written = sum(index.ingest(d.indexed_text, DocumentMeta(doc_id=d.doc_id, title=d.title))
                              for d in dataset.corpus)  # fmt: skip
            assert written == len(dataset.corpus)  # whole entries: one chunk each
            stored.append(_chunks(store))
    assert stored[0] == stored[1] and len(stored[0]) == len(dataset.corpus)
    rows = _rows(str(tmp_path / "pipeline.db"))
    assert [r["doc_id"] for r in rows] == sorted(d.doc_id for d in dataset.corpus)
    assert {(r["version"], r["chunks"], r["status"], r["loader"]) for r in rows} == {(1, 1, "active", "text")}


def test_the_default_run_stores_what_ragspine_ingest_stores(make_beir: Callable[..., Path], tmp_path: Path) -> None:
    dataset = load_beir(_sample_beir(make_beir), "test")
    cache = tmp_path / "cache"
    report = run_product_eval(dataset, ProductOptions(cache=str(cache), progress=False))
    (kept,) = cache.iterdir()
    cli_db = str(tmp_path / "cli.db")
    result = CliRunner().invoke(main, ["ingest", str(kept / CORPUS_FOLDER), "--db", cli_db])
    assert result.exit_code == 0, result.output
    with ChunkStore(kept / STORE_FILE) as eval_store, ChunkStore(cli_db) as cli_store:
        assert _chunks(eval_store) == _chunks(cli_store)
        assert report.chunks == len(_chunks(cli_store)) > len(dataset.corpus)  # the reports are cut
    assert _rows(str(kept / STORE_FILE)) == _rows(cli_db)
