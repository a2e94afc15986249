"""Retrieval over a RAPTOR tree: leaves (detail), nodes (themes), or both (the collapsed tree).

    retriever = make_raptor_retriever(base, mode="collapsed")   # base: a NarrativeIndexRetriever with an embedding backend
    retriever.build()                                          # or `ragspine raptor build`
    snippets = retriever.retrieve("what themes recur in the 2024 reports?")

Invariants:
- a node snippet is marked `is_synthesis: True, citable: False`; its `lineage` carries the union
  of its members' doc ids, chunk ids and locators, and `members` the member chunks its summary
  drew on (read at query time, in one batch for all the nodes served, from the chunks the
  pipeline ranks: active and not RESTRICTED, else left out), which is what `ask` cites; leaf
  snippets are the base retriever's, unchanged;
- nodes are served only from a tree built at the store's current data_version and only without
  filters, given or read from the query by the filter extractor (a node spans documents a
  filter may exclude: filters narrow, never widen); otherwise
  the leaves alone are returned and the lineage says why;
- nodes are served only from a tree built at the store's current data_version (a tree another
  process built since is re-read: one row read per stale query); the store's writes do not
  rebuild it (`ragspine raptor build` does), so `status()["stale"]` / `behind` say how far off
  it is;
- a node's `lineage.tree_data_version` is `visible_version()`: a digest of the tree's leaves (chunk
  ids, which carry their text's digest, of chunks that were not RESTRICTED), never the store's
  write counter, which counts RESTRICTED writes too (issue 34 #6);
- nothing here makes the store's vectors file: constructing the retriever, searching and
  `build()` never do, so a BM25-only store stays so (its leaves are BM25's; `build()` refuses with
  `NoVectors` until `ragspine embed` made the vectors, so no node is served before);
- nodes are ranked by the cosine of the query vector (the index's embedding backend) with the
  node vectors (the vector the dense channel just computed for the same query, when there is
  one: embedded once); `collapsed`
  fuses the leaf and node rankings by RRF, ties by (-score, id).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from ragspine.agent.agent import LLMProvider
from ragspine.errors import RagspineError
from ragspine.retrieval.fusion.rrf import DEFAULT_RRF_K, rrf_fuse
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever, SnippetRun
from ragspine.retrieval.raptor.build import BuildReport, RaptorConfig, build_tree, centre
from ragspine.retrieval.raptor.summary import ExtractiveSummarizer, LLMSummarizer, Summarizer
from ragspine.retrieval.raptor.tree import Node, RaptorTree
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.snippet import Snippet
from ragspine.retrieval.vector.arrays import as_matrix, unit_rows
from ragspine.retrieval.vector.dense.channel import recent_query_vector
from ragspine.retrieval.vector.embeddings.support import embed_queries

RAPTOR_MODES = ("leaves", "nodes", "collapsed")
_LABEL_ORDER = ("PUBLIC", "INTERNAL", "CONFIDENTIAL")
_LOG = logging.getLogger(__name__)


class NoVectors(RagspineError, ValueError):
    """A RAPTOR build over a store without chunk vectors (a BM25-only store): `ragspine embed`
    makes them; the build makes none."""


class RaptorRetriever(NarrativeIndexRetriever):
    """A NarrativeIndexRetriever that also serves the synthesis nodes of its store's tree."""

    def __init__(
        self,
        base: NarrativeIndexRetriever,
        tree: RaptorTree,
        *,
        mode: str = "collapsed",
        config: RaptorConfig = RaptorConfig(),
        summarizer: Summarizer | None = None,
    ) -> None:
        if mode not in RAPTOR_MODES:
            raise ValueError(f"RAPTOR mode {mode!r} is not one of {', '.join(RAPTOR_MODES)}")
        if base.index.embedding_backend is None:  # the tree clusters chunk vectors
            raise ValueError(
                "RAPTOR clusters chunk vectors: give the retriever an embedding backend "
                "(RAGSPINE_EMBEDDING, or build_narrative_retriever(embedding_backend=...))"
            )
        super().__init__(base.index, retry_without_filters=base.retry_without_filters,
                         filter_extractor=base.filter_extractor, postprocessor=base.postprocessor,
                         plan=base.plan, visual=base.visual)  # fmt: skip
        self.tree = tree
        self.mode = mode
        self.config = config
        self.summarizer = summarizer if summarizer is not None else ExtractiveSummarizer()
        self._matrix: tuple[int, list[Node], np.ndarray] | None = None
        self._visible: tuple[int | None, str] | None = None

    def build(self, *, full: bool = False) -> BuildReport:
        """Update the tree to the store's current data_version (incrementally unless `full`).
        It reads the stored vectors and makes none: over a BM25-only store (no vectors file) it
        raises `NoVectors` and writes nothing, the tree left as it was."""
        self.index.retriever()  # attaches a vectors file another process (`ragspine embed`) made since
        dense = self.index.dense
        if dense is None:
            raise NoVectors("no vectors: run `ragspine embed` first")
        report = build_tree(self.index.store, self.index.vector_lookup, self.tree, self.summarizer, self.config,
                            model_id=dense.vectors.model_id or "", full=full)  # fmt: skip
        self._matrix = None
        return report

    def visible_version(self) -> str:
        """The loaded tree's version as any caller may see it: the first 16 hex digits of the
        SHA-256 of its sorted leaf chunk ids (no leaf is RESTRICTED, and a chunk id changes with
        its text), kept per loaded tree. Two trees over the same visible chunks share it."""
        loaded = self.tree.data_version
        if self._visible is None or self._visible[0] != loaded:
            leaves = sorted({leaf.chunk_id for node in self.tree.nodes.values() for leaf in node.leaves})
            digest = hashlib.sha256("\n".join(leaves).encode("utf-8")).hexdigest()[:16]
            self._visible = (loaded, digest)
        return self._visible[1]

    def close(self) -> None:
        """Close the tree's file (the store and the index stay the caller's)."""
        self.tree.close()

    def status(self) -> dict[str, Any]:
        """The tree's state: built from which data_version, stale or not, nodes per level, size."""
        self._reload_if_rebuilt()
        version = self.tree.data_version
        current = self.index.store.data_version()
        levels: dict[int, int] = {}
        for node in self.tree.nodes.values():
            levels[node.level] = levels.get(node.level, 0) + 1
        return {
            "mode": self.mode,
            "built": version is not None,
            "data_version": version,
            "store_data_version": current,
            "stale": version != current,
            "behind": None if version is None else current - version,  # store writes since the build
            "nodes": dict(sorted(levels.items())),
            "leaves": self.tree.meta.get("leaves"),
            "build_seconds": self.tree.meta.get("seconds"),
            "built_at": self.tree.meta.get("built_at"),
            "summarizer": self.tree.meta.get("summarizer"),
            "path": self.tree.where,
            "bytes": self.tree.size_bytes(),
        }

    def finish(self, query: str, run: SnippetRun, filters: Any, where: Any, top_k: int) -> SnippetRun:
        """After the base run (security gate, query stage, chunks), the tree's nodes by mode; a
        refused query stays refused (no node is served for it). `retrieve` returns its snippets."""
        if run.refusal is not None or self.mode == "leaves":
            return run
        return SnippetRun(self._with_nodes(query, run.snippets, filters, where, top_k), run.lineage, None)

    def _with_nodes(
        self, query: str, leaves: list[Snippet], filters: Any, where: Any, top_k: int
    ) -> list[Snippet]:
        why = self._why_no_nodes(filters, where)
        if why is None and any(s["lineage"].get("extracted") for s in leaves):
            why = "filtered query (a filter read from the query's words): synthesis nodes span documents it may exclude"
        if why is not None:
            _LOG.info("RAPTOR nodes not served: %s", why)
            return [{**s, "lineage": {**s["lineage"], "raptor": why}} for s in leaves]
        ranked = self._rank_nodes(query, top_k)
        if self.mode == "nodes":
            return self._snippets(ranked)
        keys = [s["chunk_id"] or s["source_locator"] for s in leaves]  # a visual page pointer has no chunk_id
        fused = rrf_fuse([keys, [n.node_id for n, _ in ranked]], k=DEFAULT_RRF_K)
        order = sorted(fused, key=lambda cid: (-fused[cid], cid))[:top_k]
        by_id: dict[str, Snippet] = dict(zip(keys, leaves, strict=True))
        nodes = [(n, score) for n, score in ranked if n.node_id in order]
        by_id.update({n.node_id: s for (n, _), s in zip(nodes, self._snippets(nodes), strict=True)})  # members read only for these
        return [by_id[cid] for cid in order]

    def _why_no_nodes(self, filters: Any, where: Any) -> str | None:
        if filters or where:
            return "filtered query: synthesis nodes span documents a filter may exclude"
        current = self.index.store.data_version()
        if self.tree.data_version != current:
            self._reload_if_rebuilt()
        if self.tree.data_version is None:
            return "no tree yet: run `ragspine raptor build`"
        if self.tree.data_version != current:
            return "tree is stale (the store changed since it was built): run `ragspine raptor build`"
        return None

    def _reload_if_rebuilt(self) -> bool:
        """Re-read the tree when its stored version is not the one loaded (another process
        built it); whether it was re-read."""
        if self.tree.stored_version() == self.tree.data_version:
            return False
        self.tree.load()
        self._matrix = None
        return True

    def _rank_nodes(self, query: str, top_k: int) -> list[tuple[Node, float]]:
        _, nodes, matrix = self._node_matrix()
        if not nodes:
            return []
        backend = self.index.embedding_backend  # not the dense channel: a BM25-only store has none
        assert backend is not None  # __init__ refused an index without one
        q = recent_query_vector(backend, query)
        if q is None:
            q = unit_rows(as_matrix(embed_queries(backend, [query]), what="query vector"))[0]
        centres = {int(k): np.asarray(v) for k, v in self.tree.meta.get("centres", {}).items()}
        scores = matrix @ centre(q, query, centres)
        return [(nodes[i], float(scores[i])) for i in _top(scores, top_k)]

    def _node_matrix(self) -> tuple[int, list[Node], np.ndarray]:
        version = self.tree.data_version or 0
        if self._matrix is None or self._matrix[0] != version:
            nodes = sorted(self.tree.nodes.values(), key=lambda n: n.node_id)
            matrix = np.stack([n.vector for n in nodes]) if nodes else np.zeros((0, 0), dtype=np.float32)
            self._matrix = (version, nodes, matrix)
        return self._matrix

    def _snippets(self, ranked: list[tuple[Node, float]]) -> list[Snippet]:
        members = self._members([node for node, _ in ranked])
        return [self._snippet(node, score, members) for node, score in ranked]

    def _snippet(self, node: Node, score: float, chunks: Mapping[str, Chunk]) -> Snippet:
        docs = list(dict.fromkeys(leaf.doc_id for leaf in node.leaves))
        return {
            "text": node.summary,
            "is_synthesis": True,
            "citable": False,
            "doc_id": "",
            "title": f"Summary of {len(node.leaves)} passages from {len(docs)} documents (level {node.level})",
            "source_locator": "",
            "chunk_id": node.node_id,
            "topic": "", "entity": "", "geography": "", "period": "", "language": "",
            "sensitivity": _strictest(leaf.sensitivity for leaf in node.leaves),
            "version": None,
            "valid_as_of": "",
            "level": node.level,
            "members": [_member(chunks[c], node.node_id) for c in node.sources if c in chunks],
            "scores": {"bm25": 0.0, "vector": score, "fused": score},  # nodes are ranked by vector only
            "relevance": 0.0,  # rated at the retriever's exit (`relevance.rate`)
            "lineage": {
                "doc_ids": docs,
                "chunk_ids": [leaf.chunk_id for leaf in node.leaves],
                "source_locators": [leaf.source_locator for leaf in node.leaves],
                "summarizer": node.summarizer,
                "tree_data_version": self.visible_version(),
            },
        }  # fmt: skip

    def _members(self, nodes: list[Node]) -> dict[str, Chunk]:
        """The chunks the nodes' summaries drew on, read now in one batch from the chunks the
        pipeline ranks (active, RESTRICTED masked), by chunk id."""
        wanted = {c for node in nodes for c in node.sources}
        docs = list(dict.fromkeys(leaf.doc_id for node in nodes for leaf in node.leaves if leaf.chunk_id in wanted))
        if not docs:
            return {}
        chunks = self.index.retriever().chunks_of_docs(docs)
        return {c.chunk_id: c for c in chunks if c.chunk_id in wanted and not is_restricted(c.sensitivity)}


