"""Multi-hop queries over a GraphStore, each answer cited: roll-up, peers, trace, neighbours.

    q = GraphQueries(graph_store, chunk_store)
    q.rollup("ACME")                 # ACME and every descendant, their documents and citations
    q.peers("ACME", period="2024")   # ACME and its peers, each with its 2024 documents
    q.trace("ACME_HK", "ACME")       # which file line / chunks support the edges between them

Invariants:
- A query never returns a RESTRICTED chunk, nor a document that has no open active chunk: when the
  store changed since the graph was built (its data_version differs), every cited chunk and every
  document node is checked against the store's current active, open rows (`Visibility`) first.
- Citations are the provenance of the edges walked: chunk id, document, locator (and title).
- Orders are the store's (deterministic); a name is resolved as an entity unless it is a node id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragspine.graph.model import NODE_KINDS, ChunkRef, Edge, node_id
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
            raise ValueError(f"the relation graph has no node {nid!r}; `ragspine graph show` lists them")
        return nid

    def _cite(self, refs: Iterable[ChunkRef], seen: Visibility) -> list[dict[str, str]]:
        out = []
        for r in seen.refs(sorted(set(refs))):
            doc = self.graph.node(node_id("document", r.doc_id))
            out.append({**r.to_dict(), "title": str(doc.attrs.get("title", "")) if doc else ""})
        return out

    def _edge(self, edge: Edge, seen: Visibility) -> dict[str, Any] | None:
        """An edge as a dict with its citations; None when it touches a document hidden now."""
        for end in (edge.source, edge.target):
            if end.startswith("document:") and not seen.document(end.partition(":")[2]):
                return None
        data = edge.to_dict()
        data["provenance"] = [
            {**p, **({"chunks": self._cite((ChunkRef(*c) for c in p["chunks"]), seen)} if "chunks" in p else {})}
            for p in data["provenance"]
        ]
        return data

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
            if nid.startswith("entity:"):
                members.append({"entity": nid.partition(":")[2], "depth": len(path),
                                "path": [d for e in path if (d := self._edge(e, seen)) is not None]})  # fmt: skip
        documents = []
        for member in members:
            for doc in self._documents(node_id("entity", member["entity"]), period, seen):
                documents.append({**doc, "entity": member["entity"]})
        return {"entity": root.partition(":")[2], "period": period, "members": members, "documents": documents}

    def rollup_search(
        self, retriever: SnippetRetriever, entity: str, query: str, *, period: str | None = None, top_k: int = 10
    ) -> dict[str, Any]:
        """The roll-up, then narrative retrieval of `query` restricted (the filter language) to
        its members' entities (and `period`): RESTRICTED-free snippets, cited as search cites."""
        rolled = self.rollup(entity, period=period)
        names = [m["entity"] for m in rolled["members"]]
        if len(names) > MAX_ITEMS:
            raise ValueError(f"{entity!r} has {len(names)} members, more than the {MAX_ITEMS} one filter may "
                             "list; roll up a subsidiary instead")  # fmt: skip
        filters: dict[str, Any] = {"entity": {"in": names}}
        if period:
            filters["period"] = period
        snippets = [s for s in retriever.retrieve(query, filters=filters, top_k=top_k)
                    if not is_restricted(str(s.get("sensitivity", "")))]  # fmt: skip
        return {**rolled, "query": query, "filters": filters, "snippets": snippets}

    def peers(self, entity: str, *, period: str | None = None) -> dict[str, Any]:
        """`entity` and its peers (peer_of, declared or found), each with its documents in `period`."""
        root = self.resolve(entity)
        seen = self._visibility()
        rows: list[dict[str, Any]] = [{"entity": root.partition(":")[2], "relation": None,
                 "documents": self._documents(root, period, seen)}]  # fmt: skip
        for edge in self.graph.neighbors(root, ["peer_of"]):
            other = edge.other(root)
            rows.append({"entity": other.partition(":")[2], "relation": self._edge(edge, seen),
                         "documents": self._documents(other, period, seen)})  # fmt: skip
        return {"entity": root.partition(":")[2], "period": period, "rows": rows}

    def trace(self, source: str, target: str, type: str | None = None, *,
              limit: int = DEFAULT_SUPPORT_LIMIT) -> dict[str, Any]:  # fmt: skip
        """The edges between two nodes (of `type`), each with its provenance (file line or chunks)
        and, for an edge between entities, up to `limit` open chunks about one that name the other."""
        a, b = self.resolve(source, kind=_kind_of(source)), self.resolve(target, kind=_kind_of(target))
        seen = self._visibility()
        found = [e for e in self.graph.neighbors(a, [type] if type else None) if e.other(a) == b]
        if not found:
            raise ValueError(f"no {type or ''} edge between {a!r} and {b!r}".replace("  ", " "))
        edges = []
        for edge in found:
            data = self._edge(edge, seen)
            if data is None:
                continue
            if a.startswith("entity:") and b.startswith("entity:"):
                data["supporting"] = self._support(a, b, seen, limit)
            edges.append(data)
        return {"source": a, "target": b, "edges": edges}

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

    def show(self) -> dict[str, Any]:
        """Counts of nodes per kind and edges per type, and what the graph was built from."""
        graph = self.graph.graph()
        kinds: Mapping[str, int] = _count(n.kind for n in graph.nodes.values())
        types: Mapping[str, int] = _count(key[2] for key in graph.edges)
        return {"built": self.graph.is_built(), "path": self.graph.path, "meta": graph.meta,
                "stale": graph.meta.get("data_version") != self.store.data_version(),
                "nodes": dict(kinds), "edges": dict(types)}  # fmt: skip


def _kind_of(name: str) -> str:
    head = name.partition(":")[0]
    return head if head in NODE_KINDS and ":" in name else "entity"


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))
