"""The relation-extractor slot beside `build_relation_graph`: relations that exist only in text.

    from ragspine.graph import make_relation_extractor
    extractor = make_relation_extractor("cooccurrence")     # or RAGSPINE_RELATION_EXTRACTOR

Invariants:
- `none` (the default) builds nothing: the base graph is byte-identical to a build without the slot.
- An extractor is only ever given open chunks; each checks again (`check_open`) and raises if a
  RESTRICTED one slipped through, so RESTRICTED text never reaches an edge or a model.
- `cooccurrence` is deterministic: one `co_occurs_with` edge per pair of controlled entities found
  in one chunk (the chunk's own entity counts), weight = the chunks they share, lineage = those
  chunks' ids and locators (the first `max_refs`, in chunk order, when there are more).
- `llm` (retrieval via the [llm] provider) stamps every edge model-derived and unverified, and
  screens both endpoints through the security gate (`graph.llm_extract`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations
from typing import Any, Protocol, runtime_checkable

from ragspine.graph.model import ChunkRef, Edge, Provenance, make_edge, node_id
from ragspine.graph.vocabulary import Vocabulary
from ragspine import catalog
from ragspine.registry import Registry
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.raptor.summary import check_open

DEFAULT_MAX_REFS = 100


@runtime_checkable
class RelationExtractor(Protocol):
    """Finds relations between controlled entities in open chunks; returns typed edges between
    `entity:` nodes, each with its provenance."""

    name: str

    def extract(self, chunks: Sequence[Chunk], vocabulary: Vocabulary) -> list[Edge]: ...


def ref(chunk: Chunk) -> ChunkRef:
    """The citation of `chunk`."""
    return ChunkRef(chunk.chunk_id, chunk.doc_id, chunk.source_locator)


class CooccurrenceExtractor:
    """`co_occurs_with` between the controlled entities found in one chunk.

    >>> c = Chunk("d:0001:ab", "d", 1, "ACME and Rival both cut prices.", "d#p1", entity="ACME")
    >>> [(e.source, e.target, e.weight) for e in CooccurrenceExtractor().extract(
    ...     [c], Vocabulary.from_names({"ACME": [], "Rival": []}))]
    [('entity:ACME', 'entity:Rival', 1)]
    """

    name = "cooccurrence"

    def __init__(self, max_refs: int = DEFAULT_MAX_REFS) -> None:
        if isinstance(max_refs, bool) or not isinstance(max_refs, int) or max_refs < 1:
            raise ValueError(f"cooccurrence max_refs must be a positive integer, got {max_refs!r}")
        self.max_refs = max_refs

    def extract(self, chunks: Sequence[Chunk], vocabulary: Vocabulary) -> list[Edge]:
        check_open(chunks)
        known = set(vocabulary.names)
        refs: dict[tuple[str, str], list[ChunkRef]] = defaultdict(list)
        weights: dict[tuple[str, str], int] = defaultdict(int)
        for chunk in chunks:
            found = set(vocabulary.find(chunk.text))
            if chunk.entity in known:
                found.add(chunk.entity)
            for pair in combinations(sorted(found), 2):
                weights[pair] += 1
                if len(refs[pair]) < self.max_refs:
                    refs[pair].append(ref(chunk))
        return [
            make_edge(node_id("entity", a), node_id("entity", b), "co_occurs_with",
                      [Provenance("cooccurrence", chunks=tuple(refs[(a, b)]))], derivation="cooccurrence",
                      weight=weights[(a, b)])
            for a, b in sorted(weights)
        ]  # fmt: skip


RELATION_EXTRACTORS: Registry[RelationExtractor] = catalog.RELATION_EXTRACTORS.bind(RelationExtractor)


def make_relation_extractor(spec: str = "none", **options: Any) -> RelationExtractor | None:
    """The extractor `spec` names (RAGSPINE_RELATION_EXTRACTOR): none (None), cooccurrence, llm
    (needs `provider=`), or a dotted path package.module:Class."""
    return RELATION_EXTRACTORS.make(spec, **options)
