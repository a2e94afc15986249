from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.model import Chunk
from ragspine.retrieval.pipeline.hybrid import RetrievalResult
from ragspine.retrieval.rerank.listwise_rerank import (
    DEFAULT_TOP_N,
    ListwiseJudge,
    build_listwise_prompt,
    listwise_rerank,
    parse_listwise_response,
)


def _results(sensitivities: list[str]) -> list[RetrievalResult]:
    return [
        RetrievalResult(
            Chunk(f"d{i}:0", f"d{i}", 0, f"passage {i} {s}", "loc", sensitivity=s),
            bm25_score=10.0 - i, vector_score=None, fused_score=1 / (61 + i),
        )
        for i, s in enumerate(sensitivities)
    ]  # fmt: skip


class _Reverse:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.calls.append(list(candidates))
        return list(reversed(range(len(candidates))))


class _Broken:
    def __init__(self, reply: object) -> None:
        self.reply = reply

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply  # type: ignore[return-value]


def _ids(results: list[RetrievalResult]) -> list[str]:
    return [r.chunk.chunk_id for r in results]


def test_default_top_n() -> None:
    assert DEFAULT_TOP_N == 10
    assert isinstance(_Reverse(), ListwiseJudge)


def test_judge_reorders_head_only() -> None:
    results = _results(["PUBLIC"] * 5)
    reranked = listwise_rerank("q", results, _Reverse(), top_n=3)
    assert _ids(reranked) == ["d2:0", "d1:0", "d0:0", "d3:0", "d4:0"]


def test_restricted_is_never_shown_to_judge_and_keeps_its_position() -> None:
    results = _results(["PUBLIC", "restricted", "PUBLIC", " Restricted ", "PUBLIC"])
    judge = _Reverse()
    reranked = listwise_rerank("q", results, judge)
    assert judge.calls == [["passage 0 PUBLIC", "passage 2 PUBLIC", "passage 4 PUBLIC"]]
    assert _ids(reranked) == ["d4:0", "d1:0", "d2:0", "d3:0", "d0:0"]


def test_no_judge_call_when_everything_is_restricted() -> None:
    results = _results(["RESTRICTED", "RESTRICTED"])
    judge = _Reverse()
    assert _ids(listwise_rerank("q", results, judge)) == ["d0:0", "d1:0"]
    assert judge.calls == []


@pytest.mark.parametrize(
    "reply", [RuntimeError("model down"), [0, 0, 1], [0, 1], [3, 2, 1], "nonsense", None]
)
def test_failures_fall_back_to_rrf_order(reply: object) -> None:
    results = _results(["PUBLIC"] * 3)
    assert _ids(listwise_rerank("q", results, _Broken(reply))) == _ids(results)


def test_empty_results() -> None:
    assert listwise_rerank("q", [], _Reverse()) == []


def test_prompt_numbers_passages() -> None:
    prompt = build_listwise_prompt("why did revenue fall", ["first\npassage", "second"])
    assert "why did revenue fall" in prompt
    assert "[1] first passage" in prompt and "[2] second" in prompt


@pytest.mark.parametrize(
    ("text", "n", "expected"),
    [
        ("[2] > [1] > [3]", 3, [1, 0, 2]),
        ("3, 1", 3, [2, 0, 1]),
        ("[2] > [2] > [9] > [0]", 3, [1, 0, 2]),
        ("I cannot rank these.", 3, [0, 1, 2]),
        ("", 0, []),
    ],
)
def test_parse_response(text: str, n: int, expected: list[int]) -> None:
    assert parse_listwise_response(text, n) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=0, max_value=30))
def test_parse_always_returns_a_permutation(text: str, n: int) -> None:
    assert sorted(parse_listwise_response(text, n)) == list(range(n))
