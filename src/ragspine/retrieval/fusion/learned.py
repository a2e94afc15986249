"""Learned fusion: a logistic model over cheap per-query signals sets each query's channel weights.

Invariants: the model is data (`ragspine/data/fusion-model-v1.json`, versioned; its features
must be `signals.FEATURE_NAMES` in order) read once per process and evaluated in plain Python
(a dozen multiply-adds: deterministic, no numpy call per query); for a query it gives the dense
share a = sigmoid(intercept + Σ coef_i · (x_i − mean_i) / scale_i) in [0, 1], and the weights
(lexical, dense) = (2 · (1 − a), 2 · a), so a = 0.5 is plain RRF, a = 0 BM25's order and a = 1
the dense order (the retriever turns a zero weight into a tie-breaking one). With
`dense_alone_across_languages`, a query with a chunk in another language among the dense
top `CROSS_DEPTH` gets a = 1: BM25 cannot see a translation, and any BM25 weight lets its
same-language matches outvote it (never fires on a one-language corpus).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ragspine.retrieval.fusion.signals import (
    FEATURE_NAMES,
    QuerySignals,
    query_features,
)

MODEL_FORMAT = "ragspine-fusion-model"
MODEL_VERSION = 1
MODEL_RESOURCE = "fusion-model-v1.json"


@dataclass(frozen=True)
class LearnedFusion:
    """A logistic dense-share model (see the module docstring)."""

    coef: tuple[float, ...]
    intercept: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    dense_alone_across_languages: bool = True
    description: str = ""

    def __post_init__(self) -> None:
        n = len(FEATURE_NAMES)
        for name in ("coef", "mean", "scale"):
            values = getattr(self, name)
            if len(values) != n:
                raise ValueError(f"fusion model {name} has {len(values)} values; the features are {n}")
            if not all(math.isfinite(v) for v in values):
                raise ValueError(f"fusion model {name} has a value that is not a finite number")
        if any(s <= 0 for s in self.scale):
            raise ValueError("fusion model scales must be > 0")
        if not math.isfinite(self.intercept):
            raise ValueError("fusion model intercept must be a finite number")

    def dense_share_of(self, features: Sequence[float]) -> float:
        """a in [0, 1] for one query's `query_features` (the cross-language rule not applied)."""
        z = self.intercept
        for x, c, m, s in zip(features, self.coef, self.mean, self.scale, strict=True):
            z += c * (x - m) / s
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)

    def dense_share(self, signals: QuerySignals) -> float:
        """a in [0, 1] for one query (1.0 across languages when the model says so)."""
        if self.dense_alone_across_languages and signals.crossing:
            return 1.0
        return self.dense_share_of(query_features(signals))

    def weights(self, signals: QuerySignals) -> tuple[float, float]:
        """(lexical weight, dense weight) = (2 · (1 − a), 2 · a)."""
        share = self.dense_share(signals)
        return 2.0 * (1.0 - share), 2.0 * share

    def to_json(self, **extra: Any) -> dict[str, Any]:
        """The model file's content (`extra`: provenance kept beside the model)."""
        return {
            "format": MODEL_FORMAT,
            "version": MODEL_VERSION,
            "features": list(FEATURE_NAMES),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "mean": list(self.mean),
            "scale": list(self.scale),
            "dense_alone_across_languages": self.dense_alone_across_languages,
            "description": self.description,
            **extra,
        }


def model_from_json(data: Mapping[str, Any], origin: str = "fusion model") -> LearnedFusion:
    """Read a model file's content; ValueError saying what is wrong when it is not one."""
    if data.get("format") != MODEL_FORMAT or data.get("version") != MODEL_VERSION:
        raise ValueError(
            f"{origin} is not a {MODEL_FORMAT} version {MODEL_VERSION} file "
            f"(format {data.get('format')!r}, version {data.get('version')!r})"
        )
    if tuple(data.get("features", ())) != FEATURE_NAMES:
        raise ValueError(
            f"{origin} was trained on features {data.get('features')!r}; this RAGSpine computes "
            f"{list(FEATURE_NAMES)!r}: retrain it (bench/fusion_learn.py)"
        )
    try:
        return LearnedFusion(
            coef=tuple(float(x) for x in data["coef"]),
            intercept=float(data["intercept"]),
            mean=tuple(float(x) for x in data["mean"]),
            scale=tuple(float(x) for x in data["scale"]),
            dense_alone_across_languages=bool(data.get("dense_alone_across_languages", True)),
            description=str(data.get("description", "")),
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{origin} lacks or mistypes a field: {exc}") from exc


def load_model(path: str | Path | None = None) -> LearnedFusion:
    """The model in `path`, or the one shipped with the package (read once per process)."""
    if path is None:
        return _shipped_model()
    text = Path(path).read_text("utf-8")
    return model_from_json(json.loads(text), origin=str(path))


@functools.lru_cache(maxsize=1)
def _shipped_model() -> LearnedFusion:
    text = resources.files("ragspine.data").joinpath(MODEL_RESOURCE).read_text("utf-8")
    return model_from_json(json.loads(text), origin=f"ragspine/data/{MODEL_RESOURCE}")
