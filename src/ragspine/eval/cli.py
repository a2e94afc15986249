"""`ragspine eval`: a thin click wrapper over `load_beir` + `run_eval` + `format_report`.

Imports only click at module load (the CLI registers this command at start-up); the retrieval
stack is imported when the command runs. Library errors become a one-line message, exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

MODES = ("auto", "bm25", "hybrid", "vector")
ANALYZERS = ("auto", "spec", "en-stem")


@click.command("eval")
@click.argument("dataset_dir", type=click.Path(path_type=Path))
@click.option("--split", required=True, help="Qrels split to score: qrels/SPLIT.tsv (e.g. test, dev, train).")
@click.option("--mode", type=click.Choice(MODES, case_sensitive=False), default="auto", show_default=True,
              help="Retrieval mode; auto = hybrid when the embedding spec resolves to a backend, else "
                   "bm25. hybrid and vector need one.")  # fmt: skip
@click.option("--embedding", default=None, metavar="SPEC",
              help="Embedding backend (none, auto, e5, onnx, openai, ...: make_embedding_backend's names); "
                   "default: RAGSPINE_EMBEDDING, as for search and serve.")  # fmt: skip
@click.option("--db", default=None, type=click.Path(dir_okay=False),
              help="Keep the ingested store here and reuse it on the next run over the same corpus "
                   "(default: in memory; RAGSPINE_DB is not used).")  # fmt: skip
@click.option("--top-k", default=100, show_default=True, type=click.IntRange(min=1),
              help="Documents ranked per query (recall@100 counts within these).")  # fmt: skip
@click.option("--json", "json_path", default=None, metavar="PATH",
              help="Also write the results as a JSON object to PATH ('-' for standard output).")  # fmt: skip
@click.option("--analyzer", type=click.Choice(ANALYZERS, case_sensitive=False), default="auto", show_default=True,
              help="Index/query analyzer: spec (the specification's tokenizer), en-stem (+ Snowball English "
                   "stemmer, extra [stem]), auto (en-stem when installed, else spec).")  # fmt: skip
@click.option("--chunk-chars", default=None, type=click.IntRange(min=1),
              help="Chunk corpus entries with this budget (the specification's default is 480); "
                   "default: each entry whole, as one chunk.")  # fmt: skip
@click.option("--overlap-chars", default=None, type=click.IntRange(min=0),
              help="Chunk overlap with --chunk-chars [default: 80, the specification's].")  # fmt: skip
@click.option("--glossary", is_flag=True,
              help="Expand queries with the configured glossary (off: measured no effect on the tuning splits).")  # fmt: skip
def eval_command(
    dataset_dir: Path,
    split: str,
    mode: str,
    embedding: str | None,
    db: str | None,
    top_k: int,
    json_path: str | None,
    analyzer: str,
    chunk_chars: int | None,
    overlap_chars: int | None,
    glossary: bool,
) -> None:
    """Score retrieval on a BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv).

    Each corpus entry is one document (title + blank line + text); documents are ranked by their
    best chunk; nDCG@10, Recall@100 and MRR@10 follow trec_eval's conventions.
    """
    from ragspine.settings.config import ConfigError
    from ragspine.eval.dataset import load_beir
    from ragspine.eval.report import format_report
    from ragspine.eval.runner import EvalOptions, run_eval
    from ragspine.retrieval.chunking.chunking import DEFAULT_OVERLAP_CHARS

    if overlap_chars is not None and chunk_chars is None:
        raise click.UsageError("--overlap-chars needs --chunk-chars (whole documents have no overlap)")
    options = EvalOptions(
        mode=mode,
        embedding=embedding,
        analyzer=analyzer,
        chunk_chars=chunk_chars,
        overlap_chars=DEFAULT_OVERLAP_CHARS if overlap_chars is None else overlap_chars,
        glossary=glossary,
        top_k=top_k,
        db=db,
    )
    try:
        from ragspine.eval.modes import resolve_mode

        resolve_mode(mode, embedding)  # a mode that cannot run fails before loading anything
        dataset = load_beir(dataset_dir, split)
        report = run_eval(dataset, options)
    except (ValueError, ConfigError, PermissionError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_report(report))
    if json_path is not None:
        text = json.dumps(report.to_dict(), ensure_ascii=False, indent=2)
        if json_path == "-":
            click.echo(text)
        else:
            try:
                Path(json_path).write_text(text + "\n", encoding="utf-8")
            except OSError as exc:
                raise click.ClickException(f"--json {json_path}: cannot write ({exc.strerror})") from exc
