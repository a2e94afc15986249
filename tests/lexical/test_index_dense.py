"""The exhaustive search's dense vectors (`scoring.DENSE_SHARE`): a common term added as one
vector of contributions gives the same ranking as the reference scorer and the very same bits
as scattering its postings, with repeated query tokens, tombstones and filters."""

from __future__ import annotations

import random
from unittest import mock

import numpy as np
import pytest

from ragspine.retrieval.lexical.bm25 import bm25_scores
from ragspine.retrieval.lexical.index import scoring
from ragspine.retrieval.lexical.index import snapshot as snapshot_module
from ragspine.retrieval.lexical.index.segment import SegmentBuilder
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.model import INDEXED_FIELDS

from index_helpers import assert_same_ranking, ranked

N_DOCS = 600
WORDS = [f"w{i}" for i in range(80)]
WEIGHTS = [1 / (i + 1) for i in range(80)]  # Zipf-like: w0..w5 are in most documents
TOPICS = ["a", "b"]


def _docs(rng: random.Random) -> list[list[str]]:
    return [rng.choices(WORDS, WEIGHTS, k=rng.randint(1, 30)) for _ in range(N_DOCS)]


def _snapshot(docs: list[list[str]], restricted: frozenset[int] = frozenset()) -> IndexSnapshot:
    def field(name: str, i: int) -> str:
        if name == "sensitivity":
            return "RESTRICTED" if i in restricted else ""
        return TOPICS[i % 2] if name == "topic" else ""

    builder = SegmentBuilder()
    builder.add(
        docs,
        chunk_ids=[f"c{i:05d}" for i in range(len(docs))],
        fields=[tuple(field(name, i) for name in INDEXED_FIELDS) for i in range(len(docs))],
    )
    return IndexSnapshot([builder.finish()])


def _queries(rng: random.Random) -> list[list[str]]:
    # rare and common terms mixed, some repeated (multiplicity > 1 on dense terms too)
    return [rng.choices(WORDS[:6], k=rng.randint(0, 3)) + rng.choices(WORDS, k=rng.randint(1, 5)) for _ in range(60)]


def _search(
    snap: IndexSnapshot, query: list[str], dense: bool, visible: bool = False, **filters: str
) -> list[tuple[int, float]]:
    fresh = IndexSnapshot(snap.segments, active=snap.active, dead_df=snap.dead_df)  # an empty term cache
    if visible:
        fresh = fresh.visible()  # RESTRICTED positions masked (hidden), as every search sees them
    share = scoring.DENSE_SHARE if dense else 0  # 0: no term is dense
    with mock.patch.object(scoring, "DENSE_SHARE", share):
        first = fresh.search(query, 10, k1=1.5, b=0.75, filters=filters or None)
        again = fresh.search(query, 10, k1=1.5, b=0.75, filters=filters or None)  # from the term cache
    assert again == first
    return first


def test_dense_terms_give_the_reference_ranking_and_the_same_bits() -> None:
    rng = random.Random(5)
    docs = _docs(rng)
    snap = _snapshot(docs)
    dense_terms = [t for t in WORDS if scoring.is_dense(snap.query_terms([t], k1=1.5, b=0.75)[0], snap.n_positions)]
    assert 2 <= len(dense_terms) < len(WORDS) // 2  # both kinds are exercised
    for query in _queries(rng):
        got = _search(snap, query, dense=True)
        assert got == _search(snap, query, dense=False)  # bit for bit
        reference = {f"c{i:05d}": s for i, s in enumerate(bm25_scores(query, docs)) if s > 0}
        assert_same_ranking([(snap.chunk_id(p), s) for p, s in got], ranked(reference, 10))


