from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragspine.cli import main


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "cn").mkdir(parents=True)
    (root / "cn" / "report.md").write_text("# 艾克美年报\n\n营收下滑的原因是出口订单减少。\n", "utf-8")
    (root / "en.txt").write_text("\ufeffBorealis gross margin fell because of a recall.", "utf-8")
    (root / "notes.doc").write_bytes(b"legacy Word file: not a supported type")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "skip.md").write_text("hidden", "utf-8")
    return root


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_help_for_every_command() -> None:
    for command in ([], ["ingest"], ["search"], ["demo"]):
        code, out, _ = _run(*command, "--help")
        assert code == 0 and "Usage" in out


def test_ingest_then_search(corpus: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    code, out, _ = _run("ingest", str(corpus), "--db", db, "--entity", "ACME_CN", "--period", "2024")
    assert code == 0, out
    assert "ingested 2 document(s)" in out and "failed: 0" in out
    code, out, _ = _run("search", "为什么营收下滑", "--db", db, "--filter", "entity=ACME_CN", "--json")
    assert code == 0
    snippets = json.loads(out)["snippets"]
    assert snippets[0]["doc_id"] == "cn/report.md"
    assert snippets[0]["title"] == "艾克美年报" and snippets[0]["language"] == "zh"
    code, out, _ = _run("search", "gross margin", "--db", db)
    assert code == 0 and "en.txt" in out and "1." in out and "#p1@" in out


def test_db_takes_a_folder_as_ragspine_open_does(corpus: Path, tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    code, out, _ = _run("ingest", str(corpus), "--db", str(folder))
    assert code == 0 and (folder / "chunks.db").is_file(), out
    code, out, _ = _run("search", "gross margin", "--db", str(folder), "--json")
    assert code == 0 and json.loads(out)["snippets"][0]["doc_id"] == "en.txt"
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = _run("search", "x", "--db", str(empty))
    assert code == 1 and f"no chunk store at {empty / 'chunks.db'}" in err


def test_ingest_reports_failures_and_still_ingests_the_rest(corpus: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    bad = corpus / "bad.txt"
    bad.write_bytes(b"\xef\xbb\xbf\xff\xfe not UTF-8 after a UTF-8 byte order mark")
    code, out, err = _run("ingest", str(corpus / "en.txt"), str(bad), str(corpus / "missing.md"),
                          str(corpus / "notes.doc"), "--db", db)  # fmt: skip
    assert code == 1
    assert "ingested 1 document(s)" in out and "failed: 3" in out
    assert "missing.md: no such file" in err and "byte order mark" in err and "unsupported file type" in err


def test_search_errors_are_clear(tmp_path: Path, corpus: Path) -> None:
    db = str(tmp_path / "s.db")
    code, _, err = _run("search", "anything", "--db", db)
    assert code == 1 and "no chunk store" in err and "ragspine ingest" in err
    assert not Path(db).exists(), "a failed search creates nothing"
    _run("ingest", str(corpus), "--db", db)
    code, _, err = _run("search", "x", "--db", db, "--filter", "company=ACME")
    assert code == 1 and "unknown filter field" in err and "entity" in err
    code, _, err = _run("search", "x", "--db", db, "--filter", "entity")
    assert code == 1 and "KEY=VALUE" in err
    code, _, err = _run("search", "  ", "--db", db)
    assert code == 1 and "query is empty" in err
    not_store = tmp_path / "n.db"
    not_store.write_text("plain text")
    code, _, err = _run("search", "x", "--db", str(not_store))
    assert code == 1 and "not a RAGSpine chunk store" in err
    code, _, err = _run("search", "x", "--db", db, "--top-k", "0")
    assert code == 2


def test_db_from_environment(corpus: Path, tmp_path: Path) -> None:
    env = {"RAGSPINE_DB": str(tmp_path / "env.db")}
    assert _run("ingest", str(corpus / "en.txt"), env=env)[0] == 0
    code, out, _ = _run("search", "recall", "--json", env=env)
    assert code == 0 and json.loads(out)["snippets"][0]["doc_id"] == "en.txt"


def test_search_never_prints_restricted(corpus: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    secret = tmp_path / "memo.md"
    secret.write_text("Project Nightjar layoffs SECRETMARK", "utf-8")
    _run("ingest", str(secret), "--db", db, "--sensitivity", "RESTRICTED")
    _run("ingest", str(corpus / "en.txt"), "--db", db)
    code, out, _ = _run("search", "Nightjar layoffs recall", "--db", db)
    assert code == 0 and "SECRETMARK" not in out and "en.txt" in out


def test_console_script_runs_as_a_real_process(corpus: Path, tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("ragspine")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "ragspine"]
    env = {**os.environ, "RAGSPINE_DB": str(tmp_path / "p.db")}
    done = subprocess.run([*command, "ingest", str(corpus)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*command, "search", "出口订单"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "cn/report.md" in done.stdout
