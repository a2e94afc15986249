"""Both shipped GraphStores run the conformance suite; the networkx one's missing-extra error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ragspine.extras import MissingExtraError
from ragspine.graph import GRAPH_STORES, InProcessGraphStore, make_graph_store
from ragspine.graph.networkx_store import NetworkXGraphStore
from ragspine.settings import config
from ragspine.testing.graph_store import GraphStoreSuite, OpenStore, sample_graph


class TestInProcessGraphStore(GraphStoreSuite):
    @pytest.fixture
    def open_store(self) -> OpenStore:
        return lambda path: InProcessGraphStore(str(path))


class TestNetworkXGraphStore(GraphStoreSuite):
    @pytest.fixture
    def open_store(self) -> OpenStore:
        return lambda path: make_graph_store("networkx", path=str(path))


def test_the_registry_names_equal_the_settings_choices() -> None:
    assert tuple(GRAPH_STORES.names) == config.GRAPH_STORES


def test_networkx_store_gives_the_algorithms_a_networkx_graph(tmp_path: Path) -> None:
    store = NetworkXGraphStore(str(tmp_path / "g.json"))
    store.replace(sample_graph())
    g = store.nx_graph()
    assert g.number_of_edges() == len(sample_graph().edges) and g.has_edge("entity:ACME_HK", "entity:ACME", key="subsidiary_of")


def test_without_networkx_the_error_names_the_graph_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "networkx", None)  # what an install without the extra sees
    with pytest.raises(MissingExtraError, match=r"pip install 'ragspine\[graph\]'"):
        make_graph_store("networkx", path=str(tmp_path / "g.json"))


def test_an_unknown_store_lists_the_valid_names() -> None:
    with pytest.raises(ValueError, match="in_process, networkx"):
        make_graph_store("neo4j")


def test_a_corrupt_graph_file_says_to_rebuild(tmp_path: Path) -> None:
    (tmp_path / "g.json").write_text("{not json")
    with pytest.raises(ValueError, match="ragspine graph build"):
        InProcessGraphStore(str(tmp_path / "g.json"))
