"""A user's folder, timed as a user times it: `ragspine ingest`, then the first search that finds the answer, then full hybrid.

    python -m bench.folder_bench --folder DIR [--before SRC] [--rounds 1] [--query TEXT [--expect DOC_ID]] [--json F]

Each side and round ingests `--folder` into a new store with the real CLI in a fresh process
(`python -m ragspine ingest DIR --db STORE`, default settings: the `auto` embedding, e5 where
`[embed-e5]` is installed, a SQLite store), and times from the moment that process starts:

- **first search**: a second process polls `ragspine search QUERY --db STORE --json` (the plain
  command a user types; its default hybrid mode ranks BM25 plus whatever vectors exist) once the
  store file exists, waiting `--poll` seconds between searches, until a search returns the
  document `--expect` among its top 5 (a doc_id; default: the answer to the default `--query` in
  `bench.folder_source`'s folder; with a `--query` of your own, any hit unless `--expect` names
  one). A search that still misses it after the ingest has ended stops the run.
  Recorded: the wall time from the start of the ingest to that search's return, that search's
  own wall time, how many searches were tried, whether the ingest was still running, the last
  line that search logged (a warning, if any) and the last line of each distinct error of the
  searches before it. Polling then stops (it would take CPU from the ingest).
- **full hybrid**: the ingest process ends (its embedding pass included), then one more timed
  `ragspine search`; the wall time from the start of the ingest to that search's return. An
  untimed check (`bench.cold_search --check-dense`, the side's own code: `Workspace.stats()`'s
  `index.dense`) then asserts that every active chunk has a vector; the round fails otherwise.

Embedding chunks/s is the rate `ragspine ingest` prints ("embedded N chunk(s) in S s"). `--before
SRC` runs another checkout's `src` (e.g. `git archive ebe533d src/ragspine | tar -x -C DIR`) the same
way, its round first, alternating round by round with this checkout's; the ratios are
before ÷ after of the medians. The load average is printed before and after. Stores live in
`--work` (default $TMPDIR/ragspine-folder), never in the repository. `bench.folder_source`
assembles the 320-file folder that docs/benchmarks.md reports.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.cold_search import ROOT, _child, _env, _median

QUERY = "在图表中支持无障碍访问"  # the title of echarts-doc's zh/tutorial/aria.md
EXPECT = "md/zh__tutorial__aria.md"  # its doc_id in bench.folder_source's folder
EMBED_LINE = re.compile(r"embedded (\d+) chunk\(s\) in ([0-9.]+)s")


def _search(db: Path, query: str, env: dict[str, str]) -> tuple[float, list[str], str]:
    """One `ragspine search --json` process: (wall s, the hits' doc_ids, the last line of its standard error:
    the error when it failed, else a warning it logged, or "")."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "ragspine", "search", query, "--db", str(db), "--json", "--top-k", "5"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - start
    if out.returncode:
        return wall, [], (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1][:200]
    found = json.loads(out.stdout)  # a list of snippets before the {"snippets": ...} object
    logged = out.stderr.strip().splitlines()
    snippets = found["snippets"] if isinstance(found, dict) else found
    return wall, [s["doc_id"] for s in snippets], logged[-1][:200] if logged else ""


def _fresh(db: Path) -> None:
    if db.parent.exists():
        shutil.rmtree(db.parent)
    db.parent.mkdir(parents=True)


def _found(hits: list[str], expect: str) -> bool:
    """Whether a search found what it is looking for: `expect` among its hits' doc_ids, or any hit
    when `expect` is empty (a hybrid search returns the nearest vectors whatever the query, so
    "some hit" alone says little once any chunk has a vector)."""
    return expect in hits if expect else bool(hits)


