"""`ragspine eval`'s default run: the product path, with the product's settings.

Invariants: each corpus entry becomes one text file (`corpus_file_name(_id)`: its percent-encoded
id + ".txt"; content = `CorpusDoc.indexed_text`, title + blank line + text as in BEIR), the
folder is ingested by `ingest_paths` exactly as `ragspine ingest` calls it (the settings' chunker
budget and overlap, the store's index-settings record checked first, the configured embedding
backend embedding at the end), and every query goes through `Workspace.search`, the call behind
`ragspine search` and `ragspine.open(db).search` (glossary rewriter, analyzer, fusion, filter
extractor and reranker as configured). So its figures are what a user gets who writes the corpus
as files, runs `ragspine ingest` and searches; `tests/eval/test_eval_is_product.py` checks it.
Entries with no text are not written (`ragspine ingest` refuses empty files) and are counted.

The ingested workspace is cached under `--cache DIR` in `DIR/<dataset>-<key>/`, where the key
digests everything that changes the stored chunks, index or vectors: the corpus bytes, the file
layout, RAGSpine's version and ingest format, the recorded index settings (analyzer, chunker,
budget, overlap) and the embedding backend with its options. A folder whose ingest did not
finish is ingested again (unchanged files are skipped, missing vectors embedded).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from ragspine.eval.dataset import BeirDataset
from ragspine.eval.modes import EvalError
from ragspine.eval.runner import DEFAULT_EVAL_TOP_K, EvalReport, rank_documents
from ragspine.retrieval.pipeline.trace import Trace

CORPUS_FOLDER = "corpus"
STORE_FILE = "chunks.db"
MANIFEST_FILE = "eval-manifest.json"
FILE_LAYOUT = "txt:percent-encoded-id;title\\n\\ntext"
ENTRY_SUFFIX = ".txt"


@dataclass(frozen=True)
class ProductOptions:
    """What a default run may change; None keeps the configured setting (environment,
    RAGSPINE_CONFIG or `config`, then the default), exactly as `ragspine search` would."""

    mode: str | None = None  # RAGSPINE_RETRIEVAL_MODE
    embedding: str | None = None  # RAGSPINE_EMBEDDING
    analyzer: str | None = None  # RAGSPINE_ANALYZER
    chunk_chars: int | None = None  # RAGSPINE_CHUNK_CHARS
    chunk_overlap: int | None = None  # RAGSPINE_CHUNK_OVERLAP
    config: str | None = None  # a TOML settings file, as `--config` elsewhere
    top_k: int = DEFAULT_EVAL_TOP_K
    cache: str | None = None  # keep the ingested workspace under this folder
    progress: bool = True
    reranker: str | None = None  # RAGSPINE_RERANKER
    reranker_top_n: int | None = None  # RAGSPINE_RERANKER_TOP_N
    # the query stage and its LLM (RAGSPINE_LLM_BASE_URL, _LLM_MODEL, RAGSPINE_QUERY_TRANSFORM, …)
    query_flags: tuple[tuple[str, str], ...] = ()
    # called with each search's text and its detailed pipeline trace (benchmarks read the fusion
    # stage's inputs from it, e.g. `bench.fusion_learn record`); None: searches are not traced
    on_trace: Callable[[str, Trace], None] | None = None
    # called with each search's text and its snippets, best first (`bench.relevance_fit` reads
    # their scores); None: not called
    on_snippets: Callable[[str, list[Any]], None] | None = None

    def flags(self) -> dict[str, object]:
        return {
            "RAGSPINE_RETRIEVAL_MODE": self.mode, "RAGSPINE_EMBEDDING": self.embedding,
            "RAGSPINE_ANALYZER": self.analyzer, "RAGSPINE_CHUNK_CHARS": self.chunk_chars,
            "RAGSPINE_CHUNK_OVERLAP": self.chunk_overlap, "RAGSPINE_RERANKER": self.reranker,
            "RAGSPINE_RERANKER_TOP_N": self.reranker_top_n, **dict(self.query_flags),
        }  # fmt: skip


def corpus_file_name(doc_id: str) -> str:
    """The file an entry is written to; `doc_id_of` inverts it.

    >>> corpus_file_name("TRIAL_800/1 a"), doc_id_of(corpus_file_name("TRIAL_800/1 a"))
    ('TRIAL_800%2F1%20a.txt', 'TRIAL_800/1 a')
    """
    return quote(doc_id, safe="") + ENTRY_SUFFIX


def doc_id_of(stored_doc_id: str) -> str:
    """The corpus `_id` of a stored document (its doc_id is the file name)."""
    return unquote(stored_doc_id.removesuffix(ENTRY_SUFFIX))


def write_corpus(dataset: BeirDataset, folder: Path) -> int:
    """Write each non-empty entry as a file in `folder`; return how many were left out (empty).
    EvalError when two ids would share a file name on a case-insensitive file system."""
    folder.mkdir(parents=True, exist_ok=True)
    seen: dict[str, str] = {}
    empty = 0
    for doc in dataset.corpus:
        name = corpus_file_name(doc.doc_id)
        other = seen.setdefault(name.casefold(), doc.doc_id)
        if other != doc.doc_id:
            raise EvalError(
                f"corpus ids {other!r} and {doc.doc_id!r} differ only in case; they cannot be files"
            )
        if not doc.indexed_text.strip():
            empty += 1
            continue
        path = folder / name
        data = doc.indexed_text.encode("utf-8")
        if (
            not path.is_file() or path.read_bytes() != data
        ):  # unchanged files keep their mtime
            path.write_bytes(data)
    return empty


def run_product_eval(
    dataset: BeirDataset, options: ProductOptions = ProductOptions()
) -> EvalReport:
    """Files → `ingest_paths` (as `ragspine ingest`) → `Workspace.search` for every judged
    query; the report's `settings` lists the product settings the run used."""
    if options.top_k < 1:
        raise EvalError(f"top_k must be >= 1, got {options.top_k}")
    from ragspine.assembly import (
        channels,
        effective_mode,
        index_settings_for,
        load_settings,
        resolve_embedding,
    )

    settings = load_settings(config_file=options.config, flags=options.flags(), adopt=False)  # its own stores
    asked = index_settings_for(settings)
    _, why = resolve_embedding(settings)
    key = workspace_key(dataset, settings)
    temporary = options.cache is None
    root = (
        Path(tempfile.mkdtemp(prefix="ragspine-eval-"))
        if temporary
        else Path(options.cache or ".") / f"{dataset.name}-{key}"
    )
    try:
        settings = dataclasses.replace(settings, db=str(root / STORE_FILE))
        reused, empty, ingest_s, embedded, embed_s = _ingest(
            dataset, root, settings, key, options.progress
        )
        from ragspine.workspace import Workspace

        with Workspace.from_settings(settings) as workspace:
            stats = workspace.stats()
            chunks = stats["chunks"]
            run, query_s, query_ms = _query_all(
                workspace,
                dataset.queries,
                options.top_k,
                chunks,
                stats["documents"],
                options.progress,
                options.on_trace,
                options.on_snippets,
            )
            mode = workspace.retrieval_mode
            dense = workspace.retriever.index.dense
            model = None if dense is None else dense.vectors.model_id
    finally:
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
    pipeline = channels(settings)
    return EvalReport.scored(
        dataset,
        run,
        mode=mode,
        mode_note=f"RAGSPINE_RETRIEVAL_MODE={settings.retrieval_mode} -> {effective_mode(settings)}; {why}",
        embedding=model,
        fusion=pipeline["fusion"],
        analyzer=asked.analyzer,
        analyzer_note=f"RAGSPINE_ANALYZER={settings.analyzer}",
        chunking=f"{asked.chunk_chars}/{asked.chunk_overlap}",
        glossary=True,
        top_k=options.top_k,
        db=":temporary:" if temporary else str(root),
        reused_store=reused,
        chunks=chunks,
        ingest_s=ingest_s,
        query_s=query_s,
        embed_s=embed_s,
        embedded=embedded,
        path="product",
        settings={"index": asked.describe(), **pipeline},
        empty_entries=empty,
        query_ms=query_ms,
    )


