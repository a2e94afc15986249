"""The GraphStore seam: the Protocol, the in-process default and the registry factory.

    from ragspine.graph import make_graph_store
    store = make_graph_store("in_process", path="data/chunks.db.graph.json")   # RAGSPINE_GRAPH_STORE
    store.replace(graph)
    [e.other("entity:ACME") for e in store.neighbors("entity:ACME")]

Invariants:
- Every implementation passes `ragspine.testing.graph_store.GraphStoreSuite`: the same graph gives
  the same answers, in the same order, from every store.
- `replace` persists the whole graph atomically (`ragspine.atomic.write_atomic`; ":memory:" keeps it
  in memory only); a reader never sees half a graph. The file is `RelationGraph.to_json`.
- A store follows its file: a graph another process wrote there is served within
  `RELOAD_CHECK_S`; an unreadable new file keeps the old graph (logged), never a half one.
- Orders are deterministic: nodes by id, edges by (type, source, target), descendants by (depth, id).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import defaultdict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ragspine.atomic import write_atomic
from ragspine.graph.model import EDGE_TYPES, SYMMETRIC, Edge, Node, RelationGraph
from ragspine import catalog
from ragspine.registry import Registry

MEMORY = ":memory:"
#: Seconds between two looks at a graph file's (mtime, size, inode) (`FileBackedGraph`).
RELOAD_CHECK_S = 0.25
_LOG = logging.getLogger(__name__)


@runtime_checkable
class GraphStore(Protocol):
    """Holds one relation graph and answers the traversals the queries need."""

    path: str

    def replace(self, graph: RelationGraph) -> None:
        """Make `graph` the stored graph (persisted atomically when `path` is a file)."""
        ...

    def graph(self) -> RelationGraph:
        """The stored graph (empty when none was built)."""
        ...

    def is_built(self) -> bool:
        """Whether a graph was stored (in this process or in the file)."""
        ...

    def node(self, nid: str) -> Node | None: ...

    def nodes(self, kind: str | None = None) -> list[Node]:
        """Nodes (of `kind`), by id."""
        ...

    def edges(self, type: str | None = None) -> list[Edge]:
        """Edges (of `type`), by (type, source, target)."""
        ...

    def edge(self, source: str, target: str, type: str) -> Edge | None:
        """The edge of `type` between the two nodes (either order for a symmetric type)."""
        ...

    def neighbors(self, nid: str, types: Sequence[str] | None = None) -> list[Edge]:
        """Every edge touching `nid` (of `types`), by (type, source, target)."""
        ...

    def descendants(self, nid: str, type: str = "subsidiary_of") -> list[tuple[str, list[Edge]]]:
        """Nodes with a chain of `type` edges up to `nid` (`nid` excluded), by (depth, id), each
        with the chain of edges from it up to `nid` (a shortest one)."""
        ...


def edge_order(edge: Edge) -> tuple[str, str, str]:
    return (edge.type, edge.source, edge.target)


def check_type(type: str | None) -> None:
    if type is not None and type not in EDGE_TYPES:
        raise ValueError(f"unknown edge type {type!r}; valid: {', '.join(EDGE_TYPES)}")


def read_graph(path: str) -> RelationGraph | None:
    """The graph in the file at `path`, or None when there is none yet."""
    if path == MEMORY or not Path(path).is_file():
        return None
    return RelationGraph.from_json(Path(path).read_bytes(), source=f"graph file {path!r}")


def write_graph(path: str, graph: RelationGraph) -> None:
    if path != MEMORY:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(Path(path), graph.to_json())


class FileBackedGraph:
    """What every shipped store shares: the graph file at `path`, read at open, replaced
    atomically. `_index` builds the store's structures from a graph (a tuple whose first item is
    the graph); they are swapped in one assignment, so a query running during `replace` sees the
    old graph or the new one, never a mix (each method reads `self._state` once).

    The file is watched: reading `_state` looks at its (mtime, size, inode) at most every
    `check_every_s` seconds, and when another process rewrote it (`ragspine graph build` while
    `ragspine serve` runs) the new graph is read and swapped in; a file that cannot be read
    keeps the old graph (a WARNING in the log), and a removed file leaves no graph."""

    check_every_s: float = RELOAD_CHECK_S

    def __init__(self, path: str = MEMORY) -> None:
        self.path = str(path)
        self._reload_lock = threading.Lock()
        self._stamp = file_stamp(self.path)
        loaded = read_graph(self.path)
        self._built = loaded is not None
        self._held: Any = self._index(loaded or RelationGraph())
        self._checked = time.monotonic()

    @property
    def _state(self) -> Any:
        if self.path != MEMORY and time.monotonic() - self._checked >= self.check_every_s:
            self._reload_if_changed()
        return self._held

    def _reload_if_changed(self) -> None:
        with self._reload_lock:
            self._checked = time.monotonic()
            stamp = file_stamp(self.path)
            if stamp == self._stamp:
                return
            try:
                loaded = read_graph(self.path)
            except (OSError, ValueError) as exc:
                _LOG.warning("graph file %s changed but cannot be read (%s); still serving the graph loaded before",
                             self.path, exc)  # fmt: skip
            else:
                self._held, self._built = self._index(loaded or RelationGraph()), loaded is not None
            self._stamp = stamp  # a bad file is tried again when it changes again

    def _index(self, graph: RelationGraph) -> Any:
        raise NotImplementedError

    def replace(self, graph: RelationGraph) -> None:
        with self._reload_lock:
            write_graph(self.path, graph)
            self._held = self._index(graph)
            self._built = True
            self._stamp = file_stamp(self.path)

    def graph(self) -> RelationGraph:
        found: RelationGraph = self._state[0]
        return found

    def is_built(self) -> bool:
        _ = self._state  # look at the file first
        return self._built


def file_stamp(path: str) -> tuple[int, int, int] | None:
    """(mtime in ns, size, inode) of the file at `path`; None when there is none (or ":memory:")."""
    if path == MEMORY:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class InProcessGraphStore(FileBackedGraph):
    """The default GraphStore: adjacency dicts in memory, the graph JSON file beside the store.

    >>> from ragspine.graph.model import Provenance, make_edge
    >>> g = RelationGraph(); a = g.add_node("entity", "A"); b = g.add_node("entity", "B")
    >>> _ = g.add_edge(make_edge(a, b, "subsidiary_of", [Provenance("relations_file", "r.csv", 2)], derivation="declared"))
    >>> s = InProcessGraphStore(); s.replace(g)
    >>> [(n, [e.type for e in path]) for n, path in s.descendants("entity:B")]
    [('entity:A', ['subsidiary_of'])]
    """

    def _index(self, graph: RelationGraph) -> _Adjacency:
        touching: dict[str, list[tuple[str, str, str]]] = defaultdict(list)  # edge keys, by edge_order
        incoming: dict[tuple[str, str], list[tuple[str, str, str]]] = defaultdict(list)
        for key in sorted(graph.edges, key=lambda k: (k[2], k[0], k[1])):
            source, target, type = key
            touching[source].append(key)
            touching[target].append(key)
            incoming[(target, type)].append(key)
        return _Adjacency(graph, dict(touching), dict(incoming))

    def node(self, nid: str) -> Node | None:
        return self.graph().nodes.get(nid)

    def nodes(self, kind: str | None = None) -> list[Node]:
        nodes = self.graph().nodes
        return [nodes[n] for n in sorted(nodes) if kind is None or nodes[n].kind == kind]

    def edges(self, type: str | None = None) -> list[Edge]:
        check_type(type)
        return sorted((e for e in self.graph().edges.values() if type is None or e.type == type), key=edge_order)

    def edge(self, source: str, target: str, type: str) -> Edge | None:
        check_type(type)
        if type in SYMMETRIC and target < source:
            source, target = target, source
        return self.graph().edges.get((source, target, type))

    def neighbors(self, nid: str, types: Sequence[str] | None = None) -> list[Edge]:
        for t in types or ():
            check_type(t)
        state: _Adjacency = self._state
        return [state.graph.edges[k] for k in state.touching.get(nid, []) if not types or k[2] in types]

    def descendants(self, nid: str, type: str = "subsidiary_of") -> list[tuple[str, list[Edge]]]:
        check_type(type)
        state: _Adjacency = self._state
        paths: dict[str, list[Edge]] = {nid: []}
        queue = deque([nid])
        while queue:
            current = queue.popleft()
            for key in state.incoming.get((current, type), []):  # sorted: deterministic first path
                edge = state.graph.edges[key]
                if edge.source not in paths:
                    paths[edge.source] = [edge, *paths[current]]
                    queue.append(edge.source)
        del paths[nid]
        return sorted(paths.items(), key=lambda item: (len(item[1]), item[0]))


class _Adjacency(NamedTuple):
    graph: RelationGraph
    touching: dict[str, list[tuple[str, str, str]]]  # node -> keys of the edges touching it
    incoming: dict[tuple[str, str], list[tuple[str, str, str]]]  # (target, type) -> edge keys


GRAPH_STORES: Registry[GraphStore] = catalog.GRAPH_STORES.bind(GraphStore)


def make_graph_store(spec: str = "in_process", **options: Any) -> GraphStore:
    """The GraphStore `spec` names (RAGSPINE_GRAPH_STORE): in_process, networkx, or a dotted path;
    `path=` is where the graph persists."""
    built = GRAPH_STORES.make(spec, **options)
    assert built is not None  # the registry has no empty-slot name
    return built


def graph_path_for(db_path: str) -> str:
    """Where the graph of the store at `db_path` persists: `<db>.graph.json` (":memory:" for none)."""
    return MEMORY if db_path == MEMORY else f"{db_path}.graph.json"
