"""Issue 14 #3 and #6 over HTTP: an upload's front matter never loosens its form field, and a new
version never lowers a stored label; issue 34 #5: a POST onto a taken doc_id never replaces the
owner's text and answers the same whatever the stored label (no word of RESTRICTED). Real uvicorn
server, real HTTP client."""

from __future__ import annotations

from typing import Any


def _upload(served: Any, name: str, body: bytes, **form: str) -> Any:
    return served.client.post("/documents/upload", files={"file": (name, body)}, data=form)


def _search(served: Any, query: str) -> list[str]:
    return [s["doc_id"] for s in served.client.post("/search", json={"query": query}).json()["snippets"]]


def test_upload_labels_fail_closed(serve: Any) -> None:
    served = serve()
    first = _upload(served, "memo.md", b"---\nsensitivity: PUBLIC\n---\nCodename heron layoffs.\n", sensitivity="RESTRICTED")
    assert first.status_code == 201 and first.json()["warnings"] == []
    assert _search(served, "heron layoffs") == []
    open_doc = _upload(served, "open.md", b"Codename egret hiring.\n", sensitivity="PUBLIC")
    assert open_doc.status_code == 201
    # a second upload to a taken doc_id is a 409 whatever the label, and the same answer for both
    # (issue 34 #5; before it answered version 2 with a warning naming RESTRICTED and replaced the text)
    for replace in ("false", "true"):
        again = _upload(served, "memo.md", b"Codename heron layoffs, revised.\n", sensitivity="PUBLIC", replace=replace)
        taken = _upload(served, "open.md", b"Codename egret hiring, revised.\n", sensitivity="PUBLIC")
        assert again.status_code == taken.status_code == 409
        assert again.json() == {**taken.json(), "message": taken.json()["message"].replace("open.md", "memo.md")}
        assert "RESTRICTED" not in again.text and "version" not in again.json()
    assert [c.text for c in served.ws.store.iter_chunks(doc_id="memo.md")] == ["Codename heron layoffs."]
    assert _search(served, "heron layoffs") == []
    # an API key cannot withdraw (nor so lower) a RESTRICTED document (issue 14 #7): the owner can
    assert served.client.delete("/documents/memo.md").status_code == 404
    assert _search(served, "heron layoffs") == []
    lowered = served.ws.ingest_text("Codename heron layoffs, public now.\n", "memo.md", sensitivity="PUBLIC",
                                    lower_label=True)  # fmt: skip
    assert lowered.warnings == ()
    assert _search(served, "heron layoffs") == ["memo.md"]
    # a visible document is replaced only when the request asks to
    replaced = _upload(served, "open.md", b"Codename egret hiring, revised.\n", sensitivity="PUBLIC", replace="true")
    assert replaced.status_code == 201 and replaced.json()["version"] == 2
