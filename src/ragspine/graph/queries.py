"""Multi-hop queries over a GraphStore, each answer cited: roll-up, peers, trace, neighbours.

    q = GraphQueries(graph_store, chunk_store)
    q.rollup("ACME")                 # ACME and every descendant, their documents and citations
    q.peers("ACME", period="2024")   # ACME and its peers, each with its 2024 documents
    q.trace("ACME_HK", "ACME")       # which file line / chunks support the edges between them
    q.trace("ACME", "CYGNUS")        # no edge between them: the shortest path of edges, each cited
    q.entities(contains="acme")      # the entity names to ask about, with their visible documents

Invariants:
- A query never returns a RESTRICTED chunk, nor a document that has no open active chunk: when the
  store changed since the graph was built (its data_version differs), every cited chunk and every
  document node is checked against the store's current active, open rows (`Visibility`) first.
- Citations are the provenance of the edges walked: chunk id, document, locator (and title). An
  edge whose every provenance is gone now (its chunks relabelled RESTRICTED or withdrawn since the
  build) is not shown, walked or counted: an edge is never shown without its provenance.
- An entity is listed only when a visible edge touches it (or it stands alone, declared in the
  relations file): one known only from documents hidden now is never listed.
- Orders are the store's (deterministic); a name is resolved as an entity unless it is a node id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from ragspine.graph.model import NODE_KINDS, ChunkRef, Edge, node_id
from ragspine.graph.paths import DEFAULT_MAX_HOPS, shortest_path
from ragspine.graph.stores import GraphStore
from ragspine.graph.vocabulary import Vocabulary
from ragspine.retrieval.filters import MAX_ITEMS
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.snippet import Snippet
from ragspine.retrieval.store.protocol import ChunkReader

DEFAULT_SUPPORT_LIMIT = 20


class SnippetRetriever(Protocol):
    """What a roll-up searches with (`NarrativeIndexRetriever` is one)."""

    def retrieve(self, query: str, *, filters: Any = None, top_k: int = ...) -> list[Snippet]: ...


@dataclass
class Visibility:
    """Which documents and chunks a caller may see now (only checked when the graph is stale)."""

    store: ChunkReader
    check: bool
    _open: dict[str, frozenset[str]] = field(default_factory=dict)  # doc_id -> open active chunk ids

    def open_chunks(self, doc_id: str) -> frozenset[str] | None:
        """The doc's open active chunk ids (None: not checked, the graph is current)."""
        if not self.check:
            return None
        if doc_id not in self._open:
            self._open[doc_id] = frozenset(c.chunk_id for c in self.store.iter_chunks(doc_id=doc_id)
                                           if not is_restricted(c.sensitivity))  # fmt: skip
        return self._open[doc_id]

    def document(self, doc_id: str) -> bool:
        found = self.open_chunks(doc_id)
        return found is None or bool(found)

    def refs(self, refs: Iterable[ChunkRef]) -> list[ChunkRef]:
        out = []
        for r in refs:
            found = self.open_chunks(r.doc_id)
            if found is None or r.chunk_id in found:
                out.append(r)
        return out


