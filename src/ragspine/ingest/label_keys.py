"""Which metadata keys are sensitivity label keys, and every value they give.

Invariant: a key is a label key when `retrieval.sensitivity.fold_key` (NFKC, case, invisible
characters, look-alike letters, surrounding whitespace) folds it to `sensitivity`; every non-null
value of every label key of a source, duplicates included, is kept in order (`gather_labels`),
so a later key never replaces an earlier one and a null never removes one. The sidecar reader
(`metadata`), the front matter reader (`front_matter`) and the label step (`labels`) use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ragspine.retrieval.sensitivity import fold_key

__all__ = ["LABEL_KEY", "gather_labels", "is_label_key"]

LABEL_KEY = "sensitivity"


def is_label_key(key: object) -> bool:
    """True when `key` is a string that folds to `sensitivity` (`SENSITIVITY`, `sеnsitivity `)."""
    return isinstance(key, str) and fold_key(key) == LABEL_KEY


def gather_labels(pairs: Iterable[tuple[Any, Any]]) -> dict[Any, Any]:
    """`pairs` (a parsed sidecar's or front matter's keys and values, in order, duplicates
    included) as a mapping where a later key wins, except the label keys: every non-null value
    of every key that folds to `sensitivity`, in order, as one tuple under `sensitivity`.

    >>> gather_labels([("sensitivity", "RESTRICTED"), ("SENSITIVITY", "PUBLIC"), ("sensitivity ", None)])
    {'sensitivity': ('RESTRICTED', 'PUBLIC')}
    """
    out: dict[Any, Any] = {}
    labels: list[Any] = []
    for key, value in pairs:
        if is_label_key(key):
            labels.extend(() if value is None else value if isinstance(value, tuple) else (value,))
        else:
            out[key] = value
    if labels:
        out[LABEL_KEY] = tuple(labels)
    return out
