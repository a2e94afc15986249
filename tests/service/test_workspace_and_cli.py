"""`ragspine.open` and the `ask` / `serve` commands: the same settings and assembly as the service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from service_helpers import API_KEY, BM25_ENV, STUB_ANSWER, llm_settings

import ragspine
from ragspine.assembly import channels
from ragspine.cli import main
from ragspine.settings.config import ConfigError
from ragspine.workspace import Workspace, store_path

REPORT = "# 艾克美年报\n\n营收下滑的原因是出口订单减少。\n"


def test_open_a_folder_ingest_search_ask(tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text(REPORT, "utf-8")
    with ragspine.open(tmp_path / ".ragspine", env=BM25_ENV) as ws:
        assert isinstance(ws, Workspace) and ws.settings.db == str(tmp_path / ".ragspine" / "chunks.db")
        assert ws.ingest(tmp_path / "report.md", entity="ACME_CN").doc_id == "report.md"
        assert ws.ingest(str(tmp_path / "report.md"), doc_id="r2").version == 1
        result = ws.ingest("Borealis margin fell.", doc_id="b", sensitivity="PUBLIC")
        assert (result.chunks, result.version) == (1, 1)
        assert ws.ingest("Borealis margin fell again.", doc_id="b").version == 2
        hits = ws.search("营收下滑", where={"entity": "ACME_CN"}, top_k=3)
        assert [h["doc_id"] for h in hits] == ["report.md"] and hits[0]["title"] == "艾克美年报"
        answer = ws.ask("为什么营收下滑")
        assert answer.mode == "extractive" and answer.text.startswith("[1] ") and answer.citations[0]["ref"] == 1
        assert ws.withdraw("b") == 1 and ws.withdraw("b") == 0
        assert ws.stats()["documents"] == 2
    assert (tmp_path / ".ragspine" / "chunks.db").is_file()


def test_open_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot connect to the PostgreSQL store at db:5432/ragspine") as err:
        ragspine.open("postgresql://user:hunter2@db/ragspine", env=BM25_ENV)
    assert "hunter2" not in str(err.value)
    with pytest.raises(ConfigError, match="postgresql:// URL"):
        ragspine.open("mysql://user@db/ragspine", env=BM25_ENV)
    with pytest.raises(TypeError, match="unknown setting"):
        ragspine.open(":memory:", env=BM25_ENV, llm_modle="x")
    with ragspine.open(":memory:", env=BM25_ENV) as ws:
        with pytest.raises(ValueError, match="doc_id"):
            ws.ingest("some text")
        with pytest.raises(ValueError, match="text is empty"):
            ws.ingest("  ", doc_id="d")
        with pytest.raises(ValueError, match="unknown metadata"):
            ws.ingest("text", doc_id="d", company="x")
        with pytest.raises(ValueError, match="needs the dense channel"):
            ws.search("x", mode="hybrid")
    assert store_path("a/b") == str(Path("a/b/chunks.db")) and store_path("a/b.db") == "a/b.db"


def test_open_takes_settings_as_keywords_and_uses_the_llm(tmp_path: Path, stub_llm: Any) -> None:
    with ragspine.open(tmp_path / "ws", env=BM25_ENV, **llm_settings(stub_llm.base_url)) as ws:
        ws.ingest(REPORT, doc_id="r")
        answer = ws.ask("为什么营收下滑")
        assert (answer.mode, answer.text) == ("llm", STUB_ANSWER)
        assert channels(ws.settings)["reranker"] == "listwise LLM judge"


def test_cli_ask(tmp_path: Path, stub_llm: Any) -> None:
    db = str(tmp_path / "s.db")
    with ragspine.open(db, env=BM25_ENV) as ws:
        ws.ingest(REPORT, doc_id="cn/report.md", title="艾克美年报", entity="ACME_CN")
    runner = CliRunner()
    result = runner.invoke(main, ["ask", "为什么营收下滑", "--db", db, "--filter", "entity=ACME_CN"], env={})
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("[1] ") and "Sources:\n[1] 艾克美年报  [cn/report.md#p" in result.stdout
    env = {"RAGSPINE_LLM_BASE_URL": stub_llm.base_url, "RAGSPINE_LLM_MODEL": "m", "RAGSPINE_LLM_TIMEOUT": "0.5"}
    result = runner.invoke(main, ["ask", "为什么营收下滑", "--db", db, "--json"], env=env)
    assert json.loads(result.stdout)["answer"] == STUB_ANSWER
    stub_llm.default = "500"
    result = runner.invoke(main, ["ask", "为什么营收下滑", "--db", db], env={**env, "RAGSPINE_LLM_MAX_RETRIES": "0"})
    assert result.exit_code == 0 and "note: LLM call failed" in result.stderr and result.stdout.startswith("[1] ")
    missing = runner.invoke(main, ["ask", "x", "--db", str(tmp_path / "none.db")], env={})
    assert missing.exit_code == 1 and "no chunk store" in missing.stderr
    assert not (tmp_path / "none.db").exists()


def test_cli_serve_refuses_a_public_address_without_keys() -> None:
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--port", "8123"], env={})
    assert result.exit_code == 1 and "refusing to bind 0.0.0.0" in result.stderr
    result = CliRunner().invoke(main, ["serve", "--port", "0"], env={})
    assert result.exit_code == 1 and "RAGSPINE_PORT='0' (from flag)" in result.stderr


def test_cli_serve_runs_a_real_server(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "RAGSPINE_API_KEYS": API_KEY, "RAGSPINE_DB": str(tmp_path / "served.db")}
    process = subprocess.Popen([sys.executable, "-m", "ragspine", "serve", "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()
                time.sleep(0.1)
        assert health.json()["status"] == "ok"
        assert httpx.get(f"http://127.0.0.1:{port}/stats", timeout=5).status_code == 401
        stats = httpx.get(f"http://127.0.0.1:{port}/stats", headers={"X-API-Key": API_KEY}, timeout=5)
        assert stats.json()["documents"] == 0
    finally:
        process.terminate()
        _, err = process.communicate(timeout=15)
    assert b"serving" in err and b"1 API key(s): 1 write" in err and API_KEY.encode() not in err
