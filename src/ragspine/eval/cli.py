"""`ragspine eval`: a thin click wrapper over `load_beir` + `run_product_eval` (the default: the
product path with the product's settings) or `run_eval` (`--whole-entries`) + `format_report`.

Imports only click at module load (the CLI registers this command at start-up); the retrieval
stack is imported when the command runs. Library errors become a one-line message, exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

MODES = ("auto", "bm25", "hybrid", "vector")
ANALYZERS = ("auto", "spec", "en-stem")


@click.command("eval")
@click.argument("dataset_dir", type=click.Path(path_type=Path))
@click.option("--split", required=True, help="Qrels split to score: qrels/SPLIT.tsv (e.g. test, dev, train).")
@click.option("--mode", type=click.Choice(MODES, case_sensitive=False), default=None,
              help="Retrieval mode [default: RAGSPINE_RETRIEVAL_MODE, as for search; auto = hybrid when an "
                   "embedding backend resolves, else bm25]. hybrid and vector need a backend.")  # fmt: skip
@click.option("--embedding", default=None, metavar="SPEC",
              help="Embedding backend (none, auto, e5, onnx, openai, ...: make_embedding_backend's names); "
                   "default: RAGSPINE_EMBEDDING, as for search and serve.")  # fmt: skip
@click.option("--analyzer", type=click.Choice(ANALYZERS, case_sensitive=False), default=None,
              help="Lexical analyzer [default: RAGSPINE_ANALYZER, as for search; auto = en-stem]: spec (the "
                   "specification's tokenizer), en-stem (+ Snowball English stemmer).")  # fmt: skip
@click.option("--chunk-chars", default=None, type=click.IntRange(min=1),
              help="Chunk budget [default: RAGSPINE_CHUNK_CHARS, 1000]. With --whole-entries: chunk the "
                   "entries at this budget instead of keeping each whole.")  # fmt: skip
@click.option("--overlap-chars", default=None, type=click.IntRange(min=0),
              help="Chunk overlap [default: RAGSPINE_CHUNK_OVERLAP, 80].")  # fmt: skip
@click.option("--cache", default=None, type=click.Path(file_okay=False),
              help="Keep the ingested workspace (files, store, vectors, index) under this folder and reuse it "
                   "on the next run with the same corpus and settings (default: a temporary folder).")  # fmt: skip
@click.option("--config", "config_file", default=None, type=click.Path(dir_okay=False),
              help="TOML settings file [env RAGSPINE_CONFIG], as for search; flags override it.")  # fmt: skip
@click.option("--top-k", default=100, show_default=True, type=click.IntRange(min=1),
              help="Documents ranked per query (recall@100 counts within these).")  # fmt: skip
@click.option("--json", "json_path", default=None, metavar="PATH",
              help="Also write the results as a JSON object to PATH ('-' for standard output).")  # fmt: skip
@click.option("--whole-entries", is_flag=True,
              help="Not the product path: ingest each corpus entry whole, as one chunk, through NarrativeIndex "
                   "(the BEIR convention; analyzer auto, glossary off unless --glossary).")  # fmt: skip
@click.option("--db", default=None, type=click.Path(dir_okay=False),
              help="With --whole-entries: keep that run's store here and reuse it (default: in memory).")  # fmt: skip
@click.option("--reranker", default=None, metavar="SPEC",
              help="Reranker of the fused head (none, splade, cross_encoder, colbert, http, llm, ...: "
                   "make_reranker's names) [default: RAGSPINE_RERANKER, as for search].")  # fmt: skip
@click.option("--reranker-top-n", default=None, type=click.IntRange(min=2),
              help="Fused results the reranker reorders [default: RAGSPINE_RERANKER_TOP_N, 10].")  # fmt: skip
@click.option("--glossary", is_flag=True,
              help="With --whole-entries: expand queries with the glossary (the product path always does, "
                   "as search does).")  # fmt: skip
@click.option("--llm-base-url", default=None, metavar="URL",
              help="OpenAI-compatible chat API (…/v1) for the query transforms and the listwise judge "
                   "[env RAGSPINE_LLM_BASE_URL]; measures the LLM layers' quality on your endpoint.")  # fmt: skip
@click.option("--llm-model", default=None, help="Model name sent to that API [env RAGSPINE_LLM_MODEL].")
@click.option("--transform", default=None, help="hyde, rag_fusion, step_back or none [env RAGSPINE_QUERY_TRANSFORM].")
@click.option("--decompose", default=None, help="llm or none [env RAGSPINE_QUERY_DECOMPOSE].")
@click.option("--adaptive", default=None, help="rules, llm or none [env RAGSPINE_ADAPTIVE].")
@click.option("--corrective", default=None, help="rules, llm or none [env RAGSPINE_CORRECTIVE].")
def eval_command(
    dataset_dir: Path,
    split: str,
    mode: str | None,
    embedding: str | None,
    analyzer: str | None,
    chunk_chars: int | None,
    overlap_chars: int | None,
    cache: str | None,
    config_file: str | None,
    top_k: int,
    json_path: str | None,
    whole_entries: bool,
    db: str | None,
    reranker: str | None,
    reranker_top_n: int | None,
    glossary: bool,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    transform: str | None = None,
    decompose: str | None = None,
    adaptive: str | None = None,
    corrective: str | None = None,
) -> None:
    """Score retrieval on a BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv).

    By default this measures the product: each corpus entry is written as a file (title, blank
    line, text), ingested as `ragspine ingest` does and searched as `ragspine.open(db).search`
    does, with the product's settings (printed); entries are ranked by their best snippet.
    nDCG@10, Recall@100 and MRR@10 follow trec_eval's conventions.
    """
    from ragspine.eval.dataset import load_beir
    from ragspine.eval.report import format_report
    from ragspine.settings.config import ConfigError

    given_query = _query_flags(llm_base_url, llm_model, transform, decompose, adaptive, corrective)
    if whole_entries:
        _check_whole_entries_flags(cache, reranker, reranker_top_n, chunk_chars, overlap_chars, given_query)
    else:
        _check_product_flags(db, glossary)
    try:
        from ragspine.eval.modes import resolve_mode

        if whole_entries or mode is not None:
            resolve_mode(mode or "auto", embedding)  # a mode that cannot run fails before loading anything
        dataset = load_beir(dataset_dir, split)
        if whole_entries:
            report = _whole_entries(dataset, mode, embedding, analyzer, chunk_chars, overlap_chars, top_k, db, glossary)
        else:
            from ragspine.eval.product import ProductOptions, run_product_eval

            options = ProductOptions(
                mode=mode, embedding=embedding, analyzer=analyzer, chunk_chars=chunk_chars,
                chunk_overlap=overlap_chars, config=config_file, top_k=top_k, cache=cache,
                reranker=reranker, reranker_top_n=reranker_top_n,
                query_flags=tuple(given_query.items()),
            )  # fmt: skip
            report = run_product_eval(dataset, options)
    except (ValueError, ConfigError, PermissionError, FileNotFoundError, ImportError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_report(report))
    if json_path is not None:
        _write_json(report.to_dict(), json_path)


def _query_flags(
    llm_base_url: str | None, llm_model: str | None, transform: str | None, decompose: str | None,
    adaptive: str | None, corrective: str | None,
) -> dict[str, str]:  # fmt: skip
    """The LLM and query-stage options given, as the environment variables they stand for."""
    from ragspine.settings.config import QUERY_STAGE

    stage = {"transform": transform, "decompose": decompose, "adaptive": adaptive, "corrective": corrective}
    query_flags = {"RAGSPINE_LLM_BASE_URL": llm_base_url, "RAGSPINE_LLM_MODEL": llm_model,
                   **{var: stage[name] for name, var in QUERY_STAGE}}  # fmt: skip
    return {k: v for k, v in query_flags.items() if v is not None}


def _check_whole_entries_flags(
    cache: str | None, reranker: str | None, reranker_top_n: int | None, chunk_chars: int | None,
    overlap_chars: int | None, given_query: dict[str, str],
) -> None:  # fmt: skip
    """Refuse (click.UsageError) the product-path options in a --whole-entries run."""
    if cache is not None:
        raise click.UsageError("--cache keeps a product-path workspace; with --whole-entries use --db FILE")
    if reranker is not None or reranker_top_n is not None:
        raise click.UsageError("--reranker applies to the product path; --whole-entries never reranks")
    if overlap_chars is not None and chunk_chars is None:
        raise click.UsageError("--overlap-chars needs --chunk-chars (whole documents have no overlap)")
    if given_query:
        raise click.UsageError("the LLM and query-stage options apply to the product path, not --whole-entries")


def _check_product_flags(db: str | None, glossary: bool) -> None:
    """Refuse (click.UsageError) the --whole-entries options in a product-path run."""
    for given, name in ((db, "--db"), (glossary or None, "--glossary")):
        if given is not None:
            raise click.UsageError(
                f"{name} applies to --whole-entries runs; the default run is the product path "
                "(--cache DIR keeps its workspace; the glossary rewriter is on, as in search)"
            )


def _write_json(report: dict[str, Any], json_path: str) -> None:
    """Write the report as indented JSON to `json_path` ('-': standard output)."""
    text = json.dumps(report, ensure_ascii=False, indent=2)
    if json_path == "-":
        click.echo(text)
        return
    try:
        Path(json_path).write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"--json {json_path}: cannot write ({exc.strerror})") from exc


def _whole_entries(
    dataset: Any, mode: str | None, embedding: str | None, analyzer: str | None, chunk_chars: int | None,
    overlap_chars: int | None, top_k: int, db: str | None, glossary: bool,
) -> Any:  # fmt: skip
    from ragspine.eval.runner import EvalOptions, run_eval
    from ragspine.retrieval.chunking.chunking import DEFAULT_OVERLAP_CHARS

    options = EvalOptions(
        mode=mode or "auto", embedding=embedding, analyzer=analyzer or "auto", chunk_chars=chunk_chars,
        overlap_chars=DEFAULT_OVERLAP_CHARS if overlap_chars is None else overlap_chars,
        glossary=glossary, top_k=top_k, db=db,
    )  # fmt: skip
    return run_eval(dataset, options)
