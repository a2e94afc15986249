"""Scale test: N `ragspine serve` replicas over one PostgreSQL + pgvector, checked against one SQLite node.

What it does, all local (loopback) and bounded:
1. starts PostgreSQL with pgvector from the `pgserver` wheel (`ragspine.testing.postgres`), or
   uses --pg-url;
2. writes a synthetic corpus (fixed seed: the same files every run) of --docs Markdown files and
   folder-ingests it twice with the `ragspine ingest` path (`assembly.ingest_files`): into
   PostgreSQL (registry in PostgreSQL, vectors into pgvector) and into a SQLite file (vectors
   beside it): files/s and chunks/s of each;
3. starts --replicas `ragspine serve` processes over PostgreSQL (RAGSPINE_VECTOR_STORE=pgvector,
   so no replica embeds what another embedded) and one over the SQLite file (the reference),
   and times each replica's start-up (process start to its first answered search);
4. checks that every replica answers the probe queries exactly as the reference does (chunk
   ids in order and every score, to 1e-6), then makes --writes writes (add, change, withdraw a
   document) through replica 1 and the same writes on the reference; after each, polls every
   replica until it answers the written document's query and the probes like the reference:
   the staleness (write acknowledged → every replica serves it); a replica that still differs
   after --stale-timeout seconds fails the run;
5. runs a closed-loop load generator (asyncio + httpx, --concurrency connections, round robin
   over the first 1, 2, … N replicas, and on the SQLite node alone as the control) for --seconds
   each: requests/s and latency percentiles.

The retrieval is hybrid: BM25 fused with the dense channel of the `deterministic` embedding
backend (hashed tokens: no model to load, the same vectors everywhere), so the check covers the
shared pgvector path as well as the lexical index each replica keeps.

    make bench-scale                                          # 3 replicas, 600 documents
    PYTHONPATH=.:src .venv/bin/python -m bench.scale_bench --replicas 2 --docs 150 --seconds 5

The replicas, PostgreSQL and the load generator share the machine (2 cores here, with other
work): the throughput figures are a floor, and more replicas on the same cores cannot add CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

SEED = 20261201
PARAGRAPHS = (2, 4)  # paragraphs per document (each about one chunk)
WORDS = (45, 70)  # words per paragraph
ENTITIES = [f"ENT{i:02d}" for i in range(12)]
CJK = "营收利润增长下滑出口订单市场成本毛利率现金流风险管理战略产品客户"
# Every chunk reads as English (stopwords, a few Han characters): with two languages the SQLite
# node's dense channel centres vectors per language, which a shared vector store does not
# (docs/scaling.md), and this test compares the two.
STOPWORDS = ["the", "of", "and", "to", "in", "is", "for", "that", "with", "on", "was", "by"]
SCORE_TOLERANCE = 1e-6
TOP_K = 10
COLLECTION = "scale_bench_vectors"


# -- corpus ---------------------------------------------------------------------------------------
def vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size * 2)}
    return sorted(words)[:size]


class Corpus:
    """Deterministic documents: Zipf-like words and English stopwords, a little Chinese, an entity each."""

    def __init__(self, seed: int = SEED) -> None:
        self.rng = random.Random(seed)
        self.vocab = vocabulary(self.rng)
        self.weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(self.vocab))))

    def text(self, doc: int) -> str:
        paragraphs = []
        for _ in range(self.rng.randint(*PARAGRAPHS)):
            n = self.rng.randint(*WORDS)
            words = self.rng.choices(self.vocab, cum_weights=self.weights, k=n)
            stops = self.rng.choices(STOPWORDS, k=n)
            cjk = "".join(self.rng.choice(CJK) for _ in range(6))
            mixed = [w for pair in zip(words, stops, strict=True) for w in pair]
            paragraphs.append(cjk + " " + " ".join(mixed[: n + n // 2]) + ".")
        entity = ENTITIES[doc % len(ENTITIES)]
        return f"---\nentity: {entity}\ntitle: Report {doc}\n---\n" + "\n\n".join(paragraphs) + "\n"

    def queries(self, count: int) -> list[dict[str, Any]]:
        common = self.vocab[:1500]
        out: list[dict[str, Any]] = []
        for i in range(count):
            body: dict[str, Any] = {"query": " ".join(self.rng.sample(common, self.rng.randint(2, 3))), "top_k": TOP_K}
            if i % 2:
                body["filters"] = {"entity": self.rng.choice(ENTITIES)}
            out.append(body)
        return out


def write_folder(root: Path, corpus: Corpus, docs: int) -> list[str]:
    """`docs` files under root/docs/; their doc_ids (the paths relative to that folder)."""
    folder = root / "docs"
    names = []
    for doc in range(docs):
        name = f"part{doc % 10}/doc{doc:06d}.md"
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(corpus.text(doc), encoding="utf-8")
        names.append(name)
    return names


# -- settings and servers -------------------------------------------------------------------------
def node_env(db: str, *, shared_vectors: bool) -> dict[str, str]:
    """The environment of one node: this checkout's settings, none inherited from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSPINE_")}
    env.update(
        RAGSPINE_DB=db, RAGSPINE_EMBEDDING="deterministic", RAGSPINE_RETRIEVAL_MODE="hybrid",
        RAGSPINE_VECTOR_STORE="pgvector" if shared_vectors else "in_process",
    )  # fmt: skip
    if shared_vectors:
        env["RAGSPINE_VECTOR_COLLECTION"] = COLLECTION
    return env


