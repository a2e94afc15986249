"""The lexical bridge's costs (docs/benchmarks.md, "The lexical bridge"): the first bridged query
of a process with the CC-CEDICT tables built (no cache) and loaded from the user cache, and the
per-query cost of the bridge where it does not fire (a same-language query) at SciFact size.

Run: `PYTHONPATH=src:. .venv/bin/python -m bench.bridge_bench [--eval /work/shared/eval]
[--rounds 5] [--max-queries 300] [--part first|steady|both]`.

- first: each case in a fresh Python process with XDG_CACHE_HOME pointed at a temporary folder:
  `build` (empty folder: the tables are built and written), `hit` (the folder `build` filled),
  each for one Chinese query (jieba segments it: its dictionary loads) and one English query
  (no jieba). Reported: seconds to construct the dictionary and to translate the first query.
- steady: SciFact's test queries over its 5,183 abstracts (whole documents as chunks, language
  set as ingest sets it), BM25 with the default analyzer, through `HybridRetriever` with no
  extra channel (= RAGSPINE_LEXICAL_BRIDGE=off) and with the bridge (= cedict/auto); both run
  interleaved `--rounds` times; reported: median ms per query of each and the difference. The
  queries are English over an English corpus, so the bridge never fires (checked: no terms).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

_FIRST = """
import json, sys, time
t0 = time.perf_counter()
from ragspine.retrieval.lexical.bridge import CedictDictionary, translate
d = CedictDictionary()
t1 = time.perf_counter()
terms = translate(sys.argv[1], sys.argv[2], d)
t2 = time.perf_counter()
print(json.dumps({"dictionary_s": round(t1 - t0, 3), "first_translate_s": round(t2 - t1, 3),
                  "jieba_loaded": d._jieba is not None, "terms": list(terms)[:6]}, ensure_ascii=False))
"""
QUERIES = {"zh": "猫吃鱼", "en": "cat eats fish"}


def first_query() -> dict[str, Any]:
    """Fresh processes: tables built, then loaded from the cache, for a Chinese and an English query."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache}
        for case in ("build", "hit"):
            for lang in (("zh", "en") if case == "hit" else ("zh",)):
                run = subprocess.run([sys.executable, "-c", _FIRST, QUERIES[lang], lang], env=env,
                                     capture_output=True, text=True, check=True)  # fmt: skip
                out[f"{case}_{lang}"] = json.loads(run.stdout)
        out["cache_files"] = {p.name: p.stat().st_size for p in (Path(cache) / "ragspine").iterdir()}
    return out


def steady(eval_root: Path, rounds: int, max_queries: int) -> dict[str, Any]:
    """ms per query with and without the (non-firing) bridge over SciFact test."""
    from ragspine.eval.dataset import load_beir
    from ragspine.retrieval.language import detect_language
    from ragspine.retrieval.lexical.analyzers import make_analyzer
    from ragspine.retrieval.model import Chunk
    from ragspine.retrieval.pipeline.bridge import BridgeChannel
    from ragspine.retrieval.pipeline.hybrid import HybridRetriever

    data = load_beir(eval_root / "scifact", "test")
    chunks = [Chunk(f"{d.doc_id}:0", d.doc_id, 0, d.indexed_text, f"{d.doc_id}#0", language=detect_language(d.indexed_text))
              for d in data.corpus]  # fmt: skip
    queries = [data.queries[q] for q in sorted(data.queries)][:max_queries]
    analyzer = make_analyzer("auto")
    off = HybridRetriever(chunks, analyzer=analyzer)
    bridge = BridgeChannel(analyzer=analyzer)
    on = HybridRetriever(chunks, analyzer=analyzer, extra_channels=[bridge])
    times: dict[str, list[float]] = {"off": [], "bridge": []}
    for retriever in (off, on):  # warm both (first search builds per-snapshot caches)
        for q in queries[:20]:
            retriever.search(q)
    for _ in range(rounds):
        for name, retriever in (("off", off), ("bridge", on)):
            t = time.perf_counter()
            for q in queries:
                retriever.search(q)
            times[name].append((time.perf_counter() - t) * 1000 / len(queries))
    same = all([r.chunk.chunk_id for r in off.search(q)] == [r.chunk.chunk_id for r in on.search(q)] for q in queries)
    off_ms, on_ms = median(times["off"]), median(times["bridge"])
    return {"chunks": len(chunks), "queries": len(queries), "rounds": rounds,
            "off_ms_per_query": round(off_ms, 3), "bridge_ms_per_query": round(on_ms, 3),
            "added_ms_per_query": round(on_ms - off_ms, 3), "same_results": same,
            "all_rounds": {k: [round(v, 3) for v in vs] for k, vs in times.items()}}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", type=Path, default=Path("/work/shared/eval"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-queries", type=int, default=300)
    parser.add_argument("--part", choices=("first", "steady", "both"), default="both")
    args = parser.parse_args()
    result: dict[str, Any] = {}
    if args.part in ("first", "both"):
        result["first_query"] = first_query()
    if args.part in ("steady", "both"):
        result["not_firing"] = steady(args.eval, args.rounds, args.max_queries)
    print(json.dumps(result, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
