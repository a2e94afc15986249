"""The relevance score's calibration: record, fit, report (docs/benchmarks.md, "Relevance score").

    python -m bench.relevance_fit record EVAL_DIR --sets cmrc2018:dev,scifact:train --cache DIR/ws --out DIR/rel [--limit 800] [--reuse] [--kinds off]
    python -m bench.relevance_fit fit DIR/rel
    python -m bench.relevance_fit report DIR/rel --mode hybrid --floors 0.05,0.1
    python -m bench.relevance_fit lodo DIR/rel --mode hybrid --features fused,vector,log_bm25,log_rank

`record` runs the product eval (`eval.product.run_product_eval`, the path `ragspine eval` takes,
on the cached workspace: `--cache` may be `ragspine eval`'s own folder, and `--reuse` refuses to
ingest when its workspace is missing) for a set's split (its first `--limit` judged queries by
id) and records, per query, the best `TOP` snippets'
scores and whether each passage is judged relevant; then the same for `OFF_TOPIC_QUERIES`
queries of another set (`OFF_TOPIC`, the same split kind), against this set's store: none of
their passages is relevant. One JSON-lines file per (set, split, mode). `fit` fits the logistic
map of each mode (`relevance.Calibration`) on the train/dev rows of every set (the
cross-language one included: a fit on Chinese Wikipedia questions alone gave the cosine a
negative weight), each set weighing the same, and prints the constants to paste into `ragspine/retrieval/relevance.py`, a table of what each floor cuts
and the floor it suggests: the least `min_score` (a multiple of 0.05) at which most (`MOSTLY`)
off-topic queries get no passage on every set but the cross-language stress test (`STRESS`). `report` prints, for the test rows,
the expected calibration error per set and one reliability table with a column per set (the
shipped constants, through `relevance.rate`, so the table is what a caller sees), and the share
of off-topic queries left with no passage and of on-topic queries' relevant passages kept at the
default `min_score` and at each `--floors` value.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

TOP = 10  # snippets per query a caller reads
OFF_TOPIC_QUERIES = 300  # off-topic queries per set (the first, by id)
MOSTLY = 0.5  # the default floor: the least at which most off-topic queries get no passage
STRESS = ("xling_ntrex_zh_en",)  # a stress test, not a tuning target (shared/eval/README.md)
BINS = 10
# Off-topic queries for each set's store: another set's queries, of another domain, mostly in its language.
OFF_TOPIC = {
    "cmrc2018": "zh_med_dialogue",
    "drcd_simplified": "zh_med_dialogue",
    "zh_med_dialogue": "cmrc2018",
    "scifact": "xling_ntrex_zh_en",
    "en_medquad": "xling_ntrex_zh_en",
    "xling_ntrex_zh_en": "cmrc2018",
}
TUNING_SPLITS = ("train", "dev")
KINDS = ("on", "off")  # on-topic rows (the set's own queries) and off-topic rows (`OFF_TOPIC`'s)


def _split_of(root: Path, name: str, kind: str) -> str:
    """`kind` (test, or the tuning split) as one of `name`'s splits: its train or dev split."""
    if kind == "test":
        return "test"
    have = {p.stem for p in (root / name / "qrels").glob("*.tsv")}
    return next(s for s in TUNING_SPLITS if s in have)


def record(root: Path, specs: Sequence[str], cache: Path, out: Path, mode: str, reuse: bool = False,
           limit: int | None = None, kinds: Sequence[str] = KINDS) -> None:
    """Record on-topic and off-topic rows for each SET:SPLIT in `specs`; `reuse`: only read
    workspaces already complete under `cache` (SystemExit naming the folder otherwise), never ingest;
    `limit`: the split's first `limit` judged queries by id (None: all); `kinds`: the kinds of rows
    to record again (the file's rows of the other kind are kept as they are)."""
    from ragspine.eval.dataset import load_beir
    from ragspine.eval.product import ProductOptions, doc_id_of, run_product_eval

    out.mkdir(parents=True, exist_ok=True)
    for spec in specs:
        name, split = spec.split(":")
        dataset = load_beir(root / name, split)
        if limit is not None:
            kept = dict(sorted(dataset.queries.items())[:limit])
            dataset = dataclasses.replace(dataset, queries=kept, qrels={q: dataset.qrels[q] for q in kept})
        if reuse:
            _check_cached(dataset, cache, mode)
        other = load_beir(root / OFF_TOPIC[name], _split_of(root, OFF_TOPIC[name], split))
        off = dict(sorted(other.queries.items())[:OFF_TOPIC_QUERIES])
        path = out / f"{name}-{split}-{mode}.jsonl"
        kept_rows = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
        rows: list[dict[str, Any]] = [r for r in kept_rows if r["kind"] not in kinds]
        for kind, queries, qrels in (("on", dataset.queries, dataset.qrels), ("off", off, {})):
            if kind not in kinds:
                continue
            seen: dict[str, list[Any]] = {}
            options = ProductOptions(mode=mode, cache=str(cache), progress=False,
                                     on_snippets=lambda text, found: seen.__setitem__(text, found[:TOP]))  # fmt: skip
            probe = dataset if kind == "on" else _with_queries(dataset, queries)
            run_product_eval(probe, options)
            for qid, text in queries.items():
                for rank, s in enumerate(seen.get(text, []), start=1):
                    judged = qrels.get(qid, {})
                    rows.append({"kind": kind, "qid": qid, "rank": rank, "label": int(judged.get(doc_id_of(s["doc_id"]), 0) > 0),
                                 "fused": s["scores"]["fused"], "vector": s["scores"]["vector"], "bm25": s["scores"]["bm25"],
                                 "relevant_total": sum(1 for g in judged.values() if g > 0)})  # fmt: skip
        rows.sort(key=lambda r: KINDS.index(r["kind"]))  # on-topic rows first, each kind in query order
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"{name}/{split} {mode}: {len(rows)} rows -> {path}", flush=True)


