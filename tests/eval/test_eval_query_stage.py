"""`ragspine eval --llm-base-url … --transform …`: the product path with the query stage on, so a
user with an LLM endpoint can measure the transforms (here the stub server stands in for it)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from llm_stub import LLMStubServer, StubLLM

from ragspine.cli import main

BM25 = {"RAGSPINE_EMBEDDING": "none"}


def test_eval_runs_the_query_stage_against_the_given_llm(beir_dir: Path) -> None:
    with LLMStubServer(StubLLM(responder=lambda body: "a hypothetical passage")) as stub:
        args = ["eval", str(beir_dir), "--split", "test", "--llm-base-url", stub.base_url, "--llm-model", "m",
                "--transform", "hyde", "--corrective", "rules", "--json", "-"]  # fmt: skip
        result = CliRunner().invoke(main, args, env=BM25)
        assert result.exit_code == 0, result.output
        report = json.loads(result.output[result.output.index("{\n"):])
        assert report["settings"]["query_stage"] == "gate (budgets only); transform hyde; corrective rules"
        assert report["settings"]["llm"] == f"m at {stub.base_url}"
        prompts = stub.prompts()
        assert "Write one passage" in prompts  # every query went through HyDE


def test_query_stage_options_are_refused_with_whole_entries(beir_dir: Path) -> None:
    result = CliRunner().invoke(main, ["eval", str(beir_dir), "--split", "test", "--whole-entries",
                                       "--transform", "hyde"], env=BM25)  # fmt: skip
    assert result.exit_code == 2 and "apply to the product path" in result.output
