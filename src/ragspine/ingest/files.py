"""Find text files under the paths a user gives and read them as documents.

Invariants: `doc_id` is the file's path relative to the root it was found under (POSIX
separators), so it is stable across runs and machines; a file that cannot be read becomes a
`FileFailure` with a reason, never an exception that stops the batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ragspine.retrieval.lexical.tokenize import CJK_RUN

SUPPORTED_SUFFIXES = (".md", ".txt")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_LATIN_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class SourceFile:
    """A file to ingest and the doc_id it will have."""

    path: Path
    doc_id: str


@dataclass(frozen=True)
class FileFailure:
    """A path that could not be ingested, and why."""

    path: Path
    reason: str


def discover(paths: Iterable[Path]) -> tuple[list[SourceFile], list[FileFailure]]:
    """Supported files under each path (folders walked recursively, hidden entries skipped)."""
    found: list[SourceFile] = []
    failures: list[FileFailure] = []
    for path in paths:
        if path.is_dir():
            found.extend(_walk(path))
        elif not path.exists():
            failures.append(FileFailure(path, "no such file or folder"))
        elif path.suffix.lower() not in SUPPORTED_SUFFIXES:
            supported = ", ".join(SUPPORTED_SUFFIXES)
            failures.append(FileFailure(path, f"unsupported file type (supported: {supported})"))
        else:
            found.append(SourceFile(path, path.name))
    return found, failures


def read_text(path: Path) -> str:
    """The file's text (UTF-8, with or without BOM); ValueError with a reason otherwise."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start}); convert it to UTF-8") from exc
    if not text.strip():
        raise ValueError("file has no text")
    return text


def guess_title(text: str, path: Path) -> str:
    """The first Markdown heading, else the file name without its suffix."""
    match = _HEADING.search(text)
    return match.group(1) if match else path.stem


def detect_language(text: str) -> str:
    """'zh' when CJK characters are at least a fifth of (CJK characters + Latin words), 'en'
    for Latin text, '' when there is neither."""
    han = sum(len(run) for run in CJK_RUN.findall(text))
    latin_words = len(_LATIN_WORD.findall(text))
    if han == 0 and latin_words == 0:
        return ""
    return "zh" if han >= 0.2 * (han + latin_words) else "en"


def _walk(root: Path) -> Iterator[SourceFile]:
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if path.is_file() and path.suffix.lower() in SUPPORTED_SUFFIXES:
            yield SourceFile(path, relative.as_posix())
