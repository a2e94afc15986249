"""The error hierarchy: every error class RAGSpine defines is a `RagspineError`; the "built with
another model/settings" errors are one `ModelMismatch` and the damaged-file errors one
`DamagedFile`, whichever part raises them; each keeps the built-in base it always had."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import ragspine
from ragspine.errors import DamagedFile, ModelMismatch, RagspineError
from ragspine.retrieval.lexical.index.identity import IndexSettings, IndexSettingsMismatch, check_index_settings
from ragspine.retrieval.lexical.index.segment import SegmentBuilder
from ragspine.retrieval.lexical.index.storage import IndexFileError, IndexFolder
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors
from ragspine.retrieval.vector.errors import VectorFilesDamaged, VectorModelMismatch, VectorStoreError
from ragspine.retrieval.vector.stores.files import VectorFilesError, VectorFilesMismatch
from ragspine.retrieval.vector.stores.inprocess import InProcessVectorStore
from ragspine.retrieval.visual.index import VisualIndex, VisualModelMismatch
from ragspine.retrieval.visual.protocol import PageRecord

SRC = Path(ragspine.__file__).parent
BUILTIN_ERRORS = {
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
}


def _package_modules() -> tuple[list[object], list[str]]:
    """Every importable ragspine module, and the names of those an absent optional extra keeps out."""
    modules, absent = [], []
    for info in pkgutil.walk_packages(ragspine.__path__, "ragspine."):
        if info.name.endswith("__main__"):
            continue
        try:
            modules.append(importlib.import_module(info.name))
        except ImportError:
            absent.append(info.name)  # checked by the source scan below
    return modules, absent


def test_every_public_error_class_is_a_ragspine_error() -> None:
    modules, _ = _package_modules()
    found = {
        f"{value.__module__}.{value.__qualname__}": value
        for module in modules
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, BaseException)
        and value.__module__.startswith("ragspine") and not value.__name__.startswith("_")
    }
    assert len(found) >= 15, sorted(found)  # the walk did reach the package
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, RagspineError))
    assert outside == [], f"error classes that are not a RagspineError: {outside}"


def test_no_public_class_in_the_source_derives_from_a_builtin_error_alone() -> None:
    """The same check read from the source, so modules an absent extra keeps from importing are
    covered too: a public class naming a built-in exception as a base names a ragspine error beside it."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_") or node.name == "RagspineError":
                continue
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            if any(b in BUILTIN_ERRORS for b in bases) and all(b in BUILTIN_ERRORS for b in bases):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}")
    assert offenders == []


def test_the_package_exports_the_hierarchy() -> None:
    assert (ragspine.RagspineError, ragspine.ModelMismatch, ragspine.DamagedFile) == (
        RagspineError, ModelMismatch, DamagedFile,
    )  # fmt: skip
    assert {"RagspineError", "ModelMismatch", "DamagedFile"} <= set(ragspine.__all__)


def test_each_error_keeps_its_builtin_base() -> None:
    assert issubclass(ModelMismatch, ValueError)
    assert issubclass(VectorModelMismatch, VectorStoreError) and issubclass(VectorFilesDamaged, VectorStoreError)
    assert issubclass(IndexFileError, RuntimeError) and not issubclass(IndexFileError, ValueError)
    assert issubclass(VectorFilesDamaged, ValueError) and not issubclass(VectorFilesDamaged, RuntimeError)


def test_the_mismatch_names_are_one_condition() -> None:
    assert IndexSettingsMismatch is ModelMismatch and VisualModelMismatch is ModelMismatch
    assert VectorFilesMismatch is VectorModelMismatch and issubclass(VectorModelMismatch, ModelMismatch)


def test_the_damaged_file_names_are_one_condition() -> None:
    assert VectorFilesError is VectorFilesDamaged
    assert issubclass(VectorFilesDamaged, DamagedFile) and issubclass(IndexFileError, DamagedFile)


def test_every_model_mismatch_is_caught_as_one(tmp_path: Path) -> None:
    with ChunkVectors(tmp_path / "v.sqlite", model_id="model-a", dim=2) as vectors:
        vectors.add(["x"], [[1.0, 0.0]])
    with pytest.raises(ModelMismatch, match="model-b"):
        ChunkVectors(tmp_path / "v.sqlite", model_id="model-b")

    page = PageRecord("report.pdf", 1, "PUBLIC", text="revenue fell")
    VisualIndex(tmp_path / "pages", model_id="m", dim=2).write([(page, np.array([[1.0, 0.0]]))])
    with pytest.raises(ModelMismatch, match="other"):
        VisualIndex(tmp_path / "pages", model_id="other", dim=2)

    with ChunkStore(tmp_path / "chunks.db") as store:
        store.init_schema()
        check_index_settings(store, IndexSettings("spec", 480, 80))
        with pytest.raises(ModelMismatch, match="RAGSPINE_ANALYZER: spec -> en-stem"):
            check_index_settings(store, IndexSettings("en-stem", 480, 80))


def test_every_damaged_file_is_caught_as_one(tmp_path: Path) -> None:
    garbage = tmp_path / "v.sqlite"
    garbage.write_bytes(b"\x5a" * 4096)
    with pytest.raises(DamagedFile, match="not a readable chunk vectors file"):
        ChunkVectors(garbage, model_id="m")

    with pytest.raises(DamagedFile, match="no vector store"):
        InProcessVectorStore.load(tmp_path / "nothing")

    builder = SegmentBuilder()
    builder.add([["revenue", "fell"], ["exports"]], chunk_ids=["c0", "c1"])
    folder = IndexFolder(tmp_path / "idx")
    folder.path.mkdir()
    entry = folder.write_segment(builder.finish())
    (folder.path / entry["name"] / "tfs.npy").write_bytes(b"garbage")
    with pytest.raises(DamagedFile):
        folder.read_segment(entry)
