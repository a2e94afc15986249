"""`TermCache` shared by threads: concurrent searches on one snapshot, with a cache cap small
enough that terms are evicted all the time, neither fail nor change their results."""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Iterator
from unittest import mock

import pytest

from ragspine.retrieval.lexical.index import termcache
from ragspine.retrieval.lexical.index.segment import SegmentBuilder
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot

WORDS = [f"w{i}" for i in range(60)]
WEIGHTS = [1 / (i + 1) ** 0.7 for i in range(60)]


@pytest.fixture
def fast_switching() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave inside the cache's eviction loop
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_concurrent_searches_with_a_tiny_cache_neither_fail_nor_differ(fast_switching: None) -> None:
    rng = random.Random(1)
    docs = [rng.choices(WORDS, WEIGHTS, k=rng.randint(1, 20)) for _ in range(2000)]
    builder = SegmentBuilder()
    builder.add(docs, chunk_ids=[f"c{i}" for i in range(len(docs))])
    segment = builder.finish()
    queries = [rng.choices(WORDS, k=3) for _ in range(150)]
    expected = [IndexSnapshot([segment]).search(q, 10, k1=1.5, b=0.75) for q in queries]
    errors: list[str] = []
    wrong: list[int] = []

    def worker(snap: IndexSnapshot, seed: int) -> None:
        order = list(range(len(queries)))
        random.Random(seed).shuffle(order)
        try:
            for i in order:
                if snap.search(queries[i], 10, k1=1.5, b=0.75) != expected[i]:
                    wrong.append(i)
        except Exception as error:  # any failure in a thread is the bug
            errors.append(repr(error))

    with mock.patch.object(termcache.TermCache.__init__, "__defaults__", (4000,)):  # ~1000 postings
        for round_ in range(6):
            snap = IndexSnapshot([segment])
            threads = [threading.Thread(target=worker, args=(snap, round_ * 10 + i)) for i in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    assert errors == []
    assert wrong == []
