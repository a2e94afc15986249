"""Run the lexical benchmarks and write the `## Speed (make bench)` section of docs/benchmarks.md.

    python -m bench.run [--scales scifact,10k,100k,1M] [--work DIR] [--passes 3]

Each measurement runs in its own process (peak RSS = that process's ru_maxrss), one after the
other. Data lives in --work (default: $TMPDIR/ragspine-bench), never in the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.prepare import prepare

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Speed (make bench)"
COMMAND = "make bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="scifact,10k,100k,1M")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "ragspine-bench"))
    parser.add_argument("--scifact", default=str(ROOT.parent / "shared" / "eval" / "scifact"))
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--engines", default="",
                        help="measure only these engines (comma list) and merge into results.json")
    parser.add_argument("--render-only", action="store_true",
                        help="rewrite the section from <work>/results.json without measuring")
    args = parser.parse_args()
    work = Path(args.work)
    results: dict[str, dict[str, Any]] = {}
    if args.render_only:
        saved = json.loads((work / "results.json").read_text())
        write_section(Path(args.out), {n: saved[n] for n in args.scales.split(",") if n in saved}, args)
        return
    for name in args.scales.split(","):
        print(f"[bench] {name}: preparing data in {work}", flush=True)
        meta = prepare(work, name, Path(args.scifact))
        only = [e for e in args.engines.split(",") if e]
        measured = run_corpus(work / name, name, args.passes, only)
        saved_path = work / "results.json"
        saved = json.loads(saved_path.read_text()) if saved_path.exists() else {}
        results[name] = (saved.get(name, {}) if only else {}) | {"meta": meta} | measured
        saved_path.write_text(json.dumps(saved | results, indent=1))
    write_section(Path(args.out), results, args)


def run_corpus(folder: Path, name: str, passes: int, only: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    plan = ["build", "serve", "core", "bm25s", "rank_bm25"]
    if name in ("scifact", "10k", "100k"):
        plan.append("compare")
    plan += ["cli"] if name == "100k" else []
    plan.append("update")  # last: it works on a copy, but needs the built index
    for engine in plan:
        if only and engine not in only:
            continue
        out[engine] = cold_cli(folder) if engine == "cli" else child(engine, folder, passes)
    return out


def child(engine: str, folder: Path, passes: int) -> dict[str, Any]:
    print(f"[bench]   {engine} …", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "bench.engines", engine, str(folder), str(passes)],
        capture_output=True, text=True, cwd=ROOT, env=_env(),
    )  # fmt: skip
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - start
    print(f"[bench]   {engine}: {json.dumps(result)[:300]}", flush=True)
    return result


def cold_cli(folder: Path, runs: int = 7) -> dict[str, Any]:
    """`ragspine search` in a fresh process on the existing store (index already persisted)."""
    queries = json.loads((folder / "queries.json").read_text())[:runs]
    times = []
    for query in queries:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "ragspine", "search", query, "--db", str(folder / "chunks.db"),
             "--top-k", "10"],
            check=True, capture_output=True, env=_env(),
        )  # fmt: skip
        times.append(time.perf_counter() - start)
    return {"runs": runs, "median_s": statistics.median(times), "max_s": max(times)}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


# -- report ---------------------------------------------------------------------------------
def write_section(path: Path, results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    body = render(results, args)
    text = path.read_text("utf-8") if path.exists() else "# Benchmarks\n"
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + body
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + body + (text[end + 1 :] if end >= 0 else "")
    path.write_text(text, "utf-8")
    print(f"[bench] wrote {path}")


def _f(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    return f"{value:,.{digits}f}"


def _get(result: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(result, dict) or key not in result:
            return None
        result = result[key]
    return result


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}×" if a and b else "–"


def render(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        SECTION,
        "",
        f"Reproduce with `{COMMAND}` (or `python -m bench.run --scales {args.scales}`); "
        f"measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, one process per "
        "measurement, one at a time (the machine was shared with other work, so absolute times "
        "are noisy; each corpus's engines were measured back to back, so its ratios compare "
        "like with like).",
        "",
        "Every engine indexes the same chunks and the same tokens "
        "(`ragspine.retrieval.lexical.tokenize.tokenize`); top-10, k1 = 1.5, b = 0.75. "
        "bm25s: `BM25(method=\"lucene\")` (the same idf, ln(1 + (N - df + 0.5) / (df + 0.5)), "
        "float32 scores precomputed at index time, numpy backend, one query per call). "
        "rank_bm25: `BM25Okapi` (its idf differs: a speed comparison only). "
        "ragspine query times go through the public path `NarrativeIndex.retrieve(q, top_k=10, "
        "rerank=False)` with no query rewriter, in a fresh process that loads the persisted "
        "index; they include tokenising the query and reading the 10 chunks from SQLite, "
        "which bm25s and rank_bm25 do not do (they return row numbers). \"first pass\": each "
        "query's first run in the process (term and chunk caches cold); \"steady\": later "
        "passes. Build docs/s: ragspine \"public path\" builds from the store (reads SQLite, "
        "tokenises every chunk, writes the files); \"index core\" and the other engines start "
        "from the cached tokens (like for like). Peak RSS of the ragspine public path is the "
        "serving process (load + queries); of the others, build + queries.",
        "",
        "| corpus | chunks | engine | build docs/s | query p50 ms | p95 ms | queries/s | peak RSS MB | on disk MB | 1-doc index update p50 / p95 ms |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        n = _get(r, "meta", "n_chunks")
        build, serve, core = r.get("build", {}), r.get("serve", {}), r.get("core", {})
        upd = _get(r, "update", "index_update")
        lines.append(
            f"| {name} | {_f(n)} | ragspine (public path, steady) | {_f(build.get('docs_per_s'))} "
            f"| {_f(_get(serve, 'steady', 'p50_ms'), 2)} | {_f(_get(serve, 'steady', 'p95_ms'), 2)} "
            f"| {_f(_get(serve, 'steady', 'qps'))} | {_f(serve.get('peak_rss_mb'))} "
            f"| {_f(build.get('disk_mb'), 1)} "
            f"| {_f(_get(upd, 'p50_ms'))} / {_f(upd.get('p95_ms') if upd else None)} |"
        )
        lines.append(
            f"| | | ragspine (public path, first pass) | | {_f(_get(serve, 'first_pass', 'p50_ms'), 2)} "
            f"| {_f(_get(serve, 'first_pass', 'p95_ms'), 2)} | {_f(_get(serve, 'first_pass', 'qps'))} | | | |"
        )
        lines.append(
            f"| | | ragspine index core (tokens in, positions out) | {_f(core.get('docs_per_s'))} "
            f"| {_f(_get(core, 'steady', 'p50_ms'), 2)} | {_f(_get(core, 'steady', 'p95_ms'), 2)} "
            f"| {_f(_get(core, 'steady', 'qps'))} | {_f(core.get('peak_rss_mb'))} | | |"
        )
        for engine, label in (("bm25s", "bm25s"), ("rank_bm25", "rank_bm25")):
            e = r.get(engine, {})
            note = ""
            if engine == "rank_bm25" and e.get("queries_timed") and e.get("queries_timed") < 300:
                note = f" ({e['queries_timed']} queries timed)"
            if "error" in e:
                note = f" (failed: {e['error'][:80]})"
            lines.append(
                f"| | | {label}{note} | {_f(e.get('docs_per_s'))} | {_f(_get(e, 'steady', 'p50_ms'), 2)} "
                f"| {_f(_get(e, 'steady', 'p95_ms'), 2)} | {_f(_get(e, 'steady', 'qps'))} "
                f"| {_f(e.get('peak_rss_mb'))} | {_f(e.get('disk_mb'), 1)} | n/a (rebuild) |"
            )
    lines += ["", "Ratios (same run):", ""]
    lines.append("| corpus | queries/s ragspine ÷ bm25s | ÷ rank_bm25 | build docs/s ragspine core ÷ bm25s | ragspine from store ÷ bm25s |")
    lines.append("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        ours = _get(r, "serve", "steady", "qps")
        lines.append(
            f"| {name} | {_ratio(ours, _get(r, 'bm25s', 'steady', 'qps'))} "
            f"| {_ratio(ours, _get(r, 'rank_bm25', 'steady', 'qps'))} "
            f"| {_ratio(_get(r, 'core', 'docs_per_s'), _get(r, 'bm25s', 'docs_per_s'))} "
            f"| {_ratio(_get(r, 'build', 'docs_per_s'), _get(r, 'bm25s', 'docs_per_s'))} |"
        )
    compare = {n: r["compare"] for n, r in results.items() if "compare" in r and "error" not in r["compare"]}
    if compare:
        lines += ["", "Interleaved in one process (each query answered by every engine in turn, "
                  "tokenised inside the timed call for both, `tokenize(q) or [\"\"]` for bm25s; "
                  "one warm-up pass, then the timed passes):", ""]
        lines.append("| corpus | NarrativeIndex.retrieve q/s | HybridRetriever.search q/s | bm25s q/s | retrieve ÷ bm25s | top-10 agreement with bm25s |")
        lines.append("|---|---:|---:|---:|---:|---:|")
        for n, c in compare.items():
            lines.append(
                f"| {n} | {_f(_get(c, 'ragspine_retrieve', 'qps'))} | {_f(_get(c, 'ragspine_hybrid_search', 'qps'))} "
                f"| {_f(_get(c, 'bm25s', 'qps'))} | {_ratio(_get(c, 'ragspine_retrieve', 'qps'), _get(c, 'bm25s', 'qps'))} "
                f"| {_f(100 * c['top10_agreement'], 1)}% |"
            )
    lines += ["", "Bars (from the issue; measured above):", ""]
    lines += _bars(results)
    lines += ["", "Other figures:", ""]
    for name, r in results.items():
        meta, serve, build = r["meta"], r.get("serve", {}), r.get("build", {})
        parts = [
            f"store: {meta['store']} ({_f(meta['store_seconds'], 1)} s)",
            f"{_f(meta['n_tokens'] / max(1, meta['n_chunks']), 1)} tokens per chunk",
            f"index build from the store (tokenise + index + write) {_f(build.get('build_s'), 1)} s, peak RSS {_f(build.get('peak_rss_mb'))} MB",
            f"cold load of the persisted index {_f(serve.get('load_s'), 3)} s",
            f"HybridRetriever.search (same process, steady) p50 {_f(_get(serve, 'hybrid_search', 'p50_ms'), 2)} ms",
        ]
        upd = r.get("update", {})
        if "stats" in upd:
            parts.append(
                f"one-document replacement ({_f(upd['chunks_per_update'], 1)} chunks, {upd['update']['n']} runs): "
                f"index update p50 {_f(_get(upd, 'index_update', 'p50_ms'))} ms / p95 "
                f"{_f(_get(upd, 'index_update', 'p95_ms'))} ms, store write + index update p50 "
                f"{_f(_get(upd, 'update', 'p50_ms'))} ms / p95 {_f(_get(upd, 'update', 'p95_ms'))} ms; "
                f"withdrawal: index {_f(1e3 * upd['withdraw']['index_s'])} ms, with the store write "
                f"{_f(1e3 * upd['withdraw']['total_s'])} ms; index stats {upd['stats']}")
            if "compaction" in upd:
                parts.append(
                    f"a compaction (paid by the update that takes tombstones or new positions past "
                    f"25%) merges in {_f(upd['compaction']['merge_s'], 2)} s and writes in "
                    f"{_f(upd['compaction']['write_s'], 2)} s")
        if "cli" in r:
            parts.append(f"`ragspine search` cold process (default glossary rewriter): median "
                         f"{_f(r['cli']['median_s'], 2)} s, max {_f(r['cli']['max_s'], 2)} s over {r['cli']['runs']} runs")
        lines.append(f"- {name}: " + "; ".join(parts) + ".")
    lines += ["", NOTES]
    return "\n".join(lines) + "\n"


def _bars(results: dict[str, dict[str, Any]]) -> list[str]:
    out = []

    def verdict(ok: bool | None) -> str:
        return "not measured" if ok is None else ("pass" if ok else "FAIL")

    sci = results.get("scifact", {})
    c = sci.get("compare", {})
    ours, theirs = _get(c, "ragspine_retrieve", "qps"), _get(c, "bm25s", "qps")
    rank = _get(sci, "rank_bm25", "steady", "qps")
    serve_qps = _get(sci, "serve", "steady", "qps")
    if ours and theirs:
        out.append(f"- SciFact, 300 test queries, `NarrativeIndex.retrieve(top_k=10, rerank=False)` vs "
                   f"bm25s (interleaved): {_f(ours)} vs {_f(theirs)} q/s → {verdict(ours >= theirs)}.")
    if serve_qps and rank:
        out.append(f"- SciFact, ≥ 50× rank_bm25: {_f(serve_qps)} vs {_f(rank, 1)} q/s = "
                   f"{serve_qps / rank:,.0f}× → {verdict(serve_qps >= 50 * rank)}.")
    big = results.get("1M", {})
    if big:
        rss = _get(big, "serve", "peak_rss_mb")
        p50 = _get(big, "serve", "steady", "p50_ms")
        upd = _get(big, "update", "update", "p95_ms")
        idx = _get(big, "update", "index_update", "p95_ms")
        out.append(f"- 1M chunks, lexical index resident memory < 2 GB (peak RSS of the serving "
                   f"process): {_f(rss)} MB → {verdict(rss < 2048 if rss else None)}.")
        out.append(f"- 1M chunks, query p50 < 50 ms: {_f(p50, 2)} ms → {verdict(p50 < 50 if p50 else None)}.")
        comp = _get(big, "update", "compaction")
        extra = ""
        if comp:
            extra = (f" (the one update that crosses the compaction threshold, once per ≥ 25% "
                     f"new or tombstoned positions, also pays {_f(comp['merge_s'] + comp['write_s'], 1)} s)")
        out.append(f"- 1M chunks, one-document update < 1 s (p95 of 20): index {_f(idx)} ms, with the "
                   f"store's write {_f(upd)} ms → {verdict(upd < 1000 if upd else None)}{extra}.")
    cli = _get(results.get("100k", {}), "cli")
    if cli:
        out.append(f"- 100k chunks, cold `ragspine search` < 1.5 s: median {_f(cli['median_s'], 2)} s, "
                   f"max {_f(cli['max_s'], 2)} s → {verdict(cli['max_s'] < 1.5)}.")
    return out or ["- (no bar corpus in this run)"]


NOTES = """How the index works (src/ragspine/retrieval/lexical/index/): immutable segments of
term-major postings (positions int32, raw tf uint16/uint32) plus per-position columns (token
count, store row id, chunk id, filter-field codes), memory-mapped from `<db>.bm25/<analyzer>/`;
tombstones and live N / df / avgdl over the active chunks only; each update writes one small
segment and one tombstone record, merges small segments past 8, and compacts everything into
one segment once tombstones or new segments pass 25% (the compaction is a numpy merge, no
re-tokenising). Queries: exact MaxScore top-k (essential terms scanned, the rest looked up at
the surviving candidates) on large indexes, a dense scan on small ones; contributions are
float64 from raw tf and lengths, so scores equal `bm25_scores` over the active set."""


if __name__ == "__main__":
    main()
