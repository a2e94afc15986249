"""Extractive context compression: each result keeps only its sentences most related to the query.

Invariants:
- only `prompt_text` / `prompt_spans` are set; the chunk (`text`, `source_locator`, every
  citation field) is the very object given, byte-identical;
- `prompt_text` is `SEPARATOR.join(chunk.text[s:e] for s, e in prompt_spans)`: each piece is an
  exact substring of the chunk's text at its own offsets, in text order, so a citation into the
  compressed text still points at real source text;
- a result is left alone (prompt_text None) when no sentence shares a token with the query, when
  it has one sentence, or when every sentence would be kept;
- scoring is lexical (the BM25 analyzer's tokens, IDF over the sentences of this result list),
  deterministic; ties go to the earlier sentence. Order and membership are unchanged.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

from ragspine.retrieval.chunking.chunking import sentence_spans
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.types import RetrievalResult

SEPARATOR = " … "
DEFAULT_MAX_SENTENCES = 3
DEFAULT_MIN_SHARE = 0.3  # a kept sentence scores at least this share of the chunk's best one

Span = tuple[int, int]


class Compress:
    """Writes the query-relevant sentences of each result to `prompt_text`.

    >>> from ragspine.retrieval.model import Chunk
    >>> text = "Revenue fell 8%. The weather was fine. Exports to Europe fell."
    >>> r = RetrievalResult(Chunk("c", "d", 0, text, "d#p1"), 1.0, None, 1.0)
    >>> out = Compress(max_sentences=2).process("did revenue fall in Europe", [r])[0]
    >>> out.prompt_text, out.prompt_spans, out.chunk is r.chunk
    ('Revenue fell 8%. … Exports to Europe fell.', ((0, 16), (39, 62)), True)
    """

    def __init__(self, max_sentences: int = DEFAULT_MAX_SENTENCES, min_share: float = DEFAULT_MIN_SHARE) -> None:
        if isinstance(max_sentences, bool) or not isinstance(max_sentences, int) or max_sentences < 1:
            raise ValueError(f"compress max_sentences must be a positive integer, got {max_sentences!r}")
        if not 0.0 <= min_share <= 1.0:
            raise ValueError(f"compress min_share must be in [0, 1], got {min_share}")
        self.max_sentences = max_sentences
        self.min_share = min_share

    def process(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        wanted = set(tokenize(query))
        split = [sentence_spans(r.chunk.text) for r in results]
        tokens = [[set(tokenize(r.chunk.text[s:e])) & wanted for s, e in spans] for r, spans in zip(results, split)]
        df = Counter(t for per_result in tokens for sentence in per_result for t in sentence)
        n = sum(len(spans) for spans in split)
        idf = {t: math.log(1.0 + n / df[t]) for t in df}
        out = []
        for result, spans, per_sentence in zip(results, split, tokens, strict=True):
            kept = self.keep([sum(idf[t] for t in sentence) for sentence in per_sentence])
            if not kept or len(kept) == len(spans):
                out.append(result)
                continue
            merged = merge_adjacent(result.chunk.text, [spans[i] for i in kept])
            text = SEPARATOR.join(result.chunk.text[s:e] for s, e in merged)
            out.append(replace(result, prompt_text=text, prompt_spans=tuple(merged)))
        return out

    def keep(self, scores: list[float]) -> list[int]:
        """Indexes of the sentences kept, in text order (empty: keep the chunk whole)."""
        if len(scores) < 2 or max(scores) <= 0:
            return []
        best = max(scores)
        ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        chosen = [i for i in ranked if scores[i] > 0 and scores[i] >= self.min_share * best]
        return sorted(chosen[: self.max_sentences])

    def __repr__(self) -> str:
        return f"Compress(max_sentences={self.max_sentences}, min_share={self.min_share})"


def merge_adjacent(text: str, spans: list[Span]) -> list[Span]:
    """Spans in order, two joined into one when only whitespace lies between them.

    >>> merge_adjacent("A. B. C.", [(0, 2), (3, 5), (6, 8)])
    [(0, 8)]
    """
    merged: list[Span] = []
    for start, end in spans:
        if merged and not text[merged[-1][1] : start].strip():
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
