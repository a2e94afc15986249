"""Cold hybrid `ragspine search`: wall time, CPU time and peak RSS of a fresh process per query.

    python -m bench.cold_search [--runs 5] [--work DIR] [--before SRC] [--embedding auto]
    python -m bench.cold_search --scale 100k [--runs 5] [--work DIR]
    python -m bench.cold_search --after-ingest 3000 [--runs 3] [--work DIR] [--before SRC]

Two stores are built with `ragspine ingest` (this checkout's code, the dense channel on: the
default `auto` embedding, multilingual-e5 where `[embed-e5]` is installed): "one-chunk" (one
short Markdown file) and "sample+crosslingual" (the bundled sample corpus plus the 80 passages of
bench/data/crosslingual as Markdown files: Chinese and English, ~120 chunks). Each timed run is
one `python -m ragspine search QUERY --db STORE` process; its wall time, user+system CPU time and
peak RSS (ru_maxrss) come from os.wait4. The queries go through the glossary (several variants).

`--before SRC` (the `src` folder of another checkout, e.g. a `git worktree` of an older commit)
times that code on a copy of the same store, interleaved run by run with this checkout's, and
prints the ratios (with `--scale`: hybrid searches by that code on the same store, interleaved
with this checkout's hybrid and BM25-alone runs; derived files one version writes, such as the
dense matrix cache, are ignored by a version that does not know them). Each side first runs one untimed search on its copy (a store written by the
other version may be brought up to date once; the files are then in the page cache and Python's
bytecode is cached). Data lives
in --work (default: $TMPDIR/ragspine-cold), never in the repository.

`--scale 100k` (or any `bench.prepare` size) times one store instead: the synthetic corpus of
`bench.prepare` (bulk-loaded, fixed seed), with a vector for every chunk written under the
identity a `ragspine search` process with these settings looks for (`_write_vectors`: the file
name from RAGSPINE_CONTEXTUAL's index text, the model id of the backend the settings resolve,
the store's index settings recorded as `ragspine ingest` records them). The vectors are random
unit vectors (fixed seed: their values do not change the cost); each query is still embedded by
the real model. A check process then searches through the product path and asserts that the
dense channel covered every chunk. The timed runs interleave hybrid (the `--embedding` backend)
and BM25 alone (RAGSPINE_EMBEDDING=none) on the same store.

`--after-ingest N` times what a user times after `ragspine ingest`: the first search on a fresh
store. A generated Markdown corpus of about N chunks (fixed seed, Zipf-distributed words, 10
1000-character paragraphs per file) is ingested BM25-only (RAGSPINE_EMBEDDING=none) into a new
store per side and round; then one `ragspine search` process (the first search) and a second
one are timed. "before": the store as an ingest without the index step leaves it (its
`<db>.bm25/` folder removed: the first search builds the lexical index), or, with `--before
SRC`, that code's ingest and searches; "after": this checkout's ingest (its index step builds
the files) and searches. The sides alternate round by round; medians are printed, with the
ingest wall time (the index step moves the build into it).
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


def _write_vectors(db: Path) -> None:
    """Give every active chunk of `db` a random unit vector where this process's settings (a
    `ragspine search` run's) look for them; a store without a record of its index settings gets
    these settings' record, as `ragspine ingest` gives a new store (the synthetic chunks were not
    cut by that chunker: their size is the corpus's)."""
    import numpy as np

    from ragspine.assembly import (
        index_settings_for,
        make_embedding,
        make_index_text_for,
    )
    from ragspine.retrieval.chunking.contextual import index_text_tag
    from ragspine.retrieval.lexical.index.identity import (
        check_index_settings,
        record_index_settings,
        recorded_index_settings,
    )
    from ragspine.retrieval.store.sqlite import ChunkStore
    from ragspine.retrieval.vector.dense.channel import vector_key
    from ragspine.retrieval.vector.dense.chunk_vectors import (
        VECTORS_SUFFIX,
        ChunkVectors,
        vector_metadata,
    )
    from ragspine.settings.config import load_settings

    settings = load_settings(flags={"RAGSPINE_DB": str(db)})
    backend = make_embedding(settings)
    model_id, dim = vector_key(backend), getattr(backend, "dim", None)
    if model_id is None or not isinstance(dim, int):
        raise SystemExit("no embedding backend with a model id and dim resolves with these settings")
    target = Path(str(db) + index_text_tag(make_index_text_for(settings)) + VECTORS_SUFFIX)
    rng = np.random.default_rng(7)
    with ChunkStore(db) as store, ChunkVectors(target, model_id=model_id, dim=dim) as vectors:
        asked = index_settings_for(settings)
        if recorded_index_settings(store) is None:  # bulk-loaded: record what a default ingest records
            record_index_settings(store, asked)
        check_index_settings(store, asked)
        chunks = list(store.iter_chunks())
        missing = set(vectors.missing([c.chunk_id for c in chunks]))
        todo = [c for c in chunks if c.chunk_id in missing]
        for i in range(0, len(todo), 10_000):
            batch = todo[i : i + 10_000]
            matrix = rng.standard_normal((len(batch), dim)).astype(np.float32)  # unit rows on write
            vectors.upsert([c.chunk_id for c in batch], matrix, [vector_metadata(c) for c in batch])
    print(json.dumps({"vectors": str(target), "model_id": model_id, "written": len(todo), "chunks": len(chunks)}))


