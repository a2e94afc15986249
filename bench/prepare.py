"""Benchmark data in a work folder outside the repository: a chunk store and its token cache.

`<work>/<name>/chunks.db` is a real ChunkStore. SciFact and the 10k corpus are written through
the public API (`NarrativeIndex.ingest` / `ChunkStore.replace_doc_chunks`, one transaction per
document); 100k and 1M are bulk-loaded with one `executemany` transaction (same columns, one
version, the change log filled), because one transaction per document is not what is being
measured. `tokens.npy` / `offsets.npy` / `vocab.json` hold the store's active chunks tokenised
by `ragspine.retrieval.lexical.tokenize.tokenize`, in row-id order: every engine indexes
exactly these tokens. `queries.json` holds the query texts.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import numpy as np

from bench.corpus import CHUNKS_PER_DOC, scifact, synthetic_chunks, synthetic_queries
from ragspine.retrieval.store.sqlite import _COLUMNS, ChunkStore, _row  # bench only
from ragspine.retrieval.model import Chunk, DocumentMeta, make_chunk_id
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.lexical.tokenize import tokenize

N_QUERIES = 300


def prepare(work: Path, name: str, scifact_path: Path | None = None) -> dict:
    """Create (or reuse) the store and token cache of corpus `name`; return its meta."""
    folder = work / name
    meta_path = folder / "meta.json"
    if meta_path.exists():
        return json.loads(meta_path.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    db = folder / "chunks.db"
    start = time.perf_counter()
    if name == "scifact":
        assert scifact_path is not None
        docs, queries = scifact(scifact_path)
        how = _ingest_scifact(db, docs)
    else:
        n = _scale(name)
        how = _ingest_synthetic(db, n, bulk=n > 10_000)
        queries = []
    store_seconds = time.perf_counter() - start
    sample = _token_cache(folder, db)
    if not queries:
        queries = synthetic_queries(sample, N_QUERIES)
    (folder / "queries.json").write_text(json.dumps(queries, ensure_ascii=False))
    n_chunks = int(np.load(folder / "offsets.npy").shape[0] - 1)
    meta = {"name": name, "n_chunks": n_chunks, "store": how, "store_seconds": store_seconds,
            "n_tokens": int(np.load(folder / "offsets.npy", mmap_mode="r")[-1])}  # fmt: skip
    meta_path.write_text(json.dumps(meta))
    return meta


def _scale(name: str) -> int:
    return int(name.lower().replace("k", "000").replace("m", "000000"))


def _ingest_scifact(db: Path, docs: list[dict[str, str]]) -> str:
    with ChunkStore(db) as store:
        store.init_schema()
        index = NarrativeIndex(store)
        for doc in docs:
            text = f"{doc['title']}\n\n{doc['text']}" if doc["title"] else doc["text"]
            index.ingest(text, DocumentMeta(doc["_id"], title=doc["title"], language="en"))
    return f"NarrativeIndex.ingest, {len(docs)} documents (title + text, default chunking)"


def _ingest_synthetic(db: Path, n: int, *, bulk: bool) -> str:
    with ChunkStore(db) as store:
        store.init_schema()
        if not bulk:
            doc: list[Chunk] = []
            for c in synthetic_chunks(n):
                doc.append(_chunk(c))
                if len(doc) == CHUNKS_PER_DOC:
                    store.replace_doc_chunks(doc[0].doc_id, doc)
                    doc = []
            if doc:
                store.replace_doc_chunks(doc[0].doc_id, doc)
            return "ChunkStore.replace_doc_chunks, one transaction per 10-chunk document"
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        batch: list[tuple] = []
        doc_ids: dict[str, None] = {}
        sql = f"INSERT INTO narrative_chunk ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
        for c in synthetic_chunks(n):
            batch.append(_row(_chunk(c), valid_as_of="", ingested_at="bench", version=1))
            doc_ids[c.doc_id] = None
            if len(batch) == 50_000:
                conn.executemany(sql, batch)
                batch = []
        conn.executemany(sql, batch)
        conn.execute("UPDATE ragspine_meta SET value = '1' WHERE key = 'data_version'")
        conn.executemany("INSERT INTO ragspine_changes (version, doc_id) VALUES (1, ?)",
                         [(d,) for d in doc_ids])  # fmt: skip
        conn.execute("COMMIT")
    finally:
        conn.close()
    return "bulk executemany in one transaction (bench only)"


def _chunk(c) -> Chunk:  # type: ignore[no-untyped-def]
    return Chunk(
        chunk_id=make_chunk_id(c.doc_id, c.seq, c.text), doc_id=c.doc_id, seq=c.seq, text=c.text,
        source_locator=f"{c.doc_id}#p{c.seq + 1}@0-{len(c.text)}", entity=c.entity,
        topic=c.topic, period=c.period, language=c.language,
    )  # fmt: skip


def _token_cache(folder: Path, db: Path) -> list[str]:
    """Tokenise the active chunks in row-id order; return a sample of their texts."""
    vocab: dict[str, int] = {}
    ids: list[np.ndarray] = []
    lengths: list[int] = []
    sample: list[str] = []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (n,) = conn.execute("SELECT COUNT(*) FROM narrative_chunk WHERE active = 1").fetchone()
        every = max(1, n // 5000)
        cursor = conn.execute("SELECT text FROM narrative_chunk WHERE active = 1 ORDER BY row_id")
        i = 0
        while rows := cursor.fetchmany(20_000):
            flat: list[str] = []
            for (text,) in rows:
                tokens = tokenize(text)
                flat.extend(tokens)
                lengths.append(len(tokens))
                if i % every == 0:
                    sample.append(text)
                i += 1
            for term in dict.fromkeys(flat):
                if term not in vocab:
                    vocab[term] = len(vocab)
            ids.append(np.fromiter(map(vocab.__getitem__, flat), dtype=np.int32, count=len(flat)))
    finally:
        conn.close()
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    np.save(folder / "tokens.npy", np.concatenate(ids) if ids else np.zeros(0, np.int32))
    np.save(folder / "offsets.npy", offsets)
    (folder / "vocab.json").write_text(json.dumps(list(vocab), ensure_ascii=False))
    return sample
