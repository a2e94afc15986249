"""POST /documents on the real server goes through the one ingest path's label steps: front matter
opening the text is read (issue 34 item 1's gap), and content stored RESTRICTED elsewhere is not
taken in again lower (issue 34 item 3), with an error that names no other document."""

from __future__ import annotations

from typing import Any

from service_helpers import doc

SECRET = "The Borealis merger closes in March.\n\nThe price is 41 dollars a share."


def test_post_documents_reads_front_matter_and_refuses_restricted_content_lower(serve: Any) -> None:
    served = serve()
    client = served.client
    labelled = "---\nsensitivity: RESTRICTED\n---\n" + SECRET
    created = client.post("/documents", json=doc("fm", labelled, sensitivity="PUBLIC"))
    assert created.status_code == 201, created.text
    [chunk, *_] = served.ws.store.iter_chunks(doc_id="fm")
    assert chunk.sensitivity == "RESTRICTED" and not chunk.text.startswith("---")
    found = client.post("/search", json={"query": "Borealis merger price", "top_k": 5})
    assert found.status_code == 200 and found.json()["snippets"] == []
    copy = client.post("/documents", json=doc("copy", SECRET, sensitivity="PUBLIC"))
    assert copy.status_code == 400, copy.text
    body = copy.text
    assert "stored at a stricter label" in body and "'fm'" not in body and "RESTRICTED" not in body
    assert list(served.ws.store.iter_chunks(doc_id="copy")) == []


def test_an_unread_sensitivity_key_is_refused_with_a_readable_message(serve: Any) -> None:
    """The refusal reaches the client whole: the error redactor once masked its word after
    "top-level key:" (`key: value` looks like a secret), answering "…top-level key: **** rather…"."""
    nested = "---\nmeta:\n  sensitivity: RESTRICTED\n---\n" + SECRET
    refused = serve().client.post("/documents", json=doc("nested", nested, sensitivity="PUBLIC"))
    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    assert "line 3:" in message and "****" not in message
    assert "is not read as a top-level key (refused rather than ingested at a lower label)" in message


def test_a_posted_text_is_cleaned_as_a_file_is(serve: Any) -> None:
    """POST /documents reads front matter with Windows line ends (it was refused) and stores no
    NUL or CR, as `ragspine ingest` of the same file does."""
    served = serve()
    crlf = "---\r\nsensitivity: RESTRICTED\r\n---\r\n" + SECRET.replace("\n", "\r\n")
    assert served.client.post("/documents", json=doc("win", crlf, sensitivity="PUBLIC")).status_code == 201
    assert {c.sensitivity for c in served.ws.store.iter_chunks(doc_id="win")} == {"RESTRICTED"}
    plain = served.client.post("/documents", json=doc("nul", "Kestrel alpha\u0000beta\r\nsecond line", sensitivity="PUBLIC"))
    assert plain.status_code == 201, plain.text
    assert [c.text for c in served.ws.store.iter_chunks(doc_id="nul")] == ["Kestrel alphabeta\nsecond line"]
