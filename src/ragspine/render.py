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
