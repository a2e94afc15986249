"""The relation graph (graph/ domain): a deterministic typed graph over the controlled dimensions,
the GraphStore seam, the relation-extractor slot and a GraphRAG community skeleton.

    from ragspine.graph import GraphQueries, build_relation_graph, make_graph_store, make_relation_extractor

    graph = build_relation_graph(store, "relations.yaml", extractor=make_relation_extractor("cooccurrence"))
    graph_store = make_graph_store("in_process", path="data/chunks.db.graph.json")
    graph_store.replace(graph)
    GraphQueries(graph_store, store).rollup("ACME")

It is the independent multi-hop surface (roll-ups, peers, derivation traces with full citations),
not a router branch. RESTRICTED chunks never contribute a node, a label, an edge or a summary.
"""

from ragspine.graph.build import build_relation_graph
from ragspine.graph.extract import RELATION_EXTRACTORS, CooccurrenceExtractor, RelationExtractor, make_relation_extractor
from ragspine.graph.facade import BuildReport, GraphService
from ragspine.graph.model import EDGE_TYPES, NODE_KINDS, ChunkRef, Edge, Node, Provenance, RelationGraph
from ragspine.graph.queries import GraphQueries
from ragspine.graph.relations import RelationRow, load_relations
from ragspine.graph.stores import GRAPH_STORES, GraphStore, InProcessGraphStore, graph_path_for, make_graph_store

__all__ = [
    "EDGE_TYPES", "GRAPH_STORES", "NODE_KINDS", "RELATION_EXTRACTORS", "BuildReport", "ChunkRef",
    "CooccurrenceExtractor", "Edge", "GraphQueries", "GraphService", "GraphStore", "InProcessGraphStore", "Node",
    "Provenance", "RelationExtractor", "RelationGraph", "RelationRow", "build_relation_graph", "graph_path_for",
    "load_relations", "make_graph_store", "make_relation_extractor",
]  # fmt: skip
