"""The query stage, measured without a real LLM: the security gate's cost, LLM calls and added
latency per transform (against the loopback stub), Adaptive routing rates and corrective
retrieval's refusals on the shared evaluation sets.

Run: `PYTHONPATH=src:. .venv/bin/python -m bench.query_stage_bench [--eval /work/shared/eval]
[--sets scifact,cmrc2018,drcd_simplified] [--split test] [--max-queries 300]`.

What it does, per set (BM25 + RRF, whole documents as chunks, the built-in glossary rewriter; no
dense channel, no reranker: the product defaults with RAGSPINE_EMBEDDING=none):
- gate: µs per query to screen the query and its glossary variants, with the default gate
  (budgets only) and with 200 denied entities and 20 denied patterns; and the search time the
  gate sits in front of, for scale.
- adaptive: the share of queries the rule classifier routes to decomposition, and why.
- corrective: the share the rule grader refuses (no filters, no rewriter: grade → refuse), and of
  those, how many had no relevant document in the top 10 of the plain search (the precision of
  refusing), plus how many top-10 misses it did not refuse; and the share it refuses of questions
  the corpus cannot answer (another set's queries: en_medquad's against SciFact, zh_med_dialogue's
  against CMRC2018 and DRCD), with the BM25 match quantiles of both kinds.
- transforms: LLM calls and added wall time per query for hyde / rag_fusion / step_back /
  decompose against the stub server of tests/llm_stub.py (a reply in microseconds; a real LLM
  adds its own latency per call on top). The quality of LLM transforms is NOT measured: no LLM
  is reachable here; `ragspine eval` against an endpoint is the way to measure it.
Queries: the first `--max-queries` non-blank ones of the split by sorted query id (deterministic); a set without
the split asked for (SciFact has no dev) uses train. `refused_share_answerable_foreign_by_low_threshold`
shows what other grader thresholds would refuse: tune it on dev/train, report on test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from ragspine.eval.dataset import available_splits, load_beir
from ragspine.eval.runner import whole_document_budget
from ragspine.llm.openai_compatible import OpenAICompatibleProvider
from ragspine.retrieval.link.guarded import QueryPlan
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever
from ragspine.retrieval.lexical.analyzers import make_analyzer
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.query.adaptive import RuleComplexityClassifier
from ragspine.retrieval.query.corrective import RuleGrader
from ragspine.retrieval.query.gate import GateRules, SecurityGate
from ragspine.retrieval.query.glossary import GlossaryQueryRewriter, load_glossary
from ragspine.retrieval.query.transforms import LLMDecomposer, make_query_transform
from ragspine.retrieval.store.sqlite import ChunkStore

FOREIGN = {"scifact": "en_medquad", "cmrc2018": "zh_med_dialogue", "drcd_simplified": "zh_med_dialogue"}
RICH_RULES = GateRules(
    deny_entities=tuple(f"COMPETITOR_{n:03d}" for n in range(200)),
    deny_patterns=tuple(rf"secret\s*project\s*{n}" for n in range(20)),
)


def _index(dataset: Any) -> tuple[ChunkStore, NarrativeIndex]:
    store = ChunkStore(":memory:")
    store.init_schema()
    index = NarrativeIndex(store, query_rewriter=GlossaryQueryRewriter(), max_chars=whole_document_budget(dataset),
                           overlap_chars=0, analyzer=make_analyzer("auto"), persist_index=False)  # fmt: skip
    for doc in dataset.corpus:
        index.ingest(doc.indexed_text, DocumentMeta(doc_id=doc.doc_id, title=doc.title))
    index.refresh()
    return store, index


def _gate_us(gate: SecurityGate, index: NarrativeIndex, queries: list[str], passes: int = 5) -> float:
    variants = [index.variants(q) for q in queries]
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        for query, texts in zip(queries, variants, strict=True):
            gate.check(query)
            gate.screen(texts, origins=["query", *["rewriter"] * (len(texts) - 1)])
        best = min(best, time.perf_counter() - started)
    return best / len(queries) * 1e6


SWEEP = (0.15, 0.2, 0.25, 0.3, 0.35)


def _matches(runs: list[Any]) -> list[float]:
    return [run.lineage["corrective"]["grades"][0]["match"] for run in runs]


def _sweep(answerable: list[Any], foreign: list[Any]) -> dict[str, list[float]]:
    """Refused shares (answerable, foreign) had the grader's `low` threshold been each of SWEEP
    (BM25 only: a grade is incorrect exactly when match < low)."""
    out = {}
    for low in SWEEP:
        shares = [sum(m < low for m in _matches(runs)) / max(len(runs), 1) for runs in (answerable, foreign)]
        out[f"{low:g}"] = [round(x, 4) for x in shares]
    return out


def _split(root: Path, name: str, split: str) -> str:
    """`split`, or train for a set without it (SciFact has no dev split)."""
    return split if split in available_splits(root / name) else "train"


def _quantiles(runs: list[Any]) -> list[float]:
    """The 5th, 25th and 50th percentile of the first grade's BM25 match over `runs`."""
    matches = sorted(run.lineage["corrective"]["grades"][0]["match"] for run in runs)
    if not matches:
        return []
    return [round(matches[min(len(matches) - 1, int(q * len(matches)))], 3) for q in (0.05, 0.25, 0.5)]