@dataclass
class Node:
    name: str
    url: str
    proc: subprocess.Popen[bytes]
    started_s: float = 0.0  # process start → first answered search


@contextmanager
def serve(name: str, env: dict[str, str], log_dir: Path) -> Iterator[Node]:
    from ragspine.testing.postgres import free_port

    port = free_port()
    log = (log_dir / f"{name}.log").open("wb")
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragspine", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning"], env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    node = Node(name, f"http://127.0.0.1:{port}", proc)
    try:
        _wait_up(node, log_dir / f"{name}.log")
        node.started_s = time.perf_counter() - started
        yield node
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _wait_up(node: Node, log: Path, timeout: float = 600.0) -> None:
    deadline = time.perf_counter() + timeout
    with httpx.Client(base_url=node.url, timeout=timeout) as client:
        while True:
            if node.proc.poll() is not None:
                raise RuntimeError(f"replica {node.name} exited during start-up:\n{log.read_text()[-3000:]}")
            try:
                client.get("/health").raise_for_status()
                break
            except httpx.TransportError:
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"replica {node.name} did not start") from None
                time.sleep(0.1)
        client.post("/search", json={"query": "warm up", "top_k": 1}).raise_for_status()


# -- comparing answers -----------------------------------------------------------------------------
Answer = list[tuple[str, tuple[float | None, ...]]]


def answer(client: httpx.Client, url: str, body: dict[str, Any]) -> Answer:
    response = client.post(f"{url}/search", json=body)
    response.raise_for_status()
    return [
        (s["chunk_id"], tuple(s["scores"].get(k) for k in ("bm25", "vector", "fused")))
        for s in response.json()["snippets"]
    ]


def same(a: Answer, b: Answer) -> bool:
    """Same chunks in the same order, every score within SCORE_TOLERANCE."""
    if [c for c, _ in a] != [c for c, _ in b]:
        return False
    for (_, sa), (_, sb) in zip(a, b, strict=True):
        for x, y in zip(sa, sb, strict=True):
            if (x is None) != (y is None) or (x is not None and y is not None and abs(x - y) > SCORE_TOLERANCE):
                return False
    return True


