"""One search request, validated the same way on every surface: Python (`Workspace.search`),
the CLI, the HTTP API, MCP, LangChain and LlamaIndex all build a `SearchRequest` (or run its
checks in their schemas) before anything runs.

Invariants:
- `query` is a non-blank string (`stages.check_query`).
- `top_k` is a whole number: an int, never a bool, a float or a numeric string (`"3"`, `2.0`
  and `True` are refused everywhere), at least 1 and at most the surface's bound when it has
  one (the HTTP API's RAGSPINE_MAX_TOP_K, MCP's `MAX_TOP_K`). The CLI reads `--top-k` as text
  and hands this an int.
- `where` is any spelling of the filter language: a dict, a Filter, a list (AND-ed), or the
  string form (`"period>=2024 and entity=ACME_CN"`, `filters.parse_expression`). A string is
  parsed here, so a bad one is refused before any work; the structured forms go on as given
  (the pipeline reads the exact-match dict as the specification's keyword filters and records
  the filters in lineage as given).
- `filter_fallback` is None (the surface's setting, RAGSPINE_FILTER_FALLBACK) or one of
  FILTER_FALLBACKS: "retry" (a filter that matches nothing is searched once without filters,
  and the response's `filters_dropped` names the dropped fields) or "strict" (no result).
- `min_score` is None (the surface's setting, RAGSPINE_MIN_SCORE) or a number from 0 to 1 (not a
  bool or a string): the least `relevance` a snippet needs (`relevance.check_min_score`).
- A bad request is an `InvalidRequest` (a `RagspineError` and a `ValueError`: HTTP 400, an MCP
  tool error, a CLI usage error); the HTTP and MCP schemas run `check_top_k` themselves, so
  there a bad `top_k` is their validation error (HTTP 422) with the same message.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any

from ragspine.errors import RagspineError
from ragspine.retrieval.filters import And, Or, Predicate, parse_filter
from ragspine.retrieval.pipeline.stages import check_query
from ragspine.retrieval.relevance import check_min_score

__all__ = ["FILTER_FALLBACKS", "MIN_SCORE_HELP", "InvalidRequest", "SearchRequest", "check_filter_fallback",
           "check_relevance_floor", "check_top_k", "check_where"]  # fmt: skip

FILTER_FALLBACKS = ("strict", "retry")  # settings.choices.FilterFallback: the same two, in this order
MIN_SCORE_HELP = ("Least relevance (0 to 1) a passage needs to be returned; relevance never increases down the "
                  "list, so this keeps a prefix. Unset: the service's RAGSPINE_MIN_SCORE")  # fmt: skip


class InvalidRequest(RagspineError, ValueError):
    """A search request no surface runs: blank query, a `top_k` that is not a whole number in
    range, a filter of an unknown shape or a string filter that does not parse, a `min_score`
    outside [0, 1]."""


def check_relevance_floor(value: object) -> float | None:
    """`value` as a request's `min_score`: None (the setting decides) or a number from 0 to 1;
    `InvalidRequest` otherwise."""
    if value is None:
        return None
    try:
        return check_min_score(value)
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from exc


def check_top_k(value: object, maximum: int | None = None) -> int:
    """`value` as the number of snippets wanted; `InvalidRequest` unless it is a whole number
    (not a bool, a float or a string) from 1 to `maximum` (no bound when None)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InvalidRequest(f"top_k must be a whole number, got {value!r} ({type(value).__name__})")
    number = int(value)
    if number < 1:
        raise InvalidRequest(f"top_k must be >= 1, got {number}")
    if maximum is not None and number > maximum:
        raise InvalidRequest(f"top_k must be <= {maximum}, got {number}")
    return number


def check_where(where: Any) -> Any:
    """`where` ready for the pipeline: None for no filter, a string parsed into a Filter, any
    other form of the filter language as given; `InvalidRequest` for a string that does not
    parse or a value of no filter form."""
    if where is None or (isinstance(where, str | dict | list | tuple) and not where):
        return None
    if isinstance(where, str):
        try:
            return parse_filter(where)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from exc
    if isinstance(where, Predicate | And | Or | list | tuple) or hasattr(where, "items"):
        return where
    raise InvalidRequest(f"where must be a dict, a list, a string or a Filter, got {type(where).__name__}")


def check_filter_fallback(value: object) -> str | None:
    """`value` as a filter fallback: None (the surface's setting) or one of FILTER_FALLBACKS;
    `InvalidRequest` otherwise."""
    if value is None or (isinstance(value, str) and value in FILTER_FALLBACKS):
        return value
    raise InvalidRequest(f"filter_fallback must be one of {', '.join(FILTER_FALLBACKS)}, got {value!r}")


@dataclass(frozen=True)
class SearchRequest:
    """A validated search: `SearchRequest("营收", where="period>=2024", top_k=3)`.

    >>> SearchRequest("revenue", where="period>=2024 and entity=ACME_CN", top_k=3).top_k
    3
    >>> SearchRequest("revenue", top_k="3")
    Traceback (most recent call last):
    ...
    ragspine.retrieval.pipeline.request.InvalidRequest: top_k must be a whole number, got '3' (str)
    >>> SearchRequest("revenue", filter_fallback="widen")
    Traceback (most recent call last):
    ...
    ragspine.retrieval.pipeline.request.InvalidRequest: filter_fallback must be one of strict, retry, got 'widen'
    >>> SearchRequest("revenue", min_score=1.5)
    Traceback (most recent call last):
    ...
    ragspine.retrieval.pipeline.request.InvalidRequest: min_score must be a number from 0 to 1, got 1.5 (float)
    """

    query: str
    where: Any = None
    top_k: int = 10
    max_top_k: int | None = None
    filter_fallback: str | None = None
    min_score: float | None = None  # the least relevance (None: the setting, RAGSPINE_MIN_SCORE)

    def __post_init__(self) -> None:
        try:
            check_query(self.query)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from exc
        object.__setattr__(self, "top_k", check_top_k(self.top_k, self.max_top_k))
        object.__setattr__(self, "where", check_where(self.where))
        check_filter_fallback(self.filter_fallback)
        object.__setattr__(self, "min_score", check_relevance_floor(self.min_score))