def measure_set(root: Path, name: str, split: str, max_queries: int) -> dict[str, Any]:
    asked, split = split, _split(root, name, split)
    dataset = load_beir(root / name, split)
    ids = [q for q in sorted(dataset.queries) if dataset.queries[q].strip()][:max_queries]
    queries = [dataset.queries[q] for q in ids]
    # questions this corpus cannot answer: another set's, in the same language and domain where there is one
    foreign_name = FOREIGN[name]
    other = load_beir(root / foreign_name, _split(root, foreign_name, asked))
    foreign = [other.queries[q] for q in sorted(other.queries) if other.queries[q].strip()][:max_queries]
    store, index = _index(dataset)
    try:
        glossary = load_glossary()
        plain = NarrativeIndexRetriever(index)
        started = time.perf_counter()
        top10 = [plain.retrieve(q, top_k=10) for q in queries]
        search_ms = (time.perf_counter() - started) / len(queries) * 1e3
        gate = {
            "default_us_per_query": round(_gate_us(SecurityGate(), index, queries), 1),
            "rich_us_per_query": round(_gate_us(SecurityGate(RICH_RULES, glossary), index, queries), 1),
            "search_ms_per_query": round(search_ms, 2),
        }
        routes = [RuleComplexityClassifier(glossary).classify(q) for q in queries]
        reasons = Counter(r.split(" (")[0] for route in routes for r in route.reasons)
        corrective = NarrativeIndexRetriever(index, plan=QueryPlan(grader=RuleGrader()))
        runs = [corrective.retrieve_run(q, top_k=10) for q in queries]
        refused = [run.refusal is not None for run in runs]
        miss = [not any(s["doc_id"] in dataset.qrels[qid] for s in hits) for qid, hits in zip(ids, top10, strict=True)]
        n_refused = sum(refused)
        foreign_runs = [corrective.retrieve_run(q, top_k=10) for q in foreign]
        return {
            "set": name, "split": split, "queries": len(queries), "gate": gate,
            "adaptive": {"decompose_share": round(sum(r.route == "decompose" for r in routes) / len(routes), 4),
                         "reasons": dict(reasons.most_common())},
            "corrective": {
                "refused_share": round(n_refused / len(queries), 4),
                "refused": n_refused,
                "refused_without_relevant_in_top10": sum(r and m for r, m in zip(refused, miss, strict=True)),
                "top10_misses": sum(miss),
                "top10_misses_not_refused": sum(m and not r for r, m in zip(refused, miss, strict=True)),
                "match_quantiles_p5_p25_p50": _quantiles(runs),
                "foreign": {
                    "queries_from": foreign_name, "queries": len(foreign),
                    "refused_share": round(sum(r.refusal is not None for r in foreign_runs) / max(len(foreign), 1), 4),
                    "match_quantiles_p5_p25_p50": _quantiles(foreign_runs),
                },
                "refused_share_answerable_foreign_by_low_threshold": _sweep(runs, foreign_runs),
            },
        }  # fmt: skip
    finally:
        index.close()
        store.close()


def measure_transforms(root: Path, name: str, split: str, max_queries: int) -> dict[str, Any]:
    """LLM calls and added ms per query per transform against the stub server."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from llm_stub import LLMStubServer, StubLLM

    dataset = load_beir(root / name, split)
    queries = [dataset.queries[q] for q in sorted(dataset.queries)[:max_queries]]
    store, index = _index(dataset)
    out: dict[str, Any] = {}
    try:
        with LLMStubServer(StubLLM(responder=lambda body: "first rewrite\nsecond rewrite\nthird\nfourth")) as stub:
            with OpenAICompatibleProvider(stub.base_url, "stub", timeout=5, max_retries=0) as provider:
                plans = {"none": QueryPlan(), "decompose": QueryPlan(decomposer=LLMDecomposer(provider))}
                for spec in ("hyde", "rag_fusion", "step_back"):
                    plans[spec] = QueryPlan(transform=make_query_transform(spec, provider=provider))
                timings: dict[str, list[float]] = {}
                for spec, plan in plans.items():
                    retriever = NarrativeIndexRetriever(index, plan=plan)
                    before = len(stub.requests)
                    times = []
                    for query in queries:
                        started = time.perf_counter()
                        retriever.retrieve(query, top_k=10)
                        times.append(time.perf_counter() - started)
                    timings[spec] = times
                    out[spec] = {"llm_calls_per_query": (len(stub.requests) - before) / len(queries)}
                base = median(timings["none"])
                for spec, times in timings.items():
                    out[spec]["median_ms"] = round(median(times) * 1e3, 2)
                    out[spec]["added_median_ms"] = round((median(times) - base) * 1e3, 2)
    finally:
        index.close()
        store.close()
    return {"set": name, "split": split, "queries": len(queries), "transforms": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=Path("/work/shared/eval"))
    parser.add_argument("--sets", default="scifact,cmrc2018,drcd_simplified")
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-queries", type=int, default=300)
    parser.add_argument("--transform-queries", type=int, default=100, help="0: skip the transform timings")
    args = parser.parse_args()
    names = [n for n in args.sets.split(",") if n]
    results = [measure_set(args.eval, n, args.split, args.max_queries) for n in names]
    if args.transform_queries:
        results.append(measure_transforms(args.eval, names[0], args.split, args.transform_queries))
    print(json.dumps(results, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
