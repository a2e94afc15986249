"""The one configuration module: parsing, precedence, provenance, secrets, the docs table."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragspine.assembly import (  # settings checks + component checks
    effective_mode,
    load_settings,
    resolve_embedding,
    resolve_settings,
)
from ragspine.cli import main
from ragspine.secret import Secret
from ragspine.settings.config import (
    SETTINGS,
    ConfigError,
    Settings,
    describe,
    markdown_table,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
KEY = "kq7-Vd2_pZ9mXw4T"  # a strong key (issue 14 #9 refuses "k" * 20)
LLM_KEY = "sk-very-secret-llm-key"


def test_defaults_match_the_settings_dataclass() -> None:
    assert load_settings({}) == Settings()
    resolved = resolve_settings({})
    assert set(resolved.sources.values()) == {"default"}
    assert {s.field_name for s in SETTINGS} <= set(vars(Settings()))


def test_precedence_flag_environment_file_default(tmp_path: Path) -> None:
    config = tmp_path / "ragspine.toml"
    config.write_text(f'RAGSPINE_DB = "file.db"\nRAGSPINE_PORT = 9001\nRAGSPINE_HOST = "127.0.0.2"\n'
                      f'RAGSPINE_API_KEYS = ["{KEY}", "{KEY}2"]\n', "utf-8")  # fmt: skip
    env = {"RAGSPINE_CONFIG": str(config), "RAGSPINE_PORT": "9002", "RAGSPINE_HOST": "  "}
    resolved = resolve_settings(env, flags={"RAGSPINE_DB": "flag.db", "RAGSPINE_HOST": None})
    s = resolved.settings
    assert (s.db, s.port, s.host, s.max_top_k, len(s.api_keys)) == ("flag.db", 9002, "127.0.0.2", 100, 2)
    assert resolved.sources["RAGSPINE_DB"] == "flag" and resolved.sources["RAGSPINE_PORT"] == "environment"
    assert resolved.sources["RAGSPINE_HOST"] == "file" and resolved.sources["RAGSPINE_MAX_TOP_K"] == "default"
    assert resolved.sources["RAGSPINE_CONFIG"] == "environment"
    assert load_settings({}, config_file=config).db == "file.db"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAGSPINE_PORT": "http"}, r"RAGSPINE_PORT='http' \(from environment\): expected an integer from 1 to 65535"),
        ({"RAGSPINE_PORT": "70000"}, "RAGSPINE_PORT='70000'"),
        ({"RAGSPINE_RETRIEVAL_MODE": "fast"}, "accepted: auto, hybrid, vector, economy, bm25, lexical"),
        ({"RAGSPINE_RETRIEVAL_MODE": "hybrid", "RAGSPINE_EMBEDDING": "none"},
         "needs the dense channel.*RAGSPINE_EMBEDDING='none'.*use RAGSPINE_RETRIEVAL_MODE=auto or bm25"),
        ({"RAGSPINE_RETRIEVAL_MODE": "VECTOR", "RAGSPINE_EMBEDDING": "none"},
         "RAGSPINE_RETRIEVAL_MODE='vector'.*needs the dense channel"),
        ({"RAGSPINE_EMBEDDING": "word2vec"}, "RAGSPINE_EMBEDDING='word2vec'.*accepted: none, auto, onnx"),
        ({"RAGSPINE_EMBEDDING_BACKEND": "openai"}, "RAGSPINE_EMBEDDING='openai'.*needs RAGSPINE_EMBEDDING_BASE_URL"),
        ({"RAGSPINE_EMBEDDING": "none", "RAGSPINE_EMBEDDING_BACKEND": "auto"}, "both set"),
        ({"RAGSPINE_LLM_BASE_URL": "localhost:11434"}, "expected an http:// or https:// URL"),
        ({"RAGSPINE_LLM_BASE_URL": "http://h/v1"}, "RAGSPINE_LLM_MODEL is not"),
        ({"RAGSPINE_LLM_MODEL": "m"}, "RAGSPINE_LLM_BASE_URL is not"),
        ({"RAGSPINE_LLM_TIMEOUT": "0"}, "number from 0.1 to 600"),
        ({"RAGSPINE_API_KEYS": "short"}, "at least 16 characters"),
        ({"RAGSPINE_DB": "mysql://u@h/db"}, "postgresql:// URL"),
        ({"RAGSPINE_GLOSSARY": "/no/such/glossary.json"}, "RAGSPINE_GLOSSARY=.*no such file"),
        ({"RAGSPINE_CONFIG": "/no/such/file.toml"}, "RAGSPINE_CONFIG=.*no such file"),
    ],
)
def test_bad_values_name_the_variable_source_and_what_is_accepted(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env)


def test_modes_without_an_embedding_backend() -> None:
    for mode in ("auto", "bm25", "lexical", "economy"):
        settings = load_settings({"RAGSPINE_RETRIEVAL_MODE": mode, "RAGSPINE_EMBEDDING_BACKEND": "none"})
        assert effective_mode(settings) == "bm25" and settings.embedding == "none"
        assert resolve_embedding(settings)[0] is None


def test_bad_config_files(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    for text, message in [
        ("RAGSPINE_DBB = 'x'", "unknown setting 'RAGSPINE_DBB'; valid keys: .*RAGSPINE_DB"),
        ("RAGSPINE_CONFIG = 'x'", "unknown setting 'RAGSPINE_CONFIG'"),
        ("RAGSPINE_PORT = true", "must be a string or a number"),
        ("RAGSPINE_PORT = [", "not a readable UTF-8 TOML file"),
        ("RAGSPINE_PORT = 0", r"RAGSPINE_PORT='0' \(from file\)"),
    ]:
        path.write_text(text, "utf-8")
        with pytest.raises(ConfigError, match=message):
            load_settings({"RAGSPINE_CONFIG": str(path)})


def test_secrets_are_masked_everywhere() -> None:
    env = {"RAGSPINE_API_KEYS": f"{KEY}, {KEY}x", "RAGSPINE_LLM_BASE_URL": "http://127.0.0.1:1/v1",
           "RAGSPINE_LLM_MODEL": "m", "RAGSPINE_LLM_API_KEY": LLM_KEY}  # fmt: skip
    resolved = resolve_settings(env)
    shown = json.dumps(describe(resolved)) + repr(resolved) + str(resolved.settings) + f"{resolved.settings.llm_api_key}"
    assert KEY not in shown and LLM_KEY not in shown and "**** (2 keys)" in shown
    assert resolved.settings.llm_api_key is not None and resolved.settings.llm_api_key.reveal() == LLM_KEY
    with pytest.raises(TypeError):
        pickle.dumps(resolved.settings)
    with pytest.raises(TypeError):
        json.dumps(resolved.settings.llm_api_key)
    with pytest.raises(ConfigError) as info:
        load_settings({"RAGSPINE_API_KEYS": "short-secret"})
    assert "short-secret" not in str(info.value)
    assert Secret("a" * 16) == Secret("a" * 16) and Secret("a" * 16).matches("a" * 16)


def test_config_show_prints_values_sources_and_masks_secrets(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('RAGSPINE_MAX_TOP_K = 50\n', "utf-8")
    env = {"RAGSPINE_CONFIG": str(config), "RAGSPINE_LLM_BASE_URL": "http://127.0.0.1:9/v1",
           "RAGSPINE_LLM_MODEL": "qwen", "RAGSPINE_LLM_API_KEY": LLM_KEY, "RAGSPINE_API_KEYS": KEY}  # fmt: skip
    result = CliRunner().invoke(main, ["config", "show", "--port", "9100"], env=env)
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line.split() for line in result.output.splitlines() if line.startswith("RAGSPINE_")}
    assert lines["RAGSPINE_PORT"][1:] == ["9100", "flag"]
    assert lines["RAGSPINE_MAX_TOP_K"][1:] == ["50", "file"]
    assert lines["RAGSPINE_LLM_API_KEY"][1:] == ["****", "environment"]
    assert lines["RAGSPINE_DB"][-1] == "default" and set(lines) == {s.env for s in SETTINGS}
    assert LLM_KEY not in result.output and KEY not in result.output
    assert "reranker        listwise LLM judge" in result.output and "auto -> bm25" in result.output
    as_json = json.loads(CliRunner().invoke(main, ["config", "show", "--json"], env=env).output)
    assert as_json["settings"]["RAGSPINE_API_KEYS"] == {"value": "**** (1 keys)", "source": "environment"}
    bad = CliRunner().invoke(main, ["config", "show"], env={"RAGSPINE_RETRIEVAL_MODE": "hybrid"})
    assert bad.exit_code == 1 and "needs the dense channel" in bad.output and "Traceback" not in bad.output


def test_docs_table_matches_the_registry() -> None:
    text = DOC.read_text("utf-8")
    match = re.search(r"<!-- settings-table:start[^>]*-->\n(.*)<!-- settings-table:end -->", text, re.DOTALL)
    assert match, "docs/configuration.md lost its settings-table markers"
    assert match.group(1) == markdown_table(), (
        "docs/configuration.md is stale: paste the output of "
        "`.venv/bin/python -c 'from ragspine.settings.config import markdown_table; print(markdown_table(), end=\"\")'`"
    )
    for setting in SETTINGS:
        assert f"`{setting.env}`" in text
