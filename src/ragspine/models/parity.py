"""int8 parity: before a hub repo's int8 ONNX graph is used in place of the float graph the same
repo ships, the two are run on fixed probe inputs and their outputs compared.

Invariants:
- The probes are `PROBES`, fixed (query, passage) pairs in English and Chinese, tokenized with
  the repo's own tokenizer.json as pairs (truncated to 128 tokens) and run one at a time on the
  CPU, so neither padding nor batching enters the comparison.
- The measure is the lowest cosine between the two graphs' first outputs: per probe when an
  output has several values (token vectors, a sentence vector, two logits), else over the probes'
  scalars taken as one vector (a one-logit cross-encoder). Outputs of different shapes, or any
  NaN, count as -1. The int8 graph passes at `PARITY_MIN_COSINE` (0.99) or above.
- A result is kept in the repository's cache folder (`ragspine-parity.json`, keyed by the two
  graphs' and the tokenizer's blob names and `PROBES_VERSION`, so a re-pulled file or another
  probe set is checked again) and read on later resolutions without running anything; the
  verdict is the kept cosine against today's `PARITY_MIN_COSINE`. `ragspine models verify` runs
  the check again.
- onnxruntime and tokenizers are imported when a check runs (an ONNX slot has both).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.extras import require
from ragspine.models.device import onnx_session

log = logging.getLogger(__name__)

PARITY_MIN_COSINE = 0.99
RECORD = "ragspine-parity.json"
PROBES = (
    ("why did revenue fall", "revenue fell because overseas demand weakened in the third quarter"),
    ("what is the capital of France", "Paris is the capital and largest city of France."),
    ("营收为什么下滑", "第三季度海外需求减弱,导致公司营收同比下降百分之十二。"),
    ("how do I reset my password", "The weather was sunny all week and the beaches were crowded."),
)
_MAX_TOKENS = 128
PROBES_VERSION = 1  # bump when PROBES, _MAX_TOKENS or the measure change: kept results are redone


@dataclass(frozen=True)
class Parity:
    """The outcome of one check: the lowest cosine, and whether the int8 graph may be used."""

    cosine: float
    ok: bool


def graph_parity(int8: Path, fp32: Path, tokenizer: Path) -> Parity:
    """Run both graphs on `PROBES` and compare their first outputs (see the module docstring)."""
    ort = require("onnxruntime", extra="rerank", purpose="the int8 parity check")
    tokenizers = require("tokenizers", extra="rerank", purpose="the int8 parity check")
    tok = tokenizers.Tokenizer.from_file(str(tokenizer))
    tok.no_padding()
    tok.enable_truncation(max_length=_MAX_TOKENS)
    outputs = [_run_probes(onnx_session(ort, graph, device="cpu", threads=1, what="the parity check"), tok)
               for graph in (int8, fp32)]  # fmt: skip
    cosine = lowest_cosine(*outputs)
    return Parity(cosine, cosine >= PARITY_MIN_COSINE)


def _run_probes(session: Any, tok: Any) -> list[np.ndarray]:
    names = [i.name for i in session.get_inputs()]
    output = session.get_outputs()[0].name
    out = []
    for query, passage in PROBES:
        enc = tok.encode(query, passage)
        feed = {"input_ids": enc.ids, "attention_mask": enc.attention_mask, "token_type_ids": enc.type_ids}
        missing = [n for n in names if n not in feed]
        if missing:
            raise ValueError(f"the parity check cannot feed the model's inputs {missing}")
        (value,) = session.run([output], {n: np.asarray([feed[n]], dtype=np.int64) for n in names})
        out.append(np.asarray(value, dtype=np.float64).ravel())
    return out


def lowest_cosine(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    """The measure of the module docstring over two graphs' per-probe outputs.

    >>> one = [np.array([2.0]), np.array([-1.0])]
    >>> round(lowest_cosine(one, one), 4), round(lowest_cosine(one, [np.array([-2.0]), np.array([1.0])]), 4)
    (1.0, -1.0)
    >>> round(lowest_cosine([np.array([1.0, 0.0])], [np.array([1.0, 1.0])]), 4)
    0.7071
    """
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=True)):
        return -1.0
    pairs = list(zip(a, b, strict=True)) if a and a[0].size > 1 else [(np.concatenate(a), np.concatenate(b))]
    worst = 1.0
    for x, y in pairs:
        norm = float(np.linalg.norm(x) * np.linalg.norm(y))
        cos = float(np.dot(x, y) / norm) if norm > 0 else float(np.array_equal(x, y))
        worst = min(worst, cos if np.isfinite(cos) else -1.0)
    return worst


def _key(int8: Path, fp32: Path, tokenizer: Path) -> str:
    return f"{int8.resolve().name}:{fp32.resolve().name}:{tokenizer.resolve().name}:probes{PROBES_VERSION}"


def recorded(repo: Path, int8: Path, fp32: Path, tokenizer: Path) -> Parity | None:
    """The kept result for these graph and tokenizer files and this probe set, or None; `ok`
    is its cosine against `PARITY_MIN_COSINE`."""
    try:
        entry = json.loads((repo / RECORD).read_text("utf-8")).get(_key(int8, fp32, tokenizer))
        cosine = float(entry["cosine"])
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None
    return Parity(cosine, cosine >= PARITY_MIN_COSINE)


def record(repo: Path, int8: Path, fp32: Path, tokenizer: Path, parity: Parity) -> None:
    """Keep `parity` for this pair (written to a temporary file and renamed; a read-only cache
    keeps nothing and the check runs again next time)."""
    path = repo / RECORD
    try:
        kept = json.loads(path.read_text("utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        kept = {}
    kept[_key(int8, fp32, tokenizer)] = {"cosine": parity.cosine, "ok": parity.ok, "int8": int8.name, "fp32": fp32.name}
    try:
        handle, temporary = tempfile.mkstemp(dir=repo, prefix=".parity-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(kept, out, indent=1, sort_keys=True)
        os.replace(temporary, path)
    except OSError:
        pass


def checked_int8(repo: Path, int8: Path, fp32: Path, tokenizer: Path, *, name: str, again: bool = False) -> Parity:
    """The parity of `int8` against `fp32` (the kept result unless `again`), logged when it fails."""
    parity = None if again else recorded(repo, int8, fp32, tokenizer)
    if parity is None:
        parity = graph_parity(int8, fp32, tokenizer)
        record(repo, int8, fp32, tokenizer, parity)
        if not parity.ok:
            log.warning(
                "%s: the int8 graph %s failed the parity check (lowest cosine %.4f to %s < %.2f on %d fixed probes); "
                "the float graph is used", name, int8.name, parity.cosine, fp32.name, PARITY_MIN_COSINE, len(PROBES),
            )  # fmt: skip
    return parity
