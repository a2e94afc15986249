"""Pseudo-relevance feedback (and the fusion share's oracle): a grid on the product path, chosen leave-one-dataset-out.

    python -m bench.feedback_tune run ../shared/eval/scifact --split train --cache /work/evalc3 --out DIR [--limit N] [--configs ...]
    python -m bench.feedback_tune lodo DIR [TESTDIR]
    python -m bench.feedback_tune table DIR [TESTDIR] --split test --configs none,rm3:d10:w0.1
    python -m bench.feedback_tune oracle DIR --set zh_med_dialogue --split dev
    python -m bench.feedback_tune fires ../shared/eval/cmrc2018 --split test --cache /work/evalc3
    python -m bench.feedback_tune speed ../shared/eval/scifact --split train --cache /work/evalc3 --configs none,rm3:d5:w0.3

`run` opens the set's cached product workspace (what `ragspine eval --cache DIR` left: the
defaults, mode hybrid, embedding e5) once and ranks every judged query (the first N by id with
`--limit`) exactly as `ragspine eval` does (`_query_all`: `Workspace.search`, entries by their best
snippet), once per config, setting only the retriever's `feedback` (RAGSPINE_FEEDBACK and its
depth/weights are read at query time) or its zscore `dense_share`. Each query's vector is made
once and served from memory, so the configs differ in the channels' work only. A config is
`none`, `rm3:dD:wW` (depth D, expansion share W, 10 terms), `rocchio:dD:wB` (depth D, weight B),
`both:dD:wW:B`, or `share:S` (zscore's dense share S, no feedback). One JSON per (set, split,
config) goes to --out with nDCG@10, Recall@100 and each query's nDCG@10.

`lodo` applies the issue's rule per mode (and over every mode: "switch"): among the configs run on
every tuning split (train/dev), those at which no tuning set is below `none` by more than 0.003,
the best mean nDCG@10 over the sets (`none` itself qualifies, so a mode that never helps picks
`none`); for each held-out set the same rule on the other sets' tuning splits, and its test figure
(when a test run of that config exists). `oracle` prints, for one split, each `share:S` config and
the per-query best share (an upper bound on any per-query fusion weighting). `fires` counts the
queries the lexical bridge (RAGSPINE_LEXICAL_BRIDGE=cedict) translates on a set. `speed` times
`Workspace.search` per config, interleaved query by query, vectors made beforehand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TUNING = ("train", "dev")
TOLERANCE = 0.003  # the issue's: no set below today's figure by more than this
SHARES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DEFAULT_CONFIGS = (
    "none",
    *(f"rm3:d{d}:w{w}" for d in (3, 10) for w in (0.1, 0.3)),
    *(f"rocchio:d{d}:w{w}" for d in (3, 10) for w in (0.25, 0.5)),
    "both:d3:w0.1:0.25",
)


def apply(retriever: Any, config: str) -> None:
    """Set `retriever`'s feedback and fusion to what `config` names (see the module docstring)."""
    from ragspine.retrieval.fusion.rrf import Fusion
    from ragspine.retrieval.pipeline.feedback import Feedback

    parts = config.split(":")
    retriever.fusion = Fusion(dense_share=float(parts[1])) if parts[0] == "share" else Fusion()
    if parts[0] in ("none", "share"):
        retriever.feedback = Feedback()
        return
    depth = int(parts[1].removeprefix("d"))
    weights = [float(w) for w in parts[2].removeprefix("w").split(":")] + [float(p) for p in parts[3:]]
    if parts[0] == "rm3":
        retriever.feedback = Feedback("rm3", depth, lexical_weight=weights[0])
    elif parts[0] == "rocchio":
        retriever.feedback = Feedback("rocchio", depth, dense_weight=weights[0])
    elif parts[0] == "both":
        retriever.feedback = Feedback("both", depth, lexical_weight=weights[0], dense_weight=weights[1])
    else:
        raise SystemExit(f"unknown config {config!r}")


