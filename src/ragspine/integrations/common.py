"""What every adapter shares: the searcher it wraps (local workspace or HTTP API), the
RESTRICTED re-check and the metadata a framework's document carries.

Invariants: `passages` is the one gate every adapter passes snippets through; it drops any
snippet labelled RESTRICTED (the workspace never returns one: this is the second check at the
adapter boundary), so no framework object is ever built from RESTRICTED text. Every adapter
hands over the one snippet type (`ragspine.retrieval.snippet.Snippet`), and `snippet_metadata`
is the one conversion of a snippet into a framework document's metadata (LangChain `Document`,
LlamaIndex `TextNode`). That metadata is flat (every value a str, int, float or bool, so
flat-metadata vector stores accept it): nested values go as JSON strings under `<key>_json`
(`scores_json`, `lineage_json`), each channel score also as `score_<channel>`, and
`filters_dropped` is the dropped filter fields joined by commas ("" when none was). A search is
checked as on every surface (`SearchRequest`): the `RemoteWorkspace` refuses locally what the
service would refuse, and its results carry the service's `filters_dropped`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from ragspine.closing import Closeable
from ragspine.extras import require
from ragspine.retrieval.filters import And, Or, Predicate, to_dict
from ragspine.retrieval.pipeline.request import SearchRequest, check_filter_fallback, check_relevance_floor, check_top_k
from ragspine.retrieval.pipeline.snippets import SearchResults
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.snippet import Snippet

# The snippet fields a framework document's metadata carries besides the text.
CITATION_FIELDS = ("doc_id", "title", "source_locator", "chunk_id", "version", "valid_as_of")
LABEL_FIELDS = ("topic", "entity", "geography", "period", "language", "sensitivity", "library_id")
HTTP_TIMEOUT_S = 60.0


@runtime_checkable
class Searcher(Protocol):
    """What an adapter searches: a `ragspine.open(...)` workspace or a `RemoteWorkspace`."""

    def search(self, query: str, *, where: Any = None, top_k: int = ...) -> list[Snippet]: ...


def passages(snippets: Iterable[Mapping[str, Any]]) -> list[Snippet]:
    """The snippets an adapter may hand over: every one not labelled RESTRICTED, in order."""
    return [cast(Snippet, dict(s)) for s in snippets if not is_restricted(str(s.get("sensitivity", "")))]


FlatValue = str | int | float | bool


def snippet_metadata(snippet: Mapping[str, Any], filters_dropped: Sequence[str] = ()) -> dict[str, FlatValue]:
    """A framework document's flat metadata for `snippet` (never its text): the citation
    (doc_id, title, source_locator, chunk_id, version, valid_as_of) and the labels as they
    are, `score_<channel>` per channel score, `scores_json` and `lineage_json` (the nested
    values as JSON), any other nested key as `<key>_json`, and `filters_dropped` (the search's
    dropped filter fields, comma-joined). A None value is left out.

    >>> meta = snippet_metadata({"text": "t", "doc_id": "d", "version": None,
    ...                          "scores": {"bm25": 1.5, "vector": None, "fused": 0.5}}, ["entity"])
    >>> meta
    {'doc_id': 'd', 'score_bm25': 1.5, 'score_fused': 0.5, 'scores_json': '{"bm25": 1.5, "fused": 0.5, "vector": null}', 'filters_dropped': 'entity'}
    """
    meta: dict[str, FlatValue] = {}
    first = [k for k in (*CITATION_FIELDS, *LABEL_FIELDS) if k in snippet]
    for key in [*first, *(k for k in snippet if k not in first and k != "text")]:
        value = snippet[key]
        if key == "scores" and isinstance(value, Mapping):
            meta.update({f"score_{name}": float(v) for name, v in value.items() if _is_number(v)})
        if isinstance(value, FlatValue):
            meta[key] = value
        elif value is not None:
            meta[f"{key}_json"] = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    meta["filters_dropped"] = ",".join(filters_dropped)
    return meta


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def dropped_of(snippets: Iterable[Any]) -> list[str]:
    """The `filters_dropped` of a search's results (`SearchResults`); [] for a plain list."""
    return list(getattr(snippets, "filters_dropped", ()))


async def search_async(
    searcher: Searcher, query: str, *, where: Any, top_k: int, filter_fallback: str | None = None,
    min_score: float | None = None,
) -> list[Snippet]:
    """`searcher.search` without blocking the event loop: a remote searcher's own async call,
    a local one in a worker thread (the workspace is thread-safe)."""
    if isinstance(searcher, RemoteWorkspace):
        return await searcher.asearch(query, where=where, top_k=top_k, filter_fallback=filter_fallback,
                                      min_score=min_score)  # fmt: skip
    return await asyncio.to_thread(searcher.search, query, where=where, top_k=top_k,
                                   **optional_kw(filter_fallback=filter_fallback, min_score=min_score))  # fmt: skip