class GraphQueries:
    """The queries over `graph` (a GraphStore) with `store` (the chunk store it was built from)."""

    def __init__(self, graph: GraphStore, store: ChunkReader) -> None:
        self.graph, self.store = graph, store

    # -- helpers ------------------------------------------------------------------------------
    def _visibility(self) -> Visibility:
        built = self.graph.graph().meta.get("data_version")
        return Visibility(self.store, check=built != self.store.data_version())

    def resolve(self, name: str, kind: str = "entity") -> str:
        """The node id `name` stands for: a node id as given, else `kind:name` (an entity's alias
        resolves to it); ValueError when the graph has no such node."""
        if not self.graph.is_built():
            raise ValueError("no relation graph is built yet: run `ragspine graph build` first")
        head = name.partition(":")[0]
        nid = name if head in NODE_KINDS and self.graph.node(name) is not None else node_id(kind, name)
        if self.graph.node(nid) is None and kind == "entity":
            aliases = {n.key: tuple(n.attrs.get("aliases", ())) for n in self.graph.nodes("entity")}
            canonical = Vocabulary.from_names(aliases).canonical(name)
            nid = node_id("entity", canonical) if canonical else nid
        if self.graph.node(nid) is None:
            raise ValueError(f"the relation graph has no node {nid!r}; `ragspine graph entities` "
                             "(GET /graph/entities) lists the entity names")
        return nid

    def _cite(self, refs: Iterable[ChunkRef], seen: Visibility) -> list[dict[str, str]]:
        out = []
        for r in seen.refs(sorted(set(refs))):
            doc = self.graph.node(node_id("document", r.doc_id))
            out.append({**r.to_dict(), "title": str(doc.attrs.get("title", "")) if doc else ""})
        return out

    def _edge(self, edge: Edge, seen: Visibility) -> dict[str, Any] | None:
        """An edge as a dict with its citations; None when it touches a document hidden now or
        none of its provenance is left (a provenance citing only hidden chunks is left out)."""
        for end in (edge.source, edge.target):
            if end.startswith("document:") and not seen.document(end.partition(":")[2]):
                return None
        data = edge.to_dict()
        kept = []
        for p in data["provenance"]:
            if "chunks" in p:
                p = {**p, "chunks": self._cite((ChunkRef(*c) for c in p["chunks"]), seen)}
                if not p["chunks"]:
                    continue
            kept.append(p)
        if not kept:
            return None
        data["provenance"] = kept
        return data

    def _visible(self, edge: Edge, seen: Visibility) -> bool:
        """Whether `_edge` shows `edge` (always, when the graph is current)."""
        return not seen.check or self._edge(edge, seen) is not None

    def _documents(self, entity: str, period: str | None, seen: Visibility) -> list[dict[str, Any]]:
        """The documents that mention `entity` (in `period`), each with the chunks that say so."""
        period_id = node_id("period", period) if period else None
        out = []
        for edge in self.graph.neighbors(entity, ["mentions"]):
            refs = set(edge.chunk_refs())
            if period_id is not None:
                dated = self.graph.edge(edge.source, period_id, "in_period")
                refs &= set(dated.chunk_refs()) if dated else set()
            cites = self._cite(refs, seen)
            if cites:
                doc = edge.source.partition(":")[2]
                out.append({"doc_id": doc, "title": cites[0]["title"], "citations": cites})
        return out

    # -- the queries ----------------------------------------------------------------------------
    def neighbors(self, name: str, types: Sequence[str] | None = None) -> dict[str, Any]:
        """The node and every edge touching it (of `types`), with citations."""
        nid = self.resolve(name, kind=_kind_of(name))
        seen = self._visibility()
        edges = [d for e in self.graph.neighbors(nid, types) if (d := self._edge(e, seen)) is not None]
        return {"node": nid, "edges": edges}

    def rollup(self, entity: str, *, period: str | None = None) -> dict[str, Any]:
        """`entity` and all its descendants (subsidiary_of chains, each with the edges that prove
        it), and the documents about any of them (in `period`), cited."""
        root = self.resolve(entity)
        seen = self._visibility()
        members: list[dict[str, Any]] = [{"entity": root.partition(":")[2], "depth": 0, "path": []}]
        for nid, path in self.graph.descendants(root, "subsidiary_of"):
            shown = [d for e in path if (d := self._edge(e, seen)) is not None]
            if nid.startswith("entity:") and len(shown) == len(path):  # every link still proven
                members.append({"entity": nid.partition(":")[2], "depth": len(path), "path": shown})
        documents = []
        for member in members:
            for doc in self._documents(node_id("entity", member["entity"]), period, seen):
                documents.append({**doc, "entity": member["entity"]})
        return {"entity": root.partition(":")[2], "period": period, "members": members, "documents": documents}

    def rollup_search(
        self, retriever: SnippetRetriever, entity: str, query: str, *, period: str | None = None, top_k: int = 10
    ) -> dict[str, Any]:
        """The roll-up, then narrative retrieval of `query` restricted (the filter language) to
        its members' entities (and `period`): RESTRICTED-free snippets, cited as search cites, and
        `filters_dropped` as search says it."""
        rolled = self.rollup(entity, period=period)
        names = [m["entity"] for m in rolled["members"]]
        if len(names) > MAX_ITEMS:
            raise ValueError(f"{entity!r} has {len(names)} members, more than the {MAX_ITEMS} one filter may "
                             "list; roll up a subsidiary instead")  # fmt: skip
        filters: dict[str, Any] = {"entity": {"in": names}}
        if period:
            filters["period"] = period
        found = retriever.retrieve(query, filters=filters, top_k=top_k)
        snippets = [s for s in found if not is_restricted(str(s.get("sensitivity", "")))]
        dropped = list(getattr(found, "filters_dropped", ()))  # the filter fallback "retry" widened it
        return {**rolled, "query": query, "filters": filters, "filters_dropped": dropped, "snippets": snippets}

    def peers(self, entity: str, *, period: str | None = None) -> dict[str, Any]:
        """`entity` and its peers (peer_of, declared or found), each with its documents in `period`."""
        root = self.resolve(entity)
        seen = self._visibility()
        rows: list[dict[str, Any]] = [{"entity": root.partition(":")[2], "relation": None,
                 "documents": self._documents(root, period, seen)}]  # fmt: skip
        for edge in self.graph.neighbors(root, ["peer_of"]):
            relation, other = self._edge(edge, seen), edge.other(root)
            if relation is not None:
                rows.append({"entity": other.partition(":")[2], "relation": relation,
                             "documents": self._documents(other, period, seen)})  # fmt: skip
        return {"entity": root.partition(":")[2], "period": period, "rows": rows}

    def trace(self, source: str, target: str, type: str | None = None, *, limit: int = DEFAULT_SUPPORT_LIMIT,
              max_hops: int = DEFAULT_MAX_HOPS) -> dict[str, Any]:  # fmt: skip
        """How two nodes are related: the edges between them (of `type`), else the edges of a
        shortest path between them (of `type`, through entities and documents, at most
        `max_hops`), each with its provenance (file line or chunks) and its `hop`; `path` lists
        the nodes walked. A direct edge between entities also gets up to `limit` open chunks
        about one end that name the other (`supporting`)."""
        a, b = self.resolve(source, kind=_kind_of(source)), self.resolve(target, kind=_kind_of(target))
        _check_count("max_hops", max_hops)
        seen, types = self._visibility(), [type] if type else None
        edges = [{**d, "hop": 1} for e in self.graph.neighbors(a, types)
                 if e.other(a) == b and (d := self._edge(e, seen)) is not None]  # fmt: skip
        if edges:
            if a.startswith("entity:") and b.startswith("entity:"):
                for data in edges:
                    data["supporting"] = self._support(a, b, seen, limit)
            return {"source": a, "target": b, "hops": 1, "path": [a, b], "edges": edges}
        path = shortest_path(self.graph, a, b, types=types, usable=lambda e: self._visible(e, seen), max_hops=max_hops)
        if path is None:
            raise ValueError(f"no {type or ''} edge or path of at most {max_hops} edges between {a!r} and {b!r}; "
                             f"`ragspine graph neighbors` shows the edges of each".replace("  ", " "))  # fmt: skip
        nodes = [a]
        for edge in path:
            nodes.append(edge.other(nodes[-1]))
        walked = [{**cast(dict[str, Any], self._edge(e, seen)), "hop": n} for n, e in enumerate(path, start=1)]
        return {"source": a, "target": b, "hops": len(path), "path": nodes, "edges": walked}

    def entities(self, *, contains: str | None = None, limit: int = 1000) -> dict[str, Any]:
        """The entities a caller may ask about, by name: each with its aliases and the number of
        visible documents that mention it; `contains` keeps those whose name or an alias
        contains it (any case); at most `limit` listed, `total` counts every match."""
        if not self.graph.is_built():
            raise ValueError("no relation graph is built yet: run `ragspine graph build` first")
        _check_count("limit", limit)
        needle = (contains or "").casefold()
        seen = self._visibility()
        listed: list[dict[str, Any]] = []
        total = 0
        for node in self.graph.nodes("entity"):
            aliases = [str(a) for a in node.attrs.get("aliases", ())]
            if not any(needle in name.casefold() for name in (node.key, *aliases)):
                continue
            touching = self.graph.neighbors(node.id)
            shown = [e for e in touching if self._visible(e, seen)]  # each edge judged once
            if touching and not shown:
                continue  # known only from what is hidden now
            total += 1
            if len(listed) < limit:
                documents = sum(1 for e in shown if e.type == "mentions")
                listed.append({"entity": node.key, "aliases": aliases, "documents": documents})
        return {"entities": listed, "total": total}

    def _support(self, a: str, b: str, seen: Visibility, limit: int) -> list[dict[str, str]]:
        """Open active chunks about one end (the chunks its `mentions` edges cite) whose text
        names the other, read per document from the store, at most `limit`."""
        names = {n.key: tuple(n.attrs.get("aliases", ())) for n in (self.graph.node(a), self.graph.node(b)) if n}
        vocab = Vocabulary.from_names(names)
        refs: list[ChunkRef] = []
        for about, other in ((a, b), (b, a)):
            for edge in self.graph.neighbors(about, ["mentions"]):
                if len(refs) >= limit:
                    return self._cite(refs, seen)
                cited = {r.chunk_id for r in edge.chunk_refs()}
                for chunk in self.store.iter_chunks(doc_id=edge.source.partition(":")[2]):
                    if (chunk.chunk_id in cited and not is_restricted(chunk.sensitivity)
                            and other.partition(":")[2] in vocab.find(chunk.text)):  # fmt: skip
                        refs.append(ChunkRef(chunk.chunk_id, chunk.doc_id, chunk.source_locator))
        return self._cite(refs[:limit], seen)

    def show(self, *, visible_only: bool = False) -> dict[str, Any]:
        """Counts of nodes per kind and edges per type, and what the graph was built from.
        `visible_only` (a caller who may not see the store's internals): no file path, metadata
        or staleness, and, when the store changed since the build, only what the other queries
        would show is counted (an edge `_edge`
        shows, a document still visible, another node with a shown edge or none at all), so a
        document relabelled RESTRICTED or withdrawn since moves no count."""
        graph = self.graph.graph()
        if visible_only:  # without the file path, build metadata and staleness
            seen = self._visibility()
            edges = [e for e in self.graph.edges() if self._visible(e, seen)]
            shown = {end for e in edges for end in (e.source, e.target)}
            nodes = [n for n in graph.nodes.values() if n.id in shown or (
                seen.document(n.key) if n.kind == "document" else not self.graph.neighbors(n.id))]  # fmt: skip
            return {"built": self.graph.is_built(), "nodes": _count(n.kind for n in nodes),
                    "edges": _count(e.type for e in edges)}  # fmt: skip
        kinds: Mapping[str, int] = _count(n.kind for n in graph.nodes.values())
        types: Mapping[str, int] = _count(key[2] for key in graph.edges)
        return {"built": self.graph.is_built(), "path": self.graph.path, "meta": graph.meta,
                "stale": graph.meta.get("data_version") != self.store.data_version(),
                "nodes": dict(kinds), "edges": dict(types)}  # fmt: skip


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")


def _kind_of(name: str) -> str:
    head = name.partition(":")[0]
    return head if head in NODE_KINDS and ":" in name else "entity"


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))
