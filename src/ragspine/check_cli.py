"""`ragspine check`: a thin click wrapper over `store_check.check_store` (docs/operations.md).

Imports only click and the CLI's shared options at module load (the CLI registers this command at
start-up). One line per file (or `--json`); exit 1 when something could not be repaired, and a
library error (no store there, a bad config) is a one-line message, exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ragspine.cli_common import config_option, db_option, existing_store, user_errors


@click.command("check")
@db_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check_command(db: str | None, config_file: Path | None, as_json: bool) -> None:
    """Verify every file beside the store and repair the derived ones.

    Checks chunks.db (SQLite integrity_check, the document registry), the vectors file (every
    record's checksum), the .matrix/.align/.hnsw caches, the .bm25 index (every file's CRC-32),
    the graph, the RAPTOR tree and the page index; rebuilds a damaged cache or index from its
    source of truth and re-embeds damaged vector records. One line per file: status, kind, path,
    what was verified or done, then (on stderr) what the lexical bridge resolves to and why.
    Exit 1 when something could not be repaired.
    """
    from dataclasses import replace

    from ragspine.assembly import load_settings
    from ragspine.retrieval.pipeline.bridge import resolve_bridge
    from ragspine.store_check import check_store

    with user_errors():
        settings = load_settings(config_file=config_file, flags={"RAGSPINE_DB": db})
        report = check_store(replace(settings, db=existing_store(settings.db)))
        bridge, why = resolve_bridge(settings.lexical_bridge)
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        for found in report.files:
            click.echo(found.line())
        failed = sum(f.status == "damaged" for f in report.files)
        repaired = sum(f.status == "repaired" for f in report.files)
        click.echo(f"{len(report.files)} files checked, {repaired} repaired, {failed} could not be repaired", err=True)
        click.echo(f"lexical bridge: {bridge} ({why})", err=True)  # what RAGSPINE_LEXICAL_BRIDGE resolves to
    if report.failed:
        raise SystemExit(1)
