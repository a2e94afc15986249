"""Cold hybrid `ragspine search`: wall time, CPU time and peak RSS of a fresh process per query.

    python -m bench.cold_search [--runs 5] [--work DIR] [--before SRC] [--embedding auto]

Two stores are built with `ragspine ingest` (this checkout's code, the dense channel on: the
default `auto` embedding, multilingual-e5 where `[embed-e5]` is installed): "one-chunk" (one
short Markdown file) and "sample+crosslingual" (the bundled sample corpus plus the 80 passages of
bench/data/crosslingual as Markdown files: Chinese and English, ~120 chunks). Each timed run is
one `python -m ragspine search QUERY --db STORE` process; its wall time, user+system CPU time and
peak RSS (ru_maxrss) come from os.wait4. The queries go through the glossary (several variants).

`--before SRC` (the `src` folder of another checkout, e.g. a `git worktree` of an older commit)
times that code on a copy of the same store, interleaved run by run with this checkout's, and
prints the ratios. Each side first runs one untimed search on its copy (a store written by the
other version may be brought up to date once; the files are then in the page cache and Python's
bytecode is cached). Data lives
in --work (default: $TMPDIR/ragspine-cold), never in the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "src" / "ragspine" / "data" / "sample_corpus"
CROSSLINGUAL = ROOT / "bench" / "data" / "crosslingual" / "corpus.jsonl"
QUERIES = ("ACME revenue decline", "为什么营收下滑", "Borealis dividend")
ONE_CHUNK = "# Note\n\nACME's revenue fell in 2024 because export demand weakened.\n"


def _env(src: Path, embedding: str) -> dict[str, str]:
    # bytecode is written and reused, as for any installed package after its first run
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSPINE_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    env["RAGSPINE_EMBEDDING"] = embedding
    return env


def _folders(work: Path) -> dict[str, Path]:
    one = work / "corpus-one"
    one.mkdir(parents=True, exist_ok=True)
    (one / "note.md").write_text(ONE_CHUNK, encoding="utf-8")
    mixed = work / "corpus-mixed"
    mixed.mkdir(parents=True, exist_ok=True)
    for path in SAMPLE.iterdir():
        if path.suffix == ".md" or path.name in ("glossary.json", "manifest.json"):
            shutil.copy(path, mixed / path.name)
    for line in CROSSLINGUAL.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        (mixed / f"{entry['_id']}.md").write_text(f"# {entry['title']}\n\n{entry['text']}\n", encoding="utf-8")
    return {"one-chunk": one, "sample+crosslingual": mixed}


def _ingest(folder: Path, db: Path, env: dict[str, str]) -> str:
    for old in db.parent.glob(db.name + "*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    out = subprocess.run(
        [sys.executable, "-m", "ragspine", "ingest", str(folder), "--db", str(db)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip().splitlines()[0]


def _copy_store(db: Path, to: Path) -> None:
    for old in to.parent.glob(to.name + "*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    for path in db.parent.glob(db.name + "*"):
        target = to.parent / (to.name + path.name[len(db.name) :])
        shutil.copytree(path, target) if path.is_dir() else shutil.copy(path, target)


def _search(db: Path, query: str, env: dict[str, str]) -> dict[str, float]:
    """One cold search process: wall s, CPU s (user + system), peak RSS MB."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragspine", "search", query, "--db", str(db), "--top-k", "5"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode:
        raise RuntimeError(f"search failed ({proc.returncode}): {stderr.strip()}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed searches per store and side")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ragspine-cold")
    parser.add_argument("--before", type=Path, default=None, help="src folder of the code to compare with")
    parser.add_argument("--embedding", default="auto", help="RAGSPINE_EMBEDDING for ingest and search")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    sides = {"after": _env(ROOT / "src", args.embedding)}
    if args.before is not None:
        sides = {"before": _env(args.before.resolve(), args.embedding), **sides}
    report: dict[str, dict[str, object]] = {}
    for name, folder in _folders(work).items():
        db = work / f"{name}.db"
        print(f"{name}: {_ingest(folder, db, sides['after'])}", flush=True)
        copies = {}
        for side, env in sides.items():
            copies[side] = work / f"{name}-{side}.db"
            _copy_store(db, copies[side])
            _search(copies[side], QUERIES[0], env)  # untimed: brings the copy up to date, warms the cache
        runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for i in range(args.runs):
            for side, env in sides.items():
                runs[side].append(_search(copies[side], QUERIES[i % len(QUERIES)], env))
        figures: dict[str, object] = {}
        for side in sides:
            figures[side] = {key: round(_median(runs[side], key), 3) for key in ("wall_s", "cpu_s", "rss_mb")}
            f = figures[side]
            print(f"  {side:6} median of {args.runs}: wall {f['wall_s']:.2f} s, CPU {f['cpu_s']:.2f} s, "  # type: ignore[index]
                  f"peak RSS {f['rss_mb']:.0f} MB", flush=True)  # type: ignore[index]  # fmt: skip
        if "before" in sides:
            ratios = {
                key: round(_median(runs["before"], key) / _median(runs["after"], key), 2)
                for key in ("wall_s", "cpu_s", "rss_mb")
            }
            figures["before/after"] = ratios
            print(f"  before/after: wall {ratios['wall_s']}x, CPU {ratios['cpu_s']}x, RSS {ratios['rss_mb']}x")
        report[name] = figures
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
