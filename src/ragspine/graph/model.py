"""The relation graph's records: typed nodes, typed edges and the provenance every edge carries.

Invariants:
- A node id is `kind:key` (`entity:ACME_CN`, `document:r1`); kinds and edge types come from
  NODE_KINDS and EDGE_TYPES only. Symmetric relations (peer_of, co_occurs_with) are stored once,
  with their endpoints in sorted order.
- Every edge carries its provenance: the relations file (shown by its name, never a path) and
  line that declared it, or the chunk ids and locators it came from. Adding an edge twice merges the provenance (never drops it).
- `to_json` is canonical (sorted nodes, edges, provenance and keys): the same graph is the same
  bytes, so the default build is byte-identical run to run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any, NamedTuple

NODE_KINDS = ("entity", "period", "topic", "geography", "document", "community")
# declared by the user (relations file), derived from chunk metadata, found in text, or synthesis
EDGE_TYPES = (
    "subsidiary_of", "peer_of", "derived_from",                     # relations file
    "mentions", "in_period", "about_topic", "in_geography",          # chunk metadata
    "co_occurs_with",                                               # cooccurrence extractor
    "supplier_of", "customer_of", "related_to",                     # llm extractor (besides the first two)
    "member_of",                                                    # GraphRAG community membership
)  # fmt: skip
SYMMETRIC = frozenset({"peer_of", "co_occurs_with", "related_to"})
# which chunk field gives which node kind and edge (document -> dimension)
METADATA_EDGES = (("entity", "mentions"), ("period", "in_period"), ("topic", "about_topic"),
                  ("geography", "in_geography"))  # fmt: skip
FORMAT_VERSION = 1


def node_id(kind: str, key: str) -> str:
    """`kind:key`, after checking the kind and that the key is not blank."""
    if kind not in NODE_KINDS:
        raise ValueError(f"unknown node kind {kind!r}; valid: {', '.join(NODE_KINDS)}")
    if not isinstance(key, str) or not key.strip():
        raise ValueError(f"a {kind} node needs a non-blank name, got {key!r}")
    return f"{kind}:{key.strip()}"


class ChunkRef(NamedTuple):
    """A citation: the chunk, its document and where to find it (a tuple: graphs hold many)."""

    chunk_id: str
    doc_id: str
    source_locator: str

    def to_dict(self) -> dict[str, str]:
        return {"chunk_id": self.chunk_id, "doc_id": self.doc_id, "source_locator": self.source_locator}


class Provenance(NamedTuple):
    """Where an edge came from: `file`+`line` of the relations file, or `chunks` it was read from.
    `source` says which: relations_file, chunk_metadata, cooccurrence, llm, community."""

    source: str
    file: str = ""
    line: int = 0
    chunks: tuple[ChunkRef, ...] = ()

    def sort_key(self) -> tuple[str, str, int, tuple[ChunkRef, ...]]:
        return (self.source, self.file, self.line, self.chunks)

    def to_dict(self) -> dict[str, Any]:
        """The provenance as written to the graph file and shown in answers: the relations file
        by its name only, never a server path (issue 34 #6; RAGSPINE_GRAPH_RELATIONS says where)."""
        out: dict[str, Any] = {"source": self.source}
        if self.file:
            out["file"], out["line"] = PurePath(self.file).name, self.line
        if self.chunks:
            out["chunks"] = [list(c) for c in self.chunks]  # [chunk_id, doc_id, source_locator]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        chunks = tuple([ChunkRef(*c) for c in data["chunks"]]) if "chunks" in data else ()
        return cls(data["source"], data.get("file", ""), int(data.get("line", 0)), chunks)


@dataclass(frozen=True)
class Node:
    """A typed node; `attrs` holds its extras (a document's title, an entity's aliases, a community's
    summary with is_synthesis / citable / sources)."""

    id: str
    kind: str
    key: str
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "key": self.key, **({"attrs": dict(self.attrs)} if self.attrs else {})}


@dataclass(frozen=True)
class Edge:
    """A typed edge. `derivation`: declared (relations file), metadata, cooccurrence,
    model-derived or synthesis; `verified` is False for what a model proposed."""

    source: str
    target: str
    type: str
    provenance: tuple[Provenance, ...]
    derivation: str
    verified: bool = True
    weight: int = 1

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.target, self.type)

    def other(self, nid: str) -> str:
        """The endpoint that is not `nid`."""
        return self.target if self.source == nid else self.source

    def chunk_refs(self) -> list[ChunkRef]:
        """Every chunk citation of the edge's provenance, sorted, once each."""
        return sorted({c for p in self.provenance for c in p.chunks})

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "type": self.type,
                "derivation": self.derivation, "verified": self.verified, "weight": self.weight,
                "provenance": [p.to_dict() for p in self.provenance]}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Edge:
        return cls(data["source"], data["target"], data["type"],
                   tuple(Provenance.from_dict(p) for p in data["provenance"]), data["derivation"],
                   bool(data.get("verified", True)), int(data.get("weight", 1)))  # fmt: skip


