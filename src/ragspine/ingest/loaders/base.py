"""What a loader returns, and how a loader asks for an optional dependency.

Invariants: `LoadedDocument.text` is exactly the text that is chunked and cited (locator offsets
count characters of it), with `\\n` line ends and no NUL characters, and it is never blank (a
loader raises ValueError with a reason instead). `page_spans`, when given, are ordered,
non-overlapping `(start, end)` spans of that text, one per page that has text, and
`page_numbers[i]` is the 1-based page number of `page_spans[i]`. `headings`, when given, are
ordered `(start, end, level)` spans of the heading lines the format marks (Markdown `#` and
setext headings, HTML `<h*>`, Word heading styles); the structure-aware chunkers cut there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragspine.extras import MissingExtraError as MissingExtraError, require as require  # re-exported for the loaders

Span = tuple[int, int]


@dataclass(frozen=True)
class LoadedDocument:
    """One file turned into plain text plus what the format tells about it."""

    text: str
    title: str = ""
    loader: str = ""
    encoding: str = ""
    page_spans: tuple[Span, ...] = ()
    page_numbers: tuple[int, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # Heading lines the format marks, `(start, end, level)` in `text` (level 0: a title style).
    headings: tuple[tuple[int, int, int], ...] = ()


def clean_text(text: str) -> str:
    """Line ends as `\\n`, NUL characters removed (a SQLite TEXT column and a prompt both choke on them)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")


def non_blank(text: str, what: str) -> str:
    """`text` unchanged, or ValueError when it holds no visible character."""
    if not text.strip():
        raise ValueError(f"{what} has no text")
    return text
