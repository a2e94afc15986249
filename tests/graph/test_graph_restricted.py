"""Property: over any corpus, relations file and labels, no graph exit (the stored file, show,
neighbors, roll-up with and without a search, peers, trace, the global answer, LLM prompts) ever
carries text, a name or a document that only a RESTRICTED chunk holds.

The LLM is the stub OpenAI-compatible server (tests/llm_stub.py, a mock of the user's endpoint)
answering in the worst way: relations between every name it is shown, and summaries that echo
their whole prompt, so anything RESTRICTED that reached a prompt would reach the graph too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_stub import LLMStubServer, StubLLM

import ragspine

POOL = ["ACME", "ACME_HK", "BETA", "GAMMA", "DELTA"]
LABELS = ["PUBLIC", "INTERNAL", "RESTRICTED", "restricted", "ＲＥＳＴＲＩＣＴＥＤ"]
MARK = "CLASSIFIED"


def _reply(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    known = re.search(r"Known entities: (.*)", prompt)
    if known:
        names = [n for n in known.group(1).split(", ") if n != "(none)"]
        return "\n".join(f"{a} | related_to | {b}" for a in names for b in names if a < b)
    return prompt  # a summary or an answer that repeats everything it was given


@pytest.fixture(scope="module")
def stub() -> Iterator[StubLLM]:
    with LLMStubServer(StubLLM(responder=_reply)) as server:
        yield server


docs = st.lists(
    st.tuples(st.sampled_from(POOL), st.sampled_from(LABELS), st.lists(st.sampled_from(POOL), max_size=3),
              st.sampled_from(["2023", "2024"])),
    min_size=1, max_size=6,
)  # fmt: skip
rows = st.lists(st.tuples(st.sampled_from(POOL), st.sampled_from(["", *POOL]), st.sampled_from(["", *POOL])), max_size=5)


@given(corpus=docs, relations=rows, extractor=st.sampled_from(["cooccurrence", "llm"]))
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
def test_no_graph_exit_carries_restricted_text(
    stub: StubLLM, tmp_path_factory: pytest.TempPathFactory, corpus: list[Any], relations: list[Any], extractor: str
) -> None:  # fmt: skip
    root: Path = tmp_path_factory.mktemp("prop")
    lines = ["entity,parent,peers"] + [f"{e},{p if p != e else ''},{q if q != e else ''}" for e, p, q in relations]
    (root / "rel.csv").write_text("\n".join(lines) + "\n")
    env = {"RAGSPINE_EMBEDDING": "none", "RAGSPINE_LLM_BASE_URL": stub.base_url, "RAGSPINE_LLM_MODEL": "stub",
           "RAGSPINE_GRAPH_RELATIONS": str(root / "rel.csv"), "RAGSPINE_RELATION_EXTRACTOR": extractor}  # fmt: skip
    before = len(stub.requests)
    hidden: set[str] = set()
    with ragspine.open(root / "ws", env=env) as ws:
        for n, (entity, label, mentioned, period) in enumerate(corpus):
            restricted = "RESTRICTED" in label.upper() or label == "ＲＥＳＴＲＩＣＴＥＤ"
            secret = f"HIDDEN{n}" if restricted else ""
            text = " ".join([entity, *mentioned, "exports", period] + ([MARK, secret] if restricted else []))
            ws.ingest_text(text, f"doc{n}", entity=secret or entity, period=period, title=f"{secret} report",
                           sensitivity=label)  # fmt: skip
            if restricted:
                hidden |= {secret, f"doc{n}"}
        ws.graph.build(communities=True)
        g = ws.graph
        outputs: list[Any] = [g.graph.graph().to_json().decode(), g.show()]
        for node in g.graph.nodes():
            outputs.append(g.neighbors(node.id))
        for node in g.graph.nodes("entity"):
            for period in (None, "2024"):
                outputs += [g.rollup(node.key, period=period), g.peers(node.key, period=period)]
            outputs.append(g.rollup(node.key, query=f"{node.key} exports {MARK}", top_k=20))
        for edge in g.graph.edges():
            outputs.append(g.trace(edge.source, edge.target, edge.type))
        if any(n.attrs.get("summary") for n in g.graph.nodes("community")):
            outputs.append(g.global_answer(f"What about exports? {MARK}"))
    prompts = "\n".join(m["content"] for r in stub.requests[before:] for m in r["messages"])
    text = json.dumps(outputs, ensure_ascii=False) + prompts
    assert MARK not in text.replace(f"exports {MARK}", "").replace(f"exports? {MARK}", "")
    for name in hidden:
        assert not re.search(rf"\b{name}\b", text), name
