"""BM25's k1 under score fusion: the product's hybrid nDCG@10 on train/dev splits over a k1 grid.

    python -m bench.fusion_k1 run ../shared/eval/drcd_simplified --split dev --cache DIR/ws --out DIR/k1
    python -m bench.fusion_k1 table DIR/k1

`run` is `ragspine eval DATASET --split SPLIT --mode hybrid --embedding e5 --cache DIR/ws` once per
k1 (`RAGSPINE_FUSION_BM25_K1`, the only setting it changes; the cached workspace is reused, since
k1 is read at query time) and writes one JSON per (set, k1) into --out. Run it for every set's
train/dev split (never test; two processes with different sets share a machine's cores).
`table` prints nDCG@10 per set and k1 and picks the k1 the default was chosen by: among the k1
at which no set is below its figure at the specification's 1.5 (what zscore used before),
the best mean over sets.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

GRID = (0.2, 0.3, 0.4, 0.6, 0.9, 1.2, 1.5)
BASELINE = 1.5  # the specification's DEFAULT_BM25_K1


def run(dataset_dir: Path, split: str, cache: Path, out: Path, grid: tuple[float, ...]) -> None:
    """One product eval per k1; each writes OUT/<set>-<split>-k1-<k1>.json."""
    from ragspine.eval.dataset import load_beir
    from ragspine.eval.product import ProductOptions, run_product_eval

    dataset = load_beir(dataset_dir, split)
    out.mkdir(parents=True, exist_ok=True)
    for k1 in grid:
        flags = (("RAGSPINE_FUSION_BM25_K1", f"{k1:g}"),)
        options = ProductOptions(mode="hybrid", embedding="e5", cache=str(cache), progress=False, query_flags=flags)
        report = run_product_eval(dataset, options)
        row = {"set": dataset.name, "split": split, "k1": k1, "ndcg": report.ndcg, "fusion": report.fusion}
        (out / f"{dataset.name}-{split}-k1-{k1:g}.json").write_text(json.dumps(row) + "\n")
        print(f"{dataset.name}/{split} k1 {k1:g}: nDCG@10 {report.ndcg:.4f} ({report.fusion})", flush=True)


def choose(figures: dict[str, dict[float, float]]) -> float | None:
    """Among the k1 run on every set, the one with the best mean nDCG@10 of those at which no set
    is below its BASELINE figure (a tie goes to the k1 nearer BASELINE); None when BASELINE was
    not run on every set."""
    sets = list(figures)
    common = sorted(set.intersection(*(set(by_k1) for by_k1 in figures.values()))) if sets else []
    if BASELINE not in common:
        return None
    fair = [k for k in common if all(figures[s][k] >= figures[s][BASELINE] for s in sets)]
    return max(fair, key=lambda k: (sum(figures[s][k] for s in sets) / len(sets), -abs(k - BASELINE)))


def table(folder: Path) -> None:
    figures: dict[str, dict[float, float]] = {}
    for path in sorted(folder.glob("*-k1-*.json")):
        row = json.loads(path.read_text())
        figures.setdefault(f"{row['set']}/{row['split']}", {})[row["k1"]] = row["ndcg"]
    if not figures:
        raise SystemExit(f"no results in {folder}: run `python -m bench.fusion_k1 run ...` first")
    grid = sorted({k for by_k1 in figures.values() for k in by_k1})
    print("| set | " + " | ".join(f"k1 {k:g}" for k in grid) + " |")
    print("|---|" + "---:|" * len(grid))
    for name, by_k1 in figures.items():
        print(f"| {name} | " + " | ".join(f"{by_k1[k]:.4f}" if k in by_k1 else "—" for k in grid) + " |")
    means = [
        f"{sum(by_k1[k] for by_k1 in figures.values()) / len(figures):.4f}"
        if all(k in by_k1 for by_k1 in figures.values()) else "—"
        for k in grid
    ]  # fmt: skip
    print("| mean | " + " | ".join(means) + " |")
    chosen = choose(figures)
    if chosen is None:
        print(f"\nno choice: run k1 {BASELINE:g} and another k1 on every set")
        return
    from ragspine.retrieval.fusion.rrf import DEFAULT_LEXICAL_K1

    print(f"\nchosen (best mean, no set below k1 {BASELINE:g}): k1 {chosen:g}; shipped DEFAULT_LEXICAL_K1 = {DEFAULT_LEXICAL_K1:g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ru = sub.add_parser("run")
    ru.add_argument("dataset", type=Path)
    ru.add_argument("--split", required=True)
    ru.add_argument("--cache", type=Path, required=True)
    ru.add_argument("--out", type=Path, required=True)
    ru.add_argument("--k1", default=",".join(f"{k:g}" for k in GRID), help="comma-separated k1 values")
    ta = sub.add_parser("table")
    ta.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.dataset, args.split, args.cache, args.out, tuple(float(k) for k in args.k1.split(",")))
    else:
        table(args.folder)


if __name__ == "__main__":
    main()
