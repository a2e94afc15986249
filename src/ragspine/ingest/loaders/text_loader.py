"""Plain text (.txt) and Markdown (.md) files.

Invariants: the bytes are decoded by `encoding.decode_bytes` (BOM, UTF-8, GB18030/GBK, Big5,
UTF-16, …). Front matter (`ingest.front_matter`, the one reader: YAML or TOML) is removed from
the text and returned as metadata, for plain text exactly as for Markdown, so a `.txt` that opens
with `---\nsensitivity: RESTRICTED\n---` is labelled by it (and refused when the reader cannot
read a sensitivity key there), never stored at the default label with its front matter. Every
Markdown heading (ATX `# …`, or a setext line underlined with `===`/`---`) outside fenced code
stands as its own paragraph: blank lines are added around it where missing, nothing else changes;
the loaded document's `headings` are those lines' spans (`heading_spans`).
"""

from __future__ import annotations

import re
from pathlib import Path

from ragspine.ingest.encoding import decode_bytes
from ragspine.ingest.loaders.base import LoadedDocument, clean_text, non_blank
from ragspine.ingest.metadata import split_front_matter

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_NOT_PARAGRAPH_TEXT = re.compile(r"^ {0,3}(?:[-+*>|]|\d+[.)]\s|#)")


def load_text(data: bytes, path: Path) -> LoadedDocument:
    """A .txt file: its decoded text, front matter split off as metadata; the title is the file
    name without its suffix."""
    decoded = decode_bytes(data)
    front, body = split_front_matter(clean_text(decoded.text))
    text = non_blank(body, path.name)
    return LoadedDocument(text, title=path.stem, loader="text", encoding=decoded.encoding, metadata=front)


def load_markdown(data: bytes, path: Path) -> LoadedDocument:
    """A .md file: front matter split off, headings as their own paragraphs, first heading as title."""
    decoded = decode_bytes(data)
    front, body = split_front_matter(clean_text(decoded.text))
    text, headings = separate_headings(body)
    return LoadedDocument(
        non_blank(text, path.name),
        title=headings[0] if headings else path.stem,
        loader="markdown",
        encoding=decoded.encoding,
        metadata=front,
        headings=heading_spans(text),
    )


def heading_spans(text: str) -> tuple[tuple[int, int, int], ...]:
    """`(start, end, level)` of every Markdown heading line of `text` outside fenced code: ATX
    `#`… (level = the number of #), setext text over `===` (1) or `---` (2).

    >>> heading_spans("# A\\n\\nbody\\n\\nB\\n---\\n")
    ((0, 3, 1), (11, 12, 2))
    """
    lines = text.split("\n")
    out: list[tuple[int, int, int]] = []
    fence: str | None = None
    position = 0
    for i, line in enumerate(lines):
        code, fence = _fenced(line, fence)
        level = None if code else _heading_level(lines, i)
        if level is not None:
            out.append((position + len(line) - len(line.lstrip()), position + len(line.rstrip()), level))
        position += len(line) + 1
    return tuple(out)


def separate_headings(text: str) -> tuple[str, list[str]]:
    """`text` with a blank line before and after every heading, and the headings' texts."""
    lines = text.split("\n")
    out: list[str] = []
    headings: list[str] = []
    fence: str | None = None
    blank_after = False
    for i, line in enumerate(lines):
        if blank_after and line.strip():
            out.append("")
        blank_after = False
        code, fence = _fenced(line, fence)
        if code:
            out.append(line)
            continue
        atx = _ATX.match(line)
        if atx or _is_setext_text(lines, i):
            if out and out[-1].strip():
                out.append("")
            if atx and atx.group(2):
                headings.append(atx.group(2))
            elif not atx:
                headings.append(line.strip())
            out.append(line)
            blank_after = bool(atx)
            continue
        out.append(line)
        blank_after = bool(_SETEXT_UNDERLINE.match(line)) and i > 0 and _is_setext_text(lines, i - 1)
    return "\n".join(out), headings


def _fenced(line: str, fence: str | None) -> tuple[bool, str | None]:
    """Whether `line` is fenced code (its opening or closing fence included), given the fence
    open before it (None: none), and the fence open after it."""
    opener = _FENCE.match(line)
    if fence is not None:
        closes = opener is not None and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence)
        return True, None if closes else fence
    return (True, opener.group(1)) if opener else (False, None)


def _heading_level(lines: list[str], i: int) -> int | None:
    """Line i's level as a Markdown heading with text (ATX: its number of #; setext: 1 over
    `===`, 2 over `---`), or None when it is not one."""
    if (atx := _ATX.match(lines[i])) and atx.group(2):
        return len(atx.group(1))
    if _is_setext_text(lines, i):
        return 1 if lines[i + 1].strip().startswith("=") else 2
    return None


def _is_setext_text(lines: list[str], i: int) -> bool:
    """Line i is the text of a setext heading: paragraph text directly above an underline."""
    if i + 1 >= len(lines) or not lines[i].strip() or _NOT_PARAGRAPH_TEXT.match(lines[i]):
        return False
    if i > 0 and lines[i - 1].strip() and not _ATX.match(lines[i - 1]):
        return False  # a multi-line paragraph; leave it whole
    return bool(_SETEXT_UNDERLINE.match(lines[i + 1]))