def _check_dense(db: Path) -> None:
    """One search through the product path (`Workspace`, as `ragspine search`); print the dense
    channel's coverage afterwards (untimed: this also builds the derived indexes once)."""
    from ragspine.settings.config import load_settings
    from ragspine.workspace import Workspace

    with Workspace.from_settings(load_settings(flags={"RAGSPINE_DB": str(db)})) as workspace:
        hits = workspace.search(QUERIES[0], top_k=5)
        stats = workspace.stats()
    print(json.dumps({"hits": len(hits), "chunks": stats["chunks"], "index": stats["index"]}, default=str))


def _child(env: dict[str, str], flag: str, db: Path) -> dict[str, object]:
    """Run `_write_vectors` / `_check_dense` in a fresh process with the search processes' env."""
    env = {**env, "PYTHONPATH": f"{env['PYTHONPATH']}{os.pathsep}{ROOT}"}
    out = subprocess.run(
        [sys.executable, "-m", "bench.cold_search", flag, str(db)],
        env=env, cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode:
        raise SystemExit(f"{flag} failed ({out.returncode}): {out.stderr.strip()}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _scale_store(work: Path, scale: str, env: dict[str, str]) -> Path:
    """The `bench.prepare` corpus `scale` with a vector for every chunk; asserts that a search
    with `env` ranks all of them densely."""
    from bench.prepare import prepare

    meta = prepare(work, scale)
    db = work / scale / "chunks.db"
    wrote = _child(env, "--write-vectors", db)
    print(f"{scale}: {meta['n_chunks']:,} chunks; vectors {wrote}", flush=True)
    check = _child(env, "--check-dense", db)
    dense = check["index"]["dense"]  # type: ignore[index]
    print(f"  check search: {check}", flush=True)
    if not dense or dense["with_vector"] != meta["n_chunks"] or dense["problem"] is not None:
        raise SystemExit(f"the dense channel did not cover the {meta['n_chunks']} chunks: {dense}")
    return db


def _time_scale(db: Path, scale: str, runs: int, env: dict[str, str], before: dict[str, str] | None = None) -> dict[str, object]:
    """Hybrid and BM25-alone cold searches on `db`, interleaved; their medians. `before`: also
    hybrid searches by that code (another checkout's `src`) on the same store, interleaved."""
    sides = {"hybrid": env, "bm25": {**env, "RAGSPINE_EMBEDDING": "none"}}
    if before is not None:
        sides = {"before-hybrid": before, **sides}
    for side_env in sides.values():
        _search(db, QUERIES[0], side_env)  # untimed: page cache, bytecode
    times: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for i in range(runs):
        for side, side_env in sides.items():
            times[side].append(_search(db, QUERIES[i % len(QUERIES)], side_env))
    figures: dict[str, object] = {}
    for side, values in times.items():
        f = {key: round(_median(values, key), 3) for key in ("wall_s", "cpu_s", "rss_mb")}
        f["wall_max_s"] = round(max(r["wall_s"] for r in values), 3)
        figures[side] = f
        print(f"  {scale} {side:13} median of {runs}: wall {f['wall_s']:.2f} s (max {f['wall_max_s']:.2f}), "
              f"CPU {f['cpu_s']:.2f} s, peak RSS {f['rss_mb']:.0f} MB", flush=True)  # fmt: skip
    if before is not None:
        b, a = figures["before-hybrid"], figures["hybrid"]
        ratios = {key: round(b[key] / a[key], 2) for key in ("wall_s", "cpu_s", "rss_mb")}  # type: ignore[index]
        figures["before/after"] = ratios
        print(f"  before/after (hybrid): wall {ratios['wall_s']}x, CPU {ratios['cpu_s']}x, RSS {ratios['rss_mb']}x")
    print(f"  load average (1, 5, 15 min) at the end: {os.getloadavg()}", flush=True)
    return figures


def _generated(folder: Path, chunks: int) -> Path:
    """About `chunks` 1000-character paragraphs of Zipf-distributed words in Markdown files (10 each)."""
    import numpy as np

    rng = np.random.default_rng(37)
    vocab = [f"w{i:x}" + "abcdefgh"[i % 8] * (i % 4) for i in range(20_000)]
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(max(1, chunks // 10)):
        paragraphs = []
        for _ in range(10):
            words = [vocab[min(int(z), len(vocab)) - 1] for z in rng.zipf(1.2, 200)]
            paragraphs.append(" ".join(words)[:990].rsplit(" ", 1)[0] + ".")
        (folder / f"doc{f:05d}.md").write_text(f"# Document {f}\n\n" + "\n\n".join(paragraphs) + "\n", "utf-8")
    return folder


def _time_after_ingest(work: Path, chunks: int, runs: int, before: Path | None) -> dict[str, object]:
    """First and second cold search after a fresh BM25-only ingest, before/after, alternated."""
    folder = _generated(work / f"generated-{chunks}", chunks)
    sides = {"before": _env(before.resolve() if before else ROOT / "src", "none"), "after": _env(ROOT / "src", "none")}
    times: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for i in range(runs):
        for side, env in sides.items():
            db = work / f"first-{side}.db"
            start = time.perf_counter()
            line = _ingest(folder, db, env)
            ingest_s = time.perf_counter() - start
            if side == "before":  # the state an ingest without the index step leaves
                shutil.rmtree(Path(str(db) + ".bm25"), ignore_errors=True)
            first = _search(db, QUERIES[i % len(QUERIES)], env)
            second = _search(db, QUERIES[(i + 1) % len(QUERIES)], env)
            times[side].append({"ingest_s": ingest_s, "first_s": first["wall_s"], "second_s": second["wall_s"]})
            print(f"  round {i + 1} {side:6}: ingest {ingest_s:.2f} s, first search {first['wall_s']:.2f} s, "
                  f"second {second['wall_s']:.2f} s ({line})", flush=True)  # fmt: skip
    figures: dict[str, object] = {}
    for side in sides:
        figures[side] = {key: round(_median(times[side], key), 3) for key in ("ingest_s", "first_s", "second_s")}
        print(f"  {side:6} median of {runs}: {figures[side]}", flush=True)
    b, a = figures["before"], figures["after"]
    figures["before/after first search"] = round(b["first_s"] / a["first_s"], 2)  # type: ignore[index]
    print(f"  first search before/after: {figures['before/after first search']}x; "
          f"load average at the end: {os.getloadavg()}", flush=True)  # fmt: skip
    return figures


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed searches per store and side")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ragspine-cold")
    parser.add_argument("--before", type=Path, default=None, help="src folder of the code to compare with")
    parser.add_argument("--embedding", default="auto", help="RAGSPINE_EMBEDDING for ingest and search")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--scale", default=None, help="time one bench.prepare corpus of this size (e.g. 100k)")
    parser.add_argument("--after-ingest", type=int, default=None, help="first search after ingest, ~N chunks")
    parser.add_argument("--write-vectors", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--check-dense", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_vectors is not None:
        _write_vectors(args.write_vectors)
        return
    if args.check_dense is not None:
        _check_dense(args.check_dense)
        return
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.after_ingest is not None:
        first = _time_after_ingest(work, args.after_ingest, args.runs, args.before)
        if args.json is not None:
            args.json.write_text(json.dumps({"after_ingest": first}, indent=2), encoding="utf-8")
        return
    if args.scale is not None:
        env = _env(ROOT / "src", args.embedding)
        db = _scale_store(work, args.scale, env)
        before = _env(args.before.resolve(), args.embedding) if args.before is not None else None
        scaled = _time_scale(db, args.scale, args.runs, env, before)
        if args.json is not None:
            args.json.write_text(json.dumps({args.scale: scaled}, indent=2), encoding="utf-8")
        return
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
