"""`ragspine graph …`: the relation graph's commands, each one call on `Workspace.graph`
(`ragspine.graph.GraphService`) printed as JSON (a build prints one line).

Invariants: every command takes --db, --config, --relations and --extractor (`graph_command`);
bad input is one line and exit 1 (`cli_common.user_errors`); only click is imported at load.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import click

from ragspine.cli_common import config_option, db_option, store_workspace, user_errors


@click.group()
def graph() -> None:
    """The relation graph beside the store: roll-ups, peers, derivation traces (docs/graph.md)."""


def graph_command(name: str) -> Any:
    """A `ragspine graph NAME` command: --db, --config, --relations, --extractor, then its own
    options; the decorated function gets the `GraphService` and returns a line or a JSON value."""

    def wrap(func: Any) -> Any:
        @functools.wraps(func)
        def command(db: str | None, config_file: Path | None, relations: Path | None, extractor: str | None,
                    **kwargs: Any) -> None:  # fmt: skip
            from ragspine.assembly import load_settings

            flags = {"RAGSPINE_DB": db, "RAGSPINE_GRAPH_RELATIONS": relations, "RAGSPINE_RELATION_EXTRACTOR": extractor}
            with user_errors():
                settings = load_settings(config_file=config_file, flags=flags)
                with store_workspace(settings) as workspace:
                    out = func(workspace.graph, **kwargs)
            click.echo(out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, indent=2))

        for option in reversed([
            db_option, config_option,
            click.option("--relations", default=None, type=click.Path(dir_okay=False, path_type=Path),
                         help="Relations file, YAML or CSV [env RAGSPINE_GRAPH_RELATIONS]."),
            click.option("--extractor", default=None,
                         help="Relation extractor: none, cooccurrence, llm [env RAGSPINE_RELATION_EXTRACTOR]."),
        ]):  # fmt: skip
            command = option(command)
        return graph.command(name)(command)

    return wrap


@graph_command("build")
@click.option("--communities", is_flag=True, help="Also build GraphRAG community summaries ([graph] extra).")
def graph_build(service: Any, communities: bool) -> str:
    """Build the graph from the store's chunks, the relations file and the extractor; store it."""
    r = service.build(communities=communities)
    return (f"built relation graph: {r.nodes} nodes, {r.edges} edges, {r.bytes} bytes, extractor {r.extractor}"
            f"{f', {r.communities} communities' if communities else ''} in {r.seconds:.2f}s -> {service.graph.path}")


@graph_command("show")
def graph_show(service: Any) -> Any:
    """Nodes per kind, edges per type, and whether the store changed since the build."""
    return service.show()


@graph_command("entities")
@click.option("--contains", default=None, help="Only entities whose name or an alias contains this (any case).")
@click.option("--limit", default=1000, show_default=True, type=click.IntRange(min=1), help="At most this many.")
def graph_entities(service: Any, contains: str | None, limit: int) -> Any:
    """The entities the graph knows (names to pass to rollup, peers, trace), each with its aliases
    and how many visible documents mention it."""
    return service.entities(contains=contains, limit=limit)


@graph_command("neighbors")
@click.argument("node")
@click.option("--type", "types", multiple=True, help="Only edges of this type (repeatable).")
def graph_neighbors(service: Any, node: str, types: tuple[str, ...]) -> Any:
    """The edges touching NODE (an entity name, or kind:name), with citations."""
    return service.neighbors(node, list(types) or None)


@graph_command("trace")
@click.argument("source")
@click.argument("target")
@click.option("--type", "edge_type", default=None, help="Only edges of this type.")
@click.option("--max-hops", default=None, type=click.IntRange(min=1),
              help="Longest path to look for when no edge joins the two [default 4].")  # fmt: skip
def graph_trace(service: Any, source: str, target: str, edge_type: str | None, max_hops: int | None) -> Any:
    """How SOURCE and TARGET are related: the edges between them, else the shortest path of
    edges (through entities and documents), each edge with its file line or cited chunks."""
    return service.trace(source, target, edge_type, **({"max_hops": max_hops} if max_hops else {}))


@graph_command("rollup")
@click.argument("entity")
@click.option("--period", default=None, help="Only documents of this period.")
@click.option("--query", default=None, help="Also search this question, restricted to the roll-up's entities.")
@click.option("--top-k", default=10, show_default=True, type=int, help="Snippets the search returns.")
def graph_rollup(service: Any, entity: str, period: str | None, query: str | None, top_k: int) -> Any:
    """ENTITY and all its subsidiaries, their documents, cited (and a restricted search)."""
    return service.rollup(entity, period=period, query=query, top_k=top_k)


@graph_command("peers")
@click.argument("entity")
@click.option("--period", default=None, help="Only documents of this period.")
def graph_peers(service: Any, entity: str, period: str | None) -> Any:
    """ENTITY and its peers, each with its documents (in PERIOD), cited."""
    return service.peers(entity, period=period)


@graph_command("global")
@click.argument("question")
def graph_global(service: Any, question: str) -> Any:
    """Answer a broad QUESTION from the community summaries (GraphRAG), citing member chunks."""
    return service.global_answer(question)
