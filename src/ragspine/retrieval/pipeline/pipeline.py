"""One query, top to bottom: gate → variants → filters → channels → fusion → rerank → RESTRICTED exit → post-processing → snippets.

`Pipeline.run` is the whole query path; each method below is one stage, called in the order it
is written. The channels and fusion stages run in the index's ranker (`Ranker.rank`: BM25, the
dense channel and the extra channels, each through the `Channel` slot, combined by
`Fusion.fuse`); every other stage is here. A `Trace`, when given, receives one step per stage run.

Invariants:
- The caller's query is checked by the security gate before anything else: a refused query
  reaches no LLM and no index, and the run says it was refused and why.
- Every generated text (glossary variants, transform output, sub-questions, corrective
  rewrites) is screened by the gate before it is searched; a refused one never runs, and the
  lineage lists it with its origin and reason.
- Transforms, decomposers and classifiers see the question only; graders see only results
  already past RESTRICTED exit #2. An LLM failure degrades to the untransformed query (recorded
  in the lineage), never to an exception.
- Filters narrow: extracted filters never touch a field given explicitly and are dropped when
  they leave nothing. The filter fallback decides what an empty result under the caller's
  filters gives: "retry" (`retry_without_filters`, the default here) searches once without
  filters (without a corrective grader; with one, "drop filters" is its first action),
  "strict" gives nothing (and the corrective loop never drops them). The run's lineage
  carries `filters_dropped` (a result's keeps `retried_without_filters`): the caller's filter
  fields a retry dropped to find the results it returns (sorted; empty when none was), so a
  surface can say, at its top level, that the results are wider than asked.
- RESTRICTED chunks are masked before the channels score anything; the rerank step never gives
  one to a reranker (exit #1) and `restricted_exit` drops any that remain before the
  post-processors and snippets (exit #2).
- Decomposition merges the sub-questions' results round-robin in the decomposer's order,
  duplicates dropped (first kept), each result's lineage naming its sub-question.
- The corrective loop takes at most `MAX_ACTIONS` actions (drop filters, then rewrite) and
  refuses, explicitly, when the grade is still "incorrect".
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragspine.retrieval.filters import Filter, fields_of, parse_filter, to_dict
from ragspine.retrieval.model import FILTER_FIELDS
from ragspine.retrieval.pipeline.request import check_filter_fallback
from ragspine.retrieval.pipeline.snippets import SnippetRun, to_snippet, to_snippets
from ragspine.retrieval.snippet import Snippet
from ragspine.retrieval.pipeline.stages import RerankStep, check_query, restricted_exit
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.retrieval.pipeline.visual import fuse_visual
from ragspine.retrieval.postprocess.chain import PostprocessorChain
from ragspine.retrieval.query.adaptive import DECOMPOSE, ComplexityClassifier
from ragspine.retrieval.query.corrective import INCORRECT, MAX_ACTIONS, Grade, Grader
from ragspine.retrieval.query.filter_extraction import FilterExtractor, combine, narrowing, safe_extract
from ragspine.retrieval.query.gate import QUERY_ORIGIN, SecurityGate
from ragspine.retrieval.query.transforms import QueryTransform, origin_of, safe_generate
from ragspine.retrieval.store.protocol import ChunkStoreProtocol
from ragspine.retrieval.types import RetrievalResult
from ragspine.retrieval.visual.channel import VisualChannel

_LOG = logging.getLogger(__name__)

Lineage = dict[str, Any]
Ranked = list[tuple[RetrievalResult, Lineage]]
RankFn = Callable[[Mapping[str, Any], "Filter | None"], list[RetrievalResult]]  # one filtered ranking + rerank


class Ranker(Protocol):
    """What the pipeline needs of an index (`NarrativeIndex` is one): its store, the rewriter's
    variants, the channels and fusion stages, its rerank stage, and BM25's match strength."""

    store: ChunkStoreProtocol

    def variants(self, query: str) -> list[str]: ...

    def rank(
        self,
        query: str,
        *,
        top_k: int,
        filters: Mapping[str, str | None] | None,
        where: Filter | Mapping[str, Any] | None,
        variants: Sequence[str] | None,
        trace: Trace | None,
    ) -> list[RetrievalResult]: ...

    def rerank_step(self) -> RerankStep | None: ...

    def lexical_match(self, query: str, results: Sequence[RetrievalResult]) -> float: ...


