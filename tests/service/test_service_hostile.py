"""Hostile or careless HTTP input (issue 14, items 7 and 14), against the real server.

- `DELETE /documents/{id}` of a RESTRICTED document is answered exactly like a missing one and
  withdraws nothing; the owner withdraws it through Python (`Workspace.withdraw`).
- `top_k: true` is refused (not taken as 1); a body that is not UTF-8 is 422, as docs/http-api.md
  says; an `in` list past the bound is a clear 400 at once.
"""

from __future__ import annotations

from typing import Any

from ragspine.retrieval.filters import MAX_ITEMS


def test_a_restricted_document_cannot_be_withdrawn_over_http_and_is_answered_as_absent(serve: Any) -> None:
    served = serve()
    client, ws = served.client, served.ws
    ws.ingest("Salary table 9876543 for the CEO.", doc_id="salary_ceo.txt", sensitivity="RESTRICTED")
    ws.ingest("Revenue grew in the north.", doc_id="open.md", sensitivity="PUBLIC")
    hidden = client.delete("/documents/salary_ceo.txt")
    missing = client.delete("/documents/nothing.txt")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["message"].replace("salary_ceo.txt", "X") == missing.json()["message"].replace("nothing.txt", "X")
    assert ws.store.active_version("salary_ceo.txt") == 1, "nothing was withdrawn"
    assert client.delete("/documents/open.md").json() == {"doc_id": "open.md", "withdrawn_chunks": 1}
    assert ws.withdraw("salary_ceo.txt") == 1, "the owner withdraws it"
    assert ws.store.active_version("salary_ceo.txt") is None


def test_top_k_must_be_an_integer_not_a_boolean(serve: Any) -> None:
    client = serve().client
    for route, field in (("/search", "query"), ("/ask", "question")):
        for bad in (True, False, "3", 2.0):
            response = client.post(route, json={field: "revenue", "top_k": bad})
            assert response.status_code == 422, (route, bad, response.text)
            assert "top_k" in response.json()["message"]
        assert client.post(route, json={field: "revenue", "top_k": 2}).status_code == 200


def test_a_body_that_is_not_utf8_is_422(serve: Any) -> None:
    client = serve().client
    response = client.post("/search", content=b'{"query": "rev\xff\xfeenue"}', headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json() == {"status": 422, "error": "unprocessable_entity",
                               "message": "request body is not valid UTF-8: send JSON text encoded as UTF-8"}  # fmt: skip


def test_a_huge_in_list_is_refused_at_once(serve: Any) -> None:
    client = serve(max_query_body_bytes=8_000_000).client  # past the 256 KiB a query body may have by default
    values = [f"ENTITY_{i}" for i in range(200_000)]
    response = client.post("/search", json={"query": "revenue", "where": {"entity": {"in": values}}})
    assert response.status_code == 400
    assert f"more than the {MAX_ITEMS}" in response.json()["message"]
    assert client.post("/search", json={"query": "revenue", "where": {"entity": {"in": values[:MAX_ITEMS]}}}).status_code == 200
    many = {"or": [{"entity": v} for v in values[: MAX_ITEMS + 1]]}
    assert client.post("/search", json={"query": "revenue", "where": many}).status_code == 400