def _opened(dataset_dir: Path, split: str, cache: Path) -> tuple[Any, Any]:
    """(the split, settings at its cached workspace), refusing one whose ingest has not finished."""
    from bench.fusion_learn import cached_workspace

    dataset, settings = cached_workspace(dataset_dir, split, cache)
    manifest = Path(settings.db).parent / "eval-manifest.json"
    if not manifest.is_file() or json.loads(manifest.read_text()).get("status") != "complete":
        raise SystemExit(f"{manifest.parent}: its ingest has not finished (no complete eval-manifest.json)")
    return dataset, settings


def _limited(dataset: Any, limit: int | None) -> Any:
    import dataclasses

    if limit is None:
        return dataset
    keep = sorted(dataset.queries)[:limit]
    return dataclasses.replace(dataset, queries={q: dataset.queries[q] for q in keep}, qrels={q: dataset.qrels[q] for q in keep})


def run(dataset_dir: Path, split: str, cache: Path, out: Path, limit: int | None, configs: Sequence[str]) -> None:
    from ragspine.eval.metrics import evaluate_run
    from bench.fusion_learn import cached_query_vectors
    from ragspine.eval.product import _query_all
    from ragspine.workspace import Workspace

    dataset, settings = _opened(dataset_dir, split, cache)
    dataset = _limited(dataset, limit)
    out.mkdir(parents=True, exist_ok=True)
    e5, original = cached_query_vectors()
    try:
        with Workspace.from_settings(settings) as workspace:
            stats = workspace.stats()
            retriever = workspace.retriever.index.retriever()
            for config in configs:
                target = out / f"{dataset.name}-{split}-{config.replace(':', '_')}.json"
                if target.is_file():
                    continue
                apply(retriever, config)
                assert workspace.retriever.index.retriever() is retriever
                ranked, seconds, ms = _query_all(workspace, dataset.queries, 100, stats["chunks"], stats["documents"], False)
                metrics = evaluate_run({q: [d for d, _ in r] for q, r in ranked.items()}, dataset.qrels)
                row = {"set": dataset.name, "split": split, "config": config, "queries": metrics.queries,
                       "ndcg": metrics.ndcg, "recall": metrics.recall, "mrr": metrics.mrr,
                       "p50_ms": statistics.median(ms) if ms else 0.0,
                       "per_query": {q: v["ndcg"] for q, v in metrics.per_query.items()},
                       "recall_per_query": {q: v["recall"] for q, v in metrics.per_query.items()}}  # fmt: skip
                target.write_text(json.dumps(row) + "\n")
                print(f"{dataset.name}/{split} {config}: nDCG@10 {metrics.ndcg:.4f} R@100 {metrics.recall:.4f} "
                      f"({metrics.queries} q, {seconds:.0f} s, p50 {row['p50_ms']:.1f} ms)", flush=True)  # fmt: skip
    finally:
        e5.embed_queries = original


def _load(*folders: Path) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    rows: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for path in sorted(p for folder in folders for p in folder.glob("*.json")):
        row = json.loads(path.read_text())
        rows.setdefault((row["set"], row["split"]), {})[row["config"]] = row
    return rows


def choose(figures: dict[str, dict[str, float]], candidates: Sequence[str]) -> str:
    """Among `candidates` run on every set of `figures` (set -> config -> nDCG@10), those with no
    set below `none` by more than TOLERANCE; the best mean (ties: `none`, then the name)."""
    common = [c for c in candidates if all(c in by for by in figures.values())]
    fair = [c for c in common if all(by[c] >= by["none"] - TOLERANCE for by in figures.values())]
    return max(fair, key=lambda c: (statistics.fmean(by[c] for by in figures.values()), c == "none", c))


MODES = ("both", "rm3", "rocchio")


def _candidates(configs: Sequence[str], mode: str) -> list[str]:
    """`none` and the configs of `mode` ("switch": of every feedback mode)."""
    kinds = MODES if mode == "switch" else (mode,)
    return [c for c in configs if c == "none" or c.split(":")[0] in kinds]