@dataclass(frozen=True)
class QueryPlan:
    """The query stage's layers (each None: off). `rewriter` is the corrective loop's rewrite
    (off: the loop only drops filters, then refuses)."""

    gate: SecurityGate = field(default_factory=SecurityGate)
    transform: QueryTransform | None = None
    decomposer: QueryTransform | None = None
    classifier: ComplexityClassifier | None = None
    grader: Grader | None = None
    rewriter: QueryTransform | None = None


@dataclass(frozen=True)
class QueryRun:
    """The ranked results with their lineage, and the run's own lineage (`refused` when the
    run refused: the query was denied by the gate, or the corrective loop found nothing good)."""

    ranked: Ranked
    lineage: Lineage

    @property
    def refusal(self) -> str | None:
        reason = self.lineage.get("refused")
        return reason if isinstance(reason, str) else None


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
class RunContext:
    """One run's context (the request itself is checked by `pipeline.request.SearchRequest`
    on every surface): the query as the caller gave it, its filters (exact and typed, see `split_filters`) and
    how many snippets it wants. `extract` is the filter extractor's answer for a text (asked
    once per text and run: the corrective loop searches a query again without its filters).
    `retry`: whether an empty filtered result may be searched again without the caller's
    filters (the filter fallback "retry"; False: "strict")."""

    query: str
    exact: dict[str, Any]
    explicit: Filter | None
    top_k: int
    extract: Callable[[str], tuple[Filter | None, str | None]]
    trace: Trace | None
    retry: bool = True

    def dropped(self, lineage: Lineage) -> list[str]:
        """The caller's filter fields a search with this `lineage` dropped (sorted; [] when
        it ran with them)."""
        if not lineage.get("retried_without_filters"):
            return []
        return sorted(set(self.exact) | fields_of(self.explicit))


