"""Typed filters (`ragspine.retrieval.filters`) over the index's dictionary-encoded fields.

Invariant: a predicate is judged once per distinct stored value (never per chunk), with exactly
the semantics of `filters.matches`; the result is a boolean lookup over value codes, so masking
a batch of positions costs one array index. User metadata predicates read the canonical JSON of
each distinct metadata value.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from ragspine.retrieval.model import INDEXED_FIELDS
from ragspine.retrieval.filters import CORE_FIELDS, And, Filter, Or, Predicate, matches

FieldTable = tuple[dict[str, int], np.ndarray]  # value → code, code per position
Mask = Callable[[np.ndarray], np.ndarray]


def compile_filter(
    spec: Filter, field: Callable[[str], FieldTable], cache: dict[Predicate, np.ndarray]
) -> Mask:
    """A function positions → bool mask for `spec`; `cache` keeps per-predicate code lookups."""
    if isinstance(spec, (And, Or)):
        parts = [compile_filter(item, field, cache) for item in spec.items]
        combine = np.logical_and if isinstance(spec, And) else np.logical_or

        def combined(docs: np.ndarray) -> np.ndarray:
            mask = np.full(len(docs), isinstance(spec, And), dtype=bool)
            for part in parts:
                mask = combine(mask, part(docs))
            return mask

        return combined
    name = spec.field if spec.field in CORE_FIELDS else "metadata"
    table, codes = field(name)
    ok = cache.get(spec)
    if ok is None:
        ok = cache[spec] = _judge_values(spec, table)
    return lambda docs: ok[codes[docs]]


def metadata_keys(field: Callable[[str], FieldTable], active: np.ndarray | None = None) -> set[str]:
    """Every user metadata key some indexed chunk carries (only the `active` positions, a bool
    mask, when given: a tombstoned or hidden chunk's keys are not named)."""
    table, codes = field("metadata")
    used = None
    if active is not None:
        used = np.bincount(codes[active], minlength=len(table)) > 0
    keys: set[str] = set()
    for text, code in table.items():
        if used is None or used[code]:
            keys.update(_decode(text))
    return keys


def _judge_values(spec: Predicate, table: dict[str, int]) -> np.ndarray:
    ok = np.zeros(max(len(table), 1), dtype=bool)
    if spec.field in CORE_FIELDS:
        for value, code in table.items():
            ok[code] = matches(spec, {spec.field: value})
    else:
        for text, code in table.items():
            ok[code] = matches(spec, _decode(text))
    return ok


def _decode(text: str) -> dict[str, object]:
    data = json.loads(text or "{}")
    return data if isinstance(data, dict) else {}


assert set(CORE_FIELDS) <= set(INDEXED_FIELDS)  # every core filter field is indexed
