"""Which retrieval mode an eval run uses, resolved from --mode and --embedding.

Invariant: a mode that cannot run is an `EvalError` with the reason; it never falls back to
BM25 under another name. `auto` is hybrid when the embedding spec resolves to a backend (the
same `make_embedding_backend` registry and `auto` resolution as the CLI and the service),
else BM25, and the resolution says which and why. The spec defaults to RAGSPINE_EMBEDDING.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ragspine.errors import RagspineError


class EvalError(RagspineError, ValueError):
    """An eval run was asked for something it cannot do; the message says what to do instead."""


class EvalMode(str, Enum):
    """Retrieval modes accepted by `ragspine eval --mode`."""

    AUTO = "auto"
    BM25 = "bm25"
    HYBRID = "hybrid"
    VECTOR = "vector"

    @classmethod
    def parse(cls, value: str) -> EvalMode:
        try:
            return cls(value.strip().lower())
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise EvalError(f"unknown mode {value!r}; valid: {valid}") from None


@dataclass(frozen=True)
class ResolvedMode:
    """The mode that runs, what was asked for, the embedding spec that serves it (None for
    BM25), and why (shown in the output)."""

    mode: EvalMode
    requested: EvalMode
    note: str
    embedding: str | None = None


def resolve_mode(requested: str | EvalMode, embedding: str | None = None) -> ResolvedMode:
    """Resolve `requested` given the embedding spec (None: RAGSPINE_EMBEDDING); raise EvalError
    when it cannot run. Nothing heavy is imported or loaded.

    >>> resolve_mode("auto", "none").mode.value
    'bm25'
    >>> resolve_mode("hybrid", "deterministic").embedding
    'deterministic'
    """
    from ragspine.retrieval.vector.embeddings.factory import EMBEDDING_BACKENDS, resolve_auto

    mode = requested if isinstance(requested, EvalMode) else EvalMode.parse(requested)
    source = "--embedding"
    if embedding is None:
        from ragspine.assembly import load_settings

        embedding, source = load_settings(adopt=False).embedding, "RAGSPINE_EMBEDDING"
    spec = embedding.strip().lower()
    if spec not in EMBEDDING_BACKENDS:
        raise EvalError(
            f"{source} {embedding!r}: no such embedding backend (valid: {', '.join(EMBEDDING_BACKENDS)})"
        )
    if mode is EvalMode.BM25:
        return ResolvedMode(EvalMode.BM25, mode, "bm25: requested")
    why = f"{source} {spec}"
    if spec == "auto":
        name, reason = resolve_auto()
        why = reason
        spec = name or "none"
    if spec == "none":
        if mode is EvalMode.AUTO:
            return ResolvedMode(EvalMode.BM25, mode, f"auto: no embedding backend ({why})")
        raise EvalError(
            f"--mode {mode.value} needs a dense embedding backend, and none is available ({why}); "
            "name one with --embedding (e.g. e5, onnx), or use --mode bm25"
        )
    if mode is EvalMode.AUTO:
        return ResolvedMode(EvalMode.HYBRID, mode, f"auto: hybrid ({why})", spec)
    return ResolvedMode(mode, mode, f"{mode.value}: requested ({why})", spec)
