"""The query stage over HTTP: the gate and corrective retrieval configured on the service apply to
/search and /ask; /stats names the active layers; the LLM layers never see RESTRICTED text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from service_helpers import ADMIN, doc, llm_settings

SECRET_TOKEN = "ZETA-CONFIDENTIAL-9931"
GATE = {"deny_entities": ["BOREALIS"]}
BOREALIS = "Borealis gross margin fell because of a product recall."
MEMO = f"Internal memo {SECRET_TOKEN}: gross margin is at risk because of the recall and layoffs."


def _load(served: Any) -> None:
    for body in (doc("borealis.txt", BOREALIS, entity="BOREALIS", language="en"),
                 doc("memo.md", MEMO, sensitivity="RESTRICTED")):  # fmt: skip
        assert served.client.post("/documents", json=body).status_code == 201


def test_gate_and_corrective_apply_to_search_ask_and_stats(serve: Any, tmp_path: Path, stub_llm: Any) -> None:
    gate = tmp_path / "gate.json"
    gate.write_text(json.dumps(GATE), "utf-8")
    served = serve(query_gate=str(gate), corrective="llm", query_transform="rag_fusion",
                   **llm_settings(stub_llm.base_url))  # fmt: skip
    _load(served)
    client = served.client
    assert "transform rag_fusion; corrective llm" in client.get("/stats", headers=ADMIN).json()["channels"]["query_stage"]
    refused = client.post("/search", json={"query": "Borealis margin"}).json()
    assert refused["snippets"] == [] and stub_llm.requests == []  # refused before any LLM call
    answer = client.post("/ask", json={"question": "Borealis margin"}).json()
    assert answer["note"] == "no grounded answer: security gate: the query names the denied entity 'BOREALIS'"
    found = client.post("/search", json={"query": "gross margin recall"}).json()["snippets"]
    assert [s["doc_id"] for s in found] == ["borealis.txt"]
    assert found[0]["lineage"]["transform"]["name"] == "rag_fusion"
    assert stub_llm.requests and SECRET_TOKEN not in stub_llm.prompts()
