"""The query stage through settings, `ragspine.open`, the CLI and `config show`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from llm_stub import LLMStubServer, StubLLM

import ragspine
from ragspine.assembly import load_settings
from ragspine.cli import main
from ragspine.retrieval.query.adaptive import COMPLEXITY_CLASSIFIERS
from ragspine.retrieval.query.corrective import GRADERS, RuleGrader
from ragspine.retrieval.query.transforms import QUERY_DECOMPOSERS, QUERY_TRANSFORMS, HydeTransform
from ragspine.settings import config
from ragspine.settings.config import ConfigError

BM25 = {"RAGSPINE_EMBEDDING": "none"}


@pytest.mark.parametrize(
    ("choices", "names"),
    [(config.QUERY_TRANSFORMS, QUERY_TRANSFORMS.names), (config.QUERY_DECOMPOSERS, QUERY_DECOMPOSERS.names),
     (config.ADAPTIVE_CLASSIFIERS, COMPLEXITY_CLASSIFIERS.names), (config.CORRECTIVE_GRADERS, GRADERS.names)],
)  # fmt: skip
def test_each_setting_accepts_exactly_its_registry_names(choices: tuple[str, ...], names: list[str]) -> None:
    assert list(choices) == names


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAGSPINE_QUERY_TRANSFORM": "hyde"}, "RAGSPINE_QUERY_TRANSFORM='hyde' needs an LLM"),
        ({"RAGSPINE_QUERY_DECOMPOSE": "llm"}, "RAGSPINE_QUERY_DECOMPOSE='llm' needs an LLM"),
        ({"RAGSPINE_CORRECTIVE": "llm"}, "RAGSPINE_CORRECTIVE='llm' needs an LLM"),
        ({"RAGSPINE_ADAPTIVE": "rules"}, "set RAGSPINE_QUERY_DECOMPOSE=llm, or RAGSPINE_ADAPTIVE=none"),
        ({"RAGSPINE_QUERY_TRANSFORM": "hype"}, "accepted: none, hyde, rag_fusion, step_back"),
    ],
)
def test_bad_combinations_are_config_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env)


def test_defaults_are_off_and_corrective_rules_needs_no_llm() -> None:
    settings = load_settings({"RAGSPINE_CORRECTIVE": "RULES"})
    assert (settings.query_transform, settings.query_decompose, settings.adaptive, settings.corrective) == (
        "none", "none", "none", "rules"
    )  # fmt: skip


def _gate_file(tmp_path: Path, **rules: Any) -> Path:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(rules), "utf-8")
    return path


def test_the_gate_file_and_corrective_through_ragspine_open(tmp_path: Path) -> None:
    gate = _gate_file(tmp_path, deny_entities=["ACME_CN"])  # a built-in glossary entity: its synonyms too
    with ragspine.open(tmp_path / "ws", env=BM25, query_gate=str(gate), corrective="rules") as ws:
        assert isinstance(ws.retriever.plan.grader, RuleGrader) and ws.retriever.plan.rewriter is None
        ws.ingest_text("营收下滑的原因是出口减少。", doc_id="r1")
        assert [s["doc_id"] for s in ws.search("营收下滑 出口减少")] == ["r1"]
        assert ws.search("ACME_CN 营收") == []
        answer = ws.ask("ACME_CN 营收")
        assert answer.note == "no grounded answer: security gate: the query names the denied entity 'ACME_CN'"
        assert ws.stats()["channels"]["query_stage"] == f"gate ({gate}); corrective rules"


def test_a_bad_gate_file_is_a_config_error_at_start(tmp_path: Path) -> None:
    gate = _gate_file(tmp_path, deny_patterns=["("])
    with pytest.raises(ConfigError, match="RAGSPINE_QUERY_GATE=.*not a valid regular expression"):
        ragspine.open(tmp_path / "ws", env=BM25, query_gate=str(gate))


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with LLMStubServer(StubLLM(responder=lambda body: "Exports fell because of new tariffs.")) as served:
        yield served


def test_transforms_through_settings_use_the_configured_llm(tmp_path: Path, stub: StubLLM) -> None:
    llm = {"llm_base_url": stub.base_url, "llm_model": "m", "llm_timeout": 1, "llm_max_retries": 0}
    with ragspine.open(tmp_path / "ws", env=BM25, query_transform="hyde", corrective="rules", **llm) as ws:
        assert isinstance(ws.retriever.plan.transform, HydeTransform)
        assert ws.retriever.plan.rewriter is not None  # corrective rewrites with the LLM when there is one
        ws.ingest_text("Exports to Norway fell sharply because of new tariffs.", doc_id="e1")
        snippets = ws.search("why did shipments abroad drop")
        assert [s["doc_id"] for s in snippets] == ["e1"]
        assert snippets[0]["lineage"]["transform"] == {"name": "hyde", "generated": 1}


def test_cli_flags_and_config_show(tmp_path: Path, stub: StubLLM) -> None:
    db = str(tmp_path / "c.db")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "e.txt").write_text("Exports to Norway fell sharply because of new tariffs.", "utf-8")
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", str(docs), "--db", db], env=BM25).exit_code == 0
    env = {**BM25, "RAGSPINE_LLM_BASE_URL": stub.base_url, "RAGSPINE_LLM_MODEL": "m"}
    found = runner.invoke(main, ["search", "why did shipments abroad drop", "--db", db, "--transform", "hyde", "--json"], env=env)
    assert found.exit_code == 0, found.output
    assert json.loads(found.output)["snippets"][0]["lineage"]["transform"]["name"] == "hyde"
    assert json.loads(runner.invoke(main, ["search", "why did shipments abroad drop", "--db", db, "--json"], env=env).output)["snippets"] == []
    refused = runner.invoke(main, ["ask", "quantum chromodynamics", "--db", db, "--corrective", "rules"], env=BM25)
    assert refused.exit_code == 0 and "no grounded answer: corrective retrieval" in refused.output
    # with an LLM the corrective loop rewrites the question (the stub's reply finds the document)
    rewritten = runner.invoke(main, ["ask", "quantum chromodynamics", "--db", db, "--corrective", "rules"], env=env)
    assert rewritten.exit_code == 0 and "[1] e  [e.txt#p1@0-54]" in rewritten.output
    bad = runner.invoke(main, ["search", "x", "--db", db, "--transform", "hyde"], env=BM25)
    assert bad.exit_code == 1 and "needs an LLM, but RAGSPINE_LLM_BASE_URL is not set" in bad.output
    shown = runner.invoke(main, ["config", "show"], env={**env, "RAGSPINE_QUERY_DECOMPOSE": "llm", "RAGSPINE_ADAPTIVE": "rules"})
    assert "gate (budgets only); decompose llm; adaptive rules" in shown.output
