"""The scale test in its reduced form (issue 21): `bench/scale_bench.py` with 2 `ragspine serve`
replicas over one PostgreSQL + pgvector and a SQLite node over the same documents; every replica
must answer as the SQLite node does, at the start and after each write made through replica 1
(the run raises AssertionError otherwise). Real servers and a real HTTP client throughout."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale_bench.py"


def _scale_bench() -> object:
    spec = importlib.util.spec_from_file_location("scale_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["scale_bench"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_two_replicas_answer_like_one_sqlite_node_after_every_write(pg_url: str) -> None:
    bench = _scale_bench()
    report = bench.run(replicas=2, docs=120, writes=3, seconds=1.0, probes=6, pg_url=pg_url, log=lambda _: None)  # type: ignore[attr-defined]
    pg, lite = report.ingest["PostgreSQL + pgvector"], report.ingest["SQLite"]
    assert pg["files"] == lite["files"] == 120 and pg["chunks"] == lite["chunks"] >= 200
    assert len(report.staleness_ms) == 3 and len(report.startup_s) == 2
    assert report.checks >= 2 * (6 + 3 * 5)  # every probe and written document, on both replicas
    assert [row["replicas"] for row in report.load] == [0, 1, 2]  # 0: the SQLite node (control)
    assert all(row["errors"] == 0 and row["requests"] > 0 for row in report.load)


def test_answers_compare_every_score() -> None:
    bench = _scale_bench()
    a = [("d:0", (1.0, 0.5, 0.03)), ("d:1", (None, 0.2, 0.01))]
    assert bench.same(a, [("d:0", (1.0, 0.5 + 1e-9, 0.03)), ("d:1", (None, 0.2, 0.01))])  # type: ignore[attr-defined]
    assert not bench.same(a, [("d:0", (1.0, 0.5001, 0.03)), ("d:1", (None, 0.2, 0.01))])  # type: ignore[attr-defined]
    assert not bench.same(a, [("d:1", (None, 0.2, 0.01)), ("d:0", (1.0, 0.5, 0.03))])  # type: ignore[attr-defined]
    assert not bench.same(a, [("d:0", (1.0, 0.5, 0.03)), ("d:1", (0.0, 0.2, 0.01))])  # type: ignore[attr-defined]