def _check_cached(dataset: Any, cache: Path, mode: str) -> None:
    """SystemExit unless `cache` holds `dataset`'s complete workspace for `mode` (its key)."""
    from ragspine.assembly import load_settings
    from ragspine.eval.product import MANIFEST_FILE, ProductOptions, workspace_key

    key = workspace_key(dataset, load_settings(flags=ProductOptions(mode=mode).flags(), adopt=False))
    manifest = cache / f"{dataset.name}-{key}" / MANIFEST_FILE
    done = json.loads(manifest.read_text()) if manifest.is_file() else {}
    if done.get("key") != key or done.get("status") != "complete":
        raise SystemExit(f"--reuse: no complete workspace at {manifest.parent}")


def _with_queries(dataset: Any, queries: dict[str, str]) -> Any:
    """`dataset` (its corpus, so its cached workspace) with other queries and no judgements."""
    return dataclasses.replace(dataset, queries=queries, qrels={})


def _load(folder: Path, splits: Iterable[str], mode: str) -> dict[str, list[dict[str, Any]]]:
    """Rows by set, for the given splits and mode."""
    wanted = set(splits)
    by_set: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob(f"*-{mode}.jsonl")):
        name, split = path.name[: -len(f"-{mode}.jsonl")].rsplit("-", 1)
        if split in wanted:
            by_set.setdefault(name, []).extend(json.loads(line) for line in path.read_text().splitlines())
    return by_set


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, ridge: float = 1e-3) -> tuple[np.ndarray, float]:
    """Weighted logistic regression by Newton's method: (coefficients, intercept)."""
    design = np.hstack([x, np.ones((len(x), 1))])
    beta = np.zeros(design.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -30, 30)))
        grad = design.T @ (w * (y - p)) - ridge * beta
        hess = (design * (w * p * (1 - p))[:, None]).T @ design + ridge * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta += step
        if float(np.abs(step).max()) < 1e-9:
            break
    return beta[:-1], float(beta[-1])


