"""Library routers: which knowledge bases a multi-library search asks (`make_router`, RAGSPINE_ROUTER).

Invariants: names and errors come from the ROUTERS registry (a test keeps
`ragspine.settings.config.ROUTERS` equal to its names); a router only proposes library ids —
`MultiIndexRetriever` searches every library when a router fails, proposes nothing or names an
unknown id, and records that fallback in the lineage.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine.agent.agent import LLMProvider, NarrativeRetriever
from ragspine import catalog
from ragspine.registry import Registry
from ragspine.retrieval.lexical.tokenize import tokenize


@dataclass(frozen=True)
class LibraryIndex:
    """One knowledge base: an id, a description a router can read, and its retriever."""

    library_id: str
    description: str
    retriever: NarrativeRetriever


@runtime_checkable
class LibraryRouter(Protocol):
    """Chooses which libraries to search for a query (ids, best first)."""

    def route(self, query: str) -> list[str]: ...


class KeywordRouter:
    """Deterministic: libraries whose id or description shares tokens with the query, by
    overlap (ties by id). No overlap anywhere → [] (the retriever then searches all)."""

    def __init__(self, libraries: Sequence[LibraryIndex]) -> None:
        self._vocab = {
            lib.library_id: set(tokenize(f"{lib.library_id} {lib.description}")) for lib in libraries
        }

    def route(self, query: str) -> list[str]:
        tokens = set(tokenize(query))
        overlap = {lid: len(tokens & vocab) for lid, vocab in self._vocab.items()}
        return sorted((lid for lid, n in overlap.items() if n), key=lambda lid: (-overlap[lid], lid))


class LLMRouter:
    """Asks an LLM for a JSON list of library ids; anything it cannot parse raises (→ fallback)."""

    def __init__(self, provider: LLMProvider, libraries: Sequence[LibraryIndex]) -> None:
        self.provider = provider
        self.libraries = list(libraries)

    def route(self, query: str) -> list[str]:
        catalogue = "\n".join(f"- {lib.library_id}: {lib.description}" for lib in self.libraries)
        reply = self.provider.chat(
            [
                {"role": "system", "content": "You route search queries to knowledge bases."},
                {
                    "role": "user",
                    "content": f"Knowledge bases:\n{catalogue}\n\nQuery: {query}\n\n"
                    'Answer with a JSON list of the ids worth searching, e.g. ["a", "b"].',
                },
            ]
        )
        start, end = reply.find("["), reply.rfind("]")
        chosen = json.loads(reply[start : end + 1]) if start != -1 and end > start else None
        if not isinstance(chosen, list) or not all(isinstance(x, str) for x in chosen):
            raise ValueError(f"router reply is not a JSON list of ids: {reply[:200]!r}")
        return chosen


class AllRouter:
    """Every library, in id order."""

    def __init__(self, libraries: Sequence[LibraryIndex]) -> None:
        self._ids = sorted(lib.library_id for lib in libraries)

    def route(self, query: str) -> list[str]:
        return list(self._ids)


#: The routers by name: `ragspine.catalog.ROUTERS` (the one table settings accept names from),
#: bound to the LibraryRouter Protocol.
ROUTERS: Registry[LibraryRouter] = catalog.ROUTERS.bind(LibraryRouter)


def make_router(
    spec: str, libraries: Sequence[LibraryIndex], *, provider: LLMProvider | None = None, **options: Any
) -> LibraryRouter:
    """The router `spec` names over `libraries` (the llm router also takes the provider).

    >>> make_router("all", [LibraryIndex("b", "", None), LibraryIndex("a", "", None)]).route("q")
    ['a', 'b']
    """
    key, _ = ROUTERS.builder(spec)
    if key == "llm":
        if provider is None:
            raise ValueError("the llm library router needs an LLM provider (RAGSPINE_LLM_BASE_URL)")
        options["provider"] = provider
    router = ROUTERS.make(key, libraries=libraries, **options)
    assert router is not None
    return router
