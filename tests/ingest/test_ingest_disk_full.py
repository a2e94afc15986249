"""`ragspine ingest` on a full disk (issue 40, item 3): a really full store, not a mock.

`ChunkStore.max_pages` caps the store's file (SQLite's `max_page_count`), so the second file's
write fails with SQLite's own "database or disk is full". The run stops there: one line naming
the file and how many files it did not attempt, a non-zero exit, the first file intact and
nothing of the second kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ragspine.cli import main
from ragspine.retrieval.store.sqlite import ChunkStore

PAGES = 128  # 512 KiB at SQLite's 4 KiB pages: a fresh store with a small document uses ~12
BIG_TEXT = " ".join(f"word{i % 997} margin{i % 313}" for i in range(60_000))  # ~1 MB: ~370 pages


def _folder(root: Path) -> Path:
    root.mkdir()
    (root / "a.md").write_text("Revenue grew in the north because export orders rose.", "utf-8")
    (root / "b.md").write_text(BIG_TEXT, "utf-8")
    for name in ("c.md", "d.md", "e.md"):
        (root / name).write_text(f"Small note {name}.", "utf-8")
    return root


def test_ingest_stops_at_the_first_full_disk_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, db = _folder(tmp_path / "docs"), str(tmp_path / "s.db")
    monkeypatch.setattr(ChunkStore, "max_pages", PAGES)
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", db])
    assert result.exit_code == 1, result.output
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed:")]
    assert len(failed) == 1, result.stderr
    assert str(folder / "b.md") in failed[0] and "storage full: database or disk is full" in failed[0]
    assert "3 file(s) not attempted" in failed[0]
    assert "Traceback" not in result.output
    assert "not attempted: 3" in result.stdout  # the headline says the run stopped
    monkeypatch.setattr(ChunkStore, "max_pages", None)
    with ChunkStore(db) as store:
        chunks = list(store.iter_chunks())
        assert {c.doc_id for c in chunks} == {"a.md"}, "the first file intact, nothing of the second"
        assert store.active_version("a.md") == 1 and store.active_version("b.md") is None
    # With room again, the same run finishes the job: a.md unchanged, the rest written.
    again = CliRunner().invoke(main, ["ingest", str(folder), "--db", db])
    assert again.exit_code == 0, again.output
    assert "unchanged: 1" in again.stdout and "ingested 4 document(s)" in again.stdout
