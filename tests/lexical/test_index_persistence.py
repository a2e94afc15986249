"""The index is persisted beside the store, loaded (not re-tokenised) by a new index or a new
process, and updated incrementally by ingest and withdraw."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex

TEXTS = {
    "r1": "营收下滑的原因是出口减少。\n\nACME revenue fell because exports dropped.",
    "r2": "Borealis margins improved on lower costs.\n\n毛利率改善。",
    "r3": "Москва: café sales grew 3.5% in Ελλάδα.",
}


def _fill(index: NarrativeIndex) -> None:
    for doc_id, text in TEXTS.items():
        index.ingest(text, DocumentMeta(doc_id, entity=doc_id.upper()))


def _ids(index: NarrativeIndex, query: str) -> list[str]:
    return [r.chunk.chunk_id for r in index.retrieve(query, rerank=False)]


def test_index_files_sit_beside_the_store(store: ChunkStore, db_path: Path) -> None:
    index = NarrativeIndex(store)
    _fill(index)
    index.refresh()
    manifests = list(Path(f"{db_path}.bm25").glob("*/manifest.json"))
    assert len(manifests) == 1
    manifest = json.loads(manifests[0].read_text())
    assert manifest["data_version"] == store.data_version()
    assert manifest["n_active"] == len(store.iter_chunks())


def test_a_new_index_loads_instead_of_tokenizing(store: ChunkStore, db_path: Path) -> None:
    first = NarrativeIndex(store)
    _fill(first)
    expected = _ids(first, "revenue 营收")
    with ChunkStore(db_path) as other:
        second = NarrativeIndex(other)
        assert _ids(second, "revenue 营收") == expected
        stats = second.lexical_index.stats
        assert stats["loads"] == 1 and stats["builds"] == 0 and stats["tokenized"] == 0
        assert second.lexical_index.last_action == "loaded"


def test_a_new_process_loads_instead_of_tokenizing(store: ChunkStore, db_path: Path) -> None:
    index = NarrativeIndex(store)
    _fill(index)
    expected = _ids(index, "exports 出口")
    script = (
        "import json, sys\n"
        "from ragspine.retrieval.store.sqlite import ChunkStore\n"
        "from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex\n"
        "store = ChunkStore(sys.argv[1]); store.init_schema()\n"
        "index = NarrativeIndex(store)\n"
        "ids = [r.chunk.chunk_id for r in index.retrieve('exports 出口', rerank=False)]\n"
        "print(json.dumps({'ids': ids, 'stats': dict(index.lexical_index.stats)}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(db_path)], capture_output=True, text=True, check=True
    )
    reply = json.loads(out.stdout)
    assert reply["ids"] == expected
    assert reply["stats"].get("loads") == 1
    assert reply["stats"].get("builds", 0) == 0 and reply["stats"].get("tokenized", 0) == 0


def test_ingest_and_withdraw_update_incrementally(store: ChunkStore) -> None:
    index = NarrativeIndex(store)
    _fill(index)
    assert _ids(index, "margins")  # builds once
    stats = index.lexical_index.stats
    assert stats["builds"] == 1
    index.ingest("Nordic margins widened.", DocumentMeta("r4"))
    assert stats["catch_ups"] == 1 and stats["builds"] == 1
    assert any(i.startswith("r4:") for i in _ids(index, "margins"))
    index.withdraw("r2")
    assert stats["catch_ups"] == 2 and stats["builds"] == 1
    assert not any(i.startswith("r2:") for i in _ids(index, "margins 毛利率"))
    assert _ids(index, "毛利率") == []


def test_memory_store_and_opt_out_write_no_files(tmp_path: Path) -> None:
    with ChunkStore(":memory:") as memory:
        memory.init_schema()
        index = NarrativeIndex(memory)
        _fill(index)
        assert _ids(index, "revenue")
        assert index.lexical_index.folder is None
    db = tmp_path / "c.db"
    with ChunkStore(db) as store:
        store.init_schema()
        index = NarrativeIndex(store, persist_index=False)
        _fill(index)
        assert _ids(index, "revenue")
    assert not Path(f"{db}.bm25").exists()


def test_an_unnamed_analyzer_is_never_persisted(store: ChunkStore, db_path: Path) -> None:
    index = NarrativeIndex(store, analyzer=lambda text: text.lower().split())
    _fill(index)
    assert _ids(index, "revenue")
    assert index.lexical_index.folder is None
    assert not Path(f"{db_path}.bm25").exists()
