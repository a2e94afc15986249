"""Which retrieval mode an eval run uses, resolved from --mode and --embedding.

Invariant: a mode that cannot run is an `EvalError` with the reason; it never falls back to
BM25 under another name. `auto` is hybrid when an embedding backend is configured, else BM25,
and the resolution says which and why. This version ships no dense embedding backend, so
`hybrid` and `vector` cannot run yet and the only embedding specs are "none" and "auto"
(auto: the best available backend, which today is none).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class EvalError(ValueError):
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


# Embedding specs this version understands; a real backend factory replaces this table.
EMBEDDING_SPECS: tuple[str, ...] = ("none", "auto")


@dataclass(frozen=True)
class ResolvedMode:
    """The mode that runs, what was asked for, and why (shown in the output)."""

    mode: EvalMode
    requested: EvalMode
    note: str


def resolve_mode(requested: str | EvalMode, embedding: str | None = None) -> ResolvedMode:
    """Resolve `requested` given the embedding spec; raise EvalError when it cannot run.

    >>> resolve_mode("auto").mode.value
    'bm25'
    """
    mode = requested if isinstance(requested, EvalMode) else EvalMode.parse(requested)
    spec = (embedding or "none").strip().lower()
    if spec not in EMBEDDING_SPECS:
        raise EvalError(
            f"--embedding {embedding!r}: no such embedding backend; this version of RAGSpine ships "
            f"no dense backend yet (valid: {', '.join(EMBEDDING_SPECS)})"
        )
    if mode in (EvalMode.HYBRID, EvalMode.VECTOR):
        raise EvalError(
            f"--mode {mode.value} needs a dense embedding backend, and this version of RAGSpine "
            "has none (the vector channel is not built yet); use --mode bm25, or --mode auto "
            "to get hybrid once a backend is available"
        )
    if mode is EvalMode.BM25:
        return ResolvedMode(EvalMode.BM25, mode, "bm25: requested")
    return ResolvedMode(EvalMode.BM25, mode, f"auto: no embedding backend configured (--embedding {spec})")
