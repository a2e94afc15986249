"""Roll-up and peers on the bundled demo corpus (src/ragspine/data/sample_corpus) with a small
relations file: ACME_CN and ACME_HK under ACME, peers BOREALIS and LOTUS. The RESTRICTED memo
(Project Nightjar, entity ACME_CN) must appear nowhere."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import ragspine

RELATIONS = """\
entities:
  - entity: ACME_CN
    parent: ACME
    peers: [BOREALIS, LOTUS]
  - entity: ACME_HK
    parent: ACME
"""


def test_demo_corpus_rollup_and_peers(tmp_path: Path) -> None:
    corpus = resources.files("ragspine.data").joinpath("sample_corpus")
    manifest = json.loads(corpus.joinpath("manifest.json").read_text("utf-8"))
    (tmp_path / "relations.yaml").write_text(RELATIONS, encoding="utf-8")
    env = {"RAGSPINE_EMBEDDING": "none", "RAGSPINE_GRAPH_RELATIONS": str(tmp_path / "relations.yaml")}
    with ragspine.open(tmp_path / "demo", env=env) as ws:
        for doc in manifest["documents"]:
            meta = {k: v for k, v in doc.items() if k not in ("file", "doc_id")}
            ws.ingest_text(corpus.joinpath(doc["file"]).read_text("utf-8"), doc["doc_id"], **meta)
        ws.graph.build()
        rolled = ws.graph.rollup("ACME")
        searched = ws.graph.rollup("ACME", query="营收 revenue layoffs plant closure Nightjar", top_k=20)
        peers = ws.graph.peers("ACME_CN", period="2024")
        outputs = json.dumps([rolled, searched["snippets"], searched["members"], searched["documents"], peers,
                              ws.graph.graph.graph().to_json().decode()], ensure_ascii=False)  # fmt: skip
        for doc in rolled["documents"]:
            for cite in doc["citations"]:
                assert ws.chunk(cite["chunk_id"])["source_locator"] == cite["source_locator"]
    assert {d["doc_id"] for d in rolled["documents"]} == {
        "acme_cn_2024_annual_report", "acme_cn_2023_interim_report", "acme_hk_2024_annual_report"}
    assert searched["snippets"] and {s["entity"] for s in searched["snippets"]} <= {"ACME_CN", "ACME_HK"}
    rows = {r["entity"]: {d["doc_id"] for d in r["documents"]} for r in peers["rows"]}
    assert rows == {"ACME_CN": {"acme_cn_2024_annual_report"}, "BOREALIS": {"borealis_2024_annual_report"}, "LOTUS": set()}
    assert "internal_memo_restructuring" not in outputs and "Nightjar" not in outputs and "夜鹰" not in outputs
