"""The conformance suite every `GraphStore` implementation runs.

Subclass `GraphStoreSuite` in a `Test*` class and give it one fixture, `open_store`: a callable
`(path) -> GraphStore` that opens the store persisting at `path` (a file the fixture's tmp_path
owns) the way a new process would. Each test builds its graph, stores it, reopens and asks.

    class TestMyGraphStore(GraphStoreSuite):
        @pytest.fixture
        def open_store(self):
            return lambda path: MyGraphStore(path=str(path))

Needs pytest; import this module from tests only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ragspine.graph.model import ChunkRef, Provenance, RelationGraph, make_edge
from ragspine.graph.stores import GraphStore, InProcessGraphStore

OpenStore = Callable[[Path], GraphStore]


def sample_graph() -> RelationGraph:
    """A group (ACME > ACME_HK > ACME_HK_TRADE, ACME > ACME_CN), a peer, a diamond, documents."""
    g = RelationGraph()
    g.meta = {"data_version": 7, "extractor": "none"}
    for name in ("ACME", "ACME_HK", "ACME_CN", "ACME_HK_TRADE", "RIVAL", "JV"):
        g.add_node("entity", name)
    g.set_attrs("entity:ACME", aliases=["艾克美"])
    g.add_node("document", "r1", title="ACME HK 2024")
    g.add_node("period", "2024")
    line = 1
    for child, parent in (("ACME_HK", "ACME"), ("ACME_CN", "ACME"), ("ACME_HK_TRADE", "ACME_HK"),
                          ("JV", "ACME_HK"), ("JV", "ACME_CN")):  # fmt: skip
        line += 1
        g.add_edge(make_edge(f"entity:{child}", f"entity:{parent}", "subsidiary_of",
                             [Provenance("relations_file", "rel.csv", line)], derivation="declared"))  # fmt: skip
    g.add_edge(make_edge("entity:RIVAL", "entity:ACME", "peer_of", [Provenance("relations_file", "rel.csv", 9)],
                         derivation="declared"))  # fmt: skip
    cite = (ChunkRef("r1:0000:aa", "r1", "r1#p1"),)
    g.add_edge(make_edge("document:r1", "entity:ACME_HK", "mentions", [Provenance("chunk_metadata", chunks=cite)],
                         derivation="metadata"))  # fmt: skip
    g.add_edge(make_edge("document:r1", "period:2024", "in_period", [Provenance("chunk_metadata", chunks=cite)],
                         derivation="metadata"))  # fmt: skip
    return g


class GraphStoreSuite:
    """What every GraphStore must do (see the module docstring)."""

    @pytest.fixture
    def open_store(self) -> OpenStore:
        raise NotImplementedError("override the open_store fixture")

    @pytest.fixture
    def stored(self, open_store: OpenStore, tmp_path: Path) -> GraphStore:
        """A store holding `sample_graph`, reopened from its file."""
        open_store(tmp_path / "g.json").replace(sample_graph())
        return open_store(tmp_path / "g.json")

    def test_an_unbuilt_store_is_empty_and_says_so(self, open_store: OpenStore, tmp_path: Path) -> None:
        store = open_store(tmp_path / "none.json")
        assert not store.is_built()
        assert store.nodes() == [] and store.edges() == [] and store.neighbors("entity:ACME") == []
        assert store.descendants("entity:ACME") == []

    def test_the_file_round_trips_byte_for_byte(self, stored: GraphStore, tmp_path: Path) -> None:
        assert stored.is_built()
        assert (tmp_path / "g.json").read_bytes() == sample_graph().to_json() == stored.graph().to_json()
        assert stored.graph().meta == {"data_version": 7, "extractor": "none"}

    def test_nodes_and_edges_come_in_a_fixed_order(self, stored: GraphStore) -> None:
        assert [n.id for n in stored.nodes("entity")] == sorted(f"entity:{n}" for n in
                                                                 ("ACME", "ACME_HK", "ACME_CN", "ACME_HK_TRADE", "RIVAL", "JV"))  # fmt: skip
        edges = stored.edges()
        assert [(e.type, e.source, e.target) for e in edges] == sorted((e.type, e.source, e.target) for e in edges)
        assert len(stored.edges("subsidiary_of")) == 5
        assert stored.node("entity:ACME") is not None and stored.node("entity:ACME").attrs["aliases"] == ["艾克美"]  # type: ignore[union-attr]
        assert stored.node("entity:NOPE") is None

    def test_descendants_walk_every_chain_shortest_first(self, stored: GraphStore) -> None:
        found = stored.descendants("entity:ACME")
        assert [n for n, _ in found] == ["entity:ACME_CN", "entity:ACME_HK", "entity:ACME_HK_TRADE", "entity:JV"]
        paths = dict(found)
        assert [e.source for e in paths["entity:ACME_HK_TRADE"]] == ["entity:ACME_HK_TRADE", "entity:ACME_HK"]
        assert paths["entity:JV"][0].target == "entity:ACME_CN"  # the diamond: the first parent by id
        assert all(p.line > 1 for e in paths["entity:JV"] for p in e.provenance)
        assert [n for n, _ in stored.descendants("entity:ACME_HK_TRADE")] == []

    def test_neighbors_and_edges_are_symmetric_where_the_relation_is(self, stored: GraphStore) -> None:
        peers = stored.neighbors("entity:ACME", ["peer_of"])
        assert [e.other("entity:ACME") for e in peers] == ["entity:RIVAL"]
        assert stored.edge("entity:ACME", "entity:RIVAL", "peer_of") == stored.edge("entity:RIVAL", "entity:ACME", "peer_of")
        assert stored.edge("entity:ACME", "entity:ACME_HK", "subsidiary_of") is None  # directed
        touching = stored.neighbors("entity:ACME_HK")
        assert {e.type for e in touching} == {"subsidiary_of", "mentions"}
        assert [(e.type, e.source, e.target) for e in touching] == sorted((e.type, e.source, e.target) for e in touching)

    def test_an_unknown_edge_type_is_refused_naming_the_valid_ones(self, stored: GraphStore) -> None:
        with pytest.raises(ValueError, match="subsidiary_of"):
            stored.neighbors("entity:ACME", ["owns"])
        with pytest.raises(ValueError, match="unknown edge type"):
            stored.edges("owns")

    def test_replace_swaps_the_whole_graph(self, stored: GraphStore, open_store: OpenStore, tmp_path: Path) -> None:
        smaller = RelationGraph()
        smaller.add_node("entity", "ONLY")
        stored.replace(smaller)
        assert [n.id for n in stored.nodes()] == ["entity:ONLY"]
        assert [n.id for n in open_store(tmp_path / "g.json").nodes()] == ["entity:ONLY"]

    def test_answers_equal_the_in_process_reference(self, stored: GraphStore, tmp_path: Path) -> None:
        reference = InProcessGraphStore(str(tmp_path / "g.json"))
        for nid in ("entity:ACME", "entity:ACME_HK", "entity:JV", "document:r1"):
            assert stored.neighbors(nid) == reference.neighbors(nid)
            assert stored.descendants(nid) == reference.descendants(nid)
        assert stored.edges() == reference.edges() and stored.nodes() == reference.nodes()
