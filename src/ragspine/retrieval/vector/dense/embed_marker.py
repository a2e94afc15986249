"""Whether an embed run is writing a vectors file now: `<vectors>.embedding`, locked while it runs.

Invariants: a bulk embed (`NarrativeIndex.embed_pending`: `ragspine embed`, the embedding pass
of `ragspine ingest`, `Workspace.embed_pending`) holds a shared `flock` on the marker beside the
vectors file for as long as it runs (taken blocking: runs overlap, and a search's check only
delays a run's start by the check's microseconds, so no run goes unmarked). A search asks
(`embedding_in_progress`) by trying an exclusive lock without waiting: it fails while any run
holds the marker. A run removes the marker at its end only if it can then take the exclusive lock
without waiting (no other run holds it), and only the file it locked (a marker replaced since it
was opened is opened again before the run starts). A marker left by a killed run is not locked,
so it never reads as a run in progress. Where `flock` is missing (Windows) nothing is marked and
no run reads as in progress. The marker never changes what is embedded or ranked: it only
chooses the words a search uses for the chunks that have no vector yet (`vector_note`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

MARKER_SUFFIX = ".embedding"  # beside the vectors file: `<db>.vectors.sqlite.embedding`


@contextlib.contextmanager
def embedding_run(vectors_path: str | None) -> Iterator[None]:
    """Mark `vectors_path` as being embedded into for the duration of the block (nothing for an
    in-memory vectors store, None or ":memory:")."""
    if fcntl is None or vectors_path is None or vectors_path == ":memory:":
        yield
        return
    marker = vectors_path + MARKER_SUFFIX
    handle = _locked(marker)
    try:
        yield
    finally:
        _release(handle, marker)


def _locked(marker: str) -> BinaryIO:
    """The marker opened (made if absent) with a shared lock held, on the file that is at
    `marker` now: a file another run's end removed while this one waited is opened again."""
    assert fcntl is not None
    while True:
        handle = open(marker, "a+b")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH)  # blocking: a check holds it microseconds
            if _same_file(handle, marker):
                return handle
        except BaseException:
            handle.close()
            raise
        handle.close()  # unlinked or replaced since it was opened: lock the one there now


def _release(handle: BinaryIO, marker: str) -> None:
    """End a run: remove the marker if no other run holds it (the exclusive lock, not waited
    for, is the proof), then unlock; another run's marker stays."""
    assert fcntl is not None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # another run (or a search's check, for microseconds) holds it: it stays
        if _same_file(handle, marker):
            with contextlib.suppress(OSError):
                os.unlink(marker)
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _same_file(handle: BinaryIO, path: str) -> bool:
    """Whether `handle` is still the file at `path` (not unlinked, not replaced)."""
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except OSError:
        return False


def embedding_in_progress(vectors_path: str | None) -> bool:
    """Whether a run holds the marker of `vectors_path` now (a leftover, unlocked marker: no)."""
    if fcntl is None or vectors_path is None or vectors_path == ":memory:":
        return False
    try:
        handle = open(vectors_path + MARKER_SUFFIX, "rb")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True  # a run holds its shared lock
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def vector_note(with_vector: int, active: int, *, in_progress: bool) -> str:
    """The words a search logs and traces for chunks without a vector (ranked by BM25 only).

    >>> vector_note(0, 12, in_progress=False)
    'no vectors for this store: ranked by BM25 only; `ragspine embed` adds them'
    >>> vector_note(40, 200, in_progress=True)
    'embedding in progress: 40 of 200 chunks have vectors'
    >>> vector_note(40, 200, in_progress=False)
    '40 of 200 chunks have vectors; `ragspine embed` fills the rest'
    """
    if in_progress:
        return f"embedding in progress: {with_vector} of {active} chunks have vectors"
    if with_vector == 0:
        return "no vectors for this store: ranked by BM25 only; `ragspine embed` adds them"
    return f"{with_vector} of {active} chunks have vectors; `ragspine embed` fills the rest"
