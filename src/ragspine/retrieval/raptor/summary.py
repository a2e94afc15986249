"""Summaries of a cluster's member chunks: extractive (default) or by an LLM.

Invariants: a summarizer is only ever given chunks that are not RESTRICTED (it checks again and
raises if one slips through, so RESTRICTED text can never reach a summary or an LLM prompt); an
extractive summary is made of whole member sentences, verbatim; a summary is a synthesis, never
a citable fact (the tree marks it `is_synthesis`); `sources` are the members it drew on.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ragspine.agent.agent import LLMProvider
from ragspine.retrieval.chunking.chunking import sentence_spans
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.sensitivity import is_restricted

DEFAULT_SUMMARY_CHARS = 600
_PER_MEMBER = 2  # sentences one member may give an extractive summary
_LLM_MEMBER_CHARS = 1200  # characters of each member an LLM summary prompt shows
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Summary:
    """A summary, the member chunk ids it drew on, and what made it."""

    text: str
    sources: tuple[str, ...]
    summarizer: str


class Summarizer(Protocol):
    """Summarises the member chunks of one cluster (never RESTRICTED ones)."""

    def summarize(self, members: Sequence[Chunk]) -> Summary: ...


def check_open(members: Sequence[Chunk]) -> None:
    """Raise if a RESTRICTED chunk is among `members` (the tree builder never passes one)."""
    bad = [c.chunk_id for c in members if is_restricted(c.sensitivity)]
    if bad:
        raise ValueError(f"RESTRICTED chunks must never be summarised: {', '.join(bad[:3])}")


class ExtractiveSummarizer:
    """The member sentences nearest the cluster's lexical centroid, up to `max_chars`.

    A sentence's score is the cosine between its token set and the cluster's token document
    frequencies (the BM25 analyzer's tokens), so sentences using the cluster's shared vocabulary
    come first; ties go to the earlier member and sentence.

    >>> a = Chunk("a", "d1", 0, "Exports to Europe fell. The CEO spoke.", "d1#p1")
    >>> b = Chunk("b", "d2", 0, "European exports fell sharply in 2024.", "d2#p1")
    >>> s = ExtractiveSummarizer(max_chars=70).summarize([a, b])
    >>> s.text, s.sources
    ('Exports to Europe fell.\\nEuropean exports fell sharply in 2024.', ('a', 'b'))
    """

    def __init__(self, max_chars: int = DEFAULT_SUMMARY_CHARS) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ValueError(f"summary max_chars must be a positive integer, got {max_chars!r}")
        self.max_chars = max_chars

    def summarize(self, members: Sequence[Chunk]) -> Summary:
        check_open(members)
        sentences = [
            (m, i, member.text[s:e], set(tokenize(member.text[s:e])))
            for m, member in enumerate(members)
            for i, (s, e) in enumerate(sentence_spans(member.text))
        ]
        df = Counter(t for *_, tokens in sentences for t in tokens)
        norm = math.sqrt(sum(v * v for v in df.values())) or 1.0

        def score(tokens: set[str]) -> float:
            return sum(df[t] for t in tokens) / (math.sqrt(len(tokens) or 1) * norm)

        ranked = sorted(sentences, key=lambda s: (-score(s[3]), s[0], s[1]))
        picked: list[tuple[int, int, str]] = []
        used: Counter[int] = Counter()
        size = 0
        for m, i, text, _ in ranked:
            if used[m] >= _PER_MEMBER or (picked and size + len(text) + 1 > self.max_chars):
                continue
            picked.append((m, i, text))
            used[m] += 1
            size += len(text) + 1
        picked.sort(key=lambda p: (p[0], p[1]))
        text = "\n".join(p[2] for p in picked)[: self.max_chars]
        return Summary(text, tuple(dict.fromkeys(members[m].chunk_id for m, _, _ in picked)), "extractive")


class LLMSummarizer:
    """A summary written by the configured LLM from the member texts; extractive when it fails.

    The prompt holds only the given (non-RESTRICTED) members, each cut to a bounded length.
    """

    def __init__(self, provider: LLMProvider, max_chars: int = DEFAULT_SUMMARY_CHARS, name: str = "llm") -> None:
        self.provider = provider
        self.fallback = ExtractiveSummarizer(max_chars)
        self.max_chars = max_chars
        self.name = name

    def summarize(self, members: Sequence[Chunk]) -> Summary:
        check_open(members)
        passages = "\n\n".join(f"[{n}] {c.text[:_LLM_MEMBER_CHARS]}" for n, c in enumerate(members, start=1))
        messages = [
            {"role": "system", "content": "You summarise passages. Use only what they say; add nothing."},
            {"role": "user", "content": f"In at most {self.max_chars} characters, state the theme these "
                                        f"passages share and their key facts.\n\n{passages}"},
        ]  # fmt: skip
        try:
            text = self.provider.chat(messages).strip()
        except Exception as exc:  # noqa: BLE001 - a failed call falls back, visibly
            _LOG.warning("RAPTOR LLM summary failed (%s); using the extractive summary", exc)
            fallback = self.fallback.summarize(members)
            return Summary(fallback.text, fallback.sources, f"extractive (llm failed: {type(exc).__name__})")
        if not text:
            fallback = self.fallback.summarize(members)
            return Summary(fallback.text, fallback.sources, "extractive (llm answered nothing)")
        return Summary(text[: self.max_chars], tuple(c.chunk_id for c in members), self.name)
