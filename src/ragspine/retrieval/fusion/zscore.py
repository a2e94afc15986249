"""Score fusion: each ranking's scores as z-scores, summed with the ranking weights.

Invariant: a ranking only ever contributes through its own standardised scores, so BM25 (an
unbounded sum of idf weights) and cosines (in [-1, 1]) meet on one scale without a constant
tuned to either. The statistics are read over a fixed window of each ranking's best scores
(`WINDOW`) and every score below the window counts
as the window's lowest, as does an item the ranking did not return: so a search that asks for
more results (a deeper ranking) gives every candidate the same fused score (one exception: a
window whose scores are all equal, with more items tied with them below it). Deterministic: the
result depends on the scores, weights and windows only, never on the order of the items.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)

# Chosen with the dense share on the shared sets' train/dev records (docs/benchmarks.md, "Score
# fusion"; `python -m bench.fusion_learn windows`): statistics over each ranking's best 300.
# BM25's over only 100 left the worst set 0.0011 nDCG@10 lower; the cosines' over only 100 left
# the mean over sets 0.0026 lower (its worst set was 0.0001 higher).
WINDOW = 300


def standardised(scores: Mapping[K, float], window: int | None = None) -> tuple[dict[K, float], float]:
    """(z-score of each item, the value an item absent from the ranking gets).

    z = (score − mean) / standard deviation, both (population) over the `window` best finite
    scores (None: all); the absent value is the lowest z in the window, and no item's z is lower.
    A NaN or −inf score counts as absent, +inf as the window's best. A window whose scores are
    all equal (one item, say) ranks nothing above anything else it holds: its items get 1.0,
    the rest 0.0.

    >>> z, absent = standardised({"a": 3.0, "b": 1.0})
    >>> z, absent
    ({'a': 1.0, 'b': -1.0}, -1.0)
    >>> standardised({"a": 0.5})
    ({'a': 1.0}, 0.0)
    >>> standardised({"a": 3.0, "b": 1.0, "c": -7.0}, window=2)
    ({'a': 1.0, 'b': -1.0, 'c': -1.0}, -1.0)
    >>> standardised({"a": float("inf"), "b": 3.0, "c": 1.0, "d": float("nan")})
    ({'a': 1.0, 'b': 1.0, 'c': -1.0, 'd': -1.0}, -1.0)
    """
    z, absent = _standard(scores, window)
    return dict(zip(scores, z.tolist(), strict=True)), absent


def _standard(scores: Mapping[K, float], window: int | None) -> tuple[np.ndarray, float]:
    """`standardised`'s values as an array in the mapping's order, and the absent value."""
    if window is not None and window < 1:
        raise ValueError(f"a z-score window must be >= 1, got {window}")
    if not scores:
        return np.zeros(0), 0.0
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
    finite = values[np.isfinite(values)]  # statistics over finite scores only
    if window is not None and window < len(finite):
        finite = np.partition(finite, len(finite) - window)[-window:]
    if not len(finite) or float(finite.std()) <= 1e-12 * max(1.0, abs(float(finite.mean()))):
        # no scale (every finite score in the window equal, or none): those and +inf get 1.0
        low = float(finite.min()) if len(finite) else np.inf
        return ((values >= low) & ~np.isnan(values)).astype(np.float64), 0.0
    mean, deviation = float(finite.mean()), float(finite.std())
    floor, top = (float(finite.min()) - mean) / deviation, (float(finite.max()) - mean) / deviation
    z = np.clip((np.nan_to_num(values, nan=-np.inf) - mean) / deviation, floor, top)
    return z, floor


def zscore_fuse(runs: Iterable[tuple[Mapping[K, float], float, int | None]]) -> dict[K, float]:
    """Fuse scored rankings: score(d) = Σ w · z_r(d) over rankings r = (scores, weight w, window),
    where z_r is `standardised(scores, window)` (an item r did not return gets r's lowest z).

    >>> fused = zscore_fuse([({"a": 3.0, "b": 1.0}, 1.0, None), ({"b": 0.9, "c": 0.1}, 1.0, None)])
    >>> {k: round(v, 3) for k, v in sorted(fused.items())}
    {'a': 0.0, 'b': 0.0, 'c': -2.0}
    """
    base = 0.0  # what every item gets from the rankings that did not return it
    lifts: dict[K, float] = {}  # what an item gets above that from the rankings that did
    for scores, weight, window in runs:
        if weight < 0 or not math.isfinite(weight):
            raise ValueError(f"fusion weights must be finite and >= 0, got {weight}")
        if not scores:
            continue  # an empty ranking has no scale: it says nothing about any item
        z, absent = _standard(scores, window)
        base += weight * absent
        get = lifts.get
        for item, lift in zip(scores, (weight * (z - absent)).tolist(), strict=True):
            lifts[item] = get(item, 0.0) + lift
    return {item: base + lift for item, lift in lifts.items()}