def _round(folder: Path, db: Path, env: dict[str, str], query: str, expect: str, poll: float, limit: float) -> dict[str, object]:
    """One ingest with polling searches; its figures."""
    _fresh(db)
    log = db.parent / "ingest.out"
    with log.open("w") as out:
        start = time.perf_counter()
        ingest = subprocess.Popen(
            [sys.executable, "-m", "ragspine", "ingest", str(folder), "--db", str(db)],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        while not db.exists() and ingest.poll() is None:
            time.sleep(0.1)
        tries, errors, first = 0, [], None
        while first is None and time.perf_counter() - start < limit:
            ended = ingest.poll() is not None
            wall, hits, error = _search(db, query, env)
            tries += 1
            if not _found(hits, expect) and ended:
                raise SystemExit(f"{query!r} does not find {expect or 'anything'} after the ingest ended "
                                 f"(exit {ingest.returncode}; see {log}): give --query/--expect for this folder")  # fmt: skip
            if _found(hits, expect):
                first = {"first_search_s": time.perf_counter() - start, "first_search_own_s": wall,
                         "ingest_running": ingest.poll() is None, "first_search_logged": error,
                         "first_search_top": hits[:3]}  # fmt: skip
            else:
                errors += [error] if error and error not in errors else []
                time.sleep(poll)
        status = ingest.wait()
        ingest_s = time.perf_counter() - start
    if first is None:
        raise SystemExit(f"no search found {query!r} within {limit:.0f} s; errors: {errors}")
    wall, hits, error = _search(db, query, env)
    full_s = time.perf_counter() - start
    check = _child(env, "--check-dense", db)
    dense = check["index"]["dense"]  # type: ignore[index]
    if not _found(hits, expect) or not dense or dense["active"] != dense["with_vector"] + dense["lexical_only"]:
        raise SystemExit(f"not full hybrid after the ingest: hits {hits} {error}; dense {dense}")
    text = log.read_text(encoding="utf-8", errors="replace")
    embedded = EMBED_LINE.search(text)
    return {
        **first,
        "searches_tried": tries,
        "search_errors": errors,
        "ingest_s": ingest_s,
        "ingest_exit": status,
        "full_hybrid_s": full_s,
        "hybrid_search_s": wall,
        "hybrid_search_logged": error,
        "hybrid_search_top": hits[:3],
        "chunks": check["chunks"],
        "with_vector": dense["with_vector"],
        "embedded": int(embedded.group(1)) if embedded else None,
        "embed_s": float(embedded.group(2)) if embedded else None,
        "chunks_per_s": round(int(embedded.group(1)) / float(embedded.group(2)), 1) if embedded else None,
    }


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


KEYS = ("first_search_s", "first_search_own_s", "ingest_s", "full_hybrid_s", "hybrid_search_s", "chunks_per_s")


def _table(rounds: dict[str, list[dict[str, object]]]) -> dict[str, dict[str, float]]:
    """Print one row per side and round, then the medians; return the medians."""
    print(f"{'side':7} {'round':>5} {'first search':>13} {'(own)':>7} {'searches':>8} {'ingest':>8} "
          f"{'full hybrid':>12} {'(own)':>7} {'chunks':>7} {'chunks/s':>9}")  # fmt: skip
    medians: dict[str, dict[str, float]] = {}
    for side, runs in rounds.items():
        for i, r in enumerate(runs, 1):
            print(f"{side:7} {i:>5} {r['first_search_s']:>12.1f}s {r['first_search_own_s']:>6.1f}s "
                  f"{r['searches_tried']:>8} {r['ingest_s']:>7.1f}s {r['full_hybrid_s']:>11.1f}s "
                  f"{r['hybrid_search_s']:>6.1f}s {r['chunks']:>7} {r['chunks_per_s'] or 0:>9.1f}")  # fmt: skip
        medians[side] = {k: round(_median([r for r in runs if r[k] is not None], k), 2) for k in KEYS}  # type: ignore[misc]
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, required=True, help="the folder to ingest (any folder of documents)")
    parser.add_argument("--before", type=Path, default=None, help="src folder of the code to compare with")
    parser.add_argument("--rounds", type=int, default=1, help="ingests per side (alternated)")
    parser.add_argument("--query", default=QUERY, help="a query the folder's text answers")
    parser.add_argument("--expect", default=None,
                        help=f"doc_id the query must find (empty: any hit; default: {EXPECT} for the default query, else empty)")  # fmt: skip
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between polling searches")
    parser.add_argument("--limit", type=float, default=3600.0, help="give up on the first search after this")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ragspine-folder")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    folder, work = args.folder.resolve(), args.work.resolve()
    if args.expect is None:
        args.expect = EXPECT if args.query == QUERY else ""
    sides = {"after": _env(ROOT / "src", "auto")}
    if args.before is not None:
        sides = {"before": _env(args.before.resolve(), "auto"), **sides}
    load = {"start": _uptime()}
    print(f"folder {folder}; query {args.query!r}; {load['start']}", flush=True)
    rounds: dict[str, list[dict[str, object]]] = {side: [] for side in sides}
    for i in range(args.rounds):
        for side, env in sides.items():
            db = work / f"{side}-{i + 1}" / "chunks.db"
            figures = _round(folder, db, env, args.query, args.expect, args.poll, args.limit)
            rounds[side].append({**figures, "load_after": _uptime()})
            print(f"  round {i + 1} {side}: {json.dumps(rounds[side][-1], ensure_ascii=False)}", flush=True)
            if args.json is not None:  # what is done so far, in case the run is cut short
                args.json.write_text(json.dumps({"rounds": rounds}, indent=2, ensure_ascii=False), encoding="utf-8")
    load["end"] = _uptime()
    medians = _table(rounds)
    report: dict[str, object] = {"folder": str(folder), "query": args.query, "expect": args.expect, "load": load, "rounds": rounds,
                                 "medians": medians}  # fmt: skip
    if "before" in medians:
        b, a = medians["before"], medians["after"]
        ratios = {k: round(b[k] / a[k], 2) for k in ("first_search_s", "full_hybrid_s", "chunks_per_s") if a[k]}
        report["before/after"] = ratios
        print(f"before/after (medians): {ratios}")
    print(f"load: {load}", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
