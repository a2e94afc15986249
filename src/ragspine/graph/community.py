"""GraphRAG skeleton ([graph] + an LLM): entity communities, their summaries, global questions.

    graph = build_communities(graph, store, summarizer=LLMSummarizer(provider))
    answer = global_answer(graph_store, "What themes run across the group?", provider)

Invariants:
- Communities are networkx Louvain over the entity nodes and the entity-entity edges (weights),
  with a fixed seed: the same graph gives the same communities (sorted, numbered by size then name).
- A community summary is a synthesis node (`community:N`, attrs is_synthesis=True, citable=False)
  made by a raptor `Summarizer` from its members' open chunks only (the summarizer raises on a
  RESTRICTED one); its `sources` are the chunks it drew on, the citations a global answer gives.
- A global answer is written from community summaries only; it cites the member chunks, never a
  summary (a summary is never a citable fact), and without an LLM it returns the summaries as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragspine.agent.agent import LLMProvider
from ragspine.graph.build import open_chunks
from ragspine.graph.model import ChunkRef, Provenance, RelationGraph, make_edge
from ragspine.graph.networkx_store import networkx
from ragspine.graph.stores import GraphStore
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.raptor.summary import Summarizer
from ragspine.retrieval.store.protocol import ChunkReader

DEFAULT_SEED = 42
ENTITY_EDGES = ("subsidiary_of", "peer_of", "co_occurs_with", "supplier_of", "customer_of", "related_to")
DEFAULT_MEMBER_CHUNKS = 4  # chunks of each member entity a summary is made from at most
DEFAULT_TOP_COMMUNITIES = 3


def detect_communities(graph: RelationGraph, *, seed: int = DEFAULT_SEED, resolution: float = 1.0) -> list[list[str]]:
    """Entity communities (node ids), largest first then by first id; singletons dropped."""
    nx = networkx()
    g = nx.Graph()
    g.add_nodes_from(sorted(n for n, node in graph.nodes.items() if node.kind == "entity"))
    for key in sorted(graph.edges):
        edge = graph.edges[key]
        if edge.type in ENTITY_EDGES:
            old = g.get_edge_data(edge.source, edge.target, {}).get("weight", 0)
            g.add_edge(edge.source, edge.target, weight=old + edge.weight)
    found = nx.community.louvain_communities(g, weight="weight", resolution=resolution, seed=seed)
    groups = [sorted(c) for c in found if len(c) > 1]
    return sorted(groups, key=lambda c: (-len(c), c[0]))


def build_communities(
    graph: RelationGraph, store: ChunkReader, summarizer: Summarizer, *, seed: int = DEFAULT_SEED,
    member_chunks: int = DEFAULT_MEMBER_CHUNKS,
) -> RelationGraph:  # fmt: skip
    """`graph` with a synthesis node per community (its summary) and member_of edges."""
    by_entity: dict[str, list[Chunk]] = {}
    for chunk in open_chunks(store):
        if chunk.entity and len(by_entity.setdefault(chunk.entity, [])) < member_chunks:
            by_entity[chunk.entity].append(chunk)
    for number, members in enumerate(detect_communities(graph, seed=seed), start=1):
        chunks = [c for m in members for c in by_entity.get(m.partition(":")[2], [])]
        summary = summarizer.summarize(chunks) if chunks else None
        sources = [c for c in chunks if summary is not None and c.chunk_id in summary.sources]
        refs = tuple(ChunkRef(c.chunk_id, c.doc_id, c.source_locator) for c in sources)
        cid = graph.add_node("community", str(number), is_synthesis=True, citable=False,
                             summary=summary.text if summary else "", summarizer=summary.summarizer if summary else "",
                             members=[m.partition(":")[2] for m in members], sources=[r.to_dict() for r in refs])  # fmt: skip
        for member in members:
            graph.add_edge(make_edge(member, cid, "member_of", [Provenance("community", chunks=refs)],
                                     derivation="synthesis"))  # fmt: skip
    graph.meta["communities"] = {"seed": seed}
    return graph


def global_answer(
    graph: GraphStore, question: str, provider: LLMProvider | None = None, *, top: int = DEFAULT_TOP_COMMUNITIES
) -> dict[str, Any]:
    """An answer from the community summaries sharing the most words with `question`, citing
    their member chunks; the summaries themselves (no LLM) when `provider` is None."""
    communities = [n for n in graph.nodes("community") if n.attrs.get("summary")]
    if not communities:
        raise ValueError("the graph has no community summaries: run `ragspine graph build --communities`")
    words = set(tokenize(question))
    ranked = sorted(communities, key=lambda n: (-len(words & set(tokenize(str(n.attrs["summary"])))), int(n.key)))
    picked = ranked[:top]
    summaries = [{"community": n.id, "members": n.attrs.get("members", []), "summary": n.attrs["summary"],
                  "is_synthesis": True, "citable": False} for n in picked]  # fmt: skip
    citations = sorted({ChunkRef(**s) for n in picked for s in n.attrs.get("sources", [])})
    if provider is None:
        text = "\n\n".join(str(s["summary"]) for s in summaries)
    else:
        text = provider.chat(_messages(question, summaries), temperature=0).strip()
    return {"question": question, "answer": text, "mode": "llm" if provider else "summaries",
            "communities": summaries, "citations": [c.to_dict() for c in citations]}  # fmt: skip


def _messages(question: str, summaries: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    context = "\n\n".join(f"[{s['community']}] members: {', '.join(s['members'])}\n{s['summary']}" for s in summaries)
    return [
        {"role": "system", "content": "You answer broad questions from community summaries. Use only them."},
        {"role": "user", "content": f"Summaries:\n{context}\n\nQuestion: {question}"},
    ]