@dataclass
class Pipeline:
    """The query path over one index (see the module docstring): its ranker, the query stage's
    layers (`plan`), the filter policy, the post-processors and the page-image channel."""

    index: Ranker
    plan: QueryPlan = field(default_factory=QueryPlan)
    retry_without_filters: bool = True
    filter_extractor: FilterExtractor | None = None
    postprocessor: PostprocessorChain | None = None
    visual: VisualChannel | None = None

    def run(
        self,
        query: str,
        *,
        filters: Mapping[str, Any] | Filter | None = None,
        where: Filter | Mapping[str, Any] | None = None,
        top_k: int,
        trace: Trace | None = None,
        filter_fallback: str | None = None,
    ) -> SnippetRun:
        """The snippets for `query`, the run's lineage, and why it was refused (or None).
        `filter_fallback`: "retry" or "strict" for this run (None: `retry_without_filters`)."""
        check_query(query)
        fallback = check_filter_fallback(filter_fallback)
        retry = self.retry_without_filters if fallback is None else fallback == "retry"
        exact, typed = split_filters(filters)  # a bad filter is an error before anything runs
        explicit = parse_filter([f for f in (typed, parse_filter(where)) if f is not None])
        extract = functools.cache(functools.partial(safe_extract, self.filter_extractor))
        request = RunContext(query, exact, explicit, top_k, extract, trace, retry)
        run = self._gate(request)
        started = time.perf_counter()
        snippets = to_snippets(run.ranked)
        if trace is not None:
            trace.add("snippets", came_in=len(run.ranked), went_out=len(snippets), ms=_ms_since(started))
        if self.visual is not None and run.refusal is None:
            snippets = self._visual(request, snippets)
        return SnippetRun(snippets, run.lineage, run.refusal)

    # -- gate ------------------------------------------------------------------------------------
    def _gate(self, request: RunContext) -> QueryRun:
        """The security gate on the caller's query, then one question or its sub-questions."""
        query, trace = request.query, request.trace
        reason = self.plan.gate.check(query, origin=QUERY_ORIGIN)
        if trace is not None:
            trace.add("gate", came_in=1, went_out=0 if reason else 1, allowed=reason is None, reason=reason)
        if reason is not None:
            refusal = {"query": query, "origin": QUERY_ORIGIN, "reason": reason}
            return QueryRun([], {"refused": f"security gate: the query {reason}", "gate_refused": [refusal]})
        if self.plan.decomposer is None:
            return self._single(request, query)
        return self._decomposed(request)

    def _decomposed(self, request: RunContext) -> QueryRun:
        """Adaptive routing, then the decomposer's sub-questions (screened), each run whole and
        merged round-robin; a question that does not split runs whole."""
        plan, query = self.plan, request.query
        assert plan.decomposer is not None
        extra: Lineage = {}
        if plan.classifier is not None:
            route = plan.classifier.classify(query)
            extra["route"] = route.to_dict()
            if route.route != DECOMPOSE:
                return _with(self._single(request, query), extra)
        subs, error = safe_generate(plan.decomposer.transform, query)
        screened = plan.gate.screen(subs, origins=origin_of(plan.decomposer))
        extra["decomposition"] = {
            "sub_questions": screened.allowed,
            **({"gate_refused": [r.to_dict() for r in screened.refused]} if screened.refused else {}),
            **({"error": error} if error else {}),
        }
        if len(screened.allowed) < 2:  # nothing to split: the question runs whole
            return _with(self._single(request, query), extra)
        runs = [self._single(request, sub) for sub in screened.allowed]
        ranked = _round_robin([[(r, {**lin, "sub_question": sub}) for r, lin in run.ranked]
                               for sub, run in zip(screened.allowed, runs, strict=True)], request.top_k)  # fmt: skip
        refusals = {sub: run.refusal for sub, run in zip(screened.allowed, runs, strict=True) if run.refusal}
        if refusals:
            extra["decomposition"]["refused"] = refusals
        if not ranked and refusals:
            extra["refused"] = "every sub-question was refused"
        extra["filters_dropped"] = sorted({name for run in runs for name in run.lineage.get("filters_dropped", [])})
        return QueryRun(ranked, extra)

    def _single(self, request: RunContext, query: str) -> QueryRun:
        """One question, single-shot: its variants screened, searched, graded and corrected."""
        variants, extra = self._variants(query, self.plan, request.trace)
        if query not in variants:  # a sub-question or rewrite the gate refused is never searched
            return QueryRun([], {**extra, "refused": "security gate refused the question"})
        results, lineage = self._search(request, query, variants, drop_filters=False, retry=self.plan.grader is None)
        if self.plan.grader is not None:
            results, lineage, corrective = self._correct(request, query, variants, results, lineage)
            extra["corrective"] = corrective
            if corrective["refused"]:
                extra["refused"] = f"corrective retrieval: {corrective['grades'][-1]['reason']}"
        lineage = {**lineage, **extra}
        dropped = request.dropped(lineage) if results else []
        return QueryRun([(r, lineage) for r in results], {**extra, "filters_dropped": dropped})

    # -- variants ----------------------------------------------------------------------------------
    def _variants(self, query: str, plan: QueryPlan, trace: Trace | None) -> tuple[list[str], Lineage]:
        """The rewriter's variants and the transform's texts, each screened by the gate."""
        started = time.perf_counter()
        texts = self.index.variants(query)
        origins = [QUERY_ORIGIN if text == query else "rewriter" for text in texts]
        extra: Lineage = {}
        if plan.transform is not None:
            name = origin_of(plan.transform)
            generated, error = safe_generate(plan.transform.transform, query)
            texts, origins = [*texts, *generated], [*origins, *([name] * len(generated))]
            extra["transform"] = {"name": name, "generated": len(generated), **({"error": error} if error else {})}
        screened = plan.gate.screen(texts, origins=origins)
        if screened.refused:
            extra["gate_refused"] = [r.to_dict() for r in screened.refused]
        if trace is not None:
            trace.add("variants", came_in=len(texts), went_out=len(screened.allowed), ms=_ms_since(started),
                      variants=screened.allowed, **extra)  # fmt: skip
        return screened.allowed, extra

    # -- filters → channels → fusion → rerank → exit → post-processing ---------------------------
    def _search(
        self, request: RunContext, query: str, variants: list[str], *, drop_filters: bool, retry: bool
    ) -> tuple[list[RetrievalResult], Lineage]:
        """One query's screened variants searched with the filters (or without, `drop_filters`),
        through RESTRICTED exit #2 and the post-processors."""
        chain = self.postprocessor
        wanted, top_k = request.top_k, chain.fetch_size(request.top_k) if chain else request.top_k
        lineage, added = self._filters(request, query, drop_filters)
        reranked: Lineage = {}  # the last rank's rerank lineage, added to the lineage last

        def rank(filters: Mapping[str, Any], where: Filter | None) -> list[RetrievalResult]:
            return self._rank(request, query, variants, top_k, filters, where, reranked)

        if drop_filters:
            results = rank({}, None)
        else:
            results = self._filtered(request, rank, lineage, added, retry=retry)
        if "rerank" in reranked:
            lineage["rerank"] = reranked["rerank"]
        results = self._exit(results, request.trace)
        return self._postprocess(query, results, wanted, request.trace), lineage

    def _filters(self, request: RunContext, query: str, drop_filters: bool) -> tuple[Lineage, Filter | None]:
        """The filters' lineage (what is applied, or with `drop_filters` what was asked and
        dropped) and the extracted predicates that narrow the explicit ones (None: none)."""
        exact, explicit = request.exact, request.explicit
        extracted, error = request.extract(query)
        taken = parse_filter([{k: v} for k, v in exact.items()] + ([explicit] if explicit else []))
        added = narrowing(taken, extracted)
        lineage: Lineage = {"filters": exact, "where": to_dict(explicit) or None, "extracted": to_dict(added) or None,
                            "retried_without_filters": False}  # fmt: skip
        if error is not None:
            lineage["extraction_error"] = error
        if request.trace is not None:
            request.trace.add("filters", **{k: v for k, v in lineage.items() if k != "retried_without_filters"},
                              **({"dropped": True} if drop_filters else {}))  # fmt: skip
        if drop_filters:
            lineage.update({"filters": {}, "where": None, "extracted": None, "requested_filters": exact,
                            "requested_where": lineage["where"], "requested_extracted": lineage["extracted"],
                            "retried_without_filters": True})  # fmt: skip
        return lineage, added

    def _filtered(
        self, request: RunContext, rank: RankFn, lineage: Lineage, added: Filter | None, *, retry: bool
    ) -> list[RetrievalResult]:
        """The ranking under the filters; when it is empty, again without the extracted ones,
        then (with `retry` and `retry_without_filters`) once without any (the lineage says so)."""
        exact, explicit, trace = request.exact, request.explicit, request.trace
        results = rank(exact, combine(explicit, added))
        if not results and added is not None:
            _LOG.info("no result with extracted filters %s; using explicit filters only", to_dict(added))
            if trace is not None:
                trace.add("filters", retry="nothing found: searching again without the extracted filters")
            results = rank(exact, explicit)
            lineage["extracted_dropped"] = True
        if retry and not results and (exact or explicit is not None) and request.retry:
            _LOG.info("no result with filters %s %s; retrying once without filters", exact, lineage["where"])
            if trace is not None:
                trace.add("filters", retry="nothing found: searching once without filters")
            results = rank({}, None)
            lineage.update({"filters": {}, "where": None, "requested_filters": exact,
                            "requested_where": lineage["where"], "retried_without_filters": True})  # fmt: skip
        return results

    def _rank(
        self,
        request: RunContext,
        query: str,
        variants: list[str],
        top_k: int,
        filters: Mapping[str, Any],
        where: Filter | None,
        lineage: Lineage,
    ) -> list[RetrievalResult]:
        """The channels and fusion (the index's ranker), then the rerank step over the fused head."""
        step = self.index.rerank_step()
        results = self.index.rank(query, top_k=top_k if step is None else step.depth(top_k), filters=filters,
                                  where=where, variants=variants, trace=request.trace)  # fmt: skip
        if step is None:
            return results
        started, fused = time.perf_counter(), len(results)
        results, lineage["rerank"] = step.apply(query, results, top_k)
        if request.trace is not None:
            request.trace.add("rerank", came_in=fused, went_out=len(results), ms=_ms_since(started),
                              **{k: v for k, v in lineage["rerank"].items() if k != "ms"})  # fmt: skip
        return results

    def _exit(self, results: list[RetrievalResult], trace: Trace | None) -> list[RetrievalResult]:
        """RESTRICTED exit #2 (masked before scoring already: this is defence in depth)."""
        kept = restricted_exit(results)
        if trace is not None:
            trace.add("exit", came_in=len(results), went_out=len(kept))
        return kept

    def _postprocess(self, query: str, results: list[RetrievalResult], wanted: int, trace: Trace | None) -> list[RetrievalResult]:
        """The post-processor chain (it never sees RESTRICTED, and never adds a result), then the
        first `wanted`."""
        if self.postprocessor is None:
            return results[:wanted]
        started = time.perf_counter()
        processed = self.postprocessor.process(query, results, top_k=wanted)
        if trace is not None:
            trace.add("postprocess", came_in=len(results), went_out=len(processed[:wanted]), ms=_ms_since(started),
                      chain=[type(p).__name__ for p in self.postprocessor.members])  # fmt: skip
        return processed[:wanted]

    # -- corrective loop ----------------------------------------------------------------------------
    def _correct(
        self, request: RunContext, query: str, variants: list[str], results: list[RetrievalResult], lineage: Lineage
    ) -> tuple[list[RetrievalResult], Lineage, Lineage]:
        """The bounded grade → act loop: drop filters (when any were applied and the fallback is
        "retry"), then rewrite (when a rewriter is set), then refuse."""
        plan = self.plan
        assert plan.grader is not None
        grades = [self._grade(query, results)]
        actions: list[Lineage] = []
        filtered = bool(lineage.get("filters") or lineage.get("where") or lineage.get("extracted"))
        drop, current, current_variants = False, query, variants
        while grades[-1].verdict == INCORRECT and len(actions) < MAX_ACTIONS:
            if filtered and not drop and request.retry:
                drop = True
                actions.append({"action": "drop_filters"})
            elif plan.rewriter is not None and not any(a["action"] == "rewrite" for a in actions):
                action, rewritten = self._rewrite(query, request.trace)
                actions.append(action)
                if rewritten is None:
                    break
                current, current_variants = rewritten
            else:
                break
            results, lineage = self._search(request, current, current_variants, drop_filters=drop, retry=False)
            grades.append(self._grade(current, results))
        refused = grades[-1].verdict == INCORRECT
        corrective = {"grades": [g.to_dict() for g in grades], "actions": actions, "refused": refused}
        return ([] if refused else results), lineage, corrective

    def _rewrite(self, query: str, trace: Trace | None) -> tuple[Lineage, tuple[str, list[str]] | None]:
        """The corrective rewrite's action lineage and (rewritten query, its screened variants),
        or None when the rewriter failed or the gate refused the rewrite or its own variant."""
        assert self.plan.rewriter is not None
        rewritten, error = safe_generate(self.plan.rewriter.transform, query)
        screened = self.plan.gate.screen(rewritten[:1], origins=origin_of(self.plan.rewriter))
        if not screened.allowed:
            why = error or (screened.refused[0].reason if screened.refused else "no rewrite")
            return {"action": "rewrite", "error": why,
                    **({"gate_refused": [r.to_dict() for r in screened.refused]} if screened.refused else {})}, None  # fmt: skip
        current = screened.allowed[0]
        current_variants, extra = self._variants(current, QueryPlan(gate=self.plan.gate), trace)
        if current not in current_variants:
            return {"action": "rewrite", "error": "security gate refused the rewrite", **extra}, None
        return {"action": "rewrite", "query": current, **extra}, (current, current_variants)

    def _grade(self, query: str, results: list[RetrievalResult]) -> Grade:
        assert self.plan.grader is not None
        return self.plan.grader.grade(query, results, self.index.lexical_match(query, results))

    # -- visual pages -------------------------------------------------------------------------------
    def _visual(self, request: RunContext, snippets: list[Snippet]) -> list[Snippet]:
        """Page pointers of the page-image channel fused with the text snippets."""
        assert self.visual is not None
        wanted = parse_filter([{k: v} for k, v in request.exact.items()] + ([request.explicit] if request.explicit else []))
        return fuse_visual(snippets, request.query, self.visual, self.index.store, top_k=request.top_k, filters=wanted,
                           member=lambda chunk: to_snippet(RetrievalResult(chunk, 0.0, None, 0.0), {}),
                           lineage={"filters": to_dict(wanted) or None})  # fmt: skip


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _with(run: QueryRun, extra: Lineage) -> QueryRun:
    """`run` with `extra` added to its lineage and to every result's."""
    return QueryRun([(r, {**lin, **extra}) for r, lin in run.ranked], {**run.lineage, **extra})


def _round_robin(rankings: Sequence[Ranked], top_k: int) -> Ranked:
    """Rank 1 of each ranking in order, then rank 2, …; a chunk already taken is skipped."""
    merged: Ranked = []
    seen: set[str] = set()
    for rank in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if rank < len(ranking) and ranking[rank][0].chunk.chunk_id not in seen:
                seen.add(ranking[rank][0].chunk.chunk_id)
                merged.append(ranking[rank])
    return merged[:top_k]
