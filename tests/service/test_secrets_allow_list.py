"""Issue 34 #4: redaction by allow-list. Every URL shown (config show text and --json, GET /stats,
the serve banner, errors, lineage, logs) keeps scheme, host, port and path; user info, every query
value whose name is not in `SAFE_PARAMS` and the fragment are masked; secret-looking
`name=value` / `name: value` pairs in free text are masked; lineage errors carry a public code.

Real CLI (click's runner), a real uvicorn server hit by httpx, the loopback stub LLM.
"""

from __future__ import annotations

import json
import logging
import re
import string
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from service_helpers import ADMIN, LLM_KEY, llm_settings

from ragspine.cli import main
from ragspine.secret import MASK, SAFE_PARAMS, redact_text, redact_url

# The names the issue found in clear, each with a value that must never be shown.
LEAKED_NAMES = ("x-api-key", "subscription-key", "Ocp-Apim-Subscription-Key", "private_token", "refresh_token",
                "auth_token", "session_token", "X-Amz-Security-Token", "secret_key", "access_key", "hf_token",
                "jwt", "passphrase", "client_assertion", "sslpassword", "access_token")  # fmt: skip
RERANK_PASSWORD, RERANK_TOKEN = "rerank-url-password-91", "rerank-query-token-92"
RERANK_URL = f"http://ops:{RERANK_PASSWORD}@127.0.0.1:1/rerank?token={RERANK_TOKEN}"
X_API_KEY, SUBSCRIPTION_KEY, SSL_PASSWORD = "llm-x-api-key-93", "llm-subscription-key-94", "pg-sslpassword-95"
LLM_URL = f"https://llm.example/v1?api-version=2024-06&x-api-key={X_API_KEY}&subscription-key={SUBSCRIPTION_KEY}"
PG_URL = f"postgresql://app@127.0.0.1:1/rag?sslmode=require&sslpassword={SSL_PASSWORD}"
SECRETS = (RERANK_PASSWORD, RERANK_TOKEN, X_API_KEY, SUBSCRIPTION_KEY, SSL_PASSWORD, LLM_KEY)


