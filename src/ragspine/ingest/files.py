"""Find the files to ingest under the paths a user gives, and the doc_id each will have.

Invariants: `doc_id` is the file's path relative to the folder it was found under (POSIX
separators), so it is stable across runs and machines; a file named directly gets its own name.
Hidden entries (a name starting with "."), Office lock files ("~$…") and files of unsupported
types are skipped in folders; `--include`/`--exclude` globs (see `globs`) filter folder walks
only, never a file named directly. A path that cannot be used becomes a `FileFailure` with a
reason, never an exception that stops the batch. Order is sorted, so runs are reproducible.
Symlinks inside a walked folder, to files and to folders alike, are never followed: a target
inside the folder is ingested under its own path (once, no duplicate), a target outside it is
left out with a warning naming the link and its target (name it on the command line to ingest
it). A path given on the command line is used as given, symlink or not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragspine.ingest.globs import any_match
from ragspine.ingest.loaders import SUPPORTED_SUFFIXES


@dataclass(frozen=True)
class SourceFile:
    """A file to ingest, the doc_id it will have, and the folder that doc_id is relative to."""

    path: Path
    doc_id: str
    root: Path


@dataclass(frozen=True)
class FileFailure:
    """A path that could not be ingested, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class Discovery:
    """What `discover` found: files to ingest, paths that failed, and the folders walked."""

    files: list[SourceFile]
    failures: list[FileFailure]
    roots: list[Path]
    warnings: list[FileFailure] = field(default_factory=list)


def discover(
    paths: Iterable[Path], *, include: Sequence[str] = (), exclude: Sequence[str] = ()
) -> Discovery:
    """Supported files under each path (folders walked recursively); see the module docstring."""
    found: list[SourceFile] = []
    failures: list[FileFailure] = []
    roots: list[Path] = []
    warnings: list[FileFailure] = []
    for path in paths:
        if path.is_dir():
            root = path.resolve()
            roots.append(root)
            found.extend(_walk(root, path, include, exclude, warnings))
        elif not path.exists():
            failures.append(FileFailure(path, "no such file or folder"))
        elif path.suffix.lower() not in SUPPORTED_SUFFIXES:
            supported = ", ".join(SUPPORTED_SUFFIXES)
            failures.append(FileFailure(path, f"unsupported file type (supported: {supported})"))
        else:
            found.append(SourceFile(path, path.name, path.resolve().parent))
    return Discovery(found, failures, roots, warnings)


def _walk(
    root: Path, given: Path, include: Sequence[str], exclude: Sequence[str], warnings: list[FileFailure]
) -> Iterator[SourceFile]:
    for folder, dirs, names in os.walk(given):  # symlinked folders are listed, never entered
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in dirs:
            _warn_if_leaving(Path(folder) / name, root, warnings)
        for name in sorted(names):
            if name.startswith((".", "~$")) or Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
                continue
            path = Path(folder) / name
            if _warn_if_leaving(path, root, warnings) or path.is_symlink():
                continue
            doc_id = path.relative_to(given).as_posix()
            if include and not any_match(include, doc_id):
                continue
            if exclude and any_match(exclude, doc_id):
                continue
            yield SourceFile(path, doc_id, root)


def _warn_if_leaving(path: Path, root: Path, warnings: list[FileFailure]) -> bool:
    """True (and a warning) when `path` is a symlink whose target lies outside `root`."""
    if not path.is_symlink():
        return False
    target = path.resolve()
    if target == root or target.is_relative_to(root):
        return False
    warnings.append(FileFailure(path, f"symlink to {target}, outside the folder: not followed"))
    return True