class RemoteWorkspace(Closeable):
    """The search and ask of a running `ragspine serve`, over its HTTP API.

    `url`: the service's base URL (e.g. "http://127.0.0.1:8000"); `api_key`: one of its
    RAGSPINE_API_KEYS (None when it has none). Needs httpx: `pip install 'ragspine[llm]'`.
    An error answer is a ValueError (bad input) or PermissionError (missing or wrong key)
    carrying the service's message. The synchronous calls share one connection pool (an
    `httpx.Client`, thread-safe, opened on first use; `close()` or a `with` block releases it);
    `asearch` opens an async client per call (it belongs to the caller's event loop).
    """

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = HTTP_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self._httpx = require("httpx", extra="llm", purpose="RemoteWorkspace (the HTTP API client)")
        self._client: Any = None
        self._lock = threading.Lock()

    def _pool(self) -> Any:
        """The shared synchronous client, opened on first use."""
        with self._lock:
            if self._client is None:
                self._client = self._httpx.Client(base_url=self.url, headers=self._headers, timeout=self._timeout)
            return self._client

    def close(self) -> None:
        """Release the connection pool (a later call opens a new one)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def search(
        self, query: str, *, where: Any = None, top_k: int = 10, filter_fallback: str | None = None,
        min_score: float | None = None,
    ) -> SearchResults:
        """Ranked, cited snippets from POST /search, with its `filters_dropped` (`min_score` None: the
        service's setting)."""
        body = _answer(self._pool().post("/search", json=_search_body(query, where, top_k, filter_fallback, min_score)))
        return SearchResults(passages(body["snippets"]), filters_dropped=body.get("filters_dropped", []))

    async def asearch(
        self, query: str, *, where: Any = None, top_k: int = 10, filter_fallback: str | None = None,
        min_score: float | None = None,
    ) -> SearchResults:
        """`search` on an async HTTP client."""
        async with self._httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=self._timeout) as client:
            body = _answer(await client.post("/search", json=_search_body(query, where, top_k, filter_fallback, min_score)))
        return SearchResults(passages(body["snippets"]), filters_dropped=body.get("filters_dropped", []))

    def ask(
        self, question: str, *, where: Any = None, top_k: int = 5, filter_fallback: str | None = None,
        min_score: float | None = None,
    ) -> dict[str, Any]:
        """The answer of POST /ask: {question, answer, mode, note, filters_dropped, citations}
        (`min_score` None: the service's setting)."""
        payload = {"question": question, "top_k": check_top_k(top_k), "where": _where_object(where),
                   **optional_kw(filter_fallback=check_filter_fallback(filter_fallback),
                                 min_score=check_relevance_floor(min_score))}  # fmt: skip
        body = _answer(self._pool().post("/ask", json=payload))
        body["citations"] = passages(body["citations"])
        return dict(body)


def _search_body(
    query: str, where: Any, top_k: int, filter_fallback: str | None = None, min_score: float | None = None
) -> dict[str, Any]:
    """The POST /search body of a request checked as every surface checks it."""
    request = SearchRequest(query, where=where, top_k=top_k, filter_fallback=filter_fallback, min_score=min_score)
    return {"query": request.query, "top_k": request.top_k, "where": _where_object(request.where),
            **optional_kw(filter_fallback=request.filter_fallback, min_score=request.min_score)}  # fmt: skip


def optional_kw(**given: Any) -> dict[str, Any]:
    """The keyword arguments (or request body fields) given: a None is left out, so the
    searcher's, or the service's, setting applies (RAGSPINE_FILTER_FALLBACK, RAGSPINE_MIN_SCORE)
    and a searcher of one's own that takes neither keeps working."""
    return {key: value for key, value in given.items() if value is not None}


def _where_object(where: Any) -> dict[str, Any] | str | None:
    """The API's `where` for the Python forms: a dict or the string form as they are, a Filter
    as its dict form, a list AND-ed."""
    if not where:
        return None
    if isinstance(where, str):
        return where
    if isinstance(where, Predicate | And | Or):
        return dict(to_dict(where))
    if isinstance(where, Mapping):
        return dict(where)
    if isinstance(where, list | tuple):
        return {"and": [_where_object(w) or {} for w in where]}
    raise ValueError(f"where must be a dict, a string or a list (AND-ed) for the HTTP API, got {type(where).__name__}")


def _answer(response: Any) -> dict[str, Any]:
    if response.status_code == 401:
        raise PermissionError(_message(response))
    if response.status_code >= 400:
        raise ValueError(f"the RAGSpine service answered {response.status_code}: {_message(response)}")
    body: dict[str, Any] = response.json()
    return body


def _message(response: Any) -> str:
    try:
        return str(response.json().get("message", response.text))
    except ValueError:
        return str(response.text)[:200]
