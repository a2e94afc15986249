"""The networkx GraphStore (`RAGSPINE_GRAPH_STORE=networkx`, the [graph] extra).

Invariants: the same file and the same answers as `InProcessGraphStore` (both pass
`GraphStoreSuite`); networkx is imported when a store is built, and without it the error names
`pip install 'ragspine[graph]'`. `nx_graph()` gives the MultiDiGraph (keys are edge types, the
`edge` attribute the Edge) for the algorithms networkx has (communities, centrality).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragspine.extras import require
from ragspine.graph.model import SYMMETRIC, Edge, Node, RelationGraph
from ragspine.graph.stores import MEMORY, FileBackedGraph, check_type, edge_order


def networkx() -> Any:
    """The networkx module, or MissingExtraError naming the [graph] extra."""
    return require("networkx", extra="graph", purpose="the networkx graph store and GraphRAG communities")


def to_networkx(graph: RelationGraph) -> Any:
    """A networkx MultiDiGraph of `graph`: node attribute `node`, edge key = type (look an Edge up
    in `graph.edges` by (source, target, type))."""
    nx = networkx()
    g = nx.MultiDiGraph()
    for nid in sorted(graph.nodes):
        g.add_node(nid, node=graph.nodes[nid])
    for source, target, type in sorted(graph.edges):
        g.add_edge(source, target, key=type)
    return g


class NetworkXGraphStore(FileBackedGraph):
    """A GraphStore over a networkx MultiDiGraph, persisted as the same graph JSON file."""

    def __init__(self, path: str = MEMORY) -> None:
        self._nx = networkx()
        super().__init__(path)

    def _index(self, graph: RelationGraph) -> tuple[RelationGraph, Any]:
        return (graph, to_networkx(graph))

    def nx_graph(self) -> Any:
        return self._state[1]

    def node(self, nid: str) -> Node | None:
        g = self._state[1]
        return g.nodes[nid]["node"] if nid in g else None

    def nodes(self, kind: str | None = None) -> list[Node]:
        return [d["node"] for _, d in sorted(self._state[1].nodes(data=True)) if kind is None or d["node"].kind == kind]

    def edges(self, type: str | None = None) -> list[Edge]:
        check_type(type)
        graph, g = self._state
        found = (graph.edges[(u, v, k)] for u, v, k in g.edges(keys=True) if type is None or k == type)
        return sorted(found, key=edge_order)

    def edge(self, source: str, target: str, type: str) -> Edge | None:
        check_type(type)
        if type in SYMMETRIC and target < source:
            source, target = target, source
        graph, g = self._state
        if not g.has_edge(source, target, key=type):
            return None
        found: Edge = graph.edges[(source, target, type)]
        return found

    def neighbors(self, nid: str, types: Sequence[str] | None = None) -> list[Edge]:
        for t in types or ():
            check_type(t)
        graph, g = self._state
        if nid not in g:
            return []
        touching = {*g.out_edges(nid, keys=True), *g.in_edges(nid, keys=True)}
        return sorted((graph.edges[k] for k in touching if not types or k[2] in types), key=edge_order)

    def descendants(self, nid: str, type: str = "subsidiary_of") -> list[tuple[str, list[Edge]]]:
        check_type(type)
        graph, g = self._state
        if nid not in g:
            return []
        view = self._nx.subgraph_view(g, filter_edge=lambda u, v, k: k == type).reverse(copy=False)
        paths: dict[str, list[Edge]] = {nid: []}
        for parent, child in self._nx.bfs_edges(view, nid, sort_neighbors=sorted):
            paths[child] = [graph.edges[(child, parent, type)], *paths[parent]]
        del paths[nid]
        return sorted(paths.items(), key=lambda item: (len(item[1]), item[0]))
