"""`ragspine eval --whole-entries`: a BEIR dataset through `NarrativeIndex` directly, and the
document ranking and report shared with the default (product) run in `eval.product`.

Invariants: each corpus entry is one document (doc_id = `_id`, title in its metadata, text =
`CorpusDoc.indexed_text`); chunk results become a document ranking by each document's best
chunk (its first, i.e. highest-fused, chunk in the result list); the chunk depth grows until the
ranking holds `top_k` distinct documents or the retriever has no more matching chunks; a blank
query gets an empty ranking (it scores 0, it is not dropped). Only `NarrativeIndex`'s public
ingest/retrieve calls are used, so any engine behind it is measured the same way: ingest runs
through `IngestPipeline` (the path `ragspine ingest` takes), whose `ingest_document` writes
exactly the chunks `NarrativeIndex.ingest` makes.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tqdm import tqdm

from ragspine.eval.dataset import BeirDataset, CorpusDoc
from ragspine.eval.metrics import MRR_K, NDCG_K, RECALL_K, evaluate_run
from ragspine.eval.modes import EvalError, EvalMode, resolve_mode
from ragspine.eval.store import (
    IngestFingerprint,
    StoreState,
    active_chunk_count,
    active_doc_ids,
    check_store,
    mark_ingest,
    open_store,
)
from ragspine.ingest.pipeline import IngestPipeline
from ragspine.ingest.registry import DocumentRegistry
from ragspine.retrieval.chunking.chunking import DEFAULT_OVERLAP_CHARS
from ragspine.retrieval.fusion.rrf import Fusion
from ragspine.retrieval.lexical.analyzers import make_analyzer
from ragspine.retrieval.lexical.retrieval import (
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    GlossaryQueryRewriter,
    NarrativeIndex,
)
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.types import EmbeddingBackend

DEFAULT_EVAL_TOP_K = 100
WHOLE = "whole"
T = TypeVar("T")


@dataclass(frozen=True)
class EvalOptions:
    """Everything a run can vary; the defaults are `ragspine eval`'s defaults.

    chunk_chars None ingests each corpus entry as one chunk ("whole": BEIR entries are already
    passages); a number chunks with the specification's chunker at that budget.
    """

    mode: str = "auto"
    embedding: str | None = None
    analyzer: str = "auto"
    chunk_chars: int | None = None
    overlap_chars: int = DEFAULT_OVERLAP_CHARS
    glossary: bool = False
    top_k: int = DEFAULT_EVAL_TOP_K
    db: str | None = None
    progress: bool = True

    @property
    def chunking(self) -> str:
        return WHOLE if self.chunk_chars is None else f"{self.chunk_chars}/{self.overlap_chars}"


@dataclass
class EvalReport:
    """The outcome of one run; `to_dict` is the --json object."""

    dataset: str
    split: str
    mode: str
    mode_note: str
    embedding: str | None
    fusion: str
    analyzer: str
    analyzer_note: str
    chunking: str
    glossary: bool
    top_k: int
    db: str
    reused_store: bool
    docs: int
    chunks: int
    queries: int
    blank_queries: int
    unknown_judged_docs: int
    ndcg: float
    recall: float
    mrr: float
    ingest_s: float
    query_s: float
    embed_s: float = 0.0
    embedded: int = 0
    run: dict[str, list[tuple[str, float]]] = field(default_factory=dict, repr=False)
    per_query: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)
    path: str = "whole entries"  # or "product": files → ragspine ingest → Workspace.search
    settings: dict[str, str] = field(default_factory=dict)  # the product settings a product run used
    empty_entries: int = 0  # corpus entries with no text (not ingested on the product path)
    query_ms: list[float] = field(default_factory=list, repr=False)  # each non-blank query's time (product path)

    @classmethod
    def scored(cls, dataset: BeirDataset, run: dict[str, list[tuple[str, float]]], **setup: Any) -> EvalReport:
        """The report of `run` on `dataset`: the dataset's counts, the run's metrics against its
        qrels (`evaluate_run`), and `setup` (the fields that say how the run was made)."""
        metrics = evaluate_run({q: [d for d, _ in r] for q, r in run.items()}, dataset.qrels)
        blank = sum(1 for q in metrics.per_query if not dataset.queries[q].strip())
        return cls(
            dataset=dataset.name, split=dataset.split, docs=len(dataset.corpus),
            queries=metrics.queries, blank_queries=blank, unknown_judged_docs=dataset.unknown_judged_docs,
            ndcg=metrics.ndcg, recall=metrics.recall, mrr=metrics.mrr,
            run=run, per_query=metrics.per_query, **setup,
        )  # fmt: skip

    @property
    def queries_per_s(self) -> float:
        return self.queries / self.query_s if self.query_s > 0 else 0.0

    @property
    def latency_ms(self) -> tuple[float, float] | None:
        """(p50, p95) of the per-query times in ms (nearest rank), or None when not measured."""
        if not self.query_ms:
            return None
        ordered = sorted(self.query_ms)
        rank = [ordered[max(0, math.ceil(p * len(ordered)) - 1)] for p in (0.50, 0.95)]
        return rank[0], rank[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "split": self.split,
            "mode": self.mode,
            "mode_note": self.mode_note,
            "embedding": self.embedding,
            "fusion": self.fusion,
            "analyzer": self.analyzer,
            "analyzer_note": self.analyzer_note,
            "chunking": self.chunking,
            "glossary": self.glossary,
            "k1": DEFAULT_BM25_K1,
            "b": DEFAULT_BM25_B,
            "top_k": self.top_k,
            "db": self.db,
            "reused_store": self.reused_store,
            "docs": self.docs,
            "chunks": self.chunks,
            "queries": self.queries,
            "blank_queries": self.blank_queries,
            "unknown_judged_docs": self.unknown_judged_docs,
            f"ndcg@{NDCG_K}": round(self.ndcg, 6),
            f"recall@{RECALL_K}": round(self.recall, 6),
            f"mrr@{MRR_K}": round(self.mrr, 6),
            "queries_per_s": round(self.queries_per_s, 2),
            "ingest_s": round(self.ingest_s, 2),
            "embed_s": round(self.embed_s, 2),
            "embedded": self.embedded,
            "query_s": round(self.query_s, 2),
            "path": self.path,
            "settings": dict(self.settings),
            "empty_entries": self.empty_entries,
            **({"ms_per_query_p50": round(self.latency_ms[0], 2), "ms_per_query_p95": round(self.latency_ms[1], 2)}
               if self.latency_ms else {}),
        }  # fmt: skip


def run_eval(dataset: BeirDataset, options: EvalOptions = EvalOptions()) -> EvalReport:
    """Ingest (unless a kept store already holds this corpus), query every judged query, score."""
    if options.top_k < 1:
        raise EvalError(f"top_k must be >= 1, got {options.top_k}")
    from ragspine.assembly import describe_fusion

    resolved = resolve_mode(options.mode, options.embedding)  # fails before any work
    analyzer = make_analyzer(options.analyzer)
    backend, fusion = _dense_assembly(resolved.embedding)
    fingerprint = IngestFingerprint(
        dataset=dataset.name,
        corpus_sha256=dataset.corpus_sha256,
        docs=len(dataset.corpus),
        chunking=options.chunking,
    )
    store = open_store(options.db)
    index: NarrativeIndex | None = None
    try:
        state = check_store(store, fingerprint)  # refuses a store of another corpus up front
        # build_narrative_retriever's assembly (store → NarrativeIndex), with eval's chunking and
        # analyzer, the glossary rewriter only when asked, and no listwise judge.
        index = NarrativeIndex(
            store,
            query_rewriter=GlossaryQueryRewriter() if options.glossary else None,
            max_chars=options.chunk_chars or whole_document_budget(dataset),
            overlap_chars=0 if options.chunk_chars is None else options.overlap_chars,
            analyzer=analyzer,
            embedding_backend=backend,
            fusion=fusion,
            channels="vector" if resolved.mode is EvalMode.VECTOR else "hybrid",
            embed_on_write=False,  # embedded after ingest, in length-sorted batches
        )
        started = time.perf_counter()
        if state is not StoreState.COMPLETE:
            _ingest(store, index, dataset.corpus, fingerprint, state, options.progress)
        ingest_s = time.perf_counter() - started
        started = time.perf_counter()
        embedded = IngestPipeline(index).embed(progress=None if options.progress else False)  # the embed step
        embed_s = time.perf_counter() - started
        chunks = active_chunk_count(store)
        depth = chunk_depth(options.top_k, chunks, len(dataset.corpus))
        run, query_s = query_all(index, dataset.queries, options.top_k, depth, options.progress)
    finally:
        if index is not None:
            index.close()
        store.close()
    return EvalReport.scored(
        dataset,
        run,
        mode=resolved.mode.value,
        mode_note=resolved.note,
        embedding=None if backend is None else getattr(backend, "model_id", type(backend).__name__),
        fusion="none" if backend is None else describe_fusion(fusion),
        analyzer=analyzer.name,
        analyzer_note=analyzer.note or f"{analyzer.name}: requested",
        chunking=options.chunking,
        glossary=options.glossary,
        top_k=options.top_k,
        db=options.db or ":memory:",
        reused_store=state is StoreState.COMPLETE,
        chunks=chunks,
        ingest_s=ingest_s,
        query_s=query_s,
        embed_s=embed_s,
        embedded=0 if embedded is None else embedded.embedded,
    )


def _dense_assembly(spec: str | None) -> tuple[EmbeddingBackend | None, Fusion]:
    """The embedding backend for the resolved `spec` (None: BM25 only) and the configured
    fusion, built the way `Workspace.from_settings` builds them for search and serve (same
    factory, RAGSPINE_EMBEDDING_MODEL/_BASE_URL/_API_KEY options, same fusion settings)."""
    from ragspine.assembly import embedding_options, load_settings, make_fusion
    from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend

    settings = load_settings(adopt=False)  # eval builds its own stores: RAGSPINE_DB's record is not theirs
    fusion = make_fusion(settings)
    if spec is None:
        return None, fusion
    return make_embedding_backend(spec, **embedding_options(settings, spec)), fusion


def _ingest(
    store: ChunkStore,
    index: NarrativeIndex,
    corpus: Sequence[CorpusDoc],
    fingerprint: IngestFingerprint,
    state: StoreState,
    progress: bool,
) -> None:
    """Ingest the corpus, or what an interrupted run left out, and mark the store complete."""
    mark_ingest(store, fingerprint, StoreState.PARTIAL)
    done = active_doc_ids(store) if state is StoreState.PARTIAL else set()
    ingest_corpus(index, [d for d in corpus if d.doc_id not in done], progress)
    mark_ingest(store, fingerprint, StoreState.COMPLETE)


def ingest_corpus(index: NarrativeIndex, docs: Sequence[CorpusDoc], progress: bool = True) -> int:
    """Ingest each corpus entry as one document through the one ingest path (`IngestPipeline`:
    label read, `NarrativeIndex.ingest`'s chunks, a registry row beside the store); return the
    chunks written."""
    written = 0
    with IngestPipeline(index, registry=DocumentRegistry(index.store.db_path)) as pipeline:
        for doc in _progress(docs, progress, desc="ingest", unit="doc"):
            meta = DocumentMeta(doc_id=doc.doc_id, title=doc.title)
            written += pipeline.ingest_document(doc.indexed_text, meta).chunks
    return written


def query_all(
    index: NarrativeIndex,
    queries: dict[str, str],
    top_k: int,
    depth: int,
    progress: bool = True,
) -> tuple[dict[str, list[tuple[str, float]]], float]:
    """Rank documents for every query; return (run, seconds spent querying).

    A blank query gets an empty ranking. The first non-blank query is run once before the clock
    starts, so the index build or load that the first retrieval triggers is not query time.
    """
    warm = next((q for q in queries.values() if q.strip()), None)
    if warm is not None:
        index.retrieve(warm, top_k=1, rerank=False)
    run: dict[str, list[tuple[str, float]]] = {}
    started = time.perf_counter()
    for qid, text in _progress(list(queries.items()), progress, desc="queries", unit="q"):
        if not text.strip():
            run[qid] = []
            continue
        run[qid] = rank_documents(functools.partial(_retrieve, index, text), top_k, depth)
    return run, time.perf_counter() - started


def chunk_depth(top_k: int, chunks: int, docs: int) -> int:
    """First chunk depth to ask for: top_k × (mean chunks per document + 1).

    >>> chunk_depth(100, 5183, 5183), chunk_depth(100, 25339, 5183)
    (200, 600)
    """
    return top_k * (math.ceil(chunks / max(1, docs)) + 1)


def rank_documents(
    retrieve: Callable[[int], list[tuple[str, float]]], top_k: int, depth: int
) -> list[tuple[str, float]]:
    """The top_k documents by their best chunk, as (doc_id, best chunk's fused score).

    `retrieve(k)` returns the best k chunks as (doc_id, fused score), best first; k starts at `depth` and doubles while fewer than
    top_k distinct documents came back and the retriever filled the whole request.
    """
    k = max(depth, top_k)
    while True:
        results = retrieve(k)
        ranking = documents_by_best_chunk(results, top_k)
        if len(ranking) >= top_k or len(results) < k:
            return ranking
        k *= 2


def documents_by_best_chunk(results: Iterable[tuple[str, float]], top_k: int) -> list[tuple[str, float]]:
    """Each document once, at the position of its first (best) chunk, at most top_k.

    >>> documents_by_best_chunk([("a", 0.5), ("b", 0.4), ("a", 0.3)], 10)
    [('a', 0.5), ('b', 0.4)]
    """
    ranking: dict[str, float] = {}
    for doc, score in results:
        if doc not in ranking:
            ranking[doc] = score
            if len(ranking) == top_k:
                break
    return list(ranking.items())


def _retrieve(index: NarrativeIndex, query: str, k: int) -> list[tuple[str, float]]:
    """The best k chunks for `query` as (doc_id, fused score), without the listwise judge."""
    return [(r.chunk.doc_id, r.fused_score) for r in index.retrieve(query, top_k=k, rerank=False)]


def whole_document_budget(dataset: BeirDataset) -> int:
    """A chunk budget that holds the longest indexed text whole."""
    return max(1, max(len(doc.indexed_text) for doc in dataset.corpus))


def _progress(items: Sequence[T], enabled: bool, **kwargs: Any) -> Iterable[T]:
    if not enabled:
        return items
    return tqdm(items, disable=None, leave=False, **kwargs)  # disable=None: off when not a TTY
