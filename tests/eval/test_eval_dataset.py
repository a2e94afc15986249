"""BEIR loading: the indexed text, and an error naming the file (and line) for each bad layout."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from ragspine.eval.dataset import DatasetError, load_beir


def test_loads_the_split_and_joins_title_and_text(beir_dir: Path) -> None:
    ds = load_beir(beir_dir, "test")
    assert ds.name == "toy" and ds.split == "test" and ds.splits == ("dev", "test")
    assert len(ds.corpus) == 6
    assert list(ds.queries) == ["q1", "q2", "q3", "q4", "q5"]
    assert ds.qrels["q2"] == {"bread": 2}
    tide = ds.corpus[0]
    assert tide.indexed_text == "Tide pools\n\nTide pools hold starfish, anemones and small crabs between the rocks."
    assert ds.corpus[-1].indexed_text == ""  # no title: just the text
    assert ds.corpus_sha256 == hashlib.sha256((beir_dir / "corpus.jsonl").read_bytes()).hexdigest()


def test_judged_documents_missing_from_the_corpus_are_counted(make_beir: Callable[..., Path]) -> None:
    root = make_beir("ghost", qrels={"test": [("q1", "tide", 1), ("q1", "nowhere", 1)]})
    assert load_beir(root, "test").unknown_judged_docs == 1


def test_missing_folder_and_files_are_named(beir_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="dataset folder not found"):
        load_beir(tmp_path / "nope", "test")
    with pytest.raises(DatasetError, match=r"missing qrels/train\.tsv for split 'train' \(splits found: dev, test\)"):
        load_beir(beir_dir, "train")
    (beir_dir / "queries.jsonl").unlink()
    with pytest.raises(DatasetError, match=r"missing queries\.jsonl"):
        load_beir(beir_dir, "test")
    (beir_dir / "corpus.jsonl").unlink()
    with pytest.raises(DatasetError, match=r"missing corpus\.jsonl"):
        load_beir(beir_dir, "test")


@pytest.mark.parametrize(
    ("file", "line", "message"),
    [
        ("corpus.jsonl", '{"_id": "x", "text": "ok"', r"corpus\.jsonl line 2: not valid JSON"),
        ("corpus.jsonl", '["not", "an", "object"]', r"corpus\.jsonl line 2: expected a JSON object"),
        ("corpus.jsonl", '{"title": "t", "text": "no id"}', r"corpus\.jsonl line 2: missing '_id'"),
        ("corpus.jsonl", '{"_id": "y", "title": "t"}', r"corpus\.jsonl line 2: missing 'text'"),
        ("corpus.jsonl", '{"_id": "y", "text": 5}', r"corpus\.jsonl line 2: 'text' must be a string"),
        ("corpus.jsonl", '{"_id": "tide", "text": "again"}', r"corpus\.jsonl line 2: duplicate _id 'tide' \(first on line 1\)"),
        ("queries.jsonl", '{"_id": "q9"}', r"queries\.jsonl line 2: missing 'text'"),
        ("qrels/test.tsv", "q1 tide 1", r"test\.tsv line 2: expected 3 tab-separated fields"),
        ("qrels/test.tsv", "q1\ttide\thigh", r"test\.tsv line 2: score 'high' is not an integer"),
    ],
)
def test_malformed_lines_are_named(beir_dir: Path, file: str, line: str, message: str) -> None:
    path = beir_dir / file
    lines = path.read_text("utf-8").splitlines()
    lines.insert(1, line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        load_beir(beir_dir, "test")


def test_non_utf8_and_unknown_query_ids_are_refused(beir_dir: Path) -> None:
    with (beir_dir / "qrels" / "test.tsv").open("a", encoding="utf-8") as handle:
        handle.write("q404\ttide\t1\n")
    with pytest.raises(DatasetError, match=r"1 query id\(s\) not in queries\.jsonl, e\.g\. 'q404'"):
        load_beir(beir_dir, "test")
    (beir_dir / "corpus.jsonl").write_bytes(b'{"_id": "a", "text": "ok"}\n{"_id": "b", "text": "\xff"}\n')
    with pytest.raises(DatasetError, match=r"corpus\.jsonl line 2: not UTF-8"):
        load_beir(beir_dir, "test")


def test_unescaped_line_separators_inside_strings_are_text(make_beir: Callable[..., Path]) -> None:
    corpus = [{"_id": "ls", "title": "", "text": "first\u2028second\x85third"}]
    root = make_beir("separators", corpus=corpus, qrels={"test": [("q1", "ls", 1)]})
    assert load_beir(root, "test").corpus[0].text == "first\u2028second\x85third"