def make_edge(
    source: str, target: str, type: str, provenance: Iterable[Provenance], *, derivation: str,
    verified: bool = True, weight: int = 1,
) -> Edge:  # fmt: skip
    """An edge with its type checked and a symmetric relation's endpoints put in sorted order."""
    if type not in EDGE_TYPES:
        raise ValueError(f"unknown edge type {type!r}; valid: {', '.join(EDGE_TYPES)}")
    if source == target:
        raise ValueError(f"a {type} edge needs two different nodes, got {source!r} twice")
    if type in SYMMETRIC and target < source:
        source, target = target, source
    return Edge(source, target, type, tuple(sorted(set(provenance), key=Provenance.sort_key)), derivation,
                verified, weight)  # fmt: skip


class LazyEdges(dict[tuple[str, str, str], Edge]):
    """Edges by key whose values stay as read from the file until one is looked up: opening a large
    graph costs the JSON parse, not an object per citation (stores index the keys only)."""

    def _edge(self, key: tuple[str, str, str], value: Any) -> Edge:
        if isinstance(value, Edge):
            return value
        edge = Edge.from_dict(value)
        super().__setitem__(key, edge)
        return edge

    def __getitem__(self, key: tuple[str, str, str]) -> Edge:
        return self._edge(key, super().__getitem__(key))

    def get(self, key: tuple[str, str, str], default: Any = None) -> Any:
        value = super().get(key)
        return default if value is None else self._edge(key, value)

    def values(self) -> Any:
        return [self[k] for k in self]

    def items(self) -> Any:
        return [(k, self[k]) for k in self]


class RelationGraph:
    """Nodes by id and edges by (source, target, type): what a GraphStore holds.

    >>> g = RelationGraph()
    >>> g.add_node("entity", "ACME_HK"); g.add_node("entity", "ACME")
    'entity:ACME_HK'
    'entity:ACME'
    >>> _ = g.add_edge(make_edge("entity:ACME_HK", "entity:ACME", "subsidiary_of",
    ...                          [Provenance("relations_file", "rel.yaml", 3)], derivation="declared"))
    >>> [e.type for e in g.edges.values()]
    ['subsidiary_of']
    """

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: dict[tuple[str, str, str], Edge] = LazyEdges()
        self.meta: dict[str, Any] = {}  # what it was built from (the store's data_version, the extractor)

    def add_node(self, kind: str, key: str, **attrs: Any) -> str:
        """Add the node (or merge `attrs` into the existing one; existing values win); its id."""
        nid = node_id(kind, key)
        old = self.nodes.get(nid)
        merged = {**attrs, **(old.attrs if old else {})}
        self.nodes[nid] = Node(nid, kind, key.strip(), merged)
        return nid

    def set_attrs(self, nid: str, **attrs: Any) -> None:
        """Replace attributes of an existing node."""
        node = self.nodes[nid]
        self.nodes[nid] = replace(node, attrs={**node.attrs, **attrs})

    def add_edge(self, edge: Edge) -> Edge:
        """Add `edge` (both endpoints must exist); the same key again merges provenance and adds weights."""
        for end in (edge.source, edge.target):
            if end not in self.nodes:
                raise ValueError(f"edge {edge.type} refers to the unknown node {end!r}")
        old = self.edges.get(edge.key)
        if old is not None:
            prov = tuple(sorted(set(old.provenance) | set(edge.provenance), key=Provenance.sort_key))
            edge = replace(old, provenance=prov, weight=old.weight + edge.weight, verified=old.verified and edge.verified)
        self.edges[edge.key] = edge
        return edge

    def to_json(self) -> bytes:
        """Canonical JSON bytes (sorted): the same graph always gives the same bytes."""
        data = {
            "format": FORMAT_VERSION,
            "meta": self.meta,
            "nodes": [self.nodes[n].to_dict() for n in sorted(self.nodes)],
            "edges": [self.edges[k].to_dict() for k in sorted(self.edges)],
        }
        return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, source: str = "graph file") -> RelationGraph:
        """The graph `to_json` wrote; ValueError naming `source` when it is not one."""
        try:
            raw = json.loads(data)
            if raw.get("format") != FORMAT_VERSION:
                raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT_VERSION}")
            graph = cls()
            graph.meta = dict(raw.get("meta", {}))
            for n in raw["nodes"]:
                graph.nodes[n["id"]] = Node(n["id"], n["kind"], n["key"], n.get("attrs", {}))
            for e in raw["edges"]:  # parsed into an Edge when first looked up
                dict.__setitem__(graph.edges, (e["source"], e["target"], e["type"]), e)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{source} is not a relation graph written by ragspine ({exc}); "
                             "rebuild it with `ragspine graph build`") from None  # fmt: skip
        return graph
