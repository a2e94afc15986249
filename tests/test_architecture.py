"""The import architecture holds: `lint-imports` keeps every contract in pyproject.toml.

`[tool.importlinter]` declares the layer order (facades > assembly > ingest > the retrieval
stages > model > leaf helpers), that settings import nothing from retrieval and retrieval never
imports settings, ingest or a facade, and that no sibling packages or modules import each other
in a cycle. Every import counts, lazy (function-level) ones included: the second test plants one
in a copy of the package and checks that the same configuration rejects it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports(cwd: Path, *, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        found = shutil.which("lint-imports")
        if found is None:
            pytest.fail("lint-imports is missing: pip install -e '.[test]' (it brings import-linter)")
        exe = Path(found)
    env = {**os.environ, "COLUMNS": "250"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [str(exe), "--no-cache"],  # reads pyproject.toml in cwd
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _flat(result: subprocess.CompletedProcess[str]) -> str:
    """Output with line wrapping undone, so an import chain reads on one line."""
    return " ".join((result.stdout + result.stderr).split())


def test_every_import_contract_is_kept() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "Contracts: " in result.stdout


def test_a_lazy_import_of_settings_from_retrieval_breaks_the_contracts(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "src" / "ragspine", tmp_path / "src" / "ragspine",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    model = tmp_path / "src" / "ragspine" / "retrieval" / "model.py"
    model.write_text(
        model.read_text(encoding="utf-8")
        + "\n\ndef _planted() -> object:\n    from ragspine.settings import config\n\n    return config\n",
        encoding="utf-8",
    )
    result = _lint_imports(tmp_path, pythonpath=tmp_path / "src")
    output = _flat(result)
    assert result.returncode != 0, output
    # the forbidden contract names the planted import (only the copy has it)
    assert "ragspine.retrieval.model -> ragspine.settings.config" in output, output