def test_the_allow_list_is_the_short_documented_one() -> None:
    """docs/security.md lists `ragspine.secret.SAFE_PARAMS` by name: the list and the docs agree."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text("utf-8")
    listed = docs.split("not on `ragspine.secret.SAFE_PARAMS`:", 1)[1].split("(", 1)[0]
    assert set(re.findall(r"`([^`]+)`", listed)) == set(SAFE_PARAMS) and len(SAFE_PARAMS) <= 10


def _clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def _value(name: str) -> str:
    return f"v-{name.lower()}-s3cr3t"


@pytest.mark.parametrize("name", LEAKED_NAMES)
def test_each_leaked_name_is_masked_in_a_url_and_in_free_text(name: str) -> None:
    value = _value(name)
    url = f"https://h.example:8443/p/a?{name}={value}&api-version=1"
    assert redact_url(url) == f"https://h.example:8443/p/a?{name}={MASK}&api-version=1"
    for text in (f"{name}={value}", f"{name}: {value}", f'{{"{name}": "{value}"}}', f"failed ({name}={value}) at x"):
        shown = redact_text(text)
        assert value not in shown and name in shown, shown


def test_fragments_user_info_and_bare_parameters_are_masked() -> None:
    assert redact_url("https://app.example/cb#access_token=tok-1&state=s") == f"https://app.example/cb#{MASK}"
    assert redact_text("see https://app.example/cb#access_token=tok-1 now") == f"see https://app.example/cb#{MASK} now"
    assert redact_url("https://ghp_abc@host.example/x") == f"https://{MASK}@host.example/x"  # a short token as user
    assert redact_url("https://host.example/x?ghp_abc123") == f"https://host.example/x?{MASK}"
    assert redact_url("http://h:99999999/x?key=v") == f"http://{MASK}"  # unparseable: nothing after the scheme
    assert redact_url("http://127.0.0.1:11434/v1?model=m&limit=5&page=2&format=json") == (
        "http://127.0.0.1:11434/v1?model=m&limit=5&page=2&format=json"
    )


def test_config_show_masks_the_reranker_url_and_llm_query_values_in_text_and_json() -> None:
    env = {"RAGSPINE_DB": PG_URL, "RAGSPINE_LLM_BASE_URL": LLM_URL, "RAGSPINE_LLM_MODEL": "m",
           "RAGSPINE_LLM_API_KEY": LLM_KEY, "RAGSPINE_EMBEDDING": "none", "RAGSPINE_RERANKER": "http",
           "RAGSPINE_RERANKER_URL": RERANK_URL}  # fmt: skip
    for args in (["config", "show"], ["config", "show", "--json"]):
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 0, result.output
        _clean(result.output)
        assert "127.0.0.1:1/rerank" in result.output and "llm.example/v1?api-version=2024-06" in result.output
    shown = json.loads(CliRunner().invoke(main, ["config", "show", "--json"], env=env).output)
    assert shown["effective"]["reranker"] == f"http at http://ops:{MASK}@127.0.0.1:1/rerank?token={MASK} (cohere API)"
    assert shown["effective"]["llm"] == (
        f"m at https://llm.example/v1?api-version=2024-06&x-api-key={MASK}&subscription-key={MASK}"
    )


def test_serve_banner_masks_a_query_password_of_the_db() -> None:
    result = CliRunner().invoke(main, ["serve", "--port", "1"], env={"RAGSPINE_DB": PG_URL, "RAGSPINE_EMBEDDING": "none"})
    assert f"serving postgresql://{MASK}@127.0.0.1:1/rag?sslmode=require&sslpassword={MASK}" in result.output
    _clean(result.output)


def test_stats_masks_the_reranker_url_and_llm_query_values(serve: Any, stub_llm: Any) -> None:
    url = f"{stub_llm.base_url}?x-api-key={X_API_KEY}&subscription-key={SUBSCRIPTION_KEY}"
    served = serve(**llm_settings(url, reranker="http", reranker_url=RERANK_URL))
    stats = served.client.get("/stats", headers=ADMIN)
    assert stats.status_code == 200
    _clean(stats.text)
    channels = stats.json()["channels"]
    assert f"x-api-key={MASK}&subscription-key={MASK}" in channels["llm"]
    assert f"http://ops:{MASK}@127.0.0.1:1/rerank?token={MASK}" in channels["reranker"]


@pytest.mark.parametrize("stage", [{"query_transform": "hyde"}, {"query_decompose": "llm"}])
def test_lineage_errors_carry_only_the_public_code(
    serve: Any, stub_llm: Any, stage: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """`lineage.transform.error` / `decomposition.error` said `LLM http://user:****@host/v1?...:
    HTTP 500`: the endpoint reached every caller. Now the public code; the details in the log."""
    url = stub_llm.base_url.replace("http://", "http://bob:pw-96@")
    served = serve(**llm_settings(url, **stage))
    posted = served.client.post("/documents", json={"doc_id": "d0", "text": "Revenue fell because export orders dropped."})
    assert posted.status_code == 201
    stub_llm.default = "500"
    with caplog.at_level(logging.WARNING):
        hits = served.client.post("/search", json={"query": "why did revenue fall", "top_k": 5})
    assert hits.status_code == 200 and hits.json()["snippets"]
    lineage = hits.json()["snippets"][0]["lineage"]
    step = lineage["transform"] if "query_transform" in stage else lineage["decomposition"]
    assert step["error"] == "http_error (HTTP 500)"
    assert "127.0.0.1" not in hits.text and "bob" not in hits.text and "pw-96" not in hits.text
    _clean(hits.text)
    assert "HTTP 500" in caplog.text and "pw-96" not in caplog.text
    _clean(caplog.text)


# -- property: random URLs with random secrets never show a secret ----------------------------------
_SECRET_TEXT = st.text(string.ascii_letters + string.digits + "-_.~", min_size=8, max_size=24).map(lambda s: "Zq" + s)
_NAMES = st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=12).filter(
    lambda n: n.lower() not in SAFE_PARAMS
)
_HOSTS = st.sampled_from(["127.0.0.1", "llm.example", "db.internal", "[::1]"])


@settings(max_examples=300, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https", "postgresql", "qdrant"]),
    host=_HOSTS,
    port=st.one_of(st.none(), st.integers(1, 65535)),
    user=st.one_of(st.none(), st.text(string.ascii_letters, min_size=1, max_size=8)),
    secrets=st.lists(_SECRET_TEXT, min_size=4, max_size=4),
    names=st.lists(_NAMES, min_size=1, max_size=3),
    fragment=st.booleans(),
    around=st.sampled_from(["{}", "error at {} (HTTP 500)", "'{}'", "url={}"]),
)
def test_random_urls_never_show_a_secret(
    scheme: str, host: str, port: int | None, user: str | None, secrets: list[str], names: list[str],
    fragment: bool, around: str,
) -> None:  # fmt: skip
    password, token, query_value, fragment_value = secrets
    userinfo = f"{user}:{password}@" if user else f"{token}@"
    query = "&".join(f"{name}={query_value}" for name in names)
    url = f"{scheme}://{userinfo}{host}{f':{port}' if port else ''}/p?{query}" + (
        f"#access_token={fragment_value}" if fragment else ""
    )
    for shown in (redact_url(url), redact_text(around.format(url))):
        for secret in secrets:
            assert secret not in shown, (url, shown)
    assert redact_url(url).startswith(f"{scheme}://")
    assert f"{host}{f':{port}' if port else ''}/p?" in redact_url(url)  # host, port and path kept
