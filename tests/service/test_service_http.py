"""The HTTP API end to end: a real uvicorn server on 127.0.0.1, a real HTTP client (httpx)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_helpers import ADMIN, API_KEY, LLM_KEY, STUB_ANSWER, doc, llm_settings

from ragspine.settings.config import ConfigError, Settings
from ragspine.service import check_bind, openapi_schema

SECRET_TOKEN = "zebracodeword"  # only in the RESTRICTED memo
ACME = "艾克美营收下滑的原因是出口订单减少。\n\n管理层预计明年营收恢复增长。"
BOREALIS = "Borealis gross margin fell because of a product recall.\n\nThe recall cost 12 million."
MEMO = f"Internal memo {SECRET_TOKEN}: revenue fell because we plan layoffs and gross margin is at risk."
DOCS_ROOT = Path(__file__).resolve().parents[2] / "docs"


def _load(served: Any) -> None:
    client = served.client
    for body in (
        doc("acme/2024.md", ACME, entity="ACME_CN", period="2024", title="艾克美年报"),
        doc("borealis.txt", BOREALIS, entity="BOREALIS", language="en"),
        doc("memo.md", MEMO, entity="BOREALIS", sensitivity="RESTRICTED"),
    ):
        response = client.post("/documents", json=body)
        assert response.status_code == 201, response.text


def _is_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == status and body["message"] and "Traceback" not in response.text
    return body


def test_health_is_open_and_every_other_route_needs_a_key(serve: Any) -> None:
    served = serve()
    bare = httpx.Client(base_url=served.url, timeout=10)
    assert bare.get("/health").json() == {"status": "ok", "version": "0.1.0"}
    calls = [("GET", "/stats", None), ("POST", "/search", {"query": "x"}), ("POST", "/ask", {"question": "x"}),
             ("POST", "/documents", doc("a", "b")), ("DELETE", "/documents/a", None),
             ("GET", "/documents/a/chunks", None), ("GET", "/openapi.json", None)]  # fmt: skip
    for method, path, body in calls:
        for headers in ({}, {"Authorization": "Bearer wrong-key-0123456789"}, {"X-API-Key": "nope"}):
            response = bare.request(method, path, json=body, headers=headers)
            err = _is_error(response, 401)
            assert "API key" in err["message"] and "wrong-key" not in response.text
            assert response.headers["www-authenticate"] == "Bearer"
    assert bare.get("/stats", headers={"X-API-Key": API_KEY}).status_code == 200
    assert bare.get("/stats", headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200
    assert served.ws.stats()["documents"] == 0, "refused requests changed nothing"


def test_ingest_search_chunks_withdraw_stats(serve: Any) -> None:
    served = serve()
    client = served.client
    _load(served)
    again = client.post("/documents", json=doc("borealis.txt", BOREALIS + "\n\nUpdated.", entity="BOREALIS", replace=True))
    assert again.json() == {"doc_id": "borealis.txt", "chunks": 1, "version": 2, "warnings": []}

    found = client.post("/search", json={"query": "为什么营收下滑", "filters": {"entity": "ACME_CN"}, "top_k": 3})
    assert found.status_code == 200
    body = found.json()
    assert body["mode"] == "bm25"
    top = body["snippets"][0]
    assert top["doc_id"] == "acme/2024.md" and top["title"] == "艾克美年报" and top["language"] == "zh"
    assert top["source_locator"].startswith("acme/2024.md#p") and top["scores"]["bm25"] > 0
    assert ACME[top_start(top):].startswith(top["text"][:10])

    chunks = client.get("/documents/acme/2024.md/chunks").json()
    assert chunks["doc_id"] == "acme/2024.md" and [c["seq"] for c in chunks["chunks"]] == [0]
    assert chunks["chunks"][0]["text"] == ACME and chunks["chunks"][0]["version"] == 1

    stats = client.get("/stats", headers=ADMIN).json()  # internals: an admin key
    assert (stats["documents"], stats["chunks"]) == (3, 3), "the operator's view counts the RESTRICTED memo"
    assert (client.get("/stats").json()["documents"]) == 2, "a write key's does not"
    assert stats["channels"]["retrieval_mode"] == "auto -> bm25" and stats["channels"]["reranker"] == "none"
    assert stats["index"]["data_version"] >= 4

    assert client.delete("/documents/acme/2024.md").json() == {"doc_id": "acme/2024.md", "withdrawn_chunks": 1}
    _is_error(client.delete("/documents/acme/2024.md"), 404)
    _is_error(client.get("/documents/acme/2024.md/chunks"), 404)
    assert all(s["doc_id"] != "acme/2024.md" for s in client.post("/search", json={"query": "营收"}).json()["snippets"])
    assert client.get("/stats").json()["documents"] == 1


def top_start(snippet: dict[str, Any]) -> int:
    return int(snippet["source_locator"].split("@")[1].split("-")[0])


def test_restricted_never_appears_in_any_response(serve: Any, stub_llm: Any) -> None:
    served = serve(**llm_settings(stub_llm.base_url))
    client = served.client
    _load(served)
    responses = [
        client.post("/search", json={"query": f"{SECRET_TOKEN} layoffs revenue", "top_k": 100}),
        client.post("/search", json={"query": SECRET_TOKEN, "filters": {"entity": "BOREALIS"}}),
        client.post("/ask", json={"question": "internal memo: why did revenue fall, layoffs, gross margin risk?"}),
        client.get("/documents/memo.md/chunks"),
        client.get("/stats"),
        client.delete("/documents/memo.md"),
    ]
    for response in responses:
        assert SECRET_TOKEN not in response.text and "RESTRICTED" not in response.text
    assert responses[0].status_code == 200 and responses[0].json()["snippets"], "open docs still found"
    _is_error(responses[3], 404)
    assert SECRET_TOKEN not in stub_llm.prompts(), "RESTRICTED text reached an LLM prompt"
    assert stub_llm.requests, "the judge and the answer did call the LLM"


def test_ask_with_the_llm_cites_numbered_sources(serve: Any, stub_llm: Any) -> None:
    served = serve(**llm_settings(stub_llm.base_url))
    _load(served)
    answer = served.client.post("/ask", json={"question": "为什么营收下滑", "filters": {"entity": "ACME_CN"}}).json()
    assert answer["mode"] == "llm" and answer["answer"] == STUB_ANSWER and answer["note"] == ""
    first = answer["citations"][0]
    assert (first["ref"], first["cited"], first["doc_id"]) == (1, True, "acme/2024.md")
    prompt = stub_llm.requests[-1]["messages"][-1]["content"]
    assert prompt.startswith("Sources:") and f"[1] 艾克美年报 ({first['source_locator']})\n{ACME}" in prompt
    assert prompt.rstrip().endswith("Question: 为什么营收下滑")
    assert stub_llm.requests[-1]["model"] == "stub-model"
    assert stub_llm.headers[-1]["Authorization"] == f"Bearer {LLM_KEY}"
    assert LLM_KEY not in json.dumps(served.client.get("/stats").json())


def test_ask_without_llm_is_extractive_and_llm_failure_is_visible(serve: Any, stub_llm: Any) -> None:
    plain = serve()
    _load(plain)
    answer = plain.client.post("/ask", json={"question": "gross margin recall"}).json()
    assert answer["mode"] == "extractive" and answer["answer"].startswith("[1] Borealis gross margin fell")
    assert all(c["cited"] for c in answer["citations"])

    failing = serve(**llm_settings(stub_llm.base_url))
    _load(failing)
    stub_llm.default = "500"
    answer = failing.client.post("/ask", json={"question": "gross margin recall"}).json()
    assert answer["mode"] == "extractive" and "HTTP 500" in answer["note"] and answer["citations"]
    assert LLM_KEY not in answer["note"]


@pytest.mark.parametrize("behaviour", ["500", "slow", "garbage"])
def test_listwise_judge_falls_back_to_rrf_order(serve: Any, stub_llm: Any, behaviour: str) -> None:
    query = {"query": "revenue fell gross margin recall 营收", "top_k": 5}
    plain = serve()
    _load(plain)
    rrf = [s["chunk_id"] for s in plain.client.post("/search", json=query).json()["snippets"]]
    judged = serve(**llm_settings(stub_llm.base_url, llm_timeout=0.3, llm_max_retries=0))
    _load(judged)
    reranked = [s["chunk_id"] for s in judged.client.post("/search", json=query).json()["snippets"]]
    assert len(rrf) >= 2 and reranked != rrf, "a working judge reorders the head"
    stub_llm.default = behaviour
    fallback = judged.client.post("/search", json=query)
    assert fallback.status_code == 200
    assert [s["chunk_id"] for s in fallback.json()["snippets"]] == rrf


def test_upload_a_file(serve: Any) -> None:
    client = serve().client
    markdown = "---\nentity: ACME_CN\nperiod: '2023'\n---\n# 中期报告\n\n营收增长来自新产品。\n".encode()
    response = client.post("/documents/upload", files={"file": ("interim.md", markdown, "text/markdown")},
                           data={"topic": "finance"})  # fmt: skip
    assert response.status_code == 201, response.text
    assert response.json() == {"doc_id": "interim.md", "chunks": 1, "version": 1, "warnings": []}
    chunk = client.get("/documents/interim.md/chunks").json()["chunks"][0]
    assert (chunk["title"], chunk["entity"], chunk["period"], chunk["topic"]) == ("中期报告", "ACME_CN", "2023", "finance")
    named = client.post("/documents/upload", files={"file": ("x.txt", b"plain words", "text/plain")},
                        data={"doc_id": "notes/x"})  # fmt: skip
    assert named.json()["doc_id"] == "notes/x"
    err = _is_error(client.post("/documents/upload", files={"file": ("a.exe", b"MZ", "application/octet-stream")}), 400)
    assert "unsupported file type" in err["message"]
    _is_error(client.post("/documents/upload", files={"file": ("empty.txt", b"  ", "text/plain")}), 400)
    restricted = "---\nsensitivity: RESTRICTED\n---\nzebracodeword plans.\n".encode()
    response = client.post("/documents/upload", files={"file": ("memo.md", restricted, "text/markdown")},
                           data={"sensitivity": "PUBLIC"})  # fmt: skip
    assert response.status_code == 201, "the file's own label wins over the form's"
    _is_error(client.get("/documents/memo.md/chunks"), 404)
    assert "zebracodeword" not in client.post("/search", json={"query": "zebracodeword plans"}).text


def test_limits_and_errors_are_json_4xx(serve: Any) -> None:
    served = serve(max_body_bytes=4096, max_top_k=20)
    client = served.client
    err = _is_error(client.post("/search", json={"query": "x", "top_k": 21}), 422)
    assert "top_k" in err["message"] and "20" in err["message"]
    _is_error(client.post("/search", json={"query": "x", "top_k": 0}), 422)
    err = _is_error(client.post("/documents", json=doc("big", "字" * 5000)), 413)
    assert "4096" in err["message"]

    def chunked() -> Any:
        yield b'{"doc_id": "big", "text": "'
        for _ in range(10):
            yield b"a" * 1000
        yield b'"}'

    _is_error(client.post("/documents", content=chunked(), headers={"Content-Type": "application/json"}), 413)
    _is_error(client.post("/search", json={"query": "x", "filters": {"company": "A"}}), 422)
    assert "dense channel" in _is_error(client.post("/search", json={"query": "x", "mode": "hybrid"}), 400)["message"]
    assert client.post("/search", json={"query": "x", "mode": "bm25"}).json()["mode"] == "bm25"
    _is_error(client.post("/search", json={"query": "   "}), 400)
    _is_error(client.post("/search", content=b"{not json", headers={"Content-Type": "application/json"}), 422)
    lone_surrogate = b'{"doc_id": "d", "text": "\\ud800 lone surrogate"}'
    _is_error(client.post("/documents", content=lone_surrogate, headers={"Content-Type": "application/json"}), 422)
    _is_error(client.post("/documents", json=doc("", "text")), 422)
    _is_error(client.get("/nowhere"), 404)
    _is_error(client.put("/search", json={}), 405)
    served.ws.stats = lambda: 1 / 0  # type: ignore[method-assign]  # an unexpected failure
    err = _is_error(client.get("/stats"), 500)
    assert err["message"] == "internal error" and "ZeroDivisionError" not in json.dumps(err)


def test_no_keys_means_loopback_only() -> None:
    with pytest.raises(ConfigError, match="refusing to bind 0.0.0.0"):
        check_bind(Settings(host="0.0.0.0"))
    with pytest.raises(ConfigError, match="not a loopback"):
        check_bind(Settings(host="example.org"))
    for host in ("127.0.0.1", "127.8.9.10", "localhost", "::1"):
        check_bind(Settings(host=host))
    from ragspine.secret import Secret

    check_bind(Settings(host="0.0.0.0", api_keys=(Secret(API_KEY),)))


def test_openapi_is_served_and_checked_in(serve: Any) -> None:
    served = serve()
    live = served.client.get("/openapi.json").json()
    checked_in = json.loads((DOCS_ROOT / "openapi.json").read_text("utf-8"))
    regenerate = ".venv/bin/python -c 'import json; from ragspine.service import openapi_schema; " \
                 "print(json.dumps(openapi_schema(), indent=2, ensure_ascii=False))' > docs/openapi.json"  # fmt: skip
    assert checked_in == openapi_schema() == live, f"docs/openapi.json is stale; regenerate: {regenerate}"
    documented = (DOCS_ROOT / "http-api.md").read_text("utf-8")
    for path, ops in live["paths"].items():
        for method in ops:
            assert f"{method.upper()} {path}" in documented, f"{method.upper()} {path} missing from docs/http-api.md"


def test_search_and_ask_take_typed_where_filters(serve: Any) -> None:
    served = serve()
    _load(served)
    client = served.client
    found = client.post("/search", json={"query": "gross margin recall revenue 营收", "top_k": 10,
                                         "where": {"entity": {"in": ["BOREALIS", "NOBODY"]}}}).json()  # fmt: skip
    assert {s["doc_id"] for s in found["snippets"]} == {"borealis.txt"}
    assert SECRET_TOKEN not in json.dumps(found)
    both = client.post("/search", json={"query": "营收", "filters": {"entity": "ACME_CN"},
                                        "where": {"period": {"gte": "2024"}}}).json()  # fmt: skip
    assert [s["doc_id"] for s in both["snippets"]] == ["acme/2024.md"]
    answer = client.post("/ask", json={"question": "why did revenue fall", "where": {"period": {"lt": "2024"}}})
    assert answer.status_code == 200 and SECRET_TOKEN not in answer.text
    err = _is_error(client.post("/search", json={"query": "x", "where": {"period": {"like": "2024"}}}), 400)
    assert "unknown operator 'like'" in err["message"]
    err = _is_error(client.post("/search", json={"query": "x", "where": {"nosuchfield": "1"}}), 400)
    assert "nosuchfield" in err["message"]


def test_every_route_in_the_schema_needs_a_key(serve: Any) -> None:
    """Every route the app serves (the live schema, so a route a later change adds is covered
    too), /mcp included, is a 401 without a key; only /health is open."""
    served = serve()
    bare = httpx.Client(base_url=served.url, timeout=10)
    paths = served.client.get("/openapi.json").json()["paths"]
    calls = [(method, path.replace("{doc_id}", "a")) for path, ops in paths.items() for method in ops]
    assert ("get", "/graph/entities") in calls and len(calls) >= 15
    for method, path in [*calls, ("post", "/mcp")]:
        response = bare.request(method.upper(), path, json={})
        if path == "/health":
            assert response.status_code == 200
        else:
            assert _is_error(response, 401), (method, path)