def _held_out(figures: dict[str, dict[str, float]], test: dict[str, dict[str, Any]], candidates: Sequence[str]) -> None:
    """For each set: the rule's pick on the other sets, and its test figure where run."""
    for held in sorted(figures):
        picked = choose({s: by for s, by in figures.items() if s != held}, candidates)
        got, base = test.get(held, {}).get(picked), test.get(held, {}).get("none")
        shown = f"test {got['ndcg']:.4f} (none {base['ndcg']:.4f})" if got and base else "test: not run"
        print(f"  held out {held}: {picked}; {shown}")


def lodo(folders: Sequence[Path]) -> None:
    rows = _load(*folders)
    tuning = {s: by for (s, split), by in rows.items() if split in TUNING}
    test = {s: by for (s, split), by in rows.items() if split == "test"}
    if "none" not in set.intersection(*(set(by) for by in tuning.values())):
        raise SystemExit("every tuning split needs a `none` run")
    figures = {s: {c: r["ndcg"] for c, r in by.items()} for s, by in tuning.items()}
    configs = sorted(set.intersection(*(set(by) for by in figures.values())))
    print("tuning splits, nDCG@10 (queries):")
    for config in configs:
        cells = " ".join(f"{s} {figures[s][config]:.4f}" for s in sorted(figures))
        print(f"  {config:<20} {cells}  mean {statistics.fmean(figures[s][config] for s in figures):.4f}")
    for mode in [*MODES, "switch"]:
        candidates = _candidates(configs, mode)
        print(f"{mode}: chosen on every tuning set: {choose(figures, candidates)}")
        _held_out(figures, test, candidates)


def table(folders: Sequence[Path], split: str, configs: Sequence[str]) -> None:
    """A Markdown table: per set (its `split` runs; "tuning" for train/dev), nDCG@10 of each config
    (— where not run), and the mean over the sets that ran every config."""
    rows = {s: by for (s, sp), by in _load(*folders).items() if sp == split or (split == "tuning" and sp in TUNING)}
    print("| set (queries) | " + " | ".join(configs) + " |")
    print("|---|" + "---:|" * len(configs))
    for name, by in sorted(rows.items()):
        queries = next(iter(by.values()))["queries"]
        cells = [f"{by[c]['ndcg']:.4f}" if c in by else "—" for c in configs]
        print(f"| {name} ({queries}) | " + " | ".join(cells) + " |")
    full = [by for by in rows.values() if all(c in by for c in configs)]
    if full:
        print(f"| mean ({len(full)} sets) | " + " | ".join(f"{statistics.fmean(by[c]['ndcg'] for by in full):.4f}" for c in configs) + " |")


def oracle(folder: Path, name: str, split: str) -> None:
    by = _load(folder).get((name, split), {})
    shares = {c: r for c, r in by.items() if c.startswith("share:")}
    if shares and "none" in by:  # the default: zscore at its dense share, no feedback
        from ragspine.retrieval.fusion.rrf import Fusion

        shares.setdefault(f"share:{Fusion().dense_share:g}", by["none"])
    if not shares:
        raise SystemExit(f"no share: runs for {name}/{split} in {folder}")
    for config, row in sorted(shares.items()):
        print(f"{name}/{split} {config}: nDCG@10 {row['ndcg']:.4f} R@100 {row['recall']:.4f}")
    queries = next(iter(shares.values()))["per_query"]
    best = statistics.fmean(max(r["per_query"][q] for r in shares.values()) for q in queries)
    print(f"{name}/{split} per-query best share (oracle): nDCG@10 {best:.4f} over {len(queries)} queries")
    ends = [r["recall_per_query"] for end in (0.0, 1.0) for c, r in shares.items() if float(c.split(":")[1]) == end]
    if len(ends) == 2:  # either channel's top 100 (share 0: BM25 decides; 1: the vectors)
        union = statistics.fmean(max(ends[0][q], ends[1][q]) for q in queries)
        print(f"{name}/{split} Recall@100 of BM25 or dense (either end's top 100): {union:.4f}")