def _member(c: Chunk, node_id: str) -> Snippet:
    """A member chunk of a node as a citable snippet dict."""
    return {
        "text": c.text, "doc_id": c.doc_id, "title": c.title, "source_locator": c.source_locator,
        "chunk_id": c.chunk_id, "topic": c.topic, "entity": c.entity, "geography": c.geography,
        "period": c.period, "language": c.language, "sensitivity": c.sensitivity,
        "version": getattr(c, "version", None), "valid_as_of": getattr(c, "valid_as_of", ""), "via": node_id,
        "scores": {"bm25": 0.0, "vector": None, "fused": 0.0}, "relevance": 0.0,  # its node's, at the exit
        "lineage": {"via_synthesis_node": node_id},
    }  # fmt: skip


def make_raptor_retriever(
    base: NarrativeIndexRetriever,
    *,
    mode: str = "collapsed",
    config: RaptorConfig = RaptorConfig(),
    provider: LLMProvider | None = None,
    summary_chars: int | None = None,
    tree: RaptorTree | None = None,
) -> RaptorRetriever:
    """`base` with its store's RAPTOR tree (`<db>.raptor.sqlite`, or tables beside a PostgreSQL
    store's): summaries by `provider` when
    given, else extractive. The tree is built by `.build()` (or `ragspine raptor build`)."""
    chars = summary_chars if summary_chars is not None else 600
    summarizer: Summarizer = LLMSummarizer(provider, chars) if provider is not None else ExtractiveSummarizer(chars)
    return RaptorRetriever(
        base, tree if tree is not None else RaptorTree.for_store(base.index.store),
        mode=mode, config=config, summarizer=summarizer,
    )  # fmt: skip


def _top(scores: np.ndarray, k: int) -> list[int]:
    """The indices of the `k` best scores, by (-score, index): rows are in node-id order, so
    ties go to the smaller node id, as a full sort would; only the candidates are sorted.

    >>> _top(np.array([0.5, 0.9, 0.5, 0.1]), 2), _top(np.array([0.2, 0.2, 0.2]), 2)
    ([1, 0], [0, 1])
    """
    k = min(k, len(scores))
    if k <= 0:
        return []
    kth = np.partition(scores, len(scores) - k)[len(scores) - k]
    candidates = np.flatnonzero(scores >= kth)  # every tie of the k-th score: the order decides
    return candidates[np.lexsort((candidates, -scores[candidates]))][:k].tolist()


def _strictest(labels: Any) -> str:
    seen = {str(label).strip().upper() for label in labels}
    known = [label for label in reversed(_LABEL_ORDER) if label in seen]
    unknown = sorted(seen - set(_LABEL_ORDER))
    return (unknown or known or ["INTERNAL"])[0]
