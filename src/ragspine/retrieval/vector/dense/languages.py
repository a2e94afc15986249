"""The dense channel's language groups and language centring.

Small multilingual encoders place texts of one language near each other whatever they say, so in a
mixed corpus a Chinese question prefers any Chinese passage to the English passage that answers it.
When at least two languages (`detect_language` on the chunk text) each hold >= MIN_LANGUAGE_SHARE
of the vectors (and MIN_LANGUAGE_VECTORS), every vector is compared after subtracting its
language's mean passage vector (`language_centring`; the query: the mean of its own language;
Libovický et al. 2020), then re-normalised. A corpus in one language is ranked by plain cosine.

Invariant: a language code is the index in LANGUAGES of `detect_language`'s answer (-1: unknown);
CACHE_MEANING names this encoding and rule, so a matrix cache made by other code is rebuilt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragspine.retrieval.language import detect_language

LANGUAGES = ("zh", "en", "other", "")  # detect_language's answers; the index is the group code
MIN_LANGUAGE_SHARE = 0.05  # of the active vectors, for a language to count towards centring
MIN_LANGUAGE_VECTORS = 10
# how a matrix cache written by this code encodes rows' languages and decides centring (part of
# its key: a cache of other code is rebuilt, never read with another meaning)
CACHE_MEANING = f"languages={','.join(LANGUAGES)};share={MIN_LANGUAGE_SHARE};min={MIN_LANGUAGE_VECTORS};centring-r1"


def language_centring(
    matrix: np.ndarray, active_rows: np.ndarray, active_groups: np.ndarray, rows: np.ndarray, groups: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Per-language mean vectors of `matrix`'s rows (row g: language code g; the overall mean for
    a language too small to count) over `active_rows` (language `active_groups`), and
    1 / |v - mean| per position (matrix row `rows`, language `groups`), or (None, None) for
    plain cosine."""
    has = active_rows >= 0
    counted = [
        g for g in range(len(LANGUAGES) - 1)  # "" (no letters) never counts
        if (n := int(np.count_nonzero(has & (active_groups == g)))) >= MIN_LANGUAGE_VECTORS
        and n >= MIN_LANGUAGE_SHARE * max(1, int(np.count_nonzero(has)))
    ]  # fmt: skip
    if len(counted) < 2:
        return None, None
    dim = matrix.shape[1]
    sums = np.zeros((len(LANGUAGES), dim), dtype=np.float64)
    counts = np.zeros(len(LANGUAGES), dtype=np.int64)
    for start in range(0, len(active_rows), 8192):
        part_rows, part_groups = active_rows[start : start + 8192], active_groups[start : start + 8192]
        for g in np.unique(part_groups[part_rows >= 0]).tolist():
            chosen = part_rows[(part_groups == g) & (part_rows >= 0)]
            sums[g] += matrix[chosen].sum(axis=0, dtype=np.float64)
            counts[g] += len(chosen)
    overall = sums.sum(axis=0) / max(1, int(counts.sum()))
    centres = np.tile(overall, (len(LANGUAGES), 1))
    for g in counted:
        centres[g] = sums[g] / counts[g]
    centres = centres.astype(np.float32)
    # |v - c| per position, computed directly (1 - 2 v·c + |c|² loses precision near c).
    inverse = np.zeros(len(rows), dtype=np.float32)
    ok = np.flatnonzero(rows >= 0)
    for start in range(0, len(ok), 8192):
        part = ok[start : start + 8192]
        norms = np.linalg.norm(matrix[rows[part]] - centres[groups[part]], axis=1)
        inverse[part] = 1.0 / np.maximum(norms, 1e-6)
    return centres, inverse


def crossed(query: int, chunks: Sequence[int]) -> list[bool]:
    """Per chunk language code: whether it and the query's are both known and differ."""
    unknown = LANGUAGES.index("")
    return [query != unknown and chunk != unknown and query != chunk for chunk in chunks]


def language_code(text: str) -> int:
    """The index in LANGUAGES of `detect_language(text)`."""
    return LANGUAGES.index(detect_language(text))


_CODE_OF = {name: code for code, name in enumerate(LANGUAGES)}


def language_codes(languages: Sequence[Any]) -> np.ndarray:
    """int8 index in LANGUAGES of each stored language; -1 where absent or not one of them."""
    return np.fromiter((_CODE_OF.get(x, -1) if isinstance(x, str) else -1 for x in languages), np.int8, len(languages))
