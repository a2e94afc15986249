"""Issue 14 #3 and #6 over HTTP: an upload's front matter never loosens its form field, and a new
version never lowers a stored label (the response's `warnings` says so). Real uvicorn server."""

from __future__ import annotations

from typing import Any


def _upload(served: Any, name: str, body: bytes, **form: str) -> Any:
    return served.client.post("/documents/upload", files={"file": (name, body)}, data=form)


def test_upload_labels_fail_closed(serve: Any) -> None:
    served = serve()
    first = _upload(served, "memo.md", b"---\nsensitivity: PUBLIC\n---\nCodename heron layoffs.\n", sensitivity="RESTRICTED")
    assert first.status_code == 201 and first.json()["warnings"] == []
    assert served.client.post("/search", json={"query": "codename heron"}).json()["snippets"] == []
    again = _upload(served, "memo.md", b"Codename heron layoffs, revised.\n", sensitivity="PUBLIC")
    assert again.status_code == 201
    assert any("kept the stored label RESTRICTED" in w for w in again.json()["warnings"])
    assert served.client.post("/search", json={"query": "codename heron"}).json()["snippets"] == []
    # an API key cannot withdraw (nor so lower) a RESTRICTED document (issue 14 #7): the owner can
    assert served.client.delete("/documents/memo.md").status_code == 404
    assert served.client.post("/search", json={"query": "codename heron"}).json()["snippets"] == []
    lowered = served.ws.ingest_text("Codename heron layoffs, public now.\n", "memo.md", sensitivity="PUBLIC",
                                    lower_label=True)  # fmt: skip
    assert lowered.warnings == ()
    assert [s["doc_id"] for s in served.client.post("/search", json={"query": "codename heron"}).json()["snippets"]] == ["memo.md"]
