"""Units of the index package: vocabularies, segment build/merge, files, and exact top-k."""

from __future__ import annotations

import random
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from ragspine.retrieval.lexical.bm25 import bm25_scores
from ragspine.retrieval.lexical.index import scoring, snapshot, storage, strings
from ragspine.retrieval.lexical.index.merge import merge_segments
from ragspine.retrieval.lexical.index.segment import SegmentBuilder
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.lexical.index.storage import IndexFileError, IndexFolder
from ragspine.retrieval.lexical.index.strings import HashedVocab, StringColumn, hash_table

from index_helpers import close


def _corpus(rng: random.Random, n: int, vocab: int = 60) -> list[list[str]]:
    words = [f"w{i}" for i in range(vocab)]
    weights = [1 / (i + 1) for i in range(vocab)]  # Zipf-like: a few very common terms
    return [rng.choices(words, weights, k=rng.randint(0, 30)) for _ in range(n)]


def _snapshot(docs: list[list[str]]) -> IndexSnapshot:
    builder = SegmentBuilder()
    builder.add(docs, chunk_ids=[f"c{i:05d}" for i in range(len(docs))])
    return IndexSnapshot([builder.finish()])


def test_hashed_vocab_finds_every_term_and_nothing_else() -> None:
    terms = StringColumn([f"t{i}" for i in range(500)] + ["营收", "café"])
    blob, off = terms.encoded()
    column = StringColumn(blob=blob, offsets=off)
    vocab = HashedVocab(column, *hash_table(column))
    assert [vocab.get(t) for t in terms.to_list()] == list(range(len(terms)))
    assert vocab.get("absent") == -1 and vocab.get("absent") == -1  # cached miss


def test_hash_collisions_are_resolved_by_the_stored_term() -> None:
    terms = StringColumn(["a", "b", "c"])
    with mock.patch.object(strings, "term_hash", lambda term: 7):
        vocab = HashedVocab(terms, *hash_table(terms))
        assert [vocab.get(t) for t in ("a", "b", "c", "d")] == [0, 1, 2, -1]


def test_batches_and_merges_give_the_same_postings() -> None:
    rng = random.Random(3)
    docs = _corpus(rng, 300)
    whole = _snapshot(docs)
    parts = []
    for lo in range(0, 300, 70):
        builder = SegmentBuilder(first=lo)
        builder.add(docs[lo : lo + 70], chunk_ids=[f"c{i:05d}" for i in range(lo, min(lo + 70, 300))])
        parts.append(builder.finish())
    merged = merge_segments(parts)
    for term in ("w0", "w7", "w59"):
        a, b = whole.segments[0].postings(term), merged.postings(term)
        assert a is not None and b is not None
        assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()
        assert a[2:] == b[2:]


@pytest.mark.parametrize("k", [1, 3, 10, 40])
def test_pruned_top_k_equals_the_reference_ranking(k: int) -> None:
    rng = random.Random(k)
    docs = _corpus(rng, 2000)
    snap = _snapshot(docs)
    with (
        mock.patch.object(scoring, "_ESSENTIAL_MIN", 0),
        mock.patch.object(scoring, "_ESSENTIAL_SHARE", 0.0),
        mock.patch.object(snapshot, "EXHAUSTIVE_MAX", 0),
    ):
        for _ in range(40):
            query = rng.choices([f"w{i}" for i in range(60)], k=rng.randint(1, 6))
            ref = bm25_scores(query, docs)
            expected = sorted(
                ((f"c{i:05d}", s) for i, s in enumerate(ref) if s > 0), key=lambda x: (-x[1], x[0])
            )[:k]
            got = [(snap.chunk_id(p), s) for p, s in snap.search(query, k, k1=1.5, b=0.75)]
            assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-9)
            assert [i for i, _ in got] == [i for i, _ in expected]


def test_tombstones_and_compaction_keep_scores_exact() -> None:
    rng = random.Random(9)
    docs = _corpus(rng, 400)
    snap = _snapshot(docs)
    removed = np.array(sorted(rng.sample(range(400), 150)), dtype=np.int64)
    dead: dict[str, int] = {}
    for i in removed.tolist():
        for term in set(docs[i]):
            dead[term] = dead.get(term, 0) + 1
    tomb = snap.with_changes(None, removed, dead, version=1)
    alive = [i for i in range(400) if i not in set(removed.tolist())]
    for view in (tomb, tomb.compacted()):
        positions, scores = view.scores(["w1", "w3", "w30"], k1=1.5, b=0.75)
        ref = bm25_scores(["w1", "w3", "w30"], [docs[i] for i in alive])
        expected = {f"c{alive[j]:05d}": s for j, s in enumerate(ref) if s > 0}
        got = {view.chunk_id(p): s for p, s in zip(positions.tolist(), scores.tolist(), strict=True)}
        assert set(got) == set(expected)
        assert all(close(got[c], expected[c]) for c in expected)


def test_segment_files_round_trip_and_are_checked(tmp_path: Path) -> None:
    rng = random.Random(5)
    docs = _corpus(rng, 50)
    seg = _snapshot(docs).segments[0]
    folder = IndexFolder(tmp_path / "idx")
    folder.path.mkdir()
    with (  # force the hashed vocabulary
        mock.patch.object(storage, "DICT_VOCAB_MAX", 5),
        mock.patch.object(strings, "DICT_VOCAB_MAX", 5),
    ):
        entry = folder.write_segment(seg)
        back = folder.read_segment(entry)
    assert isinstance(back.vocab, HashedVocab)
    for term in ("w0", "w9", "w59", "nope"):
        a, b = seg.postings(term), back.postings(term)
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()
    assert back.chunk_ids.to_list() == seg.chunk_ids.to_list()
    (folder.path / entry["name"] / "tfs.npy").write_bytes(b"garbage")
    with pytest.raises(IndexFileError):
        folder.read_segment(entry)
