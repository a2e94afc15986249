"""Several knowledge bases behind one NarrativeRetriever: route, search concurrently, fuse by RRF.

Invariants: each snippet carries the `library_id` it came from; a router error, an empty
selection or an unknown library id falls back to searching every library, and the snippet's
lineage says so; fusion is `rrf_fuse` over (library_id, chunk_id) keys with ties broken by that
key; RESTRICTED snippets are dropped at this exit too, whatever the member retrievers return.
The results' `filters_dropped` names every filter field a member library dropped (its fallback
"retry" found nothing under the filters), so the fused list is never wider than asked unsaid.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from ragspine.retrieval.fusion.rrf import DEFAULT_RRF_K, rrf_fuse
from ragspine.retrieval.pipeline.hybrid import DEFAULT_TOP_K
from ragspine.retrieval.pipeline.snippets import SearchResults
from ragspine.retrieval.link.routers import KeywordRouter, LibraryIndex, LibraryRouter, LLMRouter
from ragspine.http_retry import public_error
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.snippet import Scores, Snippet

__all__ = ["KeywordRouter", "LLMRouter", "LibraryIndex", "LibraryRouter", "MultiIndexRetriever"]

_LOG = logging.getLogger(__name__)


class MultiIndexRetriever:
    """A NarrativeRetriever over several libraries.

    >>> class One:
    ...     def retrieve(self, query, *, filters=None, top_k=50):
    ...         return [{"chunk_id": "c", "sensitivity": "PUBLIC", "text": "t"}]
    >>> multi = MultiIndexRetriever([LibraryIndex("a", "reports", One())])
    >>> [(s["library_id"], s["chunk_id"]) for s in multi.retrieve("q")]
    [('a', 'c')]
    """

    def __init__(
        self,
        libraries: Sequence[LibraryIndex],
        router: LibraryRouter | None = None,
        *,
        rrf_k: int = DEFAULT_RRF_K,
        max_workers: int = 4,
    ) -> None:
        ids = [lib.library_id for lib in libraries]
        if not libraries or len(set(ids)) != len(ids):
            raise ValueError("MultiIndexRetriever needs at least one library and unique library ids")
        self.libraries = {lib.library_id: lib for lib in libraries}
        self.router = router if router is not None else KeywordRouter(libraries)
        self.rrf_k = rrf_k
        self.max_workers = max_workers

    def retrieve(
        self, query: str, *, filters: Any = None, top_k: int = DEFAULT_TOP_K, filter_fallback: str | None = None
    ) -> SearchResults:
        """Fused, RESTRICTED-free snippets from the routed libraries, each with `library_id`;
        `filter_fallback` ("retry" or "strict") is passed to each library when given."""
        selected, routing = self._route(query)
        extra = {} if filter_fallback is None else {"filter_fallback": filter_fallback}
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(selected))) as pool:
            futures = {
                lid: pool.submit(self.libraries[lid].retriever.retrieve, query, filters=filters, top_k=top_k, **extra)
                for lid in selected
            }
            per_library = {lid: future.result() for lid, future in futures.items()}
        keyed = {
            (lid, str(s["chunk_id"])): s
            for lid, snippets in per_library.items()
            for s in snippets
            if not is_restricted(s.get("sensitivity", ""))
        }
        fused = rrf_fuse(
            [[(lid, str(s["chunk_id"])) for s in per_library[lid]] for lid in selected], k=self.rrf_k
        )
        order = sorted((key for key in fused if key in keyed), key=lambda key: (-fused[key], key))
        out: list[Snippet] = []
        for key in order[:top_k]:
            snippet = cast(Snippet, dict(keyed[key]))
            snippet["library_id"] = key[0]
            snippet["scores"] = cast(Scores, {**snippet.get("scores", {}), "library_fused": fused[key]})
            snippet["lineage"] = {**snippet.get("lineage", {}), "routing": routing}
            out.append(snippet)
        dropped = {name for found in per_library.values() for name in getattr(found, "filters_dropped", ())}
        return SearchResults(out, filters_dropped=sorted(dropped))

    def _route(self, query: str) -> tuple[list[str], dict[str, Any]]:
        every = sorted(self.libraries)
        try:
            chosen = list(dict.fromkeys(self.router.route(query)))
        except Exception as exc:  # noqa: BLE001 - any router failure searches everything
            _LOG.warning("library router failed (%s); searching all libraries", exc)
            return every, {"selected": every, "fallback": f"router error: {public_error(exc)}"}
        unknown = [lid for lid in chosen if lid not in self.libraries]
        if not chosen or unknown:
            reason = f"unknown library id(s) {unknown}" if unknown else "router selected nothing"
            _LOG.info("%s; searching all libraries", reason)
            return every, {"selected": every, "fallback": reason}
        return chosen, {"selected": chosen, "fallback": None}
