"""A memory-mapped index file truncated under a running process is noticed before it is read:
the process neither dies (SIGBUS) nor answers wrongly; it warns once and rebuilds from the store.

The damaged searches run in a child process: a SIGBUS there would otherwise kill pytest itself
(on code without the check the child exits with -7)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.sqlite import ChunkStore

# Terms spread over the whole vocabulary and postings, so that the searches read every page;
# each query is new to the process after the truncation (a searched term's scores are cached).
QUERIES = ["common " + " ".join(f"x{i} w{i % 700}" for i in range(s, 3000, 150)) for s in range(0, 150, 10)]

# Every file is mapped (the product reads small ones into memory), then searched, truncated
# to half of its size, and searched again, all in one process.
_CHILD = """
import json, logging, os, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
try:
    from ragspine.retrieval.lexical.index import mapped
    mapped.MAP_MIN_BYTES = 0
except ImportError:
    pass
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
db, name, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
store = ChunkStore(db); store.init_schema()
index = NarrativeIndex(store)
def ids(query):
    return [(r.chunk.chunk_id, round(r.bm25_score, 9)) for r in index.retrieve(query, top_k=50, rerank=False)]
before = ids(queries[0])
target, = (p for p in index.lexical_index.folder.path.glob("seg-*/" + name))
os.truncate(target, os.path.getsize(target) // 2)
after = [ids(query) for query in queries[1:]]
print(json.dumps({"before": before, "after": after, "stats": dict(index.lexical_index.stats)}))
"""


def _fill(store: ChunkStore) -> list[list[tuple[str, float]]]:
    index = NarrativeIndex(store)
    for d in range(300):
        text = "\n\n".join(
            f"common w{i % 700} x{i} y{i * 7 % 1999} filler words here" for i in range(d * 10, d * 10 + 10)
        )
        index.ingest(text, DocumentMeta(f"d{d}"))
    return [_ranked(index, query) for query in QUERIES]


def _ranked(index: NarrativeIndex, query: str) -> list[tuple[str, float]]:
    return [(r.chunk.chunk_id, round(r.bm25_score, 9)) for r in index.retrieve(query, top_k=50, rerank=False)]


@pytest.mark.parametrize("name", ["tfs.npy", "docs.npy", "indptr.npy"])
def test_a_truncated_mapped_file_is_noticed_and_rebuilt(store: ChunkStore, db_path: Path, name: str) -> None:
    expected = _fill(store)
    assert all(len(answer) == 50 for answer in expected)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(db_path), name, json.dumps(QUERIES)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    reply = json.loads(child.stdout)
    expected_lists = [[list(pair) for pair in answer] for answer in expected]
    assert reply["before"] == expected_lists[0]
    assert reply["after"] == expected_lists[1:]
    assert reply["stats"].get("loads") == 1 and reply["stats"].get("builds") == 1
    warnings = [line for line in child.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and "changed under this process" in warnings[0] and name in warnings[0]
    # The rebuilt index replaced the damaged files: a new process loads it without a warning.
    with ChunkStore(db_path) as again:
        fresh = NarrativeIndex(again)
        assert [_ranked(fresh, query) for query in QUERIES] == expected
        assert fresh.lexical_index.stats["loads"] == 1 and fresh.lexical_index.stats["builds"] == 0


def test_small_files_are_read_into_memory_and_large_ones_watched(
    store: ChunkStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragspine.retrieval.lexical.index import mapped

    _fill(store)
    with ChunkStore(db_path) as again:
        index = NarrativeIndex(again)
        snap = index.lexical_index.snapshot()
        assert index.lexical_index.stats["loads"] == 1
        assert all(not seg.files for seg in snap.segments)  # every file here is under 1 MiB
        assert snap.changed_files() == []
    monkeypatch.setattr(mapped, "MAP_MIN_BYTES", 0)  # now every file counts as large: mapped and watched
    with ChunkStore(db_path) as again:
        snap = NarrativeIndex(again).lexical_index.snapshot()
        assert any(seg.files for seg in snap.segments)
        assert snap.changed_files() == []
