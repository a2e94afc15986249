"""The seam between retrieval and the agent: the specification's `NarrativeIndexRetriever` and `build_narrative_retriever`.

`NarrativeIndexRetriever` is a façade: every query runs through `ragspine.retrieval.pipeline.pipeline.Pipeline`
(gate → variants → filters → channels → fusion → rerank → RESTRICTED exit #2 → post-processing →
snippets), whose docstring states the invariants: RESTRICTED text never reaches a snippet; the
security gate screens the query and every variant; with `retry_without_filters` (the
specification's default) an empty filtered result is retried once without filters (a request's
`filter_fallback="strict"` turns it off for that request, "retry" on), and the results' top-level
`filters_dropped` (and each snippet's `lineage`) says so; an unknown filter key is a ValueError
that lists the valid keys. Snippets and parent expansion: `pipeline.snippets`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, Unpack

from ragspine.agent.agent import LLMProvider
from ragspine.retrieval.chunking.protocol import Chunker, IndexTextFn
from ragspine.retrieval.filters import Filter
from ragspine.retrieval.fusion.rrf import Fusion
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.pipeline.channels import Channel
from ragspine.retrieval.pipeline.feedback import Feedback
from ragspine.retrieval.pipeline.hybrid import DEFAULT_TOP_K
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.pipeline.pipeline import Pipeline, QueryPlan, split_filters
from ragspine.retrieval.pipeline.snippets import SearchResults, SnippetRun, expand_parents, to_snippet as _to_snippet
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.retrieval.postprocess.chain import PostprocessorChain
from ragspine.retrieval.postprocess.protocol import Postprocessor
from ragspine.retrieval.query.filter_extraction import FilterExtractor
from ragspine.retrieval.query.glossary import GlossaryQueryRewriter
from ragspine.retrieval.rerank.guard import DEFAULT_TOP_N
from ragspine.retrieval.rerank.llm_judge import ProviderListwiseJudge
from ragspine.retrieval.rerank.protocol import Reranker
from ragspine.retrieval.sensitivity import RESTRICTED_SENSITIVITY
from ragspine.retrieval.relevance import rate, relevance_mode
from ragspine.retrieval.snippet import Snippet
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
    "SearchResults",
    "SnippetRun",
    "ProviderListwiseJudge",
    "Trace",
    "_to_snippet",
    "build_narrative_retriever",
    "expand_parents",
    "split_filters",
]


class GlossaryDefault:
    """The default of `build_narrative_retriever(query_rewriter=...)`: the built-in glossary
    rewriter (the specification's default chain); None means no rewriter at all."""

    def __repr__(self) -> str:
        return "GLOSSARY_DEFAULT"


GLOSSARY_DEFAULT = GlossaryDefault()


class RetrieveArgs(TypedDict, total=False):
    """A retrieval's request as `retrieve` takes it: `filters`, `top_k` (default DEFAULT_TOP_K),
    `where`, `filter_fallback` ("retry" or "strict"; None: the retriever's `retry_without_filters`)."""

    filters: Mapping[str, Any] | Filter | None
    top_k: int
    where: Filter | Mapping[str, Any] | None
    filter_fallback: str | None


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
        if self.postprocessor is not None and index.embedding_backend is not None:
            self.postprocessor.use_vectors(index.vector_lookup)  # MMR's similarity: the vectors there at each call

    def retrieve(
        self,
        query: str,
        *,
        filters: Mapping[str, Any] | Filter | None = None,
        top_k: int = DEFAULT_TOP_K,
        where: Filter | Mapping[str, Any] | None = None,
        filter_fallback: str | None = None,
    ) -> SearchResults:
        """RESTRICTED-free snippets (`ragspine.retrieval.snippet.Snippet`) with full lineage, best first.

        `filters`: exact matches on the five metadata fields (the specification's form), or
        any filter in the typed language (see `split_filters`); `where`: a typed filter AND-ed
        with it. Extracted filters (when an extractor is set) only narrow: they never touch a
        field given explicitly, and are dropped when they leave nothing. Lineage records what
        was applied. A refused query (the security gate, the corrective loop) gives no snippet;
        `retrieve_run` says why. The result is a list with `filters_dropped` (`SearchResults`):
        the filter fields dropped because nothing matched them (`filter_fallback`, "retry" or
        "strict", overrides `retry_without_filters` for this call).
        """
        run = self.retrieve_run(query, filters=filters, top_k=top_k, where=where, filter_fallback=filter_fallback)
        return run.results()

    def retrieve_run(self, query: str, *, trace: Trace | None = None, **request: Unpack[RetrieveArgs]) -> SnippetRun:
        """`retrieve`'s snippets (same `filters`, `top_k`, `where`) with the run's lineage:
        `refusal` is set when the query was refused (the gate denied it, or corrective retrieval
        found no grounded context). `trace`: receives one step per stage (`Trace.render()` is
        `ragspine search --explain`)."""
        for key in request:
            if key not in RetrieveArgs.__annotations__:
                raise TypeError(f"retrieve_run() got an unexpected keyword argument {key!r}")
        filters, where, top_k = request.get("filters"), request.get("where"), request.get("top_k", DEFAULT_TOP_K)
        run = self.pipeline().run(query, filters=filters, where=where, top_k=top_k, trace=trace,
                                  filter_fallback=request.get("filter_fallback"))  # fmt: skip
        run = self.finish(query, run, filters, where, top_k)
        rate(run.snippets, self.relevance_mode)  # the one place a snippet's relevance is set
        return run

    @property
    def relevance_mode(self) -> str:
        """Which calibration rates this retriever's snippets (`relevance.relevance_mode`)."""
        index = self.index
        return relevance_mode(index.dense is not None, index.channels, index.fusion.fuses_scores)

    def finish(self, query: str, run: SnippetRun, filters: Any, where: Any, top_k: int) -> SnippetRun:
        """What a subclass adds after the pipeline's run (`RaptorRetriever`: the tree's nodes);
        here the run as it is."""
        return run

    def pipeline(self) -> Pipeline:
        """The query pipeline over this retriever's index and layers (as they are set now)."""
        return Pipeline(
            self.index,
            plan=self.plan,
            retry_without_filters=self.retry_without_filters,
            filter_extractor=self.filter_extractor,
            postprocessor=self.postprocessor,
            visual=self.visual,
        )


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
    retry_without_filters: bool = True,
    feedback: Feedback = Feedback(),
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
    class (`open_chunk_store`, e.g. a PostgreSQL store's local `cache_dir`). `retry_without_filters`:
    the filter fallback, "retry" (True, the specification's default) or "strict". `feedback`:
    pseudo-relevance feedback in the channels (RM3, Rocchio; default off). The layers
    are values: nothing here reads settings (`ragspine.assembly` builds them from RAGSPINE_*). The caller closes the returned store (and `retriever.index.dense.vectors`, when there is one);
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
            feedback=feedback,
        )
    except BaseException:
        store.close()
        if vectors is not None:
            vectors.close()
        raise
    retriever = NarrativeIndexRetriever(
        index, retry_without_filters=retry_without_filters, filter_extractor=filter_extractor,
        postprocessor=postprocessor, plan=query_plan, visual=visual,
    )
    return retriever, store
