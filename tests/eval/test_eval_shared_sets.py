"""Real runs over the shared BEIR sets: our metrics equal pytrec_eval's to 1e-6.

Each case ingests the whole corpus (in memory) and queries a spread-out subsample, so the file
stays well under a minute on two cores. Skipped when ../shared/eval is absent.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ragspine.eval.dataset import load_beir
from ragspine.eval.runner import EvalOptions, run_eval

pytest.importorskip("pytrec_eval")
from pytrec_helpers import assert_agrees_with_pytrec_eval  # noqa: E402

SAMPLE = 60
CASES = [
    # (dataset, split, chunk_chars, queries that must be in the sample)
    ("scifact", "test", None, ()),
    ("cmrc2018", "dev", 480, ("TRIAL_776_QUERY_4", "TRIAL_20_QUERY_0")),  # two blank queries
    ("drcd_simplified", "test", None, ()),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "split", "chunk_chars", "must"), CASES, ids=[c[0] for c in CASES])
def test_metrics_agree_with_pytrec_eval_on_real_runs(
    shared_eval: Path, name: str, split: str, chunk_chars: int | None, must: tuple[str, ...]
) -> None:
    full = load_beir(shared_eval / name, split)
    qids = list(full.qrels)
    picked = list(dict.fromkeys([*qids[:: max(1, len(qids) // SAMPLE)][:SAMPLE], *must]))
    dataset = dataclasses.replace(
        full,
        queries={q: full.queries[q] for q in picked},
        qrels={q: full.qrels[q] for q in picked},
    )
    report = run_eval(dataset, EvalOptions(analyzer="spec", chunk_chars=chunk_chars, progress=False))

    assert report.queries == len(picked)
    assert report.blank_queries == len(must)
    assert all(len(r) == 100 for q, r in report.run.items() if dataset.queries[q].strip())
    assert all(len({d for d, _ in r}) == len(r) for r in report.run.values())
    if chunk_chars is not None:
        assert report.chunks > report.docs  # the best-chunk aggregation is exercised
    assert_agrees_with_pytrec_eval({q: [d for d, _ in r] for q, r in report.run.items()}, dataset.qrels)
    assert 0.5 < report.ndcg <= 1.0
