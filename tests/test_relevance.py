"""The relevance score (issue 35, item 2): in [0, 1], never increasing down a result list (it
never reorders), a snippet the mode's map cannot read takes its neighbour's value, members carry
their parent's, and every snippet a real store's search returns is rated by its mode's map."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.relevance import CALIBRATIONS, Calibration, above, check_min_score, rate, relevance_mode
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

FINITE = st.floats(min_value=-50, max_value=50, allow_nan=False)


def _snippet(fused: float, vector: float | None = 0.5, bm25: float | None = 1.0, **extra: Any) -> dict[str, Any]:
    return {"scores": {"fused": fused, "vector": vector, "bm25": bm25}, **extra}


@given(st.lists(st.tuples(FINITE, st.floats(-1, 1), st.floats(0, 100)), max_size=30))
def test_relevance_is_bounded_and_never_increases(rows: list[tuple[float, float, float]]) -> None:
    for mode in CALIBRATIONS:
        found = rate([_snippet(*row) for row in rows], mode)  # type: ignore[arg-type]
        values = [s["relevance"] for s in found]
        assert all(0.0 <= v <= 1.0 for v in values)
        assert values == sorted(values, reverse=True)


def test_unrated_snippets_take_a_neighbours_value_and_members_their_parents() -> None:
    calibration = {"hybrid": Calibration(("fused",), (1.0,), 0.0)}
    pointer = {"scores": {"visual": 3.0, "fused": 0.0, "bm25": None, "vector": None}, "is_visual": True,
               "members": [{"scores": {}}]}  # fmt: skip
    found = rate([pointer, _snippet(1.0), _snippet(-1.0), {"scores": {"fused": 9.0}, "is_synthesis": True}],  # type: ignore[list-item]
                 "hybrid", calibration)  # fmt: skip
    first, low = round(1 / (1 + math.exp(-1.0)), 4), round(1 / (1 + math.exp(1.0)), 4)
    # the pointer takes the next rated value; the node, last, the one above it
    assert [s["relevance"] for s in found] == [first, first, low, low]
    assert pointer["members"][0]["relevance"] == first  # type: ignore[index]


def test_the_floor_keeps_a_prefix_and_bad_floors_are_refused() -> None:
    found = rate([_snippet(3.0), _snippet(1.0), _snippet(-2.0)], "hybrid", {"hybrid": Calibration(("fused",), (1.0,), 0.0)})  # type: ignore[list-item]
    assert above(found, found[1]["relevance"]) == found[:2]
    for bad in (1.01, -0.5, float("nan"), "0.5", True, None):
        with pytest.raises(ValueError, match="min_score must be a number from 0 to 1"):
            check_min_score(bad)


def test_the_mode_picks_its_map() -> None:
    assert relevance_mode(False, "hybrid", True) == "bm25"
    assert relevance_mode(True, "vector", True) == "vector"
    assert relevance_mode(True, "hybrid", False) == "vector", "a rank fusion's fused score is a reciprocal rank"
    assert relevance_mode(True, "hybrid", True) == "hybrid"


@pytest.mark.parametrize("backend", [None, DeterministicEmbeddingBackend()])
def test_a_real_stores_snippets_are_rated_by_their_modes_map(backend: Any) -> None:
    retriever, store = build_narrative_retriever(":memory:", embedding_backend=backend)
    try:
        for i, text in enumerate(["营收下滑的原因是出口订单减少。", "毛利率因召回而下降。", "董事会批准了分红方案。"]):
            retriever.index.ingest(text, DocumentMeta(doc_id=f"d{i}", title=f"d{i}"))
        found = retriever.retrieve("营收下滑", top_k=3)
        mode = "bm25" if backend is None else "hybrid"
        assert retriever.relevance_mode == mode and found
        expected, running = [], 1.0
        for rank, s in enumerate(found, start=1):
            running = min(running, CALIBRATIONS[mode](s["scores"], rank) or 0.0)
            expected.append(round(running, 4))
        assert [s["relevance"] for s in found] == expected
    finally:
        store.close()
