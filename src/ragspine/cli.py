"""The `ragspine` command line: thin wrappers over the public Python API.

Each command opens the store, makes one API call per item, and turns library errors into a
one-line message and a non-zero exit (never a traceback for bad input).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ragspine import __version__
from ragspine.config import ConfigError, load_settings
from ragspine.retrieval.chunking.chunk_store import NotAChunkStoreError
from ragspine.render import format_snippets
from ragspine.retrieval.chunking.chunking import FILTER_FIELDS


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ragspine")
def main() -> None:
    """RAGSpine: cited, RESTRICTED-free retrieval over Chinese and English documents."""


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn the library's input errors into a clean CLI error (exit 1)."""
    try:
        yield
    except (ValueError, ConfigError, NotAChunkStoreError, PermissionError) as exc:
        raise click.ClickException(str(exc)) from exc


def _db_path(db: str | None) -> str:
    with _user_errors():
        return db or load_settings().db


def _meta_option(name: str) -> Any:
    return click.option(f"--{name}", default=None, help=f"{name} stored on every ingested document.")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--db", default=None, help="Chunk store path [env RAGSPINE_DB; default .ragspine/chunks.db].")
@_meta_option("entity")
@_meta_option("period")
@_meta_option("topic")
@_meta_option("geography")
@click.option("--language", default=None, help="Document language; detected (zh/en) when not given.")
@click.option("--sensitivity", default="INTERNAL", show_default=True, help="Sensitivity label, e.g. PUBLIC, INTERNAL, RESTRICTED.")
def ingest(paths: tuple[Path, ...], db: str | None, **meta: str | None) -> None:
    """Ingest .txt and .md files, or folders of them (doc_id = path relative to the folder)."""
    from ragspine.ingest.pipeline import ingest_paths

    with _user_errors():
        report = ingest_paths(list(paths), _db_path(db), **meta)
    for failure in report.failures:
        click.echo(f"failed: {failure.path}: {failure.reason}", err=True)
    click.echo(
        f"ingested {len(report.ingested)} document(s), {report.chunks} chunk(s) into {report.db}; "
        f"failed: {len(report.failures)}"
    )
    if report.failures:
        raise SystemExit(1)


@main.command()
@click.argument("query")
@click.option("--db", default=None, help="Chunk store path [env RAGSPINE_DB; default .ragspine/chunks.db].")
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE",
              help=f"Metadata filter, repeatable; keys: {', '.join(FILTER_FIELDS)}.")  # fmt: skip
@click.option("--top-k", default=10, show_default=True, type=click.IntRange(min=1), help="Snippets to return.")
@click.option("--json", "as_json", is_flag=True, help="Print the snippet dicts as JSON.")
def search(query: str, db: str | None, filters: tuple[str, ...], top_k: int, as_json: bool) -> None:
    """Search the store; prints ranked snippets with their citations (RESTRICTED never shown)."""
    from ragspine.retrieval.link.narrative_link import build_narrative_retriever

    path = _db_path(db)
    with _user_errors():
        parsed = _parse_filters(filters)
        if not query.strip():
            raise ValueError("query is empty: give some words to search for")
        if path != ":memory:" and not Path(path).is_file():
            raise ValueError(f"no chunk store at {path}; create one with `ragspine ingest PATH --db {path}`")
        retriever, store = build_narrative_retriever(path)
        try:
            snippets = retriever.retrieve(query, filters=parsed, top_k=top_k)
        finally:
            store.close()
    if as_json:
        click.echo(json.dumps(snippets, ensure_ascii=False, indent=2))
    else:
        click.echo(format_snippets(snippets))


@main.command()
@click.option("--db", default=None, help="Keep the demo store at this path (default: a temporary folder).")
def demo(db: str | None) -> None:
    """Ingest the bundled sample corpus and run three example questions."""
    from ragspine.demo import run_demo

    with _user_errors():
        run_demo(db, echo=click.echo)


def _parse_filters(items: tuple[str, ...]) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--filter {item!r}: expected KEY=VALUE, e.g. --filter entity=ACME_CN")
        parsed[key.strip()] = value.strip()
    return parsed
