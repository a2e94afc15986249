"""The listwise LLM judge: one chat call orders the open head candidates (RankGPT-style).

Invariant: provider errors propagate to the caller, whose guard (`guard.rerank_head`) keeps the
fused order; the judge only ever sees the texts the guard passes, never a RESTRICTED one.
"""

from __future__ import annotations

from ragspine.agent.agent import LLMProvider
from ragspine.retrieval.rerank.listwise_rerank import (
    build_listwise_prompt,
    parse_listwise_response,
)

_JUDGE_SYSTEM = "You are a precise search relevance judge. Follow the answer format exactly."


class ProviderListwiseJudge:
    """A ListwiseJudge (and Reranker) backed by the agent's LLMProvider: one chat call per rerank.

    >>> class Echo:
    ...     def chat(self, messages, **kw):
    ...         return "[2] > [1]"
    >>> ProviderListwiseJudge(Echo()).rerank("q", ["a", "b"])
    [1, 0]
    """

    def __init__(self, provider: LLMProvider) -> None:
        self.provider = provider

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        messages = [
            {"role": "system", "content": _JUDGE_SYSTEM},
            {"role": "user", "content": build_listwise_prompt(query, candidates)},
        ]
        reply = self.provider.chat(messages)
        return parse_listwise_response(reply, len(candidates))

    def rerank(self, query: str, candidates: list[str]) -> list[int]:
        return self.judge(query, candidates)
