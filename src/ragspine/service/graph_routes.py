"""The relation graph's HTTP routes (/graph/…): each one call on `Workspace.graph`.

(No `from __future__ import annotations` here: FastAPI reads the handlers' annotations at run time.)

Invariants: the routes sit behind the same API-key check as every data route (the app mounts
them in its keyed router); building needs a write key, and only an admin key sees the graph's
file path, build metadata and staleness (which moves with RESTRICTED writes too); a graph answer never carries a RESTRICTED chunk (`GraphQueries`
guarantees it); a missing graph or an unknown node is a 400 whose message says what to do.
"""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from ragspine.graph.model import EDGE_TYPES
from ragspine.graph.paths import DEFAULT_MAX_HOPS
from ragspine.service.models import MAX_META_CHARS, MAX_QUERY_CHARS, Text
from ragspine.service.security import api_key_dependency
from ragspine.settings.api_keys import Role, role_allows
from ragspine.workspace import Workspace

Name = Annotated[Text, Query(min_length=1, max_length=MAX_META_CHARS)]
Period = Annotated[Text | None, Query(max_length=MAX_META_CHARS)]
EdgeType = Annotated[str | None, Query(description=f"one of {', '.join(EDGE_TYPES)}")]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class GraphShowOut(_Open):
    built: bool
    path: str | None = Field(None, description="The graph file (admin keys only)")
    stale: bool | None = Field(None, description="The store changed since the graph was built (answers are still "
                               "filtered); admin keys only: it moves with every write, RESTRICTED ones too")
    nodes: dict[str, int]
    edges: dict[str, int]


class GraphBuildIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    communities: bool = Field(False, description="Also build GraphRAG community summaries (the [graph] extra)")


class GraphBuildOut(_Open):
    nodes: int
    edges: int
    bytes: int
    seconds: float
    extractor: str
    communities: int


class GraphEdgesOut(_Open):
    node: str
    edges: list[dict[str, Any]] = Field(description="Edges with their provenance: file+line, or cited chunks")


class GraphTraceOut(_Open):
    source: str
    target: str
    hops: int = Field(description="1: edges join the two; more: the length of the shortest path found")
    path: list[str] = Field(description="The nodes walked, from source to target")
    edges: list[dict[str, Any]] = Field(description="The edges (each with its `hop` and provenance)")


class GraphEntityOut(BaseModel):
    entity: str
    aliases: list[str]
    documents: int = Field(description="Visible documents that mention it")


class GraphEntitiesOut(BaseModel):
    entities: list[GraphEntityOut]
    total: int = Field(description="Every entity that matched (the list stops at `limit`)")


class GraphRollupOut(_Open):
    entity: str
    period: str | None
    members: list[dict[str, Any]] = Field(description="The entity and its descendants, each with the subsidiary_of chain")
    documents: list[dict[str, Any]]
    snippets: list[dict[str, Any]] | None = Field(None, description="With `query`: the restricted narrative search")
    filters_dropped: list[str] | None = Field(
        None, description="With `query`: the filter fields that matched nothing and were dropped "
        "(RAGSPINE_FILTER_FALLBACK=retry)",
    )


class GraphPeersOut(_Open):
    entity: str
    period: str | None
    rows: list[dict[str, Any]]


class GraphGlobalIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: Annotated[Text, Field(min_length=1, max_length=MAX_QUERY_CHARS)]


class GraphGlobalOut(_Open):
    question: str
    answer: str
    mode: str
    communities: list[dict[str, Any]] = Field(description="The summaries used: synthesis, never citable")
    citations: list[dict[str, Any]] = Field(description="The member chunks the summaries drew on")


def graph_routes(ws: Workspace, max_top_k: int) -> APIRouter:
    router = APIRouter(prefix="/graph", tags=["graph"])
    caller = api_key_dependency(ws.settings.api_keys, "read")

    @router.get("", response_model=GraphShowOut)
    def show(role: Role = Depends(caller)) -> dict[str, Any]:
        """Nodes per kind and edges per type of the stored relation graph, as the other routes
        would show them (an admin key: every one built, its file path, build metadata and
        whether the store changed since the build)."""
        if role_allows(role, "admin"):
            return ws.graph.show()
        return ws.graph.show(visible_only=True)  # no path, meta or stale; counts of what queries show

    @router.post("/build", response_model=GraphBuildOut,
                 dependencies=[Depends(api_key_dependency(ws.settings.api_keys, "write"))])  # fmt: skip
    def build(body: GraphBuildIn) -> dict[str, Any]:
        """Build the relation graph from the store, the relations file and the extractor, and store it."""
        report = ws.graph.build(communities=body.communities)
        return {k: v for k, v in vars(report).items() if k != "dropped"}

    @router.get("/entities", response_model=GraphEntitiesOut)
    def entities(
        contains: Annotated[Text | None, Query(max_length=MAX_META_CHARS, description="Part of a name or alias")] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> dict[str, Any]:
        """The entity names the other routes take, with aliases and visible document counts
        (an entity known only from RESTRICTED or withdrawn documents is never listed)."""
        return ws.graph.entities(contains=contains or None, limit=limit)

    @router.get("/neighbors", response_model=GraphEdgesOut)
    def neighbors(node: Name, type: EdgeType = None) -> dict[str, Any]:
        """The edges touching `node` (an entity name or kind:name), with citations."""
        return ws.graph.neighbors(node, [type] if type else None)

    @router.get("/trace", response_model=GraphTraceOut)
    def trace(
        source: Name, target: Name, type: EdgeType = None,
        max_hops: Annotated[int, Query(ge=1, le=8, description="Longest path looked for")] = DEFAULT_MAX_HOPS,
    ) -> dict[str, Any]:  # fmt: skip
        """How two nodes are related: the edges between them, else the shortest path of edges
        (through entities and documents), each with its provenance (file lines, cited chunks)."""
        return ws.graph.trace(source, target, type, max_hops=max_hops)

    @router.get("/rollup", response_model=GraphRollupOut)
    def rollup(
        entity: Name, period: Period = None,
        query: Annotated[Text | None, Query(max_length=MAX_QUERY_CHARS)] = None,
        top_k: Annotated[int, Query(ge=1, le=max_top_k)] = min(10, max_top_k),
    ) -> dict[str, Any]:  # fmt: skip
        """An entity and all its subsidiaries with their documents; with `query`, a narrative
        search restricted to them (RESTRICTED never included)."""
        return ws.graph.rollup(entity, period=period, query=query or None, top_k=top_k)

    @router.get("/peers", response_model=GraphPeersOut)
    def peers(entity: Name, period: Period = None) -> dict[str, Any]:
        """An entity and its peers, each with its documents (in `period`), cited."""
        return ws.graph.peers(entity, period=period)

    @router.post("/global", response_model=GraphGlobalOut)
    def global_question(body: GraphGlobalIn) -> dict[str, Any]:
        """A broad question answered from the community summaries, citing member chunks."""
        return ws.graph.global_answer(body.question)

    return router
