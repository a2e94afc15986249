"""Benchmark corpora: a synthetic mixed Chinese/English corpus from a fixed seed, and SciFact.

The synthetic corpus is a pure function of (seed, n_chunks): documents of 10 chunks; a chunk
is Chinese (45%), English (45%) or mixed (10%); words are drawn from Zipf-like distributions
(s = 1.07) over 40,000 generated English-like words and 2,500 Han characters grouped into
20,000 words of 1-3 characters; English chunks have 20-60 words, Chinese chunks 15-50
characters; metadata (entity, topic, period, language) is drawn from small sets. Queries are
2-5 consecutive words of randomly chosen chunks (so each has at least one match).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SEED = 20240611
CHUNKS_PER_DOC = 10
_BATCH_DOCS = 2_000
_SYLLABLES = [a + b for a in "bcdfghjklmnprstvwz" for b in ["a", "e", "i", "o", "u", "ai", "ou", "ea"]]
ENTITIES = [f"ENT{i:02d}" for i in range(50)]
TOPICS = ["revenue", "margin", "risk", "esg", "capex", "debt", "people", "legal", "ops", "market"]
PERIODS = [str(y) for y in range(2017, 2025)]


@dataclass(frozen=True)
class SynthChunk:
    doc_id: str
    seq: int
    text: str
    entity: str
    topic: str
    period: str
    language: str


def _vocabularies() -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(SEED)
    words: dict[str, None] = {}
    while len(words) < 40_000:
        n = int(rng.integers(1, 5))
        words["".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), n))] = None
    han = [chr(c) for c in rng.choice(np.arange(0x4E00, 0x9FA5), 2_500, replace=False)]
    zh: dict[str, None] = {}
    while len(zh) < 20_000:
        n = int(rng.choice([1, 2, 2, 2, 3]))
        zh["".join(han[int(i)] for i in _zipf(rng, len(han), n))] = None
    return list(words), list(zh)


def _zipf(rng: np.random.Generator, size: int, n: int, s: float = 1.07) -> np.ndarray:
    cdf = _cdf(size, s)
    return np.searchsorted(cdf, rng.random(n) * cdf[-1])


_CDFS: dict[tuple[int, float], np.ndarray] = {}


def _cdf(size: int, s: float) -> np.ndarray:
    key = (size, s)
    if key not in _CDFS:
        _CDFS[key] = np.cumsum(1.0 / np.arange(1, size + 1) ** s)
    return _CDFS[key]


def synthetic_chunks(n_chunks: int) -> Iterator[SynthChunk]:
    """The first `n_chunks` chunks of the synthetic corpus, in order (deterministic)."""
    en, zh = _vocabularies()
    n_docs = (n_chunks + CHUNKS_PER_DOC - 1) // CHUNKS_PER_DOC
    produced = 0
    for batch, start in enumerate(range(0, n_docs, _BATCH_DOCS)):
        rng = np.random.default_rng([SEED, batch])
        for d in range(start, min(n_docs, start + _BATCH_DOCS)):
            entity = ENTITIES[int(rng.integers(len(ENTITIES)))]
            topic = TOPICS[int(rng.integers(len(TOPICS)))]
            period = PERIODS[int(rng.integers(len(PERIODS)))]
            for seq in range(CHUNKS_PER_DOC):
                if produced == n_chunks:
                    return
                kind = rng.random()
                if kind < 0.45:
                    text, lang = _zh_text(rng, zh, int(rng.integers(15, 51))), "zh"
                elif kind < 0.9:
                    text, lang = _en_text(rng, en, int(rng.integers(20, 61))), "en"
                else:
                    text = _zh_text(rng, zh, 12) + " " + _en_text(rng, en, 8) + " " + _zh_text(rng, zh, 12)
                    lang = "zh"
                yield SynthChunk(f"doc{d:07d}", seq, text, entity, topic, period, lang)
                produced += 1


def _en_text(rng: np.random.Generator, en: list[str], n_words: int) -> str:
    words = [en[i] for i in _zipf(rng, len(en), n_words).tolist()]
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


def _zh_text(rng: np.random.Generator, zh: list[str], n_chars: int) -> str:
    text = "".join([zh[i] for i in _zipf(rng, len(zh), n_chars).tolist()])  # ≥ n_chars chars
    return text[:n_chars] + "。"


def synthetic_queries(texts: list[str], n: int) -> list[str]:
    """`n` queries of 2-5 consecutive words (English) or 2-6 characters (Chinese)."""
    rng = np.random.default_rng([SEED, 999])
    queries = []
    for i in rng.integers(0, len(texts), n):
        text = texts[int(i)].rstrip("。.")
        words = text.split()
        if len(words) > 3:
            w = int(rng.integers(2, 6))
            s = int(rng.integers(0, max(1, len(words) - w)))
            queries.append(" ".join(words[s : s + w]))
        else:
            w = int(rng.integers(2, 7))
            s = int(rng.integers(0, max(1, len(text) - w)))
            queries.append(text[s : s + w])
    return queries


def scifact(path: Path) -> tuple[list[dict[str, str]], list[str]]:
    """(documents {_id, title, text}, the 300 test queries in qrels order)."""
    docs = [json.loads(line) for line in (path / "corpus.jsonl").open(encoding="utf-8")]
    lines = (path / "qrels" / "test.tsv").read_text("utf-8").splitlines()[1:]
    wanted = list(dict.fromkeys(line.split("\t")[0] for line in lines))
    queries = {}
    for line in (path / "queries.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        queries[row["_id"]] = row["text"]
    return docs, [queries[q] for q in wanted]
