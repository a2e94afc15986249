"""LlamaIndex `MetadataFilters` in RAGSpine's filter language, and back.

Invariants:
- `from_metadata_filters` gives the dict form `ragspine.retrieval.filters.parse_filter` reads,
  for every LlamaIndex operator RAGSpine can honour: `==`, `!=`, `>`, `>=`, `<`, `<=`, `in`,
  `nin`, and `any` (our metadata values are single values, so "holds any of" is "is one of":
  `in`); conditions `and` and `or`, nested. Any other operator (`all`, `contains`,
  `text_match`, `text_match_insensitive`, `is_empty`) and the `not` condition are refused by
  name: a `ValueError` of one line, never a filter that means something else.
- `to_metadata_filters` (in `ragspine.integrations.llamaindex`, which imports LlamaIndex)
  writes a RAGSpine filter with the same operators (`between` as `>=` and `<=` AND-ed), so a
  filter survives the round trip.
- Nothing here imports LlamaIndex: the objects are read by their attributes (`filters`,
  `condition`; `key`, `value`, `operator`), an `ExactMatchFilter` (no operator) being `==`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FROM_LLAMAINDEX", "TO_LLAMAINDEX", "UNSUPPORTED", "from_metadata_filters"]

# LlamaIndex FilterOperator value -> RAGSpine operator
FROM_LLAMAINDEX = {"==": "eq", "!=": "ne", ">": "gt", ">=": "gte", "<": "lt", "<=": "lte",
                   "in": "in", "nin": "nin", "any": "in"}  # fmt: skip
# RAGSpine operator -> LlamaIndex FilterOperator value (`between`: written as >= and <=)
TO_LLAMAINDEX = {"eq": "==", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "in": "in", "nin": "nin"}
UNSUPPORTED = {
    "all": "RAGSpine metadata holds one value per field, so 'holds all of' cannot be honoured",
    "contains": "RAGSpine filters match whole values (use == or in)",
    "text_match": "RAGSpine filters match whole values (use == or in)",
    "text_match_insensitive": "RAGSpine filters match whole values (use == or in)",
    "is_empty": "a RAGSpine filter never matches a missing or empty field",
}


def from_metadata_filters(filters: Any) -> dict[str, Any] | None:
    """The RAGSpine dict form of a LlamaIndex `MetadataFilters` (None: no filter).

    >>> from types import SimpleNamespace as NS
    >>> from_metadata_filters(NS(condition="and", filters=[NS(key="entity", value="ACME", operator="=="),
    ...                                                    NS(key="period", value="2024", operator=">=")]))
    {'and': [{'entity': {'eq': 'ACME'}}, {'period': {'gte': '2024'}}]}
    >>> from_metadata_filters(NS(condition="and", filters=[NS(key="title", value="R&D", operator="contains")]))
    Traceback (most recent call last):
    ...
    ValueError: LlamaIndex filter operator 'contains' on 'title' is not supported: RAGSpine filters match whole values (use == or in)
    """
    if filters is None:
        return None
    members = getattr(filters, "filters", None)
    if members is None:
        raise TypeError(f"filters must be a llama_index MetadataFilters, got {type(filters).__name__}")
    condition = _name(getattr(filters, "condition", None)) or "and"
    if condition not in ("and", "or"):
        raise ValueError(f"LlamaIndex filter condition {condition!r} is not supported (RAGSpine has and, or)")
    parts = [from_metadata_filters(m) if hasattr(m, "filters") else _predicate(m) for m in members]
    kept = [p for p in parts if p]
    return {condition: kept} if kept else None


def _predicate(item: Any) -> dict[str, Any]:
    """One `MetadataFilter` (or `ExactMatchFilter`) as `{key: {op: value}}`."""
    key = getattr(item, "key", None)
    if not isinstance(key, str):
        raise TypeError(f"a MetadataFilters member must be a MetadataFilter, got {type(item).__name__}")
    operator = _name(getattr(item, "operator", None)) or "=="
    if operator in UNSUPPORTED:
        why = UNSUPPORTED[operator]
        raise ValueError(f"LlamaIndex filter operator {operator!r} on {key!r} is not supported: {why}")
    if operator not in FROM_LLAMAINDEX:
        raise ValueError(f"LlamaIndex filter operator {operator!r} on {key!r} is not supported; "
                         f"supported: {', '.join(FROM_LLAMAINDEX)}")  # fmt: skip
    return {key: {FROM_LLAMAINDEX[operator]: item.value}}


def _name(value: Any) -> str | None:
    """An enum member's value (FilterOperator.GTE -> ">="), or the string as given."""
    if value is None:
        return None
    return str(getattr(value, "value", value))
