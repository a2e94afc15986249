"""Post-processor benchmarks (issue 19): MMR on near-duplicates, and extractive compression.

    # MMR: a corpus of BEIR passages, each with 0-4 near-copies (a few words swapped); queries
    # are the titles of the first 100 originals. Distinct passages ("families") in the top 10.
    PYTHONPATH=src:. .venv/bin/python -m bench.postprocess_bench dupes ../shared/eval/scifact [--embedding deterministic]

    # nDCG@10 with and without a chain, product path (ragspine eval's code), first N test queries.
    PYTHONPATH=src:. .venv/bin/python -m bench.postprocess_bench ndcg ../shared/eval/cmrc2018 --cache DIR [--queries 500]

    # Compression: prompt characters saved, and the share of gold answers (queries.jsonl
    # metadata "answers") found in the top-5 texts that are still in prompt_text.
    PYTHONPATH=src:. .venv/bin/python -m bench.postprocess_bench compress ../shared/eval/cmrc2018 STORE_DB

Deterministic: originals are the first N corpus entries in file order, edits come from
random.Random(seed); compression uses the first --queries test-split queries in file order over
an existing product store (e.g. the one `ragspine eval --cache DIR` keeps in DIR/<set>-<key>/chunks.db).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import ragspine
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.postprocess import make_postprocessor
from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def near_duplicate_corpus(dataset: Path, originals: int, seed: int) -> dict[str, tuple[str, str]]:
    """doc_id -> (family, text): each original plus 0-4 copies with ~5% of words replaced."""
    entries = _read_jsonl(dataset / "corpus.jsonl")[:originals]
    rng = random.Random(seed)
    vocabulary = sorted({w for e in entries for w in e["text"].split()})
    docs: dict[str, tuple[str, str]] = {}
    for e in entries:
        text = f"{e['title']}\n\n{e['text']}"
        docs[f"{e['_id']}~0"] = (e["_id"], text)
        for copy in range(1, rng.randint(0, 4) + 1):
            words = text.split(" ")
            for _ in range(max(1, len(words) // 20)):
                words[rng.randrange(len(words))] = rng.choice(vocabulary)
            docs[f"{e['_id']}~{copy}"] = (e["_id"], " ".join(words))
    return docs


def dupes(args: argparse.Namespace) -> None:
    docs = near_duplicate_corpus(args.dataset, args.originals, args.seed)
    titles = [(e["_id"], e["title"]) for e in _read_jsonl(args.dataset / "corpus.jsonl")[: args.queries]]
    print(f"{len(docs)} documents from {args.originals} originals; {len(titles)} title queries; embedding {args.embedding}")
    with tempfile.TemporaryDirectory() as tmp:
        backend = make_embedding_backend(args.embedding) if args.embedding != "none" else None
        chains = {"none": None, **{f"mmr λ={lam}": make_postprocessor("mmr", mmr={"lambda_mult": lam}) for lam in args.lambdas}}
        first = True
        for name, chain in chains.items():
            retriever, store = build_narrative_retriever(
                Path(tmp) / "dupes.db", embedding_backend=backend, postprocessor=chain, query_rewriter=None
            )
            try:
                if first:
                    for doc_id, (_, text) in docs.items():
                        retriever.index.ingest(text, DocumentMeta(doc_id, sensitivity="PUBLIC"))
                    retriever.index.embed_pending(progress=False)
                    first = False
                families, docs_seen, top1, took = [], [], 0, []
                for family, title in titles:
                    started = time.perf_counter()
                    snippets = retriever.retrieve(title, top_k=10)
                    took.append(time.perf_counter() - started)
                    families.append(len({docs[s["doc_id"]][0] for s in snippets}))
                    docs_seen.append(len({s["doc_id"] for s in snippets}))
                    top1 += bool(snippets) and docs[snippets[0]["doc_id"]][0] == family
                print(f"{name:>10}: distinct passages in top 10 {statistics.mean(families):.2f} "
                      f"(documents {statistics.mean(docs_seen):.2f}); own passage first {top1}/{len(titles)}; "
                      f"median query {1000 * statistics.median(took):.1f} ms")  # fmt: skip
            finally:
                retriever.index.close()
                store.close()


def compress(args: argparse.Namespace) -> None:
    queries = _read_jsonl(args.dataset / "queries.jsonl")
    judged = {line.split("\t")[0] for line in (args.dataset / "qrels" / "test.tsv").read_text("utf-8").splitlines()[1:]}
    chosen = [q for q in queries if q["_id"] in judged and q["text"].strip()][: args.queries]
    for max_sentences in args.max_sentences:
        workspace = ragspine.open(args.store, retrieval_mode="bm25", postprocessor="compress",
                                  compress_max_sentences=max_sentences)  # fmt: skip
        before_chars = after_chars = found = kept = snippet_found = snippet_kept = 0
        try:
            for q in chosen:
                answers = [a for a in q.get("metadata", {}).get("answers", []) if a.strip()]
                snippets = workspace.search(q["text"], top_k=args.top_k)
                texts = [s["text"] for s in snippets]
                prompts = [s.get("prompt_text") or s["text"] for s in snippets]
                before_chars += sum(map(len, texts))
                after_chars += sum(map(len, prompts))
                if any(a in t for a in answers for t in texts):
                    found += 1
                    kept += any(a in p for a in answers for p in prompts)
                for t, p in zip(texts, prompts, strict=True):
                    if any(a in t for a in answers):
                        snippet_found += 1
                        snippet_kept += any(a in p for a in answers)
        finally:
            workspace.close()
        print(f"{args.dataset.name} max_sentences={max_sentences}: {len(chosen)} queries, top {args.top_k}; "
              f"prompt chars {before_chars} -> {after_chars} ({1 - after_chars / max(before_chars, 1):.1%} saved); "
              f"answer still in the prompt for {kept}/{found} queries ({kept / max(found, 1):.1%}) and "
              f"{snippet_kept}/{snippet_found} snippets ({snippet_kept / max(snippet_found, 1):.1%})")  # fmt: skip


def ndcg(args: argparse.Namespace) -> None:
    """nDCG@10 on the product path (`ragspine eval`'s code) with RAGSPINE_POSTPROCESSOR unset and
    set, over the first --queries judged queries of the split (file order)."""
    import dataclasses
    import os

    from ragspine.eval.dataset import load_beir
    from ragspine.eval.product import ProductOptions, run_product_eval

    dataset = load_beir(args.dataset, args.split)
    chosen = list(dataset.queries)[: args.queries]
    subset = dataclasses.replace(dataset, queries={q: dataset.queries[q] for q in chosen},
                                 qrels={q: dataset.qrels[q] for q in chosen})  # fmt: skip
    options = ProductOptions(mode="bm25", top_k=10, cache=str(args.cache), progress=False)
    for chain in ("none", args.chain):
        os.environ["RAGSPINE_POSTPROCESSOR"] = chain
        report = run_product_eval(subset, options)
        print(f"{dataset.name} {args.split} first {len(chosen)} queries, RAGSPINE_POSTPROCESSOR={chain}: "
              f"nDCG@10 {report.ndcg:.4f} ({report.queries} scored, {report.query_s:.0f}s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dupes")
    d.add_argument("dataset", type=Path)
    d.add_argument("--originals", type=int, default=300)
    d.add_argument("--queries", type=int, default=100)
    d.add_argument("--seed", type=int, default=19)
    d.add_argument("--embedding", default="none")
    d.add_argument("--lambdas", type=float, nargs="+", default=[0.7, 0.5])
    c = sub.add_parser("compress")
    c.add_argument("dataset", type=Path)
    c.add_argument("store", type=Path)
    c.add_argument("--queries", type=int, default=500)
    c.add_argument("--top-k", type=int, default=5)
    c.add_argument("--max-sentences", type=int, nargs="+", default=[3])
    n = sub.add_parser("ndcg")
    n.add_argument("dataset", type=Path)
    n.add_argument("--split", default="test")
    n.add_argument("--queries", type=int, default=500)
    n.add_argument("--cache", type=Path, required=True)
    n.add_argument("--chain", default="mmr")
    args = parser.parse_args()
    {"dupes": dupes, "compress": compress, "ndcg": ndcg}[args.command](args)


if __name__ == "__main__":
    main()
