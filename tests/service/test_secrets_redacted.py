"""Issue 14 #8 and #9: credentials are never shown, upstream bodies never reach a caller, weak API
keys are refused.

Real CLI (click's runner), a real uvicorn server hit by httpx, and the loopback stub LLM (a mock:
users run a real LLM server; its "echo" behaviour answers 401 with the request headers in the
body, as some upstreams do, Authorization included).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from click.testing import CliRunner
from service_helpers import ADMIN, API_KEY, LLM_KEY, llm_settings

from ragspine.cli import main
from ragspine.secret import redact_text, redact_url
from ragspine.settings.config import ConfigError, load_settings

DB_PASSWORD = "hunter2-db-password"
URL_PASSWORD = "llm-url-password"
URL_TOKEN = "query-token-value"
PG_URL = f"postgresql://app:{DB_PASSWORD}@127.0.0.1:1/rag"
LLM_URL = f"https://bob:{URL_PASSWORD}@llm.example/v1?api_key={URL_TOKEN}"
SECRETS = (DB_PASSWORD, URL_PASSWORD, URL_TOKEN, LLM_KEY)


def _clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (PG_URL, "postgresql://app:****@127.0.0.1:1/rag"),
        (LLM_URL, "https://bob:****@llm.example/v1?api_key=****"),
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
        ("store.db", "store.db"),
        ('{"Authorization": "Bearer sk-live-abcdef12345"}', '{"Authorization": "Bearer ****"}'),
        ("x-api-key: abcdef0123", "x-api-key: ****"),
    ],
)
def test_redaction(text: str, shown: str) -> None:
    assert redact_text(text) == shown
    if "://" in text and " " not in text:
        assert redact_url(text) == shown


def test_config_show_masks_url_credentials_in_text_and_json() -> None:
    env = {"RAGSPINE_DB": PG_URL, "RAGSPINE_LLM_BASE_URL": LLM_URL, "RAGSPINE_LLM_MODEL": "m",
           "RAGSPINE_LLM_API_KEY": LLM_KEY, "RAGSPINE_EMBEDDING": "none"}  # fmt: skip
    for args in (["config", "show"], ["config", "show", "--json"]):
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 0, result.output
        _clean(result.output)
        assert "postgresql://app:****@127.0.0.1:1/rag" in result.output
    shown = json.loads(CliRunner().invoke(main, ["config", "show", "--json"], env=env).output)
    assert shown["effective"]["llm"] == "m at https://bob:****@llm.example/v1?api_key=****"


def test_a_bad_setting_value_is_shown_redacted() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"RAGSPINE_LLM_BASE_URL": f"ftp://bob:{URL_PASSWORD}@llm.example/v1"})
    _clean(str(info.value))


def test_serve_banner_and_its_connection_error_mask_the_db_password() -> None:
    result = CliRunner().invoke(main, ["serve", "--port", "1"], env={"RAGSPINE_DB": PG_URL, "RAGSPINE_EMBEDDING": "none"})
    assert "serving postgresql://app:****@127.0.0.1:1/rag" in result.output
    _clean(result.output)


def test_the_library_error_masks_the_db_password() -> None:
    result = CliRunner().invoke(main, ["search", "q", "--library", f"a={PG_URL}"], env={"RAGSPINE_EMBEDDING": "none"})
    assert result.exit_code == 1 and "no chunk store at postgresql://app:****@127.0.0.1:1/rag" in result.output
    _clean(result.output)
    result = CliRunner().invoke(main, ["search", "q", "--library", PG_URL], env={"RAGSPINE_EMBEDDING": "none"})
    assert result.exit_code == 1 and "expected NAME=PATH" in result.output
    _clean(result.output)


def test_stats_masks_credentials_in_the_llm_base_url(serve: Any, stub_llm: Any) -> None:
    url = stub_llm.base_url.replace("http://", f"http://bob:{URL_PASSWORD}@") + f"?api_key={URL_TOKEN}"
    served = serve(**llm_settings(url))
    stats = served.client.get("/stats", headers=ADMIN)
    assert stats.status_code == 200
    _clean(stats.text)
    assert "bob:****@" in stats.json()["channels"]["llm"]


def _load(served: Any) -> None:
    for n, text in enumerate(["Revenue fell because export orders dropped.", "Gross margin fell after a recall."]):
        assert served.client.post("/documents", json={"doc_id": f"d{n}", "text": text}).status_code == 201


def test_an_upstream_body_echoing_the_key_never_reaches_a_caller(
    serve: Any, stub_llm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """/ask's note and every snippet's lineage.extraction_error got the upstream body, and with
    it the Authorization header an upstream echoed. Now: a short code and the status; the body,
    redacted, in the log."""
    served = serve(**llm_settings(stub_llm.base_url, filter_extractor="llm"))
    _load(served)
    stub_llm.default = "echo"
    with caplog.at_level(logging.WARNING):
        answer = served.client.post("/ask", json={"question": "why did revenue fall"})
        hits = served.client.post("/search", json={"query": "revenue fell", "top_k": 5})
    assert answer.status_code == 200 and hits.status_code == 200
    assert f"Bearer {LLM_KEY}" in json.dumps(stub_llm.headers), "the key really was sent upstream"
    _clean(answer.text)
    _clean(hits.text)
    assert "invalid key" not in answer.text + hits.text and "authorization" not in (answer.text + hits.text).lower()
    assert answer.json()["note"] == "LLM call failed (http_error (HTTP 401)); extractive answer instead"
    assert hits.json()["snippets"][0]["lineage"]["extraction_error"] == "http_error (HTTP 401)"
    assert "invalid key" in caplog.text and "Bearer ****" in caplog.text, "the body is logged, redacted"
    _clean(caplog.text)


# -- #9 weak API keys ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key",
    ["a" * 16, "k" * 40, "abababababababab", "abcabcabcabcabcabcabc", "0123456789abcdef", "qwertyuiopasdfgh",
     "aaaaaaaaaaaaaaab", "aaaaaaaaabcdefgh"],
)  # fmt: skip
def test_weak_api_keys_are_refused(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"RAGSPINE_API_KEYS": f"{API_KEY},{key}"})
    message = str(info.value)
    assert "too weak" in message and "secrets.token_urlsafe" in message
    assert key not in message and API_KEY not in message


@pytest.mark.parametrize("key", [API_KEY, "Zx4-pQ9_mW2rT7vL", "3f9c2a7e51d04b8c9e6f1a2b3c4d5e6f", "sk-test-secret-key-0123456789"])
def test_strong_api_keys_are_accepted(key: str) -> None:
    assert len(load_settings({"RAGSPINE_API_KEYS": key}).api_keys) == 1
