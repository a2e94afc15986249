"""A vector store's folder on disk: float32 rows in .npy, ids and metadata in JSON, a manifest.

Layout: `manifest.json` names the generation in use, `vectors-<digest>.npy` (count × dim float32)
and `records-<digest>.json` (ids and metadata, row for row), and records the model_id and dim.

Invariants:
- A save is atomic: the data files are written under new names (the digest of their content)
  and fsynced, then `manifest.json` is replaced in one `os.replace`; a reader sees the old
  store or the new one, never a mix. The previous generation's files are kept (a reader that
  read the old manifest can still open them); older ones are removed.
- A load checks the manifest against the files (format, shape, ids unique and one per row) and,
  when the caller names the model_id or dim in use, refuses a store made by another model or of
  another dimension with VectorFilesMismatch, whose message says how to re-embed. Vectors of
  different models are never compared.
- `np.load` runs with allow_pickle=False; nothing here executes what it reads.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.atomic import fsync_dir, write_atomic
from ragspine.retrieval.vector.errors import VectorFilesDamaged, VectorModelMismatch

FORMAT = "ragspine-vectors"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"


# A vector folder is missing, damaged or of an unknown format: the one damaged-vectors error
# (`ragspine.errors.DamagedFile`); like the mismatch, an alias kept for existing callers.
VectorFilesError = VectorFilesDamaged
# One mismatch error for every vector store (an alias kept for existing callers).
VectorFilesMismatch = VectorModelMismatch


@dataclass(frozen=True)
class SavedVectors:
    """What a vector folder holds."""

    vectors: np.ndarray  # (count, dim) float32
    ids: list[str]
    metadata: list[dict[str, Any]]
    model_id: str | None
    dim: int | None


def write_vectors(
    folder: Path,
    vectors: np.ndarray,
    ids: Sequence[str],
    metadata: Sequence[dict[str, Any]],
    *,
    model_id: str | None,
    dim: int | None,
) -> None:
    """Save atomically into `folder` (created if needed); see the module invariants."""
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
    records = json.dumps({"ids": list(ids), "metadata": list(metadata)}, ensure_ascii=False,
                         sort_keys=True, allow_nan=False).encode("utf-8")  # fmt: skip
    digest = hashlib.sha256(buffer.getvalue() + b"\0" + records).hexdigest()[:16]
    names = {"vectors": f"vectors-{digest}.npy", "records": f"records-{digest}.json"}
    previous = _referenced(folder)
    write_atomic(folder / names["vectors"], buffer.getvalue())
    write_atomic(folder / names["records"], records)
    manifest = {"format": FORMAT, "version": FORMAT_VERSION, "model_id": model_id, "dim": dim,
                "count": len(ids), **names}  # fmt: skip
    write_atomic(folder / MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1).encode("utf-8"))
    fsync_dir(folder)
    keep = set(names.values()) | previous | {MANIFEST}
    for path in folder.iterdir():
        stale = path.name.startswith(("vectors-", "records-")) or path.name.endswith(".tmp")
        if stale and path.name not in keep and path.is_file():
            path.unlink(missing_ok=True)


def read_vectors(folder: Path, *, model_id: str | None = None, dim: int | None = None) -> SavedVectors:
    """Load `folder`; with `model_id` / `dim`, raise VectorFilesMismatch when they differ."""
    manifest = _read_manifest(folder)
    saved_model, saved_dim = manifest.get("model_id"), manifest.get("dim")
    if model_id is not None and saved_model != model_id:
        raise VectorFilesMismatch(
            f"the vectors in {str(folder)!r} were made by model {saved_model!r}, but the embedding "
            f"backend in use is {model_id!r}; vectors of different models cannot be compared. "
            "Re-embed: embed every chunk with the backend in use into a new store and save it "
            f"over {str(folder)!r} (or delete that folder and let ingest rebuild it)"
        )
    if dim is not None and saved_dim is not None and saved_dim != dim:
        raise VectorFilesMismatch(
            f"the vectors in {str(folder)!r} have dimension {saved_dim}, but the embedding backend "
            f"in use makes {dim}; re-embed every chunk with the backend in use into a new store and "
            f"save it over {str(folder)!r} (or delete that folder and let ingest rebuild it)"
        )
    try:
        vectors = np.load(folder / manifest["vectors"], allow_pickle=False)
        records = json.loads((folder / manifest["records"]).read_text("utf-8"))
        ids, metadata = list(records["ids"]), list(records["metadata"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VectorFilesError(f"vector folder {str(folder)!r} is damaged: {exc}") from None
    count = manifest.get("count")
    expected_shape = (count, saved_dim or 0)
    if vectors.dtype != np.float32 or vectors.shape != expected_shape:
        raise VectorFilesError(
            f"vector folder {str(folder)!r} is damaged: vectors {vectors.dtype} {vectors.shape}, "
            f"manifest says float32 {expected_shape}"
        )
    if len(ids) != count or len(metadata) != count or len(set(ids)) != count:
        raise VectorFilesError(f"vector folder {str(folder)!r} is damaged: ids do not match the rows")
    return SavedVectors(vectors, ids, metadata, saved_model, saved_dim)


def _read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise VectorFilesError(f"no vector store in {str(folder)!r} (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise VectorFilesError(f"vector folder {str(folder)!r}: unreadable {MANIFEST}: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise VectorFilesError(f"{str(path)!r} is not a RAGSpine vector store manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise VectorFilesError(
            f"{str(path)!r} has format version {manifest.get('version')!r}; this RAGSpine reads "
            f"version {FORMAT_VERSION}: re-embed the chunks into a new store"
        )
    return manifest


def _referenced(folder: Path) -> set[str]:
    """The data files the current manifest names (none when there is no readable manifest)."""
    try:
        manifest = _read_manifest(folder)
    except VectorFilesError:
        return set()
    return {str(manifest.get(key)) for key in ("vectors", "records") if manifest.get(key)}
