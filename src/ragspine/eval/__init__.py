"""BEIR-format evaluation: load a dataset, run it through the product (files → `ragspine ingest`
→ `Workspace.search`, `run_product_eval`; or whole entries, `run_eval`), score it.

Names are imported on first use, so `ragspine.eval.cli` (loaded with every CLI start) stays light.

>>> from ragspine.eval import evaluate_run
>>> evaluate_run({"q": ["d1"]}, {"q": {"d1": 1}}).ndcg
1.0
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "BeirDataset": "dataset",
    "CorpusDoc": "dataset",
    "DatasetError": "dataset",
    "load_beir": "dataset",
    "evaluate_run": "metrics",
    "mrr_at_k": "metrics",
    "ndcg_at_k": "metrics",
    "recall_at_k": "metrics",
    "EvalError": "modes",
    "EvalMode": "modes",
    "EvalOptions": "runner",
    "EvalReport": "runner",
    "run_eval": "runner",
    "ProductOptions": "product",
    "run_product_eval": "product",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragspine.eval' has no attribute {name!r}")
    return getattr(import_module(f"ragspine.eval.{module}"), name)