@pytest.mark.parametrize("visible", [False, True], ids=["all", "visible"])
def test_dense_terms_respect_tombstones_and_filters(visible: bool) -> None:
    """With `visible`, a third of the documents are RESTRICTED and searched through
    `visible()`: they are neither returned nor counted in N, df or avgdl."""
    rng = random.Random(8)
    docs = _docs(rng)
    removed = np.array(sorted(rng.sample(range(N_DOCS), 200)), dtype=np.int64)
    restricted = frozenset(rng.sample(range(N_DOCS), N_DOCS // 3) if visible else [])
    dead: dict[str, int] = {}
    for i in removed.tolist():
        for term in set(docs[i]):
            dead[term] = dead.get(term, 0) + 1
    snap = _snapshot(docs, restricted).with_changes(None, removed, dead, version=1)
    gone = set(removed.tolist()) | restricted
    alive = [i for i in range(N_DOCS) if i not in gone]
    for query in _queries(rng):
        scores = bm25_scores(query, [docs[i] for i in alive])  # statistics over the active ones
        for topic in (None, "a"):
            filters = {"topic": topic} if topic else {}
            got = _search(snap, query, dense=True, visible=visible, **filters)
            assert got == _search(snap, query, dense=False, visible=visible, **filters)
            assert not gone & {p for p, _ in got}
            reference = {f"c{i:05d}": s for i, s in zip(alive, scores, strict=True)
                         if s > 0 and (topic is None or TOPICS[i % 2] == topic)}  # fmt: skip
            assert_same_ranking([(snap.chunk_id(p), s) for p, s in got], ranked(reference, 10))


def test_a_filter_that_leaves_the_sparse_terms_nothing_still_adds_the_dense_ones() -> None:
    docs = [["rare", "common"], ["common"], ["common", "x"], ["common"]]
    builder = SegmentBuilder()
    topics = ["a", "b", "b", "b"]
    builder.add(docs, chunk_ids=[f"c{i}" for i in range(4)],
                fields=[tuple(t if name == "topic" else "" for name in INDEXED_FIELDS) for t in topics])  # fmt: skip
    snap = IndexSnapshot([builder.finish()])
    with mock.patch.object(scoring, "DENSE_SHARE", 2):  # "common" dense, "rare" (1 of 4) sparse
        got = snap.search(["rare", "common"], 10, k1=1.5, b=0.75, filters={"topic": "b"})
    scores = bm25_scores(["rare", "common"], docs)
    assert [(snap.chunk_id(p), s) for p, s in got] == sorted(
        ((f"c{i}", scores[i]) for i in (1, 2, 3)), key=lambda x: (-x[1], x[0])
    )


def test_a_repeated_common_token_on_the_pruned_path_reuses_its_cached_arrays() -> None:
    """Above EXHAUSTIVE_MAX (`top_candidates`, which ignores dense vectors) a repeated common
    token caches its posting arrays once; no dense vector is built, nothing is recomputed."""
    rng = random.Random(5)
    docs = _docs(rng)
    snap = _snapshot(docs)
    common = WORDS[0]
    assert scoring.is_dense(snap.query_terms([common], k1=1.5, b=0.75)[0], snap.n_positions)
    query = [common, common, WORDS[30]]
    computed = mock.Mock(wraps=scoring.contributions)
    dense = mock.Mock(wraps=snapshot_module.dense_contributions)
    with mock.patch.object(snapshot_module, "EXHAUSTIVE_MAX", 0), \
            mock.patch.object(scoring, "contributions", computed), \
            mock.patch.object(snapshot_module, "dense_contributions", dense):  # fmt: skip
        results = [snap.search(query, 10, k1=1.5, b=0.75) for _ in range(4)]
    assert dense.call_count == 0
    assert computed.call_count <= 2  # each term's postings once, then from the cache
    assert all(r == results[0] for r in results)
    reference = {f"c{i:05d}": s for i, s in enumerate(bm25_scores(query, docs)) if s > 0}
    assert_same_ranking([(snap.chunk_id(p), s) for p, s in results[0]], ranked(reference, 10))


def test_a_query_of_common_terms_hands_on_only_the_positions_at_the_cut() -> None:
    """With (almost) only dense terms no sparse sample gives a cut: the k-th best of the
    accumulator does, ties included, so best_k sorts about k positions, not every match."""
    snap = _snapshot(_docs(random.Random(5)))
    query = WORDS[:3]
    terms = snap.query_terms(query, k1=1.5, b=0.75)
    assert all(scoring.is_dense(t, snap.n_positions) for t in terms)
    positions, scores = scoring.top_exhaustive(terms, 10, snap.norms(1.5, 0.75), None, snap.n_positions)
    all_positions, all_scores = snap.scores(query, k1=1.5, b=0.75)
    cut = np.sort(all_scores)[-10]
    assert positions.tolist() == all_positions[all_scores >= cut].tolist()  # the best 10 and ties
    assert scores.tolist() == all_scores[all_scores >= cut].tolist()
    assert len(all_positions) > 10 * len(positions)
