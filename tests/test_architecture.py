"""Guard rails: `lint-imports` keeps every contract in pyproject.toml; the unit tier is in-process.

`[tool.importlinter]` declares the layer order (facades > assembly > ingest > pipeline > the
retrieval stages > model > settings > leaf helpers), that settings import nothing from retrieval
and retrieval never imports settings, assembly, ingest or a facade, and that no sibling packages
or modules import each other in a cycle. Every import counts, lazy (function-level) ones
included: the second test plants one in a copy of the package and checks that the same
configuration rejects it. The third checks that the tier markers set by tests/conftest.py keep
servers, processes and neural models out of `pytest -m unit`.
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


def test_the_unit_tier_leaves_out_servers_processes_and_models() -> None:
    """`pytest -m unit` (tiers from tests/conftest.py) keeps in-process tests only."""
    files = ["tests/service/test_llm_provider.py", "tests/test_cli.py", "tests/test_demo.py"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "unit", "-p", "no:cacheprovider", *files],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    collected = {line for line in result.stdout.splitlines() if "::" in line}
    assert not any(line.startswith("tests/service/") for line in collected), "a server test is unit"
    assert "tests/test_cli.py::test_console_script_runs_as_a_real_process" not in collected
    assert "tests/test_demo.py::test_demo_on_the_default_dense_channel" not in collected
    assert "tests/test_demo.py::test_demo_answers_three_questions_and_hides_the_memo" in collected
    assert any(line.startswith("tests/test_cli.py::") for line in collected)