def speed(dataset_dir: Path, split: str, cache: Path, queries: int, configs: Sequence[str]) -> None:
    """`Workspace.search` top_k 10 per config, interleaved, each query's vector made beforehand."""
    from bench.fusion_learn import cached_query_vectors
    from ragspine.workspace import Workspace

    dataset, settings = _opened(dataset_dir, split, cache)
    texts = [t for _, t in sorted(dataset.queries.items()) if t.strip()][:queries]
    e5, original = cached_query_vectors()
    configs = list(configs)
    timings: dict[str, list[float]] = {c: [] for c in configs}
    try:
        with Workspace.from_settings(settings) as workspace:
            retriever = workspace.retriever.index.retriever()
            for text in texts:
                apply(retriever, "none")
                workspace.search(text, top_k=10)  # embeds the query once, warms the caches
                for config in configs:
                    apply(retriever, config)
                    began = time.perf_counter()
                    workspace.search(text, top_k=10)
                    timings[config].append((time.perf_counter() - began) * 1000)
                configs = [*configs[1:], configs[0]]
    finally:
        e5.embed_queries = original
    first = next(iter(timings))
    for config, values in timings.items():
        diff = statistics.median(a - b for a, b in zip(values, timings[first], strict=True))
        print(f"{dataset.name}/{split} {config}: median {statistics.median(values):.2f} ms, "
              f"p95 {sorted(values)[int(0.95 * (len(values) - 1))]:.2f} ms, median per-query diff to {first} {diff:+.2f} ms")  # fmt: skip


def fires(dataset_dir: Path, split: str, cache: Path) -> None:
    """How many of the split's queries the lexical bridge fires for (translates), over the set's
    cached workspace: where it never fires, every ranking is the same as without it."""
    from ragspine.retrieval.pipeline.bridge import BridgeChannel
    from ragspine.workspace import Workspace

    dataset, settings = _opened(dataset_dir, split, cache)
    with Workspace.from_settings(settings) as workspace:
        retriever = workspace.retriever.index.retriever()
        ranker = BridgeChannel().attach(retriever.index, retriever._source)
        fired = sum(1 for text in dataset.queries.values() if text.strip() and ranker.terms_for(text))
    languages = sorted(retriever.index.languages())
    print(f"{dataset.name}/{split}: the bridge fires for {fired} of {len(dataset.queries)} queries (chunk languages {languages})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    fi = sub.add_parser("fires")
    fi.add_argument("dataset", type=Path)
    fi.add_argument("--split", required=True)
    fi.add_argument("--cache", type=Path, required=True)
    for name in ("run", "speed"):
        p = sub.add_parser(name)
        p.add_argument("dataset", type=Path)
        p.add_argument("--split", required=True)
        p.add_argument("--cache", type=Path, required=True)
        p.add_argument("--configs", default=",".join(DEFAULT_CONFIGS))
        p.add_argument("--limit" if name == "run" else "--queries", type=int, default=None if name == "run" else 200)
        if name == "run":
            p.add_argument("--out", type=Path, required=True)
    lo = sub.add_parser("lodo")
    lo.add_argument("folder", type=Path, nargs="+", help="run --out folders (tuning and test runs)")
    ta = sub.add_parser("table")
    ta.add_argument("folder", type=Path, nargs="+")
    ta.add_argument("--split", required=True, help="test, or tuning (each set's train/dev)")
    ta.add_argument("--configs", required=True)
    orc = sub.add_parser("oracle")
    orc.add_argument("folder", type=Path)
    orc.add_argument("--set", required=True)
    orc.add_argument("--split", required=True)
    args = parser.parse_args()
    configs = [c for c in getattr(args, "configs", "").split(",") if c]
    if args.command == "run":
        run(args.dataset, args.split, args.cache, args.out, args.limit, configs)
    elif args.command == "speed":
        speed(args.dataset, args.split, args.cache, args.queries, configs)
    elif args.command == "fires":
        fires(args.dataset, args.split, args.cache)
    elif args.command == "table":
        table(args.folder, args.split, configs)
    elif args.command == "lodo":
        lodo(args.folder)
    else:
        oracle(args.folder, args.set, args.split)


if __name__ == "__main__":
    main()
