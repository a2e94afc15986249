"""A generated corpus of company groups, subsidiaries, peers and reports, with the answers a
roll-up and a peer comparison must give (for the graph tests and `make bench-graph`).

    corpus = graph_corpus(groups=3, subsidiaries=2, periods=("2023", "2024"), chunks_per_report=2)
    corpus.ingest(store)                          # through replace_doc_chunks
    corpus.relations_csv(path)                    # entity,parent,peers,aliases
    corpus.rollup_docs["G1"]                      # every open report of G1's group

Invariants: deterministic (no randomness; names and texts are functions of the indices); each
group is a parent with `subsidiaries` children and each child one grandchild; group i's parent
peers group i+1's; each report names its entity, its parent (so cooccurrence finds the pair) and,
every third chunk, a peer; every `restricted_every`-th report is RESTRICTED and carries SECRET.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.retrieval.model import Chunk, make_chunk_id
from ragspine.retrieval.store.protocol import ChunkWriter

SECRET = "SECRET-GRAPH-4417"


@dataclass
class GraphCorpus:
    """The reports (doc_id -> chunks), the relations and the expected answers."""

    docs: dict[str, list[Chunk]] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)  # entity -> parent
    peers: dict[str, list[str]] = field(default_factory=dict)  # entity -> declared peers
    aliases: dict[str, list[str]] = field(default_factory=dict)
    rollup_docs: dict[str, set[str]] = field(default_factory=dict)  # group root -> open doc ids
    open_docs: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (entity, period) -> open doc ids
    restricted_docs: set[str] = field(default_factory=set)

    @property
    def chunks(self) -> int:
        return sum(len(c) for c in self.docs.values())

    def ingest(self, store: ChunkWriter) -> None:
        for doc_id in sorted(self.docs):
            store.replace_doc_chunks(doc_id, self.docs[doc_id])

    def ingest_texts(self, ws: Any) -> None:
        """Ingest each report through a `Workspace` (`ingest_text`: its chunker makes the chunks;
        the parts are paragraphs), with the report's entity, period, title and label."""
        for doc_id in sorted(self.docs):
            first = self.docs[doc_id][0]
            ws.ingest_text("\n\n".join(c.text for c in self.docs[doc_id]), doc_id, title=first.title,
                           entity=first.entity, period=first.period, topic=first.topic,
                           geography=first.geography, sensitivity=first.sensitivity)  # fmt: skip

    def relations_csv(self, path: Path) -> Path:
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["entity", "parent", "peers", "aliases"])
            for entity in sorted(set(self.parent) | set(self.peers) | set(self.aliases)):
                writer.writerow([entity, self.parent.get(entity, ""), ";".join(self.peers.get(entity, [])),
                                 ";".join(self.aliases.get(entity, []))])  # fmt: skip
        return path


def graph_corpus(
    *, groups: int = 3, subsidiaries: int = 2, periods: tuple[str, ...] = ("2023", "2024"),
    chunks_per_report: int = 2, restricted_every: int = 5,
) -> GraphCorpus:  # fmt: skip
    """The corpus; chunks = groups * (1 + 2 * subsidiaries) * len(periods) * chunks_per_report."""
    corpus = GraphCorpus()
    roots = [f"G{g}" for g in range(1, groups + 1)]
    for g, root in enumerate(roots):
        members = [root]
        for s in range(1, subsidiaries + 1):
            child, grandchild = f"{root}_S{s}", f"{root}_S{s}_U"
            corpus.parent[child], corpus.parent[grandchild] = root, child
            members += [child, grandchild]
        corpus.aliases[root] = [f"{root} Holdings"]
        if g + 1 < len(roots):
            corpus.peers[root] = [roots[g + 1]]
        corpus.rollup_docs[root] = set()
        for entity in members:
            _reports(corpus, root, entity, roots, periods, chunks_per_report, restricted_every)
    return corpus


def _reports(corpus: GraphCorpus, root: str, entity: str, roots: list[str], periods: tuple[str, ...],
             per_report: int, restricted_every: int) -> None:  # fmt: skip
    parent = corpus.parent.get(entity, "")
    peer = roots[(roots.index(root) + 1) % len(roots)]
    for period in periods:
        doc_id = f"report-{entity}-{period}"
        restricted = (len(corpus.docs) + 1) % restricted_every == 0
        chunks = []
        for seq in range(per_report):
            text = (f"{entity} annual report {period}, part {seq}: revenue and exports of {entity}"
                    + (f", a subsidiary of {parent}" if parent else "")
                    + (f"; compared with {peer}" if seq % 3 == 2 else "")
                    + (f". {SECRET} layoffs plan" if restricted else ".")) # fmt: skip
            chunks.append(Chunk(make_chunk_id(doc_id, seq, text), doc_id, seq, text, f"{doc_id}#p{seq + 1}",
                                title=f"{entity} report {period}", entity=entity, period=period, topic="annual report",
                                geography="CN", sensitivity="RESTRICTED" if restricted else "INTERNAL"))  # fmt: skip
        corpus.docs[doc_id] = chunks
        if restricted:
            corpus.restricted_docs.add(doc_id)
            continue
        corpus.rollup_docs[root].add(doc_id)
        corpus.open_docs.setdefault((entity, period), set()).add(doc_id)
