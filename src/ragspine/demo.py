"""`ragspine demo`: ingest the bundled sample corpus and answer three example questions.

The corpus (src/ragspine/data/sample_corpus/, written for this project about invented
companies) holds one RESTRICTED memo; the third question's best raw match is that memo, and the
demo shows it is kept out of the candidates (the public matches fill every slot) and never
printed. Retrieval is the configured default
(`RAGSPINE_EMBEDDING` / `RAGSPINE_RETRIEVAL_MODE` / `RAGSPINE_FUSION`, as for search and
serve): hybrid BM25 + multilingual-e5 where it is installed, BM25 otherwise; the first line
says which.
"""

from __future__ import annotations

import json
from dataclasses import replace
import shlex
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from ragspine.assembly import build_retriever, load_settings
from ragspine.ingest.pipeline import IngestPipeline
from ragspine.ingest.registry import DocumentRegistry
from ragspine.render import format_snippets
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.link.narrative_link import split_filters
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.vector.embeddings.support import model_id_of

TOP_K = 5


def run_demo(
    db: str | None = None, *, echo: Callable[[str], Any] = print, prog: str = "ragspine"
) -> list[dict[str, Any]]:
    """Run the demo; return every snippet it showed. Raises RuntimeError if RESTRICTED leaked."""
    corpus = resources.files("ragspine.data").joinpath("sample_corpus")
    manifest = json.loads(corpus.joinpath("manifest.json").read_text("utf-8"))
    with (
        tempfile.TemporaryDirectory(prefix="ragspine-demo-") as tmp,
        resources.as_file(corpus.joinpath("glossary.json")) as glossary,
    ):
        path = db or str(Path(tmp) / "demo.db")
        # The product's own assembly, with the demo's store and glossary.
        settings = replace(load_settings(flags={"RAGSPINE_DB": path}), glossary=str(glossary))
        retriever, store = build_retriever(settings)
        backend = retriever.index.embedding_backend
        try:
            mode = "BM25 only" if backend is None else f"hybrid BM25 + {model_id_of(backend)}"
            echo(f"== Retrieval: {mode}")
            echo(f"== Ingesting the sample corpus into {path}")
            with IngestPipeline(retriever.index, registry=DocumentRegistry(path)) as pipeline:  # the one ingest path
                for doc in manifest["documents"]:
                    fields = {k: v for k, v in doc.items() if k != "file"}
                    text = corpus.joinpath(doc["file"]).read_text("utf-8")
                    meta = DocumentMeta(**fields)
                    count = pipeline.ingest_document(text, meta, levels=settings.sensitivity_levels).chunks
                    echo(f"   {doc['doc_id']:<32} {doc['entity']:<9} {doc['sensitivity']:<10} {count} chunks")
            shown: list[dict[str, Any]] = []
            for number, question in enumerate(manifest["questions"], start=1):
                shown.extend(_ask(retriever, number, question, echo))
        finally:
            if retriever.index.dense is not None:
                retriever.index.dense.vectors.close()
            store.close()
    restricted_ids = {d["doc_id"] for d in manifest["documents"] if is_restricted(d["sensitivity"])}
    leaked = [s for s in shown if s["doc_id"] in restricted_ids or is_restricted(s["sensitivity"])]
    if leaked:
        raise RuntimeError(f"RESTRICTED text reached the output: {[s['chunk_id'] for s in leaked]}")
    echo(
        f"\n== Check: {len(shown)} snippets shown; none from the RESTRICTED "
        f"{', '.join(sorted(restricted_ids))} (the memo never appears)."
    )
    echo(next_steps(db, prog))
    return shown


def next_steps(db: str | None, prog: str = "ragspine") -> str:
    """The commands a newcomer runs next: search the demo's store (kept with `--db`), ingest their
    own folder, serve it. `prog`: how the command is called (e.g. `.venv/bin/ragspine`)."""
    store = shlex.quote(db or "demo.db")
    commands = [
        *([] if db else [(f"{prog} demo --db demo.db", "keep the demo's store (this run's was temporary)")]),
        (f'{prog} search "为什么营收下滑" --db {store} --explain', "one query, stage by stage"),
        (f"{prog} ingest YOUR_FOLDER", "your own documents (.txt .md .html .pdf .docx) into .ragspine/"),
        (f"{prog} serve", "the HTTP API and the search page over them"),
    ]
    width = max(len(command) for command, _ in commands)
    return "\n".join(["\n== Next:", *(f"   {command.ljust(width)}   # {why}" for command, why in commands)])


def _ask(retriever: Any, number: int, question: dict[str, Any], echo: Callable[[str], Any]) -> list[dict[str, Any]]:
    query, filters = question["query"], question.get("filters") or {}
    echo(f"\n== Q{number}: {query}   filters={json.dumps(filters, ensure_ascii=False)}")
    echo(f"   ({question['label']})")
    snippets = retriever.retrieve(query, filters=filters, top_k=TOP_K)
    echo(format_snippets(snippets))
    exact, typed = split_filters(filters)
    # The owner's view (RESTRICTED not masked) only to say what was kept out; never printed.
    raw = retriever.index.retrieve(query, top_k=TOP_K, rerank=False, where=typed, include_restricted=True, **exact)
    withheld = [r.chunk for r in raw if is_restricted(r.chunk.sensitivity)]
    if withheld:
        first = "the best raw match" if is_restricted(raw[0].chunk.sensitivity) else "raw matches"
        docs = ", ".join(sorted({c.doc_id for c in withheld}))
        echo(
            f"   RESTRICTED exit: {len(withheld)} of the top {len(raw)} raw hits ({first}) come "
            f"from RESTRICTED {docs}; kept out before ranking, their text is not printed."
        )
    return snippets
