"""`ragspine search --library NAME=PATH`: several stores searched as one, fused by RRF.

Invariant: every library is opened through the same assembly as a single store
(`ragspine.assembly`, the store path swapped), routed by RAGSPINE_ROUTER's router, searched
concurrently by `MultiIndexRetriever`, and closed afterwards; RESTRICTED stays stripped at
every exit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ragspine.secret import redact_text, redact_url
from ragspine.settings.config import Settings
from ragspine.retrieval.link.multi_index import LibraryIndex, MultiIndexRetriever
from ragspine.retrieval.pipeline.snippets import SearchResults
from ragspine.retrieval.relevance import above


@dataclass(frozen=True)
class LibrarySpec:
    """One library to search: its id, its store path and a description for the router."""

    library_id: str
    path: str
    description: str = ""


def read_libraries(pairs: Sequence[str], file: Path | None) -> list[LibrarySpec]:
    """Libraries from `NAME=PATH` pairs and a JSON file ([{"id", "path", "description"}])."""
    specs: list[LibrarySpec] = []
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ValueError(f"--library {redact_text(pair)!r}: expected NAME=PATH, e.g. --library reports=./reports.db")
        specs.append(LibrarySpec(name.strip(), path.strip(), name.strip()))
    if file is not None:
        try:
            entries = json.loads(file.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"--libraries {file}: cannot read it as a UTF-8 JSON file: {exc}") from exc
        if isinstance(entries, dict):
            entries = entries.get("libraries")
        if not isinstance(entries, list):
            raise ValueError(f"--libraries {file}: expected a list of {{\"id\", \"path\", \"description\"}}")
        for n, entry in enumerate(entries, start=1):
            if not isinstance(entry, dict) or not entry.get("id") or not entry.get("path"):
                raise ValueError(f"--libraries {file}: entry {n} needs an \"id\" and a \"path\"")
            specs.append(LibrarySpec(str(entry["id"]), str(entry["path"]), str(entry.get("description", ""))))
    ids = [s.library_id for s in specs]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"library id(s) used twice: {', '.join(duplicates)}")
    return specs


def search_libraries(
    settings: Settings, specs: Sequence[LibrarySpec], query: str, *, where: Any, top_k: int
) -> SearchResults:
    """Search the libraries RAGSPINE_ROUTER picks (every library when it picks none or fails);
    snippets carry `library_id`, the results `filters_dropped` (RAGSPINE_FILTER_FALLBACK);
    RAGSPINE_MIN_SCORE cuts them as `Workspace.search` does."""
    from ragspine.assembly import make_provider, make_router_for
    from ragspine.workspace import Workspace

    for spec in specs:
        if not Path(spec.path).is_file():
            raise ValueError(f"library {spec.library_id!r}: no chunk store at {redact_url(spec.path)}")
    with ExitStack() as stack:
        libraries = [
            LibraryIndex(
                spec.library_id,
                spec.description,
                stack.enter_context(Workspace.from_settings(replace(settings, db=spec.path))).retriever,
            )
            for spec in specs
        ]
        provider = make_provider(settings) if settings.router == "llm" else None
        if provider is not None:
            stack.callback(getattr(provider, "close", lambda: None))
        multi = MultiIndexRetriever(libraries, make_router_for(settings, libraries, provider))
        found = multi.retrieve(query, filters=where, top_k=top_k)
        return SearchResults(above(found, settings.min_score), filters_dropped=found.filters_dropped)
