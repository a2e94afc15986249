"""Exact identifier matches: a rare code the query names verbatim is never hidden by the fusion.

A query term is an *exact term* when it is identifier-like (`identifier_like`: Latin letters
mixed with digits such as ``zmk0004`` or ``q4``, not an ordinal such as ``12th``; or a number of
four or more digits such as a year, a case or an order number) and occurs in
at most `EXACT_MAX_DF` visible chunks. An embedding model has no meaning for such a token (its
vector neighbours are whatever the rest of the query, or noise, points at, often passages in
another language, which then makes the cross-language rule drop BM25), and one BM25 hit has no
spread for a z-score to reward. So the chunks holding an exact term are lifted above every other
fused candidate (`lift_exact`), keeping their own fused order among themselves, by no more than
`EXACT_MARGIN` above the best other one.

Invariants: only the query's own tokens are read (never a rewritten variant's), rarity is counted
over the visible corpus (the metadata filter never changes which terms are exact, only which
chunks are scored), the lift only adds to fused scores, so the order among the lifted chunks and
among the others is the fusion's own; with no exact term the fused scores are returned unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K")

# "Few chunks": a term in more chunks than this is ranked by the fusion like any other (a code
# a whole manual repeats is a topic word there, and BM25 orders those chunks by itself).
EXACT_MAX_DF = 5
# The lifted chunks sit at most this far above the best other fused score (in z units under zscore).
EXACT_MARGIN = 1.0

_LETTER_AND_DIGIT = re.compile(r"(?=.*[a-z])(?=.*[0-9])[a-z0-9]+")
_ORDINAL = re.compile(r"[0-9]+(?:st|nd|rd|th)")
_LONG_NUMBER = re.compile(r"[0-9]{4,}")


def identifier_like(token: str) -> bool:
    """Whether an analyzed token looks like a code, not a word: Latin letters mixed with digits
    (not an ordinal), or a number of 4 or more digits. Measured on the cross-language set's dev
    split (docs/benchmarks.md, "Exact identifier terms"): shorter numbers there are quantities
    ("600万", "£120 million") written differently across languages, and words in capitals
    ("TV", "MP") are common words, so neither counts.

    >>> [identifier_like(t) for t in ("zmk0004", "2023", "q4", "12th", "384", "margin", "营收")]
    [True, True, True, False, False, False, False]
    """
    if _LETTER_AND_DIGIT.fullmatch(token):
        return _ORDINAL.fullmatch(token) is None
    return _LONG_NUMBER.fullmatch(token) is not None


def exact_terms(tokens: Sequence[str], df: Callable[[str], int | None]) -> list[str]:
    """The query's distinct identifier-like tokens that occur in 1 to `EXACT_MAX_DF` chunks
    (`df`: a term's visible chunk count), in query order.

    >>> exact_terms(["zmk0004", "2023", "zmk0004", "pump"], {"zmk0004": 1, "2023": 90}.get)
    ['zmk0004']
    """
    found: list[str] = []
    for token in dict.fromkeys(tokens):
        if identifier_like(token) and 0 < (df(token) or 0) <= EXACT_MAX_DF:
            found.append(token)
    return found


def lift_exact(fused: Mapping[K, float], exact: Iterable[K]) -> dict[K, float]:
    """`fused` with every `exact` item above every other one, in their own fused order, lifted
    no further than needed: the i-th of n exact items (best first) gets at least the best other
    score + `EXACT_MARGIN` · (n − i) / n, and keeps its own score when that is higher (so a lift
    never makes a passage look far better than the best other one: the relevance map reads
    the fused score). An exact item the fusion did not score enters at the lowest fused score.

    >>> lift_exact({"a": 3.0, "b": 1.0, "c": 0.5, "d": -2.0}, ["c", "d"])
    {'a': 3.0, 'b': 1.0, 'c': 4.0, 'd': 3.5}
    >>> lift_exact({"a": 3.0, "c": 9.0}, ["c"]), lift_exact({"a": 3.0}, [])
    ({'a': 3.0, 'c': 9.0}, {'a': 3.0})
    """
    lifted = dict(fused)
    items = list(dict.fromkeys(exact))
    if not items:
        return lifted
    floor = min(lifted.values(), default=0.0)
    for item in items:
        lifted.setdefault(item, floor)
    wanted = set(items)
    others = [v for k, v in lifted.items() if k not in wanted]
    if not others:
        return lifted
    best_other, n = max(others), len(items)
    ranked = sorted(items, key=lambda item: -lifted[item])  # stable: ties keep their given order
    for i, item in enumerate(ranked):
        lifted[item] = max(lifted[item], best_other + EXACT_MARGIN * (n - i) / n)
    return lifted
