from __future__ import annotations

import threading
from typing import Any

import pytest

from ragspine.retrieval.link.multi_index import (
    KeywordRouter,
    LibraryIndex,
    LLMRouter,
    MultiIndexRetriever,
)


class FakeLibrary:
    """A member retriever returning fixed snippets (test-only; real members are NarrativeIndexRetrievers)."""

    def __init__(self, ids: list[str], restricted: tuple[str, ...] = ()) -> None:
        self.ids, self.restricted = ids, restricted
        self.calls: list[tuple[str, Any]] = []
        self.threads: set[int] = set()

    def retrieve(self, query: str, *, filters: dict[str, Any] | None = None, top_k: int = 50) -> list[dict[str, Any]]:
        self.calls.append((query, filters))
        self.threads.add(threading.get_ident())
        return [
            {"chunk_id": cid, "text": f"text {cid}", "scores": {"fused": 1.0},
             "sensitivity": "RESTRICTED" if cid in self.restricted else "PUBLIC", "lineage": {}}
            for cid in self.ids[:top_k]
        ]  # fmt: skip


class Router:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def route(self, query: str) -> list[str]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _libs() -> tuple[list[LibraryIndex], FakeLibrary, FakeLibrary]:
    reports, memos = FakeLibrary(["r1", "r2", "r3"]), FakeLibrary(["m1", "m2"], restricted=("m1",))
    return [LibraryIndex("reports", "annual reports 年报 revenue", reports),
            LibraryIndex("memos", "internal memos 备忘录", memos)], reports, memos  # fmt: skip


def test_routes_to_selected_library_and_tags_snippets() -> None:
    libraries, reports, memos = _libs()
    snippets = MultiIndexRetriever(libraries, Router(["reports"])).retrieve("q", filters={"entity": "A"})
    assert [(s["library_id"], s["chunk_id"]) for s in snippets] == [
        ("reports", "r1"), ("reports", "r2"), ("reports", "r3"),
    ]
    assert reports.calls == [("q", {"entity": "A"})] and memos.calls == []
    assert snippets[0]["lineage"]["routing"] == {"selected": ["reports"], "fallback": None}


def test_fuses_by_rrf_and_strips_restricted() -> None:
    libraries, _, _ = _libs()
    snippets = MultiIndexRetriever(libraries, Router(["reports", "memos"])).retrieve("q")
    keys = [(s["library_id"], s["chunk_id"]) for s in snippets]
    assert ("memos", "m1") not in keys
    # m2 is rank 2 in its list, like r2: the tie breaks by (library_id, chunk_id)
    assert keys == [("reports", "r1"), ("memos", "m2"), ("reports", "r2"), ("reports", "r3")]
    assert snippets[0]["scores"]["library_fused"] == pytest.approx(1 / 61)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [(RuntimeError("llm down"), "router error"), ([], "selected nothing"), (["nope"], "unknown library")],
)
def test_router_failures_search_everything(answer: Any, reason: str) -> None:
    libraries, reports, memos = _libs()
    snippets = MultiIndexRetriever(libraries, Router(answer)).retrieve("q")
    assert reports.calls and memos.calls
    assert {s["library_id"] for s in snippets} == {"reports", "memos"}
    assert reason in snippets[0]["lineage"]["routing"]["fallback"]


def test_keyword_router() -> None:
    libraries, _, _ = _libs()
    router = KeywordRouter(libraries)
    assert router.route("年报里的 revenue") == ["reports"]
    assert router.route("memos") == ["memos"]
    assert router.route("weather") == []


class Provider:
    def __init__(self, reply: str) -> None:
        self.reply = reply

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        return self.reply


def test_llm_router_parses_json_and_fails_loudly() -> None:
    libraries, _, _ = _libs()
    assert LLMRouter(Provider('Search ["memos", "reports"].'), libraries).route("q") == ["memos", "reports"]
    with pytest.raises(ValueError):
        LLMRouter(Provider("both of them"), libraries).route("q")
    multi = MultiIndexRetriever(libraries, LLMRouter(Provider("no idea"), libraries))
    assert "router error" in multi.retrieve("q")[0]["lineage"]["routing"]["fallback"]


def test_needs_unique_ids() -> None:
    libraries, _, _ = _libs()
    with pytest.raises(ValueError):
        MultiIndexRetriever([libraries[0], libraries[0]])
    with pytest.raises(ValueError):
        MultiIndexRetriever([])
