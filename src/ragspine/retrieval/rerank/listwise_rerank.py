"""LLM listwise rerank of the fused head, with RESTRICTED exit #1 and an RRF fallback.

Invariants:
- A candidate whose sensitivity is RESTRICTED (any spelling, `is_restricted`) is never shown to
  the judge and keeps its original position; if every head candidate is RESTRICTED (or only one
  is open, so there is nothing to order) the judge is not called.
- Any exception from the judge, or output that is not a permutation, leaves the open candidates
  in their incoming (RRF) order. `listwise_rerank` never raises.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ragspine.retrieval.rerank.guard import DEFAULT_TOP_N, rerank_head
from ragspine.retrieval.types import RetrievalResult

_PASSAGE_CHARS = 600


@runtime_checkable
class ListwiseJudge(Protocol):
    """Orders candidate passages by relevance: returns a 0-based permutation of their indices."""

    def judge(self, query: str, candidates: list[str]) -> list[int]: ...


def listwise_rerank(
    query: str,
    results: Sequence[RetrievalResult],
    judge: ListwiseJudge,
    *,
    top_n: int = DEFAULT_TOP_N,
) -> list[RetrievalResult]:
    """Reorder the non-RESTRICTED members of the first `top_n` results by the judge's verdict
    (`guard.rerank_head`: the one RESTRICTED exit #1 every reranker goes through)."""
    return rerank_head(query, results, judge.judge, top_n=top_n, name="listwise judge")


def build_listwise_prompt(query: str, candidates: Sequence[str]) -> str:
    """A RankGPT-style prompt: numbered passages, answer as `[2] > [1] > [3]`."""
    lines = [
        "Rank the passages below by how well they answer the query, most relevant first.",
        f"Query: {query}",
        "",
    ]
    for number, text in enumerate(candidates, start=1):
        lines.append(f"[{number}] {_squash(text)}")
    lines += [
        "",
        f"Answer with all {len(candidates)} passage numbers in order, like [2] > [1] > [3], "
        "and nothing else.",
    ]
    return "\n".join(lines)


def parse_listwise_response(text: str, n_candidates: int) -> list[int]:
    """The 0-based permutation named by a reply like "[2] > [1] > [3]".

    Numbers are 1-based passage labels; out-of-range and repeated numbers are ignored, and any
    passage the reply leaves out follows in its original order. A reply with no usable number
    gives the identity order.

    >>> parse_listwise_response("[3] > [1]", 3)
    [2, 0, 1]
    """
    seen: list[int] = []
    try:
        for match in re.findall(r"\d+", str(text)):
            index = int(match) - 1
            if 0 <= index < n_candidates and index not in seen:
                seen.append(index)
    except Exception:  # noqa: BLE001 - a malformed reply is the identity order
        seen = []
    return seen + [i for i in range(n_candidates) if i not in seen]


def _squash(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PASSAGE_CHARS else flat[:_PASSAGE_CHARS] + " …"
