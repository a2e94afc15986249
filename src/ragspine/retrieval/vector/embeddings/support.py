"""What every embedding backend shares: its error types, the missing-extra message, input checks,
and the two helpers a caller uses around the `EmbeddingBackend` Protocol.

Invariants:
- A backend whose `is_remote` is true sends texts off this machine. `can_embed(backend,
  sensitivity)` is False for a RESTRICTED chunk on such a backend (`is_restricted`, the same test
  both RESTRICTED exits use), so the caller keeps that chunk lexical-only. `embed_texts` itself
  only ever sees strings and cannot tell.
- `embed_queries(backend, texts)` uses the backend's own `embed_queries` (asymmetric models such
  as E5 prefix queries and passages differently) and falls back to `embed_texts`.
- A missing optional dependency raises `MissingExtraError` naming the extra to install.
- `file_sha256` is the one digest of a model file a backend's `model_id` or cache key names.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ragspine import extras
from ragspine.extras import MissingExtraError as MissingExtraError  # re-exported: the one class
from ragspine.http_retry import EndpointError
from ragspine.models.hub import file_digest
from ragspine.retrieval.types import EmbeddingBackend
from ragspine.retrieval.sensitivity import is_restricted


class EmbeddingBackendError(EndpointError):
    """A backend could not produce vectors (bad response, model failure); `status` is the last
    HTTP status for remote backends."""


def require(module: str, *, extra: str, backend: str) -> ModuleType:
    """`ragspine.extras.require` with the backend's name as the purpose."""
    return extras.require(module, extra=extra, purpose=backend)


def check_texts(texts: Sequence[str]) -> list[str]:
    """`texts` as a list, or ValueError when it is a bare string or holds a non-string."""
    if isinstance(texts, str):
        raise ValueError("embed_texts takes a list of strings, not one string")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ValueError(f"texts[{i}] is {type(text).__name__}, expected str")
    return out


def embed_queries(backend: EmbeddingBackend, texts: list[str]) -> list[list[float]]:
    """Query vectors: `backend.embed_queries` when the backend has it, else `embed_texts`."""
    method = getattr(backend, "embed_queries", None)
    return method(texts) if callable(method) else backend.embed_texts(texts)


def is_remote(backend: Any) -> bool:
    """Whether the backend sends texts over the network (unknown backends count as remote)."""
    return bool(getattr(backend, "is_remote", True))


def can_embed(backend: Any, sensitivity: object) -> bool:
    """False when `sensitivity` is RESTRICTED and the backend is remote: keep that chunk
    lexical-only. Local backends may embed anything (the vectors never leave the machine)."""
    return not (is_remote(backend) and is_restricted(sensitivity))


def model_id_of(backend: Any) -> str:
    """The backend's `model_id`, or ValueError: persisted vectors must name their model."""
    model_id = getattr(backend, "model_id", None)
    if not isinstance(model_id, str) or not model_id:
        raise ValueError(f"{type(backend).__name__} has no model_id; vectors cannot be keyed by model")
    return model_id


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (`models.hub.file_digest`, read 1 MiB at a time)."""
    return file_digest(Path(path), "sha256")
