"""RESTRICTED exit #1 for every reranker, in one place: the wrapper every reranker runs behind.

Invariants: only the first `top_n` results are reordered; a RESTRICTED candidate is never given
to the reranker and keeps its position; with fewer than two open candidates the reranker is not
called; an exception, a run longer than `timeout_s`, or an answer that is not a permutation
keeps the incoming (fused) order and is logged. `rerank_traced` / `rerank_head` never raise and
never add, drop or duplicate a result; the `RerankLineage` says which reranker ran, on how many
candidates, how many were withheld, and whether (and why) the fused order was kept; the why is
the short public code `http_retry.public_error` gives (`http_error (HTTP 500)`, `timeout`),
never a rerank server's URL, a value from its reply or an exception's text (those go to the log).
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypedDict, Unpack

from ragspine.background import DaemonCall
from ragspine.http_retry import public_error, request_deadline
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.types import RetrievalResult
from ragspine.secret import redact_text

DEFAULT_TOP_N = 10
_LOG = logging.getLogger(__name__)

Order = Callable[[str, list[str]], list[int]]


@dataclass(frozen=True)
class RerankLineage:
    """What the rerank step did, for a result's lineage."""

    reranker: str
    candidates: int  # open candidates given to the reranker (0 when it was not called)
    withheld: int  # RESTRICTED candidates in the head: never given to it, kept in place
    fell_back: bool  # the fused order was kept because the reranker failed
    reason: str | None = None  # why it fell back, or why it was not called
    ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def reranker_name(reranker: object) -> str:
    """A reranker's `name` attribute, else its class name."""
    name = getattr(reranker, "name", None)
    return name if isinstance(name, str) and name else type(reranker).__name__


class RerankOptions(TypedDict, total=False):
    """`rerank_traced`'s options (and defaults): `top_n` (DEFAULT_TOP_N), `name` ("reranker"),
    `timeout_s` (None: no limit)."""

    top_n: int
    name: str
    timeout_s: float | None


def rerank_head(
    query: str, results: Sequence[RetrievalResult], order: Order, **options: Unpack[RerankOptions]
) -> list[RetrievalResult]:
    """`results` with the open members of its first `top_n` reordered by `order(query, texts)`
    (`rerank_traced` without the lineage).

    >>> from ragspine.retrieval.model import Chunk
    >>> rs = [RetrievalResult(Chunk(f"c{i}", "d", i, t, "d"), 0.0, None, 1.0 / (i + 1))
    ...       for i, t in enumerate(["a", "b", "c"])]
    >>> [r.chunk.chunk_id for r in rerank_head("q", rs, lambda q, texts: [2, 1, 0])]
    ['c2', 'c1', 'c0']
    """
    return rerank_traced(query, results, order, **options)[0]


def rerank_traced(
    query: str,
    results: Sequence[RetrievalResult],
    order: Order,
    *,
    top_n: int = DEFAULT_TOP_N,
    name: str = "reranker",
    timeout_s: float | None = None,
) -> tuple[list[RetrievalResult], RerankLineage]:
    """`rerank_head`, and the lineage of what it did."""
    ranked = list(results)
    head = ranked[: max(top_n, 0)]
    open_slots = [i for i, r in enumerate(head) if not is_restricted(r.chunk.sensitivity)]
    withheld = len(head) - len(open_slots)
    if len(open_slots) < 2:
        return ranked, RerankLineage(name, 0, withheld, False, "fewer than two open candidates; not called")
    candidates = [head[i].chunk.text for i in open_slots]
    started = time.perf_counter()
    try:
        answer = _call(order, query, candidates, timeout_s)
        permutation = [operator.index(j) for j in answer]
        if sorted(permutation) != list(range(len(candidates))):
            raise ValueError(f"the answer is not a permutation of {len(candidates)}")  # never its values
    except Exception as exc:  # noqa: BLE001 - any reranker failure keeps the fused order
        ms = (time.perf_counter() - started) * 1000
        _LOG.warning("%s failed (%s); keeping the fused order", name, redact_text(str(exc)))
        reason = public_error(exc)  # the short public code; the text above went to the log
        return ranked, RerankLineage(name, len(candidates), withheld, True, reason, round(ms, 3))
    ms = (time.perf_counter() - started) * 1000
    reordered = [head[open_slots[j]] for j in permutation]
    for slot, result in zip(open_slots, reordered, strict=True):
        ranked[slot] = result
    return ranked, RerankLineage(name, len(candidates), withheld, False, None, round(ms, 3))


def _call(order: Order, query: str, candidates: list[str], timeout_s: float | None) -> list[int]:
    """`order(query, a copy of candidates)`; TimeoutError when `timeout_s` passes first (the call
    is left to finish on its daemon thread, `background.DaemonCall`; its answer is ignored). The call runs under
    `http_retry.request_deadline(timeout_s)`: an HTTP reranker's request itself ends at the
    deadline (retries and backoff included), so its thread does not outlive the timeout."""
    if timeout_s is None:
        return order(query, list(candidates))

    def run() -> list[int]:
        with request_deadline(timeout_s):
            return order(query, list(candidates))

    return DaemonCall(run, name="ragspine-rerank").result(timeout_s)