@dataclass
class Report:
    replicas: int
    docs: int
    chunks: int = 0
    ingest: dict[str, dict[str, float]] = field(default_factory=dict)
    startup_s: list[float] = field(default_factory=list)
    checks: int = 0
    staleness_ms: list[float] = field(default_factory=list)
    load: list[dict[str, float]] = field(default_factory=list)

    def table(self) -> str:
        lines = ["| store | files | chunks | seconds | files/s | chunks/s |", "|---|---:|---:|---:|---:|---:|"]
        for name, row in self.ingest.items():
            lines.append(
                f"| {name} | {row['files']:.0f} | {row['chunks']:.0f} | {row['seconds']:.2f} "
                f"| {row['files'] / row['seconds']:.1f} | {row['chunks'] / row['seconds']:.1f} |"
            )
        lines += ["", f"replica start-up (s): {', '.join(f'{s:.2f}' for s in self.startup_s)}"]
        if self.staleness_ms:
            st = sorted(self.staleness_ms)
            lines.append(
                f"writes: {len(st)}; staleness ms (write acknowledged -> every replica serves it, each polled "
                f"by its own client): "
                f"median {statistics.median(st):.0f}, max {st[-1]:.0f}; answers compared: {self.checks}"
            )
        lines += ["", "| serving | concurrency | requests | errors | requests/s | p50 ms | p95 ms |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for row in self.load:
            name = "SQLite node (control)" if row["replicas"] == 0 else f"{row['replicas']:.0f} replica(s)"
            lines.append(
                f"| {name} | {row['concurrency']:.0f} | {row['requests']:.0f} | {row['errors']:.0f} "
                f"| {row['rps']:.1f} | {row['p50']:.1f} | {row['p95']:.1f} |"
            )
        return "\n".join(lines)


# -- the run ---------------------------------------------------------------------------------------
def ingest_folder(folder: Path, env: dict[str, str]) -> tuple[float, int, int]:
    """`ragspine ingest FOLDER` in this process with `env`'s settings: (seconds, files, chunks)."""
    from ragspine.assembly import ingest_files
    from ragspine.settings.config import load_settings

    settings = load_settings(env={k: v for k, v in env.items() if k.startswith("RAGSPINE_")})
    started = time.perf_counter()
    report, _ = ingest_files([folder], settings, progress=False)
    seconds = time.perf_counter() - started
    if report.failures:
        raise RuntimeError(f"ingest failed: {report.failures[:3]}")
    return seconds, len(report.ingested), report.chunks


def run(
    *,
    replicas: int = 3,
    docs: int = 600,
    writes: int = 12,
    seconds: float = 20.0,
    concurrency: int = 8,
    probes: int = 12,
    stale_timeout: float = 30.0,
    pg_url: str | None = None,
    log: Any = print,
) -> Report:
    """The whole scale test (module docstring); AssertionError when a replica and the SQLite
    node disagree after the staleness timeout."""
    from ragspine.testing.postgres import LocalPostgres

    corpus = Corpus()
    report = Report(replicas, docs)
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ragspine-scale-")))
        if pg_url is None:
            pg_url = stack.enter_context(LocalPostgres(max_connections=100))
        _prepare_database(pg_url)
        lite = str(tmp / "chunks.db")
        names = write_folder(tmp, corpus, docs)
        pg_env, lite_env = node_env(pg_url, shared_vectors=True), node_env(lite, shared_vectors=False)
        for store, env in (("PostgreSQL + pgvector", pg_env), ("SQLite", lite_env)):
            secs, files, chunks = ingest_folder(tmp / "docs", env)
            report.ingest[store] = {"files": files, "chunks": chunks, "seconds": secs}
            report.chunks = chunks
            log(f"ingested {files} files, {chunks} chunks into {store} in {secs:.2f} s")
        reference = stack.enter_context(serve("sqlite", lite_env, tmp))
        nodes = []
        for i in range(replicas):  # one at a time: each start-up is timed alone
            nodes.append(stack.enter_context(serve(f"replica{i + 1}", pg_env, tmp)))
            report.startup_s.append(nodes[-1].started_s)
        log(f"{replicas} replica(s) up; start-up s: {[round(s, 2) for s in report.startup_s]}")
        client = stack.enter_context(httpx.Client(timeout=60))
        probe_bodies = corpus.queries(probes)
        _converge(client, nodes, reference, probe_bodies, report, stale_timeout, record=False)
        rng = random.Random(SEED + 7)
        live, next_doc = list(names), docs
        for w in range(writes):
            kind = ("add", "change", "withdraw")[w % 3]
            if kind == "add":
                doc_id, next_doc = f"new/doc{next_doc:06d}.md", next_doc + 1
                text = corpus.text(next_doc)
                live.append(doc_id)
            else:
                doc_id = live[rng.randrange(len(live))]
                text = corpus.text(next_doc + 10_000 + w)
            for node in (nodes[0], reference):
                if kind == "withdraw":
                    client.delete(f"{node.url}/documents/{doc_id}").raise_for_status()
                else:
                    body = {"doc_id": doc_id, "text": text, "replace": kind == "change"}  # a taken id is 409 without replace
                    client.post(f"{node.url}/documents", json=body).raise_for_status()
            if kind == "withdraw":
                live.remove(doc_id)
            words = text.split("---\n")[-1].split()[:3]
            written = {"query": " ".join(words), "top_k": TOP_K}
            report.staleness_ms.append(_staleness(nodes, reference, written, stale_timeout))
            _converge(client, nodes, reference, [written, *probe_bodies[:4]], report, stale_timeout, record=False)
        log(f"{writes} writes checked; staleness ms: {[round(x) for x in report.staleness_ms]}")
        load_queries = corpus.queries(5000)
        row = asyncio.run(_load([reference.url], load_queries, concurrency, seconds))  # the control
        report.load.append({"replicas": 0, "concurrency": concurrency, **row})
        log(f"load on the SQLite node: {row['rps']:.1f} req/s, p95 {row['p95']:.1f} ms")
        for n in range(1, replicas + 1):
            row = asyncio.run(_load([node.url for node in nodes[:n]], load_queries, concurrency, seconds))
            report.load.append({"replicas": n, "concurrency": concurrency, **row})
            log(f"load over {n} replica(s): {row['rps']:.1f} req/s, p95 {row['p95']:.1f} ms")
    return report


def _prepare_database(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


def _converge(
    client: httpx.Client,
    nodes: Sequence[Node],
    reference: Node,
    bodies: Sequence[dict[str, Any]],
    report: Report,
    timeout: float,
    *,
    record: bool,
) -> None:
    """Poll every replica until each answers `bodies` as the reference does; record how long."""
    expected = [answer(client, reference.url, body) for body in bodies]
    started = time.perf_counter()
    waiting = list(nodes)
    while waiting:
        still = []
        for node in waiting:
            got = [answer(client, node.url, body) for body in bodies]
            report.checks += len(bodies)
            if not all(same(g, e) for g, e in zip(got, expected, strict=True)):
                still.append((node, got))
        if not still:
            break
        if time.perf_counter() - started > timeout:
            node, got = still[0]
            raise AssertionError(
                f"replica {node.name} still differs from the SQLite node after {timeout:.0f} s:\n"
                f"query {bodies}\nreplica {got}\nsqlite  {expected}"
            )
        waiting = [node for node, _ in still]
        time.sleep(0.02)
    if record:
        report.staleness_ms.append((time.perf_counter() - started) * 1000)


def _staleness(nodes: Sequence[Node], reference: Node, body: dict[str, Any], timeout: float) -> float:
    """Milliseconds from now until every replica answers `body` as the reference does, each
    replica polled by its own thread (a replica catches up on the first query after a write)."""
    from concurrent.futures import ThreadPoolExecutor

    with httpx.Client(timeout=60) as client:
        expected = answer(client, reference.url, body)
    started = time.perf_counter()

    def poll(node: Node) -> float:
        with httpx.Client(timeout=60) as own:
            while not same(answer(own, node.url, body), expected):
                if time.perf_counter() - started > timeout:
                    raise AssertionError(f"replica {node.name} does not serve the write after {timeout:.0f} s: {body}")
                time.sleep(0.005)
        return time.perf_counter() - started

    with ThreadPoolExecutor(len(nodes)) as pool:
        return max(pool.map(poll, nodes)) * 1000


async def _load(urls: Sequence[str], queries: list[dict[str, Any]], concurrency: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0
    counter = itertools.count()
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                i = next(counter)
                body, url = queries[i % len(queries)], urls[i % len(urls)]
                start = time.perf_counter()
                response = await client.post(f"{url}/search", json=body)
                latencies.append(time.perf_counter() - start)
                errors += response.status_code != 200

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    ms = sorted(x * 1000 for x in latencies)
    pct = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    return {"requests": len(ms), "errors": errors, "rps": len(ms) / elapsed, "p50": pct[49], "p95": pct[94]}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--writes", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=20.0, help="load per replica count")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--stale-timeout", type=float, default=30.0)
    parser.add_argument("--pg-url", default=None, help="a PostgreSQL with pgvector (default: start one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    report = run(
        replicas=args.replicas, docs=args.docs, writes=args.writes, seconds=args.seconds,
        concurrency=args.concurrency, stale_timeout=args.stale_timeout, pg_url=args.pg_url,
        log=lambda line: print(line, file=sys.stderr),
    )  # fmt: skip
    print(report.table())
    if args.json:
        args.json.write_text(json.dumps(report.__dict__, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
