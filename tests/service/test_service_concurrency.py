"""Parallel searches while documents are re-ingested, through the real server.

Every chunk of version N of a document carries the token `verN` (and every version of a
document has several chunks). A search that returns chunks of one document from two versions
saw a half-replaced document: that, or any non-200 answer, fails the test.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from typing import Any

import httpx
from service_helpers import AUTH

DOCS = 4
PARAGRAPHS = 8  # ~450 characters each: several chunks at the 1000-character default
SEARCHERS = 4
DURATION_S = 3.0
_VERSION = re.compile(r"\bver(\d+)\b")


def _text(doc: int, version: int) -> str:
    """PARAGRAPHS paragraphs of ~300 characters each, so each version is several chunks."""
    filler = " ".join(f"word{doc}x{i}" for i in range(40))
    return "\n\n".join(f"common ver{version} paragraph {p} of doc {doc}. {filler}" for p in range(PARAGRAPHS))


def test_parallel_searches_never_see_a_half_replaced_document(serve: Any) -> None:
    served = serve()
    for doc in range(DOCS):
        assert served.client.post("/documents", json={"doc_id": f"doc{doc}", "text": _text(doc, 0)}).status_code == 201
    chunks_per_doc = len(served.client.get("/documents/doc0/chunks").json()["chunks"])
    assert chunks_per_doc >= 3, "each version must span several chunks for the test to mean anything"

    stop = time.monotonic() + DURATION_S
    problems: list[str] = []
    counts = defaultdict(int)
    lock = threading.Lock()

    def writer() -> None:
        with httpx.Client(base_url=served.url, headers=AUTH, timeout=30) as client:
            version = 0
            while time.monotonic() < stop:
                version += 1
                for doc in range(DOCS):
                    r = client.post("/documents", json={"doc_id": f"doc{doc}", "text": _text(doc, version), "replace": True})
                    with lock:
                        counts["writes"] += 1
                        if r.status_code != 201:
                            problems.append(f"ingest {r.status_code}: {r.text[:200]}")

    def searcher() -> None:
        with httpx.Client(base_url=served.url, headers=AUTH, timeout=30) as client:
            while time.monotonic() < stop:
                r = client.post("/search", json={"query": "common paragraph", "top_k": 100})
                if r.status_code != 200:
                    with lock:
                        problems.append(f"search {r.status_code}: {r.text[:200]}")
                    continue
                seen: dict[str, set[tuple[str, int]]] = defaultdict(set)
                for snippet in r.json()["snippets"]:
                    marker = _VERSION.search(snippet["text"])
                    seen[snippet["doc_id"]].add((marker.group(1) if marker else "?", snippet["version"]))
                with lock:
                    counts["searches"] += 1
                    for doc_id, versions in seen.items():
                        if len(versions) != 1:
                            problems.append(f"{doc_id}: one search saw versions {sorted(versions)}")
                    if len(seen) != DOCS or any(len(v) == 0 for v in seen.values()):
                        problems.append(f"a search saw {len(seen)} of {DOCS} documents")

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=searcher) for _ in range(SEARCHERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not problems, problems[:5]
    assert counts["writes"] >= DOCS and counts["searches"] >= SEARCHERS, dict(counts)
    final = served.client.post("/search", json={"query": "common", "top_k": 100}).json()["snippets"]
    assert len(final) == DOCS * chunks_per_doc
