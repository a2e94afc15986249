"""The guarded query run: gate → (route → decompose) → variants → gate → search → grade → act or refuse.

`NarrativeIndexRetriever` runs every query through `run_query` with its `QueryPlan`; the default
plan (a gate with only its budgets, nothing else) searches exactly the rewriter's variants, so
results and lineage are those of the pipeline without this module unless a variant is refused.

Invariants:
- The caller's query is checked by the gate before anything else: a refused query reaches no
  LLM and no index, and the run says it was refused and why.
- Every generated text (glossary variants, transform output, sub-questions, corrective
  rewrites) is screened by the gate before it is searched; a refused one never runs, and the
  lineage lists it with its origin and reason.
- Transforms, decomposers and classifiers see the question only; graders see only results the
  link has already passed through RESTRICTED exit #2. An LLM failure degrades to the
  untransformed query (recorded in the lineage), never to an exception.
- Decomposition merges the sub-questions' results round-robin in the decomposer's order,
  duplicates dropped (first kept), each result's lineage naming its sub-question.
- The corrective loop takes at most `MAX_ACTIONS` actions (drop filters, then rewrite) and
  refuses, explicitly, when the grade is still "incorrect".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragspine.retrieval.query.adaptive import DECOMPOSE, ComplexityClassifier
from ragspine.retrieval.query.corrective import INCORRECT, MAX_ACTIONS, Grade, Grader
from ragspine.retrieval.query.gate import QUERY_ORIGIN, SecurityGate
from ragspine.retrieval.query.transforms import QueryTransform, origin_of, safe_generate
from ragspine.retrieval.types import RetrievalResult

Lineage = dict[str, Any]
Ranked = list[tuple[RetrievalResult, Lineage]]


class Search(Protocol):
    """The link's filtered search of one query with its screened variants: RESTRICTED-free,
    post-processed results and the filter lineage. `drop_filters`: search unfiltered;
    `retry`: today's single retry without filters when nothing is found."""

    def __call__(
        self, query: str, variants: list[str], /, *, drop_filters: bool, retry: bool
    ) -> tuple[list[RetrievalResult], Lineage]: ...


class QueryIndex(Protocol):
    """What the run needs of the index: the rewriter's variants and the BM25 match strength."""

    def variants(self, query: str) -> list[str]: ...

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


def run_query(plan: QueryPlan, index: QueryIndex, search: Search, query: str, top_k: int) -> QueryRun:
    """Run `query` through `plan` (see the module docstring)."""
    reason = plan.gate.check(query, origin=QUERY_ORIGIN)
    if reason is not None:
        refusal = {"query": query, "origin": QUERY_ORIGIN, "reason": reason}
        return QueryRun([], {"refused": f"security gate: the query {reason}", "gate_refused": [refusal]})
    if plan.decomposer is None:
        return _single(plan, index, search, query)
    extra: Lineage = {}
    if plan.classifier is not None:
        route = plan.classifier.classify(query)
        extra["route"] = route.to_dict()
        if route.route != DECOMPOSE:
            return _with(_single(plan, index, search, query), extra)
    subs, error = safe_generate(plan.decomposer.transform, query)
    screened = plan.gate.screen(subs, origins=origin_of(plan.decomposer))
    extra["decomposition"] = {
        "sub_questions": screened.allowed,
        **({"gate_refused": [r.to_dict() for r in screened.refused]} if screened.refused else {}),
        **({"error": error} if error else {}),
    }
    if len(screened.allowed) < 2:  # nothing to split: the question runs whole
        return _with(_single(plan, index, search, query), extra)
    runs = [_single(plan, index, search, sub) for sub in screened.allowed]
    ranked = _round_robin([[(r, {**lin, "sub_question": sub}) for r, lin in run.ranked]
                           for sub, run in zip(screened.allowed, runs, strict=True)], top_k)  # fmt: skip
    refusals = {sub: run.refusal for sub, run in zip(screened.allowed, runs, strict=True) if run.refusal}
    if refusals:
        extra["decomposition"]["refused"] = refusals
    if not ranked and refusals:
        extra["refused"] = "every sub-question was refused"
    return QueryRun(ranked, extra)


def _single(plan: QueryPlan, index: QueryIndex, search: Search, query: str) -> QueryRun:
    """One question, single-shot: its variants screened, searched, graded and corrected."""
    variants, extra = _screened_variants(plan, index, query)
    if query not in variants:  # a sub-question or rewrite the gate refused is never searched
        return QueryRun([], {**extra, "refused": "security gate refused the question"})
    results, lineage = search(query, variants, drop_filters=False, retry=plan.grader is None)
    if plan.grader is not None:
        results, lineage, corrective = _correct(plan, index, search, query, variants, results, lineage)
        extra["corrective"] = corrective
        if corrective["refused"]:
            extra["refused"] = f"corrective retrieval: {corrective['grades'][-1]['reason']}"
    lineage = {**lineage, **extra}
    return QueryRun([(r, lineage) for r in results], extra)


def _screened_variants(plan: QueryPlan, index: QueryIndex, query: str) -> tuple[list[str], Lineage]:
    texts = index.variants(query)
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
    return screened.allowed, extra


def _correct(
    plan: QueryPlan,
    index: QueryIndex,
    search: Search,
    query: str,
    variants: list[str],
    results: list[RetrievalResult],
    lineage: Lineage,
) -> tuple[list[RetrievalResult], Lineage, Lineage]:
    """The bounded grade → act loop: drop filters (when any were applied), then rewrite (when a
    rewriter is set), then refuse."""
    assert plan.grader is not None
    grades = [_grade(plan.grader, index, query, results)]
    actions: list[Lineage] = []
    filtered = bool(lineage.get("filters") or lineage.get("where") or lineage.get("extracted"))
    drop, current, current_variants = False, query, variants
    while grades[-1].verdict == INCORRECT and len(actions) < MAX_ACTIONS:
        if filtered and not drop:
            drop = True
            actions.append({"action": "drop_filters"})
        elif plan.rewriter is not None and not any(a["action"] == "rewrite" for a in actions):
            rewritten, error = safe_generate(plan.rewriter.transform, query)
            screened = plan.gate.screen(rewritten[:1], origins=origin_of(plan.rewriter))
            if not screened.allowed:
                why = error or (screened.refused[0].reason if screened.refused else "no rewrite")
                actions.append({"action": "rewrite", "error": why,
                                **({"gate_refused": [r.to_dict() for r in screened.refused]} if screened.refused else {})})  # fmt: skip
                break
            current = screened.allowed[0]
            current_variants, extra = _screened_variants(QueryPlan(gate=plan.gate), index, current)
            if current not in current_variants:
                actions.append({"action": "rewrite", "error": "security gate refused the rewrite", **extra})
                break
            actions.append({"action": "rewrite", "query": current, **extra})
        else:
            break
        results, lineage = search(current, current_variants, drop_filters=drop, retry=False)
        grades.append(_grade(plan.grader, index, current, results))
    refused = grades[-1].verdict == INCORRECT
    corrective = {"grades": [g.to_dict() for g in grades], "actions": actions, "refused": refused}
    return ([] if refused else results), lineage, corrective


def _grade(grader: Grader, index: QueryIndex, query: str, results: list[RetrievalResult]) -> Grade:
    return grader.grade(query, results, index.lexical_match(query, results))


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
