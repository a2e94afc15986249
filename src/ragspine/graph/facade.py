"""`GraphService`: the graph layer as the CLI, the HTTP API and Python users call it.

Invariants: it builds with the chunk store, relations file and extractor the assembly gave it
(`assembly.make_graph_service`); it answers through `GraphQueries` (RESTRICTED-free, cited); a
global answer uses only communities whose every source chunk is still open and active.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.agent.agent import LLMProvider
from ragspine.graph.build import build_relation_graph
from ragspine.graph.extract import RelationExtractor
from ragspine.graph.model import ChunkRef
from ragspine.graph.queries import GraphQueries, SnippetRetriever
from ragspine.graph.stores import GraphStore
from ragspine.retrieval.store.protocol import ChunkReader


@dataclass
class BuildReport:
    """What a build made and how long it took."""

    nodes: int
    edges: int
    bytes: int
    seconds: float
    extractor: str
    communities: int = 0
    dropped: list[dict[str, str]] = field(default_factory=list)


class GraphService(GraphQueries):
    """Build, store and query the relation graph of one chunk store."""

    def __init__(
        self, graph: GraphStore, store: ChunkReader, *, relations: str | Path | None = None,
        extractor: RelationExtractor | None = None, retriever: SnippetRetriever | None = None,
        provider: LLMProvider | None = None, summary_chars: int = 600,
    ) -> None:  # fmt: skip
        super().__init__(graph, store)
        self.relations, self.extractor, self.retriever = relations, extractor, retriever
        self.provider, self.summary_chars = provider, summary_chars

    def build(self, *, communities: bool = False) -> BuildReport:
        """Build the graph from the store (+ relations file, + extractor) and store it;
        `communities`: add GraphRAG community summaries (the [graph] extra; by the LLM when one is set)."""
        start = time.perf_counter()
        graph = build_relation_graph(self.store, self.relations, extractor=self.extractor)
        found = 0
        if communities:
            from ragspine.graph.community import build_communities
            from ragspine.retrieval.raptor.summary import ExtractiveSummarizer, LLMSummarizer, Summarizer

            summarizer: Summarizer = (LLMSummarizer(self.provider, self.summary_chars) if self.provider is not None
                                      else ExtractiveSummarizer(self.summary_chars))  # fmt: skip
            build_communities(graph, self.store, summarizer)
            found = sum(1 for n in graph.nodes.values() if n.kind == "community")
        self.graph.replace(graph)
        return BuildReport(len(graph.nodes), len(graph.edges), len(graph.to_json()), time.perf_counter() - start,
                           graph.meta.get("extractor", "none"), found,
                           list(getattr(self.extractor, "dropped", [])))  # fmt: skip

    def rollup(self, entity: str, *, period: str | None = None, query: str | None = None,
               top_k: int = 10) -> dict[str, Any]:  # fmt: skip
        """The roll-up; with `query`, also the narrative search restricted to its members."""
        if query is None:
            return super().rollup(entity, period=period)
        if self.retriever is None:
            raise ValueError("a roll-up search needs a retriever; this graph service has none")
        return self.rollup_search(self.retriever, entity, query, period=period, top_k=top_k)

    def global_answer(self, question: str, *, top: int = 3) -> dict[str, Any]:
        """GraphRAG's global-question mode over the stored community summaries."""
        from ragspine.graph.community import global_answer

        seen = self._visibility()
        if seen.check:
            hidden = [n.id for n in self.graph.nodes("community")
                      if len(seen.refs(ChunkRef(**s) for s in n.attrs.get("sources", []))) < len(n.attrs.get("sources", []))]  # fmt: skip
            if hidden:
                raise ValueError("the store changed since the community summaries were made: run "
                                 "`ragspine graph build --communities` again")  # fmt: skip
        if not question.strip():
            raise ValueError("question is empty")
        return global_answer(self.graph, question, self.provider, top=top)
