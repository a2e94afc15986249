"""Fixtures for the eval tests: a tiny BEIR folder written for the project, and the shared sets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

SHARED_EVAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval"

CORPUS = [
    {"_id": "tide", "title": "Tide pools", "text": "Tide pools hold starfish, anemones and small crabs between the rocks."},
    {"_id": "bread", "title": "Sourdough bread", "text": "A sourdough starter ferments flour and water for days before baking."},
    {"_id": "volcano", "title": "Volcanoes", "text": "Magma rises through the crust and erupts as lava from a volcano."},
    {"_id": "tea", "title": "茶叶", "text": "绿茶不经发酵，红茶经过完全发酵，乌龙茶介于两者之间。"},
    {"_id": "rail", "title": "高速铁路", "text": "高速铁路的列车时速超过二百五十公里，连接主要城市。"},
    {"_id": "empty", "title": "", "text": ""},
]
QUERIES = [
    {"_id": "q1", "text": "what lives in tide pools"},
    {"_id": "q2", "text": "how is sourdough fermented"},
    {"_id": "q3", "text": "红茶是否发酵"},
    {"_id": "q4", "text": "高速列车的时速"},
    {"_id": "q5", "text": "   "},
    {"_id": "q6", "text": "lava and magma", "metadata": {}},
]
QRELS = {
    "test": [("q1", "tide", 1), ("q2", "bread", 2), ("q3", "tea", 1), ("q4", "rail", 1), ("q5", "tide", 1)],
    "dev": [("q6", "volcano", 1), ("q6", "tide", 0)],
}


def write_beir(
    root: Path,
    corpus: list[dict[str, object]] = CORPUS,
    queries: list[dict[str, object]] = QUERIES,
    qrels: dict[str, list[tuple[str, str, int]]] = QRELS,
) -> Path:
    """Write a BEIR folder at `root` and return it."""
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in corpus), encoding="utf-8"
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8"
    )
    for split, rows in qrels.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in rows]
        (root / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "toy")


@pytest.fixture
def make_beir(tmp_path: Path) -> Callable[..., Path]:
    def make(name: str, **kwargs: object) -> Path:
        return write_beir(tmp_path / name, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def shared_eval() -> Path:
    if not (SHARED_EVAL / "README.md").is_file():
        pytest.skip(f"shared evaluation data not found at {SHARED_EVAL.resolve()}")
    return SHARED_EVAL