def workspace_key(dataset: BeirDataset, settings: Any) -> str:
    """The cache key of `dataset`'s workspace under these settings (`cache_key` of what they ask
    for); `--cache DIR` keeps it at DIR/<dataset name>-<key>."""
    from ragspine.assembly import embedding_options, index_settings_for, resolve_embedding

    backend_name, _ = resolve_embedding(settings)
    options = embedding_options(settings, backend_name) if backend_name else {}
    return cache_key(dataset, index_settings_for(settings), backend_name, options)


def cache_key(
    dataset: BeirDataset, asked: Any, backend: str | None, options: Mapping[str, Any]
) -> str:
    """A digest of everything that changes what a cached workspace holds, for e5 the engine its
    setting resolves to (with the engine's revision). The encoder's thread count
    (RAGSPINE_EMBED_THREADS) and device (RAGSPINE_DEVICE) are left out: they change how fast
    vectors are made, not which (the backend's model id ignores them too), so a rerun with other
    threads or on a GPU reuses the workspace."""
    from ragspine import __version__
    from ragspine.ingest.document import INGEST_FORMAT

    embedding_options = {k: str(v) for k, v in sorted(options.items()) if k not in ("threads", "device")}
    data: dict[str, Any] = {
        "corpus_sha256": dataset.corpus_sha256, "layout": FILE_LAYOUT, "ragspine": __version__,
        "ingest_format": INGEST_FORMAT, "index": dataclasses.asdict(asked), "embedding": backend,
        "embedding_options": embedding_options,
    }  # fmt: skip
    if backend in ("e5", "multilingual"):  # the engine it runs (auto resolved), with its revision
        from ragspine.retrieval.vector.embeddings.e5 import engine_tag, resolve_engine

        data["e5_engine"] = engine_tag(resolve_engine(str(options.get("engine", "auto"))))
        embedding_options.pop("engine", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def _ingest(
    dataset: BeirDataset, root: Path, settings: Any, key: str, progress: bool
) -> tuple[bool, int, float, int, float]:
    """Ingest the corpus into `root` unless a finished ingest of the same key is there; return
    (reused, empty entries, ingest seconds, chunks embedded, embedding seconds)."""
    from ragspine.assembly import ingest_files

    manifest = root / MANIFEST_FILE
    done = _read_manifest(manifest)
    if done is not None and done.get("key") == key and done.get("status") == "complete":
        return True, int(done.get("empty", 0)), 0.0, 0, 0.0
    started = time.perf_counter()
    _write_manifest(manifest, {"key": key, "status": "partial"})
    empty = write_corpus(dataset, root / CORPUS_FOLDER)
    # Exactly `ragspine ingest ROOT/corpus --db ROOT/chunks.db` with these settings:
    report, _ = ingest_files([root / CORPUS_FOLDER], settings, progress=None if progress else False)
    if report.failures:
        first = report.failures[0]
        raise EvalError(
            f"ragspine ingest failed on {len(report.failures)} file(s), e.g. {first.path}: {first.reason}"
        )
    elapsed = time.perf_counter() - started
    embed = report.embedding
    embed_s = embed.seconds if embed is not None else 0.0
    _write_manifest(manifest, {"key": key, "status": "complete", "empty": empty})
    return (
        False,
        empty,
        elapsed - embed_s,
        0 if embed is None else embed.embedded,
        embed_s,
    )


def _query_all(
    workspace: Any,
    queries: Mapping[str, str],
    top_k: int,
    chunks: int,
    docs: int,
    progress: bool,
    on_trace: Callable[[str, Trace], None] | None = None,
    on_snippets: Callable[[str, list[Any]], None] | None = None,
) -> tuple[dict[str, list[tuple[str, float]]], float, list[float]]:
    """Rank corpus entries for each query by their best snippet (`Workspace.search`, best first,
    with no relevance floor: the ranking is measured, `min_score`'s cut is reported apart);
    a blank query gets an empty ranking. The first query runs once before the clock starts.
    Returns (run, seconds, each non-blank query's milliseconds). `on_trace`: each search is
    traced in detail and handed to it with its text; `on_snippets`: each search's snippets."""
    from ragspine.eval.runner import _progress, chunk_depth

    depth = chunk_depth(top_k, chunks, docs)

    def search(text: str, k: int) -> list[tuple[str, float]]:
        trace = Trace(detail=True) if on_trace is not None else None
        snippets = workspace.search(text, top_k=k, trace=trace, min_score=0.0)
        if on_trace is not None and trace is not None:
            on_trace(text, trace)
        if on_snippets is not None:
            on_snippets(text, snippets)
        return [(doc_id_of(s["doc_id"]), float(s["scores"]["fused"])) for s in snippets]

    warm = next((q for q in queries.values() if q.strip()), None)
    if warm is not None:
        workspace.search(warm, top_k=1)
    run: dict[str, list[tuple[str, float]]] = {}
    times: list[float] = []
    started = time.perf_counter()
    for qid, text in _progress(
        list(queries.items()), progress, desc="queries", unit="q"
    ):
        if not text.strip():
            run[qid] = []
            continue
        began = time.perf_counter()
        run[qid] = rank_documents(functools.partial(search, text), top_k, depth)
        times.append((time.perf_counter() - began) * 1000)
    return run, time.perf_counter() - started, times


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_manifest(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
