"""`build_relation_graph`: the deterministic typed graph over the controlled dimensions.

    from ragspine.graph import build_relation_graph
    graph = build_relation_graph(store, "relations.yaml")          # + extractor=...

Invariants:
- Chunks are read only through the chunk-store Protocol (`iter_chunks`: the active set). A
  RESTRICTED chunk contributes nothing: no node, no label, no edge, no provenance; a name only a
  RESTRICTED chunk carries is not in the graph (unless the user's relations file names it).
- From chunk metadata: a document node per document (title from its open chunks), a node per
  entity / period / topic / geography value, and document -> value edges (mentions, in_period,
  about_topic, in_geography) whose provenance is the chunks (ids and locators) that carry it.
- From the relations file: subsidiary_of (entity -> parent), peer_of, derived_from (document ->
  source document), each with the file and line that declared it; aliases feed the vocabulary.
- The same store, file and extractor give the same graph, byte for byte (`RelationGraph.to_json`);
  with no extractor the graph is exactly the base graph.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from ragspine.graph.extract import RelationExtractor, ref
from ragspine.graph.model import METADATA_EDGES, ChunkRef, Provenance, RelationGraph, make_edge, node_id
from ragspine.graph.relations import RelationRow, load_relations
from ragspine.graph.vocabulary import Vocabulary
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.store.protocol import ChunkReader


def open_chunks(store: ChunkReader) -> list[Chunk]:
    """The store's active chunks a caller may see (RESTRICTED ones dropped), in store order."""
    return [c for c in store.iter_chunks() if not is_restricted(c.sensitivity)]


def build_relation_graph(
    store: ChunkReader,
    relations: str | Path | Sequence[RelationRow] | None = None,
    *,
    extractor: RelationExtractor | None = None,
) -> RelationGraph:
    """The relation graph of `store`'s open chunks, the relations file (a path or its rows) and
    what `extractor` finds in the chunks' text (None: nothing)."""
    rows = load_relations(relations) if isinstance(relations, (str, Path)) else list(relations or [])
    version = store.data_version()  # read first: a write racing the read makes the graph look stale, never current
    chunks = open_chunks(store)
    graph = RelationGraph()
    graph.meta = {"data_version": version, "extractor": extractor.name if extractor is not None else "none"}
    _add_metadata(graph, chunks)
    _add_relations(graph, rows)
    if extractor is not None:
        vocabulary = entity_vocabulary(graph)
        for edge in extractor.extract(chunks, vocabulary):
            for end in (edge.source, edge.target):
                if end not in graph.nodes:
                    graph.add_node("entity", end.partition(":")[2], derivation=edge.derivation)
            graph.add_edge(edge)
    return graph


def entity_vocabulary(graph: RelationGraph) -> Vocabulary:
    """Every entity node's name and aliases."""
    names = {n.key: tuple(n.attrs.get("aliases", ())) for n in graph.nodes.values() if n.kind == "entity"}
    return Vocabulary.from_names(names)


def _add_metadata(graph: RelationGraph, chunks: Sequence[Chunk]) -> None:
    refs: dict[tuple[str, str, str], list[ChunkRef]] = defaultdict(list)
    titles: dict[str, str] = {}
    for chunk in chunks:
        titles.setdefault(chunk.doc_id, chunk.title)
        for field, edge_type in METADATA_EDGES:
            value = getattr(chunk, field).strip()
            if value:
                refs[(chunk.doc_id, field, value)].append(ref(chunk))
    for doc_id in sorted(titles):
        graph.add_node("document", doc_id, **({"title": titles[doc_id]} if titles[doc_id] else {}))
    kinds = dict(METADATA_EDGES)
    for doc_id, field, value in sorted(refs):
        target = graph.add_node(field, value)
        graph.add_edge(make_edge(node_id("document", doc_id), target, kinds[field],
                                 [Provenance("chunk_metadata", chunks=tuple(refs[(doc_id, field, value)]))],
                                 derivation="metadata"))  # fmt: skip


def _add_relations(graph: RelationGraph, rows: Sequence[RelationRow]) -> None:
    for row in rows:
        try:
            _add_row(graph, row)
        except ValueError as exc:
            raise ValueError(f"relations file {row.file!r} line {row.line}: {exc}") from None


def _add_row(graph: RelationGraph, row: RelationRow) -> None:
    where = Provenance("relations_file", file=row.file, line=row.line)
    if row.document:
        doc = graph.add_node("document", row.document)
        for source in row.derived_from:
            graph.add_edge(make_edge(doc, graph.add_node("document", source), "derived_from", [where],
                                     derivation="declared"))  # fmt: skip
        return
    entity = graph.add_node("entity", row.entity)
    if row.aliases:
        known = tuple(graph.nodes[entity].attrs.get("aliases", ()))
        graph.set_attrs(entity, aliases=sorted({*known, *row.aliases}))
    if row.parent:
        graph.add_edge(make_edge(entity, graph.add_node("entity", row.parent), "subsidiary_of", [where],
                                 derivation="declared"))  # fmt: skip
    for peer in row.peers:
        graph.add_edge(make_edge(entity, graph.add_node("entity", peer), "peer_of", [where], derivation="declared"))
