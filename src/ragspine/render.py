"""Plain-text rendering for people (the CLI and the demo): snippet dicts, embedding reports."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any


def dropped_note(filters_dropped: Sequence[str]) -> str:
    """The line that says a search ran without some of its filters ("" when it did not).

    >>> dropped_note(["entity", "period"])
    'filters dropped: entity, period matched nothing, so these results ignore them (RAGSPINE_FILTER_FALLBACK=retry)'
    """
    if not filters_dropped:
        return ""
    return (f"filters dropped: {', '.join(filters_dropped)} matched nothing, so these results ignore them "
            "(RAGSPINE_FILTER_FALLBACK=retry)")  # fmt: skip


def format_snippets(snippets: Sequence[Mapping[str, Any]], *, width: int = 100) -> str:
    """Ranked, cited snippets as readable text; first, when the search dropped filters (a
    `SearchResults` whose `filters_dropped` is not empty), the line that says so."""
    note = dropped_note(getattr(snippets, "filters_dropped", ()))
    if not snippets:
        return "no results"
    blocks = [note] if note else []
    for rank, snippet in enumerate(snippets, start=1):
        scores = snippet["scores"]
        head = (
            f"{rank}. {snippet['title'] or snippet['doc_id']}  [{snippet['source_locator']}]"
            + (f"  fused={scores['fused']:.4f} visual={scores['visual']:.2f}  (page pointer, not a citation)"
               if snippet.get("is_visual") else f"  fused={scores['fused']:.4f} bm25={scores['bm25']:.2f}")
        )  # fmt: skip
        body = " ".join(snippet["text"].split())
        body = body if len(body) <= 320 else body[:320] + " …"
        blocks.append(head + "\n" + textwrap.indent(textwrap.fill(body, width - 4), "    "))
    return "\n".join(blocks)


def format_embed_report(report: Any) -> str:
    """One line from an `EmbedReport` (what `ragspine ingest` and `ragspine embed` print)."""
    rate = f" ({report.embedded / report.seconds:.1f} chunks/s)" if report.embedded and report.seconds > 0 else ""
    return (
        f"embedded {report.embedded} chunk(s) in {report.seconds:.1f}s{rate}; already embedded: "
        f"{report.present}; lexical-only (RESTRICTED, remote backend): {report.lexical_only}; "
        f"stale vectors removed: {report.removed}"
        + (f"; damaged vectors re-embedded: {report.repaired}" if report.repaired else "")
    )


def format_ingest_report(
    report: Any, *, strict: bool = False, rebuilt: str | None = None
) -> tuple[list[str], list[str], int]:
    """What `ragspine ingest` prints for its `IngestRunReport`: (lines for stderr: failures and
    warnings; lines for stdout: the rebuild line, headline, summary table, the embedding and page
    passes, and the exit line; the exit status). The status is `report.exit_status(strict)`
    (0 when every failure is a known one, unless `strict`), or 1 when the page pass failed."""
    errors = [f"failed: {failure.path}: {failure.reason}" for failure in report.failures]
    errors += [f"warning: {warning.path}: {warning.reason}" for warning in report.warnings]
    lines = [rebuilt] if rebuilt else []
    lines += [report.headline(), report.summary_table()]
    if report.embedding is not None:
        lines.append(format_embed_report(report.embedding))
    status = report.exit_status(strict=strict)
    if report.visual is not None:
        for kind, items in (("failed", report.visual.failures), ("warning", report.visual.warnings)):
            errors += [f"{kind}: {item.path}: {item.reason}" for item in items]
        lines.append(report.visual.headline())
        if report.visual.failures:
            return errors, [*lines, "exit 1: the page index pass failed"], 1
    lines.append(report.exit_line(strict=strict))
    return errors, lines, status
