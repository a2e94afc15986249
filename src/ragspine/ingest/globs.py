"""Glob matching for `--include`/`--exclude` and sensitivity rules, over `doc_id` paths.

Invariant: one meaning everywhere, case-insensitive, on POSIX paths relative to the ingest root:
`*` and `?` match any characters (including `/`), `[...]` a set; a pattern without `/` also
matches the file name alone (`*.pdf` matches `a/b/c.pdf`); a leading `**/` also matches at the
top level (`**/x.md` matches `x.md`); a trailing `/` matches everything under that folder.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase


def glob_match(pattern: str, path: str) -> bool:
    """True when `pattern` matches the relative POSIX `path` per the module docstring."""
    pattern, path = pattern.strip().lower(), path.lower()
    if pattern.endswith("/"):
        pattern += "*"
    if fnmatchcase(path, pattern):
        return True
    if "/" not in pattern:
        return fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    return pattern.startswith("**/") and fnmatchcase(path, pattern[3:])


def any_match(patterns: Iterable[str], path: str) -> bool:
    """True when any of `patterns` matches `path`."""
    return any(glob_match(pattern, path) for pattern in patterns)
