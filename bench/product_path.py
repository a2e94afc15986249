"""The product path on a BEIR folder, without `ragspine eval`: files → `ragspine ingest` →
`ragspine.open(db).search`, scored with trec_eval's conventions.

What a user gets who writes each corpus entry as a text file (title, blank line, text: the BEIR
convention), ingests the folder with the real command line and searches with the Python API.
`ragspine eval` by default must give the same figures (issue 13; docs/benchmarks.md).

    PYTHONPATH=. .venv/bin/python -m bench.product_path build ../shared/eval/scifact /tmp/pp/scifact
    PYTHONPATH=. .venv/bin/python -m bench.product_path search ../shared/eval/scifact /tmp/pp/scifact \
        --split test [--mode bm25]

`build` writes OUT/corpus/<percent-encoded _id>.txt and runs `python -m ragspine ingest OUT/corpus
--db OUT/chunks.db` in a subprocess with the caller's environment (so the configured embedding
backend embeds at ingest, as for any user). `search` opens the store with `ragspine.open` (mode:
the settings' default, or --mode) and ranks each corpus entry by its best chunk, asking for more
chunks (first 100 x (mean chunks per file + 1), then twice as many) until 100 distinct entries
came back or the store has no more: the depth rule `ragspine eval` uses.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, unquote

TOP_K = 100


def build(dataset: Path, out: Path) -> None:
    corpus = out / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    written = 0
    for line in (dataset / "corpus.jsonl").read_text("utf-8").split("\n"):
        if not line.strip():
            continue
        entry = json.loads(line)
        title, text = str(entry.get("title") or ""), str(entry["text"])
        body = f"{title}\n\n{text}" if title.strip() else text
        (corpus / f"{quote(str(entry['_id']), safe='')}.txt").write_text(
            body, encoding="utf-8"
        )
        written += 1
    print(f"wrote {written} files to {corpus}", flush=True)
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragspine",
            "ingest",
            str(corpus),
            "--db",
            str(out / "chunks.db"),
        ],
        check=False,
    )
    print(
        f"ragspine ingest exit {done.returncode} in {time.perf_counter() - started:.1f} s",
        flush=True,
    )


def search(dataset: Path, out: Path, split: str, mode: str | None) -> dict[str, float]:
    import ragspine
    from ragspine.eval.metrics import evaluate_run

    queries = {}
    for line in (dataset / "queries.jsonl").read_text("utf-8").split("\n"):
        if line.strip():
            entry = json.loads(line)
            queries[str(entry["_id"])] = str(entry["text"])
    qrels: dict[str, dict[str, int]] = {}
    for row in (dataset / "qrels" / f"{split}.tsv").read_text("utf-8").split("\n")[1:]:
        if row.strip():
            qid, doc, grade = row.split("\t")
            qrels.setdefault(qid, {})[doc] = int(grade)
    run: dict[str, list[str]] = {}
    overrides = {} if mode is None else {"retrieval_mode": mode}
    with ragspine.open(out / "chunks.db", **overrides) as workspace:
        stats = workspace.stats()
        # first chunk depth: TOP_K x (mean chunks per file + 1), doubled while short of TOP_K files
        depth = TOP_K * (math.ceil(stats["chunks"] / max(1, stats["documents"])) + 1)
        started = time.perf_counter()
        for qid in qrels:
            text = queries[qid]
            run[qid] = [] if not text.strip() else _rank(workspace, text, depth)
        seconds = time.perf_counter() - started
    metrics = evaluate_run(run, qrels)
    result = {
        "dataset": dataset.resolve().name, "split": split, "retrieval": stats["index"]["retrieval"],
        "chunks": stats["chunks"], "queries": metrics.queries,
        "ndcg@10": round(metrics.ndcg, 4), "recall@100": round(metrics.recall, 4),
        "mrr@10": round(metrics.mrr, 4), "query_s": round(seconds, 1),
    }  # fmt: skip
    print(json.dumps(result), flush=True)
    return result


def _rank(workspace: object, text: str, depth: int) -> list[str]:
    while True:
        snippets = workspace.search(text, top_k=depth)  # type: ignore[attr-defined]
        ranking: list[str] = []
        for snippet in snippets:
            doc = unquote(snippet["doc_id"].removesuffix(".txt"))
            if doc not in ranking:
                ranking.append(doc)
        if len(ranking) >= TOP_K or len(snippets) < depth:
            return ranking[:TOP_K]
        depth *= 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("phase", choices=("build", "search"))
    parser.add_argument("dataset", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument(
        "--mode",
        default=None,
        help="RAGSPINE_RETRIEVAL_MODE for search (default: settings)",
    )
    args = parser.parse_args()
    if args.phase == "build":
        build(args.dataset, args.out)
    else:
        search(args.dataset, args.out, args.split, args.mode)


if __name__ == "__main__":
    main()
