"""`bench/gpu_bench.py`'s own logic, without a model: the corpus slice keeps every judged document
of the chosen queries, dense rankings and nDCG@10 from given vectors, and the parity block."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np

from ragspine.eval.dataset import load_beir


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "bench" / "gpu_bench.py"
    spec = importlib.util.spec_from_file_location("gpu_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": "", "text": f"document {i}"} for i in range(6)]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    (root / "queries.jsonl").write_text("\n".join(json.dumps({"_id": q, "text": q}) for q in ("q1", "q2")))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td5\t1\nq2\td4\t1\n")
    return root


def test_the_slice_keeps_the_judged_documents_and_scores_rankings(tmp_path: Path) -> None:
    bench = _bench()
    dataset = load_beir(_beir(tmp_path / "set"), "test")
    docs, qids = bench.corpus_slice(dataset, 3, 1)
    assert qids == ["q1"] and [d.doc_id for d in docs] == ["d5", "d0", "d1"], "the judged one first, then fillers"
    doc_ids = [d.doc_id for d in docs]
    passages = np.eye(3, dtype=np.float32)
    query = np.array([[0.1, 0.2, 0.9]], dtype=np.float32)  # closest to d1, then d0, then d5
    ranked = bench.rankings(passages, query, doc_ids, 3)
    assert ranked == [["d1", "d0", "d5"]]
    assert round(bench.mean_ndcg(ranked, qids, dataset.qrels), 4) == 0.5


def test_the_parity_block_compares_the_first_device_with_the_last() -> None:
    bench = _bench()
    a = {"device": "cuda", "P": np.eye(2, dtype=np.float32), "ndcg@10": 0.5,
         "rerank": {"scores": [[1.0, 2.0]], "ndcg@10": 0.6}}  # fmt: skip
    tilted = np.array([[1.0, 0.0], [0.6, 0.8]], dtype=np.float32)
    b = {"device": "cpu", "P": tilted, "ndcg@10": 0.4, "rerank": {"scores": [[1.0, 2.5]], "ndcg@10": 0.6}}
    out = bench.parity(a, b)
    assert out == {"devices": "cuda vs cpu", "passage_cosine_min": 0.8, "passage_cosine_mean": 0.9,
                   "ndcg@10_delta": 0.1, "rerank_score_max_abs_diff": 0.5, "rerank_ndcg@10_delta": 0.0}  # fmt: skip
    skipped = bench.parity(a, {**b, "rerank": {"skipped": "no model"}})
    assert "rerank_score_max_abs_diff" not in skipped
