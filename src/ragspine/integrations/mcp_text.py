"""The text an LLM host reads from each MCP tool: compact, numbered, cited (the structured
content beside it keeps every field for the clients that read it).

Invariants:
- The first line of a search or an answer says how many passages came back and whether the
  filters held: when they were dropped (the response's top-level `filters_dropped`), it says so
  and names them, before any passage.
- Each passage is `[n] title [source_locator]`, its relevance (the snippet's `relevance` in
  [0, 1] when present, to 2 decimals; else the fused score, to 3 significant digits) and its
  chunk_id, then its text; nothing else (no lineage, no per-channel scores, no JSON).
- Every function reads mappings with `.get`: a key a newer response adds is ignored, a key an
  older one lacks is left out. Only the standard library is imported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["answer_text", "chunk_text", "citation", "libraries_text", "search_text"]


def citation(passage: Mapping[str, Any]) -> str:
    """How to cite a passage: `title [source_locator]` (the doc_id when it has no title).

    >>> citation({"title": "", "doc_id": "memo", "source_locator": "memo#p1@0-40"})
    'memo [memo#p1@0-40]'
    """
    return f"{passage.get('title') or passage.get('doc_id', '')} [{passage.get('source_locator', '')}]"


def search_text(response: Mapping[str, Any]) -> str:
    """The `search` tool's text: a first line on the count and the filters, then the passages.

    >>> print(search_text({"library": "default", "filters_dropped": ["entity"], "passages": [
    ...     {"rank": 1, "title": "Borealis 2024", "source_locator": "b#p2@0-61", "chunk_id": "b:0001:9f",
    ...      "relevance": 0.4321, "text": "Gross margin fell in 2024.", "scores": {"fused": 2.37}}]}))
    1 passage, NOT filtered: no passage matched the filter on entity, so it was dropped.
    <BLANKLINE>
    [1] Borealis 2024 [b#p2@0-61] · relevance 0.43 · chunk_id b:0001:9f
    Gross margin fell in 2024.
    """
    passages = response.get("passages") or []
    return _head(len(passages), response) + "".join(_passage(n, p) for n, p in enumerate(passages, start=1))


def answer_text(response: Mapping[str, Any]) -> str:
    """The `ask` tool's text: the first line as for search, the answer, then its numbered sources.

    >>> print(answer_text({"answer": "Margins fell [1].", "mode": "extractive", "note": "", "citations": [
    ...     {"ref": 1, "title": "Borealis 2024", "source_locator": "b#p2@0-61", "chunk_id": "b:0001:9f"}]}))
    Answer (extractive) from 1 passage.
    <BLANKLINE>
    Margins fell [1].
    <BLANKLINE>
    Sources:
    [1] Borealis 2024 [b#p2@0-61] · chunk_id b:0001:9f
    """
    cited = response.get("citations") or []
    head = _head(len(cited), response, what=f"Answer ({response.get('mode', '')}) from ")
    note = f"Note: {response['note']}\n" if response.get("note") else ""
    sources = "".join(f"\n{_label(c.get('ref', n), c)}" for n, c in enumerate(cited, start=1))
    return f"{head}\n{note}{response.get('answer', '')}\n" + (f"\nSources:{sources}" if cited else "")


def chunk_text(response: Mapping[str, Any]) -> str:
    """The `get_chunk` tool's text: its citation and chunk_id, then the passage."""
    return f"{citation(response)} · chunk_id {response.get('chunk_id', '')}\n{_text(response)}"


def libraries_text(response: Mapping[str, Any]) -> str:
    """The `list_libraries` tool's text: one line per library."""
    lines = [
        f"{lib.get('name')}: {lib.get('description')} ({lib.get('documents')} documents, "
        f"{lib.get('chunks')} chunks, retrieval {lib.get('retrieval')})"
        for lib in response.get("libraries") or []
    ]
    return "\n".join(lines) or "No library."


def _head(count: int, response: Mapping[str, Any], *, what: str = "") -> str:
    """The first line: the count, and whether the filters held; a blank line after it."""
    noun = f"{count} passage{'' if count == 1 else 's'}"
    library = response.get("library")
    where = f" in library {library}" if library and library != "default" else ""
    dropped: Sequence[str] = response.get("filters_dropped") or []
    if dropped:
        pronoun = "it was" if len(dropped) == 1 else "they were"
        return (f"{what}{noun}{where}, NOT filtered: no passage matched the filter on "
                f"{', '.join(dropped)}, so {pronoun} dropped.\n")  # fmt: skip
    if count == 0:
        return f"No passage matched{where}{_filters(response)}.\n"
    return f"{what}{noun}{where}{_filters(response)}.\n"


def _filters(response: Mapping[str, Any]) -> str:
    where = response.get("where")
    if not where:
        return ""
    shown = where if isinstance(where, str) else json.dumps(where, ensure_ascii=False, separators=(",", ":"))
    return f", filtered by {shown}"


def _passage(n: int, passage: Mapping[str, Any]) -> str:
    return f"\n{_label(passage.get('rank', n), passage)}\n{_text(passage)}\n"


def _label(n: Any, passage: Mapping[str, Any]) -> str:
    parts = [f"[{n}] {citation(passage)}"]
    score = _score(passage)
    if score is not None:
        parts.append(score)
    if passage.get("chunk_id"):
        parts.append(f"chunk_id {passage['chunk_id']}")
    return " · ".join(parts)


def _score(passage: Mapping[str, Any]) -> str | None:
    relevance = passage.get("relevance")
    if isinstance(relevance, int | float):
        return f"relevance {relevance:.2f}"
    fused = (passage.get("scores") or {}).get("fused")
    return f"score {fused:.3g}" if isinstance(fused, int | float) else None


def _text(passage: Mapping[str, Any]) -> str:
    """The passage's text with runs of blank lines closed up (the text an LLM needs, no padding)."""
    lines = [line.rstrip() for line in str(passage.get("text", "")).strip().splitlines()]
    return "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1]))
