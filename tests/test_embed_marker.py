"""The embed marker (`<vectors>.embedding`, review 5 finding 4): a run holds a shared lock for its
whole duration, taken even while a search's check holds the file for an instant; overlapping runs
keep the marker until the last ends; a run never locks a marker file that was removed or replaced
(it opens the one there now); a marker left by a killed run reads as no run in progress. Real
files and real `flock` locks, one run in a killed child process."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import ragspine
from ragspine.retrieval.vector.dense.embed_marker import MARKER_SUFFIX, embedding_in_progress, embedding_run

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock: POSIX only")


class _Run(threading.Thread):
    """An embed run in a thread: it enters `embedding_run`, says so, and ends when told."""

    def __init__(self, vectors: str) -> None:
        super().__init__(daemon=True)
        self.vectors, self.inside, self.stop = vectors, threading.Event(), threading.Event()

    def run(self) -> None:
        with embedding_run(self.vectors):
            self.inside.set()
            assert self.stop.wait(30)

    def end(self) -> None:
        self.stop.set()
        self.join(30)
        assert not self.is_alive()


def _hold(path: str) -> int:
    """An exclusive lock on `path`, as a search's check takes it for an instant; its descriptor."""
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_run_that_starts_during_a_check_is_still_marked(tmp_path: Path) -> None:
    vectors = str(tmp_path / "s.db.vectors.sqlite")
    marker = vectors + MARKER_SUFFIX
    Path(marker).touch()  # a leftover marker: a search may be checking it
    check = _hold(marker)
    run = _Run(vectors)
    run.start()
    try:
        time.sleep(0.2)
        assert not run.inside.is_set()  # the run waits for the check, microseconds in real life
    finally:
        os.close(check)
    try:
        assert run.inside.wait(30)
        assert embedding_in_progress(vectors)  # marked, though a check held the file as it started
    finally:
        run.end()
    assert not embedding_in_progress(vectors) and not os.path.exists(marker)


def test_overlapping_runs_keep_the_marker_until_the_last_ends(tmp_path: Path) -> None:
    vectors = str(tmp_path / "s.db.vectors.sqlite")
    marker = vectors + MARKER_SUFFIX
    first, second = _Run(vectors), _Run(vectors)
    first.start()
    assert first.inside.wait(30)
    second.start()
    try:
        assert second.inside.wait(30)
        first.end()
        assert os.path.exists(marker) and embedding_in_progress(vectors)  # the second still runs
    finally:
        second.end()
    assert not os.path.exists(marker) and not embedding_in_progress(vectors)


def test_a_run_locks_the_marker_there_now_not_one_removed_while_it_waited(tmp_path: Path) -> None:
    vectors = str(tmp_path / "s.db.vectors.sqlite")
    marker = vectors + MARKER_SUFFIX
    Path(marker).touch()
    check = _hold(marker)
    run = _Run(vectors)
    run.start()  # opens the marker, waits for the lock
    try:
        time.sleep(0.2)
        os.unlink(marker)  # what another run's end does with a file this run already opened
    finally:
        os.close(check)
    try:
        assert run.inside.wait(30)
        assert embedding_in_progress(vectors)  # the run holds the file at the marker's path
    finally:
        run.end()
    assert not os.path.exists(marker)


def test_a_killed_runs_marker_reads_as_no_run(tmp_path: Path) -> None:
    vectors = str(tmp_path / "s.db.vectors.sqlite")
    marker = vectors + MARKER_SUFFIX
    code = (
        "import sys, time\n"
        "from ragspine.retrieval.vector.dense.embed_marker import embedding_run\n"
        "with embedding_run(sys.argv[1]):\n"
        "    print('in', flush=True)\n"
        "    time.sleep(60)\n"
    )
    src = str(Path(ragspine.__file__).resolve().parent.parent)  # the ragspine this test imports
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    child = subprocess.Popen([sys.executable, "-c", code, vectors], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline() == "in\n"
        assert embedding_in_progress(vectors)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert os.path.exists(marker)  # left behind, unlocked
    assert not embedding_in_progress(vectors)
    with embedding_run(vectors):  # a new run over the leftover is marked, and removes it at its end
        assert embedding_in_progress(vectors)
    assert not os.path.exists(marker)
