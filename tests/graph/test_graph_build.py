"""build_relation_graph over a real SQLite store: relations files (YAML, CSV) with file+line
provenance, metadata edges with chunk lineage, the extractor slot, determinism, RESTRICTED."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine.graph import RELATION_EXTRACTORS, build_relation_graph, load_relations, make_relation_extractor
from ragspine.retrieval.model import Chunk, make_chunk_id
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.settings import config
from ragspine.testing.graph_corpus import SECRET, graph_corpus

YAML = """\
entities:
  - entity: ACME_HK
    parent: ACME
    peers: [RIVAL]
    aliases: [艾克美香港]
  - entity: ACME_CN
    parent: ACME
documents:
  - document: summary-2024
    derived_from: [r1, r2]
"""


def _chunk(doc: str, seq: int, text: str, entity: str, label: str = "INTERNAL", period: str = "2024") -> Chunk:
    return Chunk(make_chunk_id(doc, seq, text), doc, seq, text, f"{doc}#p{seq + 1}", title=f"{doc} title",
                 entity=entity, period=period, sensitivity=label)  # fmt: skip


def test_yaml_rows_keep_their_line(tmp_path: Path) -> None:
    (tmp_path / "rel.yaml").write_text(YAML, encoding="utf-8")
    rows = load_relations(tmp_path / "rel.yaml")
    assert [(r.entity or r.document, r.line) for r in rows] == [("ACME_HK", 2), ("ACME_CN", 6), ("summary-2024", 9)]
    assert rows[0].peers == ("RIVAL",) and rows[0].aliases == ("艾克美香港",) and rows[2].derived_from == ("r1", "r2")


def test_csv_rows_keep_their_line_and_split_lists(tmp_path: Path) -> None:
    (tmp_path / "rel.csv").write_text("entity,parent,peers,aliases\nACME_HK,ACME,RIVAL;OTHER,\nACME_CN,ACME,,\n")
    rows = load_relations(tmp_path / "rel.csv")
    assert [(r.entity, r.parent, r.peers, r.line) for r in rows] == [
        ("ACME_HK", "ACME", ("RIVAL", "OTHER"), 2), ("ACME_CN", "ACME", (), 3)]


@pytest.mark.parametrize(("name", "text", "message"), [
    ("r.yaml", "entities:\n  - entity: A\n    owner: B\n", r"line 2: unknown key\(s\) \['owner'\]"),
    ("r.yaml", "entities:\n  - parent: B\n", "line 2: a row needs an 'entity'"),
    ("r.yaml", "entities: [a: [b\n", "not valid YAML"),
    ("r.csv", "entity,parent\nA,B,C\n", "line 2: more cells than columns"),
    ("r.txt", "A,B\n", r"use a \.yaml, \.yml or \.csv file"),
])  # fmt: skip
def test_a_bad_relations_file_names_the_file_and_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=message):
        load_relations(tmp_path / name)


def test_a_self_parent_is_an_error_at_its_line(tmp_path: Path, store: ChunkStore) -> None:
    (tmp_path / "rel.csv").write_text("entity,parent\nA,B\nC,C\n")
    with pytest.raises(ValueError, match="rel.csv' line 3: a subsidiary_of edge needs two different nodes"):
        build_relation_graph(store, tmp_path / "rel.csv")


def test_the_graph_has_typed_edges_with_their_provenance(tmp_path: Path, store: ChunkStore) -> None:
    (tmp_path / "rel.yaml").write_text(YAML, encoding="utf-8")
    store.replace_doc_chunks("r1", [_chunk("r1", 0, "ACME_HK exports fell.", "ACME_HK"),
                                    _chunk("r1", 1, "艾克美香港 and RIVAL cut prices.", "ACME_HK")])  # fmt: skip
    graph = build_relation_graph(store, tmp_path / "rel.yaml")
    sub = graph.edges[("entity:ACME_HK", "entity:ACME", "subsidiary_of")]
    assert [(p.source, p.file.endswith("rel.yaml"), p.line) for p in sub.provenance] == [("relations_file", True, 2)]
    assert sub.derivation == "declared" and sub.verified
    assert ("entity:ACME_HK", "entity:RIVAL", "peer_of") in graph.edges  # symmetric: sorted ends
    derived = graph.edges[("document:summary-2024", "document:r1", "derived_from")]
    assert derived.provenance[0].line == 9
    mentions = graph.edges[("document:r1", "entity:ACME_HK", "mentions")]
    assert [(c.chunk_id.split(":")[1], c.source_locator) for c in mentions.chunk_refs()] == [("0000", "r1#p1"), ("0001", "r1#p2")]
    assert ("document:r1", "period:2024", "in_period") in graph.edges
    assert graph.nodes["document:r1"].attrs["title"] == "r1 title"
    assert graph.nodes["entity:ACME_HK"].attrs["aliases"] == ["艾克美香港"]


def test_none_leaves_the_base_graph_byte_identical(tmp_path: Path, store: ChunkStore) -> None:
    corpus = graph_corpus()
    corpus.ingest(store)
    rel = corpus.relations_csv(tmp_path / "rel.csv")
    base = build_relation_graph(store, rel).to_json()
    assert build_relation_graph(store, rel, extractor=make_relation_extractor("none")).to_json() == base
    assert build_relation_graph(store, rel).to_json() == base  # run to run
    with_cooc = build_relation_graph(store, rel, extractor=make_relation_extractor("cooccurrence"))
    assert with_cooc.to_json() != base
    assert {k for k in with_cooc.edges if k[2] != "co_occurs_with"} == set(build_relation_graph(store, rel).edges)


def test_cooccurrence_lineage_is_the_chunks_that_name_both(store: ChunkStore) -> None:
    store.replace_doc_chunks("r1", [_chunk("r1", 0, "ACME_HK and RIVAL cut prices.", "ACME_HK"),
                                    _chunk("r1", 1, "ACME_HK alone.", "ACME_HK"),
                                    _chunk("r1", 2, "RIVALS are not RIVAL_X.", "ACME_HK")])  # fmt: skip
    store.replace_doc_chunks("r2", [_chunk("r2", 0, "rival opened a plant", "RIVAL")])
    graph = build_relation_graph(store, extractor=make_relation_extractor("cooccurrence"))
    edge = graph.edges[("entity:ACME_HK", "entity:RIVAL", "co_occurs_with")]
    assert [c.chunk_id for c in edge.chunk_refs()] == [store.iter_chunks(doc_id="r1")[0].chunk_id]
    assert edge.weight == 1 and edge.derivation == "cooccurrence"
    assert graph.meta["extractor"] == "cooccurrence"


def test_restricted_chunks_contribute_nothing(tmp_path: Path, store: ChunkStore) -> None:
    store.replace_doc_chunks("open", [_chunk("open", 0, "ACME and RIVAL met.", "ACME")])
    store.replace_doc_chunks("secret", [_chunk("secret", 0, f"{SECRET} ACME buys HIDDEN_CO.", "HIDDEN_CO", "restricted")])
    graph = build_relation_graph(store, extractor=make_relation_extractor("cooccurrence"))
    data = graph.to_json().decode()
    assert SECRET not in data and "HIDDEN_CO" not in data and "document:secret" not in graph.nodes


def test_extractor_names_match_the_settings_and_errors_list_them() -> None:
    assert tuple(RELATION_EXTRACTORS.names) == config.RELATION_EXTRACTORS
    with pytest.raises(ValueError, match="none, cooccurrence, llm"):
        make_relation_extractor("spacy")
    with pytest.raises(ValueError, match="the llm relation extractor needs an LLM"):
        make_relation_extractor("llm", provider=None)
