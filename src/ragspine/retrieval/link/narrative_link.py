"""The seam between retrieval and the agent; RESTRICTED exit #2.

Invariants: `NarrativeIndexRetriever.retrieve` drops every RESTRICTED chunk before any snippet
dict exists, so RESTRICTED text never reaches a synthesis prompt; every query runs through the
retriever's `QueryPlan` (`link.guarded`: the security gate on every variant, and the opt-in
transforms, decomposition, routing and corrective loop); without a corrective grader an empty
filtered result is retried once without filters, and the snippet's `lineage` says so; an unknown
filter key is a ValueError that lists the valid keys.

Parent expansion: a chunk that carries a `window_text` (its parent section, or its sentence
window) gets a `prompt_text` — that text, for generation only — and its `heading`, `parent_id`
and `parent_locator`; `text` and every citation field stay the chunk's own. When several
results share one parent, the first carries it and the others' `prompt_text` is their own text
(`lineage["parent_in"]` names the chunk that carries it), so a prompt never repeats a parent.
A chunk without structure gives exactly the specification's snippet (no added key).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspine.agent.agent import LLMProvider
from ragspine.retrieval.chunking.protocol import Chunker, IndexTextFn
from ragspine.retrieval.filters import Filter, parse_filter, to_dict
from ragspine.retrieval.fusion.rrf import Fusion
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.model import FILTER_FIELDS, Chunk
from ragspine.retrieval.link.guarded import QueryPlan, run_query
from ragspine.retrieval.pipeline.channels import Channel
from ragspine.retrieval.link.visual import fuse_visual
from ragspine.retrieval.pipeline.hybrid import DEFAULT_TOP_K, RetrievalResult, check_query
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.postprocess.chain import PostprocessorChain
from ragspine.retrieval.postprocess.protocol import Postprocessor
from ragspine.retrieval.query.filter_extraction import (
    FilterExtractor,
    combine,
    narrowing,
    safe_extract,
)
from ragspine.retrieval.query.glossary import GlossaryQueryRewriter
from ragspine.retrieval.rerank.guard import DEFAULT_TOP_N
from ragspine.retrieval.rerank.llm_judge import ProviderListwiseJudge
from ragspine.retrieval.rerank.protocol import Reranker
from ragspine.retrieval.sensitivity import RESTRICTED_SENSITIVITY, is_restricted
from ragspine.retrieval.store.factory import open_chunk_store
from ragspine.retrieval.store.protocol import ChunkStoreProtocol
from ragspine.retrieval.types import EmbeddingBackend, QueryRewriter
from ragspine.retrieval.vector.dense.ann import AnnConfig
from ragspine.retrieval.vector.stores.inprocess import ChunkVectorStore
from ragspine.retrieval.visual.channel import VisualChannel

__all__ = [
    "RESTRICTED_SENSITIVITY",
    "NarrativeIndexRetriever",
    "QueryPlan",
    "SnippetRun",
    "ProviderListwiseJudge",
    "build_narrative_retriever",
    "split_filters",
]

_LOG = logging.getLogger(__name__)


class GlossaryDefault:
    """The default of `build_narrative_retriever(query_rewriter=...)`: the built-in glossary
    rewriter (the specification's default chain); None means no rewriter at all."""

    def __repr__(self) -> str:
        return "GLOSSARY_DEFAULT"


GLOSSARY_DEFAULT = GlossaryDefault()


def split_filters(filters: Any) -> tuple[dict[str, Any], Filter | None]:
    """(exact keyword filters, typed filter) for a `filters` argument.

    A mapping of the five metadata fields to strings is the specification's exact-match form
    and becomes NarrativeIndex keyword arguments; anything else (operators, OR, doc_id,
    sensitivity, valid_as_of, user metadata, a Filter object, a list) is the typed filter
    language of `ragspine.retrieval.filters`, checked by the index (an unknown field is a
    ValueError naming it and the valid ones).
    """
    if not filters:
        return {}, None
    if isinstance(filters, Mapping) and all(
        key in FILTER_FIELDS and (value is None or isinstance(value, str))
        for key, value in filters.items()
    ):
        return {key: value for key, value in filters.items() if value is not None}, None
    return {}, parse_filter(filters)


@dataclass(frozen=True)
class SnippetRun:
    """What `retrieve_run` returns: the snippets, the run's lineage, and why it refused (or None)."""

    snippets: list[dict[str, Any]]
    lineage: dict[str, Any]
    refusal: str | None = None


class NarrativeIndexRetriever:
    """Adapts a NarrativeIndex to the agent's NarrativeRetriever contract.

    >>> retriever, store = build_narrative_retriever(":memory:")
    >>> retriever.retrieve("营收")
    []
    >>> store.close()
    """

    def __init__(
        self,
        index: NarrativeIndex,
        *,
        retry_without_filters: bool = True,
        filter_extractor: FilterExtractor | None = None,
        postprocessor: Postprocessor | None = None,
        plan: QueryPlan | None = None,
        visual: VisualChannel | None = None,
    ) -> None:
        self.index = index
        self.visual = visual  # the page-image channel (RAGSPINE_VISUAL_EMBEDDER); None: text only
        # The query stage's gate and opt-in transforms; every variant is screened before it runs.
        self.plan = plan if plan is not None else QueryPlan()
        self.retry_without_filters = retry_without_filters
        self.filter_extractor = filter_extractor
        # Runs after rerank and exit #2, before snippets exist: it never sees RESTRICTED, and
        # the chain refuses a member that adds a result.
        self.postprocessor = (
            postprocessor
            if postprocessor is None or isinstance(postprocessor, PostprocessorChain)
            else PostprocessorChain([postprocessor])
        )
        if self.postprocessor is not None and index.dense is not None:
            self.postprocessor.use_vectors(index.dense.vectors.get)  # MMR's similarity

    def retrieve(
        self,
        query: str,
        *,
        filters: Mapping[str, Any] | Filter | None = None,
        top_k: int = DEFAULT_TOP_K,
        where: Filter | Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """RESTRICTED-free snippet dicts with full lineage, best first.

        `filters`: exact matches on the five metadata fields (the specification's form), or
        any filter in the typed language (see `split_filters`); `where`: a typed filter AND-ed
        with it. Extracted filters (when an extractor is set) only narrow: they never touch a
        field given explicitly, and are dropped when they leave nothing. Lineage records what
        was applied. A refused query (the security gate, the corrective loop) gives no snippet;
        `retrieve_run` says why.
        """
        return self.retrieve_run(query, filters=filters, top_k=top_k, where=where).snippets

    def retrieve_run(
        self,
        query: str,
        *,
        filters: Mapping[str, Any] | Filter | None = None,
        top_k: int = DEFAULT_TOP_K,
        where: Filter | Mapping[str, Any] | None = None,
    ) -> SnippetRun:
        """`retrieve`'s snippets with the run's lineage: `refusal` is set when the query was
        refused (the gate denied it, or corrective retrieval found no grounded context)."""
        check_query(query)
        split_filters(filters)  # a bad filter is an error before anything runs
        # once per text and run: the corrective loop searches a query again without its filters
        extract = functools.cache(functools.partial(safe_extract, self.filter_extractor))

        def search(q: str, variants: list[str], *, drop_filters: bool, retry: bool) -> tuple[list[RetrievalResult], dict[str, Any]]:
            return self._search(q, variants, filters, where, top_k, extract(q), drop_filters=drop_filters, retry=retry)

        run = run_query(self.plan, self.index, search, query, top_k)
        snippets = expand_parents([_to_snippet(r, lineage) for r, lineage in run.ranked], [r.chunk for r, _ in run.ranked])
        if self.visual is not None and run.refusal is None:  # local hook: page pointers fused in
            kwargs, typed = split_filters(filters)
            wanted = parse_filter([{k: v} for k, v in kwargs.items()] + [f for f in (typed, parse_filter(where)) if f])
            snippets = fuse_visual(snippets, query, self.visual, self.index.store, top_k=top_k, filters=wanted,
                                   member=lambda chunk: _to_snippet(RetrievalResult(chunk, 0.0, None, 0.0), {}),
                                   lineage={"filters": to_dict(wanted) or None})  # fmt: skip
        return SnippetRun(snippets, run.lineage, run.refusal)

    def _search(
        self,
        query: str,
        variants: list[str],
        filters: Mapping[str, Any] | Filter | None,
        where: Filter | Mapping[str, Any] | None,
        top_k: int,
        extraction: tuple[Filter | None, str | None],
        *,
        drop_filters: bool,
        retry: bool,
    ) -> tuple[list[RetrievalResult], dict[str, Any]]:
        """One query's screened variants searched with the filters (or without, `drop_filters`),
        through RESTRICTED exit #2 and the post-processors; `extraction`: `safe_extract`'s answer
        for `query`."""
        wanted, top_k = top_k, self.postprocessor.fetch_size(top_k) if self.postprocessor else top_k
        kwargs, typed = split_filters(filters)
        explicit = parse_filter([f for f in (typed, parse_filter(where)) if f is not None])
        extracted, error = extraction
        taken = parse_filter([{k: v} for k, v in kwargs.items()] + ([explicit] if explicit else []))
        added = narrowing(taken, extracted)
        lineage: dict[str, Any] = {
            "filters": kwargs,
            "where": to_dict(explicit) or None,
            "extracted": to_dict(added) or None,
            "retried_without_filters": False,
        }
        if error is not None:
            lineage["extraction_error"] = error
        trace: dict[str, Any] = {}
        if drop_filters:
            results = self.index.retrieve(query, top_k=top_k, variants=variants, trace=trace)
            lineage = {**lineage, "filters": {}, "where": None, "extracted": None, "requested_filters": kwargs,
                       "requested_where": lineage["where"], "requested_extracted": lineage["extracted"],
                       "retried_without_filters": True}  # fmt: skip
        else:
            results = self.index.retrieve(
                query, top_k=top_k, where=combine(explicit, added), variants=variants, trace=trace, **kwargs
            )
        if not drop_filters and not results and added is not None:
            _LOG.info("no result with extracted filters %s; using explicit filters only", to_dict(added))
            results = self.index.retrieve(query, top_k=top_k, where=explicit, variants=variants, trace=trace, **kwargs)
            lineage["extracted_dropped"] = True
        if not drop_filters and retry and not results and (kwargs or explicit is not None) and self.retry_without_filters:
            _LOG.info("no result with filters %s %s; retrying once without filters", kwargs, lineage["where"])
            results = self.index.retrieve(query, top_k=top_k, variants=variants, trace=trace)
            lineage = {**lineage, "filters": {}, "where": None, "requested_filters": kwargs,
                       "requested_where": lineage["where"], "retried_without_filters": True}  # fmt: skip
        if "rerank" in trace:
            lineage["rerank"] = trace["rerank"]
        results = [r for r in results if not is_restricted(r.chunk.sensitivity)]
        if self.postprocessor is not None:
            results = self.postprocessor.process(query, results, top_k=wanted)
        return results[:wanted], lineage


def build_narrative_retriever(
    chunk_db: str | Path,
    provider: LLMProvider | None = None,
    *,
    embedding_backend: EmbeddingBackend | None = None,
    reranker: Reranker | None = None,
    postprocessor: Postprocessor | None = None,
    chunker: Chunker | None = None,
    query_rewriter: QueryRewriter | None | GlossaryDefault = GLOSSARY_DEFAULT,
    filter_extractor: FilterExtractor | None = None,
    fusion: Fusion | None = None,
    channels: str = "hybrid",
    embed_on_write: bool = True,
    analyzer: Callable[[str], list[str]] | None = None,
    vectors: ChunkVectorStore | None = None,
    rerank_top_n: int = DEFAULT_TOP_N,
    rerank_timeout: float | None = None,
    query_plan: QueryPlan | None = None,
    index_text: IndexTextFn | None = None,
    extra_channels: Sequence[Channel] = (),
    visual: VisualChannel | None = None,
    ann: AnnConfig | None = None,
    store_options: Mapping[str, Any] | None = None,
) -> tuple[NarrativeIndexRetriever, ChunkStoreProtocol]:
    """The default assembly: store (schema ensured) → BM25 + RRF (+ the dense channel when a
    backend is given: chunk vectors in `<db>.vectors.sqlite`, or in `vectors` (a pgvector /
    Qdrant `ChunkVectorStore`), rankings fused by `fusion`;
    `channels="vector"` ranks by the dense channel alone) → glossary multi-query (the built-in
    glossary unless `query_rewriter` is given; None: none) → `reranker` (e.g. `make_reranker(...)`), else the
    listwise LLM judge when a provider is given, over the first `rerank_top_n` fused results (past
    `rerank_timeout` seconds the fused order stands; the snippets' lineage says so) → `postprocessor` (e.g. `make_postprocessor(...)`)
    → snippets. `query_plan`: the security gate and the opt-in query transforms, decomposition,
    Adaptive routing and corrective retrieval (default: a gate with only its budgets). `chunker` cuts documents ingested through the index (default: the paragraph
    packer); `index_text` is what both channels index for a chunk (Contextual Retrieval, e.g.
    `make_index_text_fn("header")`; None: its text); `extra_channels` are ranked beside BM25
    and the dense channel and fused with them (`make_channel`). `visual`: the page-image channel,
    whose page pointers are fused with the text snippets (None: text only). `ann`: when the
    dense channel uses an HNSW index (default `AnnConfig()`). `store_options` go to the store's
    class (`open_chunk_store`, e.g. a PostgreSQL store's local `cache_dir`). The layers are values: nothing here reads settings (`ragspine.assembly` builds them
    from RAGSPINE_*). The caller closes the returned store (and `retriever.index.dense.vectors`, when there is one);
    on error nothing is left open."""
    store = open_chunk_store(chunk_db, **(store_options or {}))  # SQLite path, or a postgresql:// URL
    try:
        store.init_schema()
        index = NarrativeIndex(
            store,
            embedding_backend=embedding_backend,
            query_rewriter=GlossaryQueryRewriter() if isinstance(query_rewriter, GlossaryDefault) else query_rewriter,
            judge=ProviderListwiseJudge(provider) if provider is not None else None,
            reranker=reranker,
            chunker=chunker,
            fusion=fusion,
            channels=channels,
            embed_on_write=embed_on_write,
            analyzer=tokenize if analyzer is None else analyzer,
            vectors=vectors,
            top_n=rerank_top_n,
            rerank_timeout=rerank_timeout,
            index_text=index_text,
            extra_channels=extra_channels,
            ann=ann,
        )
    except BaseException:
        store.close()
        if vectors is not None:
            vectors.close()
        raise
    retriever = NarrativeIndexRetriever(
        index, filter_extractor=filter_extractor, postprocessor=postprocessor, plan=query_plan, visual=visual
    )
    return retriever, store


def expand_parents(snippets: list[dict[str, Any]], chunks: list[Chunk]) -> list[dict[str, Any]]:
    """Add each structured chunk's expansion to its snippet (see the module docstring)."""
    carried: dict[tuple[str, str], str] = {}
    for snippet, chunk in zip(snippets, chunks, strict=True):
        for name in ("heading", "parent_id", "parent_locator"):
            if getattr(chunk, name):
                snippet[name] = getattr(chunk, name)
        if not chunk.window_text:
            continue
        key = (chunk.doc_id, chunk.parent_id or chunk.parent_locator)
        first = carried.setdefault(key, chunk.chunk_id)
        if first == chunk.chunk_id:
            snippet["prompt_text"] = chunk.window_text
        else:
            snippet["prompt_text"] = chunk.text
            snippet["lineage"]["parent_in"] = first
    return snippets


def _to_snippet(result: RetrievalResult, lineage: dict[str, Any]) -> dict[str, Any]:
    chunk = result.chunk
    return {
        "text": chunk.text,
        "doc_id": chunk.doc_id,
        "title": chunk.title,
        "source_locator": chunk.source_locator,
        "chunk_id": chunk.chunk_id,
        "topic": chunk.topic,
        "entity": chunk.entity,
        "geography": chunk.geography,
        "period": chunk.period,
        "language": chunk.language,
        "sensitivity": chunk.sensitivity,
        "version": getattr(chunk, "version", None),
        "valid_as_of": getattr(chunk, "valid_as_of", ""),
        "scores": {
            "bm25": result.bm25_score,
            "vector": result.vector_score,
            "fused": result.fused_score,
            **dict(result.channel_scores),
        },
        "lineage": dict(lineage),
    } | _prompt_fields(result)


def _prompt_fields(result: RetrievalResult) -> dict[str, Any]:
    """`prompt_text` (what a prompt shows instead of `text`) and its spans into `text`, when set."""
    if result.prompt_text is None:
        return {}
    return {"prompt_text": result.prompt_text, "prompt_spans": [list(span) for span in result.prompt_spans]}
