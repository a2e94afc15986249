"""The relevance score: a number in [0, 1] on every snippet, comparable across queries and modes.

A snippet's `relevance` estimates the probability that its passage is relevant to the query: a
logistic map (`Calibration`) of its scores, one per retrieval mode, fitted on the shared eval
sets' train/dev splits (never test) with the multilingual-e5-small default embedding and
constants shipped here (`CALIBRATIONS`); `python -m bench.relevance_fit fit` (`make
relevance-fit`) refits them and prints the table to paste. The fused score alone is relative to
its query (a z-score sum, or a reciprocal rank), so hybrid's map also reads the cosine and
log(1 + BM25); vector's reads the cosine and the rank; BM25's reads the rank alone (a BM25 score
grows with the store's size: a map of it would rate a small store's good match as irrelevant).

Invariants:
- `rate` never reorders: down a result list the relevance never increases (a snippet whose map
  says more than the one above it gets that one's value), so a floor (`min_score`) keeps a
  prefix of the list, and the same floor cuts the same snippets on every surface.
- Each value is in [0, 1], rounded to `DECIMALS`; a snippet the mode's map cannot read (a visual
  page pointer, a RAPTOR synthesis node) takes the next rated snippet's value (else the previous
  one's, else 0.0); a member (a pointer's or a node's chunk) carries its parent's value.
- `scores` (the channels' raw scores and the fused one) are left as they are.
This module imports only the snippet model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragspine.retrieval.snippet import Snippet

__all__ = ["CALIBRATIONS", "DECIMALS", "RELEVANCE_MODES", "Calibration", "above", "check_min_score", "rate",
           "relevance_mode"]  # fmt: skip

DECIMALS = 4
RELEVANCE_MODES = ("hybrid", "vector", "bm25")


@dataclass(frozen=True)
class Calibration:
    """P(relevant) = 1 / (1 + exp(-(intercept + Σ coef · feature))) over the named features of a
    snippet's scores: `fused`, `vector` (the cosine), `log_bm25` (log(1 + BM25)), and of its place
    in the list: `log_rank` (log of the rank, from 1)."""

    features: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float

    def __call__(self, scores: Mapping[str, Any], rank: int = 1) -> float | None:
        """The probability for these scores at this place (from 1), or None when one of the
        features is missing."""
        values = feature_values(self.features, scores, rank)
        if values is None:
            return None
        z = self.intercept + sum(c * v for c, v in zip(self.coef, values, strict=True))
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0


def feature_values(names: Sequence[str], scores: Mapping[str, Any], rank: int = 1) -> list[float] | None:
    """The named features of a snippet's `scores` (None when one is missing or not finite).

    >>> feature_values(("fused", "vector", "log_bm25"), {"fused": 1.5, "vector": 0.8, "bm25": 0.0})
    [1.5, 0.8, 0.0]
    >>> feature_values(("vector",), {"fused": 1.0, "vector": None, "bm25": 2.0}) is None
    True
    """
    out: list[float] = []
    for name in names:
        if name == "log_rank":
            out.append(math.log(max(1, rank)))
            continue
        raw = scores.get("bm25" if name == "log_bm25" else name)
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
            return None
        out.append(math.log1p(max(0.0, float(raw))) if name == "log_bm25" else float(raw))
    return out


# Fitted by `python -m bench.relevance_fit fit` (docs/benchmarks.md, "Relevance score").
CALIBRATIONS: dict[str, Calibration] = {
    "hybrid": Calibration(("fused", "vector", "log_bm25"), (0.4218, 2.9911, -0.2223), -7.5758),
    "vector": Calibration(("vector", "log_rank"), (1.4378, -2.0718), -1.525),
    "bm25": Calibration(("log_rank",), (-2.0479,), -0.5093),
}


def relevance_mode(dense: bool, channels: str, fuses_scores: bool) -> str:
    """Which map rates a retriever's snippets: bm25 without a dense channel, vector for the dense
    channel alone (channels="vector") and for a rank fusion (its fused score is a reciprocal
    rank: the cosine is read), hybrid for the score fusion (zscore, the default).

    >>> relevance_mode(False, "hybrid", True), relevance_mode(True, "vector", True), relevance_mode(True, "hybrid", True)
    ('bm25', 'vector', 'hybrid')
    """
    if not dense:
        return "bm25"
    return "hybrid" if channels != "vector" and fuses_scores else "vector"


def rate(snippets: list[Snippet], mode: str, calibrations: Mapping[str, Calibration] = CALIBRATIONS) -> list[Snippet]:
    """Set each snippet's `relevance` (in place; see the module's invariants) and return them.

    >>> calibration = {"hybrid": Calibration(("fused",), (1.0,), 0.0)}
    >>> found = rate([{"scores": {"fused": 2.0}}, {"scores": {"fused": 3.0}}, {"scores": {"fused": -1.0}}], "hybrid", calibration)  # type: ignore[list-item]
    >>> [s["relevance"] for s in found]
    [0.8808, 0.8808, 0.2689]
    """
    calibration = calibrations[mode]
    raw: list[float | None] = [
        None if s.get("is_synthesis") or s.get("is_visual") else calibration(s["scores"], rank)
        for rank, s in enumerate(snippets, start=1)
    ]
    following: float | None = None
    for i in range(len(raw) - 1, -1, -1):  # an unrated snippet takes the next rated one's value
        if raw[i] is None:
            raw[i] = following
        following = raw[i]
    running = 1.0
    previous = 0.0
    for snippet, value in zip(snippets, raw, strict=True):
        value = previous if value is None else value  # no rated snippet after it: the one above's
        running = min(running, value)
        previous = running
        snippet["relevance"] = round(running, DECIMALS)
        for member in snippet.get("members", []):
            member["relevance"] = snippet["relevance"]
    return snippets


def above(snippets: list[Snippet], floor: float) -> list[Snippet]:
    """The snippets whose relevance is at least `floor` (a prefix of a rated list): the one cut
    every surface applies (`Workspace.search`, library search).

    >>> [s["relevance"] for s in above([{"relevance": 0.9}, {"relevance": 0.4}], 0.5)]  # type: ignore[list-item]
    [0.9]
    """
    return [s for s in snippets if s["relevance"] >= floor]


def check_min_score(value: object) -> float:
    """`value` as a relevance floor: a number from 0 to 1 (not a bool or a string); ValueError
    otherwise, naming the value.

    >>> check_min_score(0.3), check_min_score(1)
    (0.3, 1.0)
    >>> check_min_score("0.3")
    Traceback (most recent call last):
    ...
    ValueError: min_score must be a number from 0 to 1, got '0.3' (str)
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"min_score must be a number from 0 to 1, got {value!r} ({type(value).__name__})")
    return float(value)
