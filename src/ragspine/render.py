"""Plain-text rendering of snippet dicts for people (the CLI and the demo)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any


def format_snippets(snippets: Sequence[Mapping[str, Any]], *, width: int = 100) -> str:
    """Ranked, cited snippets as readable text."""
    if not snippets:
        return "no results"
    blocks = []
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
