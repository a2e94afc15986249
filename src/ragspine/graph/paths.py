"""The shortest typed path between two nodes of a GraphStore (breadth first, either direction).

Invariants: the path found is a shortest one among the edges `usable` admits and through the
intermediate node kinds `via` (never a hub such as a period or a topic, which would join
everything in two hops); among equally short paths the first in the store's edge order wins, so
the same graph gives the same path; no path longer than `max_hops` is looked for.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from ragspine.graph.model import Edge
from ragspine.graph.stores import GraphStore

DEFAULT_MAX_HOPS = 4
PATH_NODE_KINDS = ("entity", "document")  # what a path may pass through


def shortest_path(
    graph: GraphStore, source: str, target: str, *, types: Sequence[str] | None = None,
    usable: Callable[[Edge], bool] = lambda _: True, max_hops: int = DEFAULT_MAX_HOPS,
    via: Sequence[str] = PATH_NODE_KINDS,
) -> list[Edge] | None:  # fmt: skip
    """The edges of a shortest path from `source` to `target` (in walking order), of `types`
    (None: any), each admitted by `usable`; None when there is none within `max_hops`.

    >>> from ragspine.graph.model import Provenance, RelationGraph, make_edge
    >>> from ragspine.graph.stores import InProcessGraphStore
    >>> g = RelationGraph(); a, b, c = (g.add_node("entity", n) for n in ("A", "B", "C"))
    >>> for x, y in ((a, b), (c, b)):
    ...     _ = g.add_edge(make_edge(x, y, "subsidiary_of", [Provenance("relations_file", "r.csv", 2)], derivation="declared"))
    >>> s = InProcessGraphStore(); s.replace(g)
    >>> [(e.source, e.target) for e in shortest_path(s, a, c)]
    [('entity:A', 'entity:B'), ('entity:C', 'entity:B')]
    """
    if source == target:
        return []
    came: dict[str, Edge | None] = {source: None}
    frontier = deque([(source, 0)])
    while frontier:
        node, depth = frontier.popleft()
        if depth >= max_hops:
            continue
        for edge in graph.neighbors(node, types):
            other = edge.other(node)
            if other in came or not usable(edge):
                continue
            came[other] = edge
            if other == target:
                return _walk(came, target)
            if other.partition(":")[0] in via:
                frontier.append((other, depth + 1))
    return None


def _walk(came: dict[str, Edge | None], end: str) -> list[Edge]:
    path: list[Edge] = []
    node, edge = end, came[end]
    while edge is not None:
        path.append(edge)
        node = edge.other(node)
        edge = came[node]
    return path[::-1]