def _matrix(rows: Sequence[dict[str, Any]], features: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, keep) of the rows; keep marks the rows whose features are all present."""
    from ragspine.retrieval.relevance import feature_values

    values = [feature_values(features, r, r["rank"]) for r in rows]
    keep = np.array([v is not None for v in values])
    x = np.array([v for v in values if v is not None], dtype=np.float64).reshape(-1, len(features))
    y = np.array([r["label"] for r, v in zip(rows, values, strict=True) if v is not None], dtype=np.float64)
    return x, y, keep


def fit(folder: Path) -> None:
    """Fit each recorded mode on the train/dev rows; print the constants and the suggested floor."""
    from ragspine.retrieval.relevance import CALIBRATIONS, Calibration

    fitted: dict[str, Calibration] = {}
    for mode, shipped in CALIBRATIONS.items():
        # the stress test too: its cross-language queries are real ones, and in BM25 mode the lexical
        # bridge (on by default) matches them across languages (docs/benchmarks.md, "Relevance score")
        by_set = _load(folder, TUNING_SPLITS, mode)
        if not by_set:
            continue
        xs, ys, ws = [], [], []
        for rows in by_set.values():
            x, y, _ = _matrix(rows, shipped.features)
            xs.append(x), ys.append(y), ws.append(np.full(len(y), 1.0 / max(1, len(y))))
        coef, intercept = fit_logistic(np.vstack(xs), np.concatenate(ys), np.concatenate(ws))
        fitted[mode] = Calibration(shipped.features, tuple(round(float(c), 4) for c in coef), round(intercept, 4))
        print(f"    {mode!r}: {fitted[mode]!r},  # sets: {', '.join(sorted(by_set))}")
    for mode, calibration in fitted.items():
        by_set = _load(folder, TUNING_SPLITS, mode)
        print(f"{mode}: floor -> per set: off-topic queries with no passage / on-topic relevant passages "
              "kept / on-topic queries with no passage")
        for step in range(1, 13):
            figures = {name: cut_figures(rows, calibration, mode, step * 0.05) for name, rows in by_set.items()}
            print(f"  {step * 0.05:.2f}: " + "; ".join(f"{n} {a:.1%} / {b:.1%} / {c:.1%}" for n, (a, b, c) in figures.items()))
        print(f"{mode}: suggested min_score {suggest_floor(by_set, calibration, mode):.2f}")


def _rated(rows: Sequence[dict[str, Any]], calibration: Any, mode: str) -> list[tuple[dict[str, Any], float]]:
    """Each row with its relevance as `relevance.rate` gives it (per query, in rank order)."""
    from ragspine.retrieval.relevance import rate

    by_query: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by_query.setdefault((r["kind"], r["qid"]), []).append(r)
    out: list[tuple[dict[str, Any], float]] = []
    for ranked in by_query.values():
        ranked.sort(key=lambda r: r["rank"])
        snippets = [{"scores": {"fused": r["fused"], "vector": r["vector"], "bm25": r["bm25"]}} for r in ranked]
        rate(snippets, mode, {mode: calibration})  # type: ignore[arg-type]
        out.extend((r, s["relevance"]) for r, s in zip(ranked, snippets, strict=True))
    return out


def cut_figures(rows: Sequence[dict[str, Any]], calibration: Any, mode: str, floor: float) -> tuple[float, float, float]:
    """At `floor`: (share of off-topic queries left with no passage, share of on-topic relevant
    passages in the top TOP kept, share of on-topic queries left with no passage)."""
    rated = _rated(rows, calibration, mode)

    def emptied(kind: str) -> float:
        asked = {r["qid"] for r, _ in rated if r["kind"] == kind}
        answered = {r["qid"] for r, v in rated if r["kind"] == kind and v >= floor}
        return 1 - len(answered) / len(asked) if asked else math.nan

    relevant = [(r, v) for r, v in rated if r["kind"] == "on" and r["label"]]
    kept = sum(1 for _, v in relevant if v >= floor)
    return emptied("off"), kept / len(relevant) if relevant else math.nan, emptied("on")


def suggest_floor(by_set: dict[str, list[dict[str, Any]]], calibration: Any, mode: str) -> float:
    """The least multiple of 0.05 at which, on every set but the STRESS ones, at least MOSTLY of
    the off-topic queries get no passage (1.0 when none does)."""
    tuned = [rows for name, rows in by_set.items() if name not in STRESS] or list(by_set.values())
    for step in range(1, 21):
        floor = round(step * 0.05, 2)
        if all(cut_figures(rows, calibration, mode, floor)[0] >= MOSTLY for rows in tuned):
            return floor
    return 1.0


def reliability(rated: Sequence[tuple[dict[str, Any], float]]) -> tuple[float, list[tuple[str, int, float, float]]]:
    """(expected calibration error, rows of (bin, count, mean relevance, share relevant)) over BINS equal bins."""
    bins: list[list[tuple[int, float]]] = [[] for _ in range(BINS)]
    for r, v in rated:
        bins[min(BINS - 1, int(v * BINS))].append((r["label"], v))
    total = sum(len(b) for b in bins)
    ece, table = 0.0, []
    for i, b in enumerate(bins):
        if not b:
            continue
        mean, share = sum(v for _, v in b) / len(b), sum(y for y, _ in b) / len(b)
        ece += len(b) / total * abs(mean - share)
        table.append((f"{i / BINS:.1f}–{(i + 1) / BINS:.1f}", len(b), mean, share))
    return ece, table


def report(folder: Path, mode: str, floors: Sequence[float] = ()) -> None:
    """Markdown for the test rows of every set in `mode`: a summary (ECE over on-topic and
    off-topic snippets and over on-topic ones alone; at the default floor, then at each of
    `floors`, the share of off-topic queries with no passage, of on-topic relevant passages kept
    and of on-topic queries with no passage), then one reliability table, a column per set."""
    from ragspine.assembly import load_settings
    from ragspine.retrieval.relevance import CALIBRATIONS

    calibration = CALIBRATIONS[mode]
    default = load_settings(adopt=False).min_score  # the default, unless RAGSPINE_MIN_SCORE is set
    cuts = [default, *(f for f in floors if f != default)]
    by_set = _load(folder, ("test",), mode)
    print(f"\n**{mode}** (test splits; off-topic: `OFF_TOPIC`'s test queries; at min_score: off-topic "
          f"queries with no passage / on-topic relevant passages in the top {TOP} kept / on-topic queries "
          "with no passage)\n")  # fmt: skip
    print("| set | ECE | ECE on-topic | " + " | ".join(f"at {f:g}" for f in cuts) + " |")
    print("|---|---:|---:|" + "---|" * len(cuts))
    tables: dict[str, dict[str, tuple[int, float, float]]] = {}
    for name, rows in by_set.items():
        ece_on, _ = reliability(_rated([r for r in rows if r["kind"] == "on"], calibration, mode))
        ece, table = reliability(_rated(rows, calibration, mode))
        tables[name] = {label: (count, mean, share) for label, count, mean, share in table}
        figures = [cut_figures(rows, calibration, mode, f) for f in cuts]
        print(f"| {name} | {ece:.3f} | {ece_on:.3f} | " + " | ".join(f"{a:.1%} / {b:.1%} / {c:.1%}" for a, b, c in figures) + " |")
    labels = [f"{i / BINS:.1f}–{(i + 1) / BINS:.1f}" for i in range(BINS)]
    print(f"\nReliability ({mode}, test; per bin: snippets · mean relevance · share relevant)\n")
    print("| relevance | " + " | ".join(tables) + " |\n|---|" + "---:|" * len(tables))
    for label in labels:
        cells = [tables[n].get(label) for n in tables]
        if any(cells):
            print(f"| {label} | " + " | ".join(f"{c[0]} · {c[1]:.3f} · {c[2]:.3f}" if c else "–" for c in cells) + " |")


def lodo(folder: Path, mode: str, features: Sequence[str]) -> None:
    """Leave one set out on the train/dev rows: fit `features` on the other sets (each weighing
    the same), print the held-out set's ECE (how a feature set generalises; test rows unread)."""
    from ragspine.retrieval.relevance import Calibration

    by_set = _load(folder, TUNING_SPLITS, mode)
    held_out = []
    for held in by_set:
        xs, ys, ws = [], [], []
        for name, rows in by_set.items():
            if name != held:
                x, y, _ = _matrix(rows, features)
                xs.append(x), ys.append(y), ws.append(np.full(len(y), 1.0 / max(1, len(y))))
        coef, intercept = fit_logistic(np.vstack(xs), np.concatenate(ys), np.concatenate(ws))
        ece, _ = reliability(_rated(by_set[held], Calibration(tuple(features), tuple(coef), intercept), mode))
        held_out.append(f"{held} {ece:.3f}")
    print(f"{mode} {','.join(features)}: held-out ECE " + "; ".join(held_out))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.relevance_fit", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("root", type=Path)
    rec.add_argument("--sets", required=True, help="SET:SPLIT,... (train/dev to fit, test to report)")
    rec.add_argument("--cache", type=Path, required=True)
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--mode", default="hybrid", choices=("hybrid", "vector", "bm25"))
    rec.add_argument("--reuse", action="store_true", help="only read complete cached workspaces, never ingest")
    rec.add_argument("--limit", type=int, default=None, help="the split's first N judged queries by id (default: all)")
    rec.add_argument("--kinds", default="on,off", help="the rows to record again: on, off or both (the file's others are kept)")
    fitter = sub.add_parser("fit")
    fitter.add_argument("folder", type=Path)
    rep = sub.add_parser("report")
    rep.add_argument("folder", type=Path)
    rep.add_argument("--mode", default="hybrid", choices=("hybrid", "vector", "bm25"))
    rep.add_argument("--floors", default="", help="more min_score values to report, e.g. 0.05,0.1")
    out = sub.add_parser("lodo")
    out.add_argument("folder", type=Path)
    out.add_argument("--mode", default="hybrid", choices=("hybrid", "vector", "bm25"))
    out.add_argument("--features", default="fused,vector,log_bm25", help="comma-separated `Calibration` features")
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.root, args.sets.split(","), args.cache, args.out, args.mode, args.reuse, args.limit,
               tuple(k for k in args.kinds.split(",") if k))
    elif args.command == "fit":
        fit(args.folder)
    elif args.command == "lodo":
        lodo(args.folder, args.mode, args.features.split(","))
    else:
        report(args.folder, args.mode, [float(f) for f in args.floors.split(",") if f])


if __name__ == "__main__":
    main()
