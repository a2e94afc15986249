"""A store records the chunking and analyzer it was built with; other settings are refused with
the way out, and `ragspine ingest --rebuild` is that way out. Real SQLite stores, the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import ragspine
from ragspine.cli import main
from ragspine.retrieval.lexical.index.identity import (
    IndexSettings,
    IndexSettingsMismatch,
    check_index_settings,
    recorded_index_settings,
)
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.store.sqlite import ChunkStore

PARAGRAPHS = "\n\n".join(
    f"Paragraph {i} about tide pools, starfish and anemones on the rocks."
    for i in range(20)
)


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tides.txt").write_text(PARAGRAPHS, encoding="utf-8")
    (folder / "tea.txt").write_text(
        "红茶经过完全发酵，绿茶不经发酵。", encoding="utf-8"
    )
    return folder


def test_ingest_records_the_settings_and_other_settings_are_refused(
    files: Path, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    assert cli("ingest", str(files), "--db", str(db)).exit_code == 0
    with ChunkStore(db) as store:
        assert recorded_index_settings(store) == IndexSettings(
            "en-stem", 1000, 80, "auto", "header"
        )  # the product defaults
    refused = cli(
        "search", "starfish", "--db", str(db), env={"RAGSPINE_CHUNK_CHARS": "200"}
    )
    assert refused.exit_code == 1
    assert (
        "RAGSPINE_CHUNK_CHARS: 1000 -> 200" in refused.output
        and "--rebuild" in refused.output
    )
    again = cli(
        "ingest", str(files), "--db", str(db), env={"RAGSPINE_ANALYZER": "spec"}
    )
    assert again.exit_code == 1 and "RAGSPINE_ANALYZER: en-stem -> spec" in again.output
    with pytest.raises(IndexSettingsMismatch, match="RAGSPINE_CHUNK_OVERLAP: 80 -> 0"):
        ragspine.open(db, chunk_overlap=0)
    with ragspine.open(db) as workspace:  # the recorded settings still open it
        assert workspace.search("starfish")[0]["doc_id"] == "tides.txt"


def test_rebuild_recuts_every_file_and_withdraws_what_is_not_under_the_paths(
    files: Path, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    assert cli("ingest", str(files), "--db", str(db)).exit_code == 0
    with ragspine.open(db) as workspace:
        workspace.ingest("An API document, not a file.", doc_id="memo")
        before = len(workspace.chunks("tides.txt"))
    small = {"RAGSPINE_CHUNK_CHARS": "150", "RAGSPINE_CHUNK_OVERLAP": "20"}
    result = cli("ingest", str(files), "--db", str(db), "--rebuild", env=small)
    assert result.exit_code == 0, result.output
    assert (
        "rebuilt with RAGSPINE_ANALYZER=en-stem, RAGSPINE_CHUNKER=auto, RAGSPINE_CHUNK_CHARS=150"
        in result.output
    )
    assert "withdrawn (not under PATHS): 1" in result.output
    with ragspine.open(db, chunk_chars=150, chunk_overlap=20) as workspace:
        chunks = workspace.chunks("tides.txt")
        assert len(chunks) > before and all(len(c["text"]) <= 150 for c in chunks)
        assert workspace.chunks("memo") == []  # no document keeps the old chunking
        assert workspace.search("starfish")[0]["doc_id"] == "tides.txt"
    old = {"RAGSPINE_CHUNK_CHARS": "1000", "RAGSPINE_CHUNK_OVERLAP": "80"}  # given: opening adopts the record
    assert (
        cli("search", "starfish", "--db", str(db), env=old).exit_code == 1
    )  # 1000/80 is now the other setting


def test_a_store_from_before_the_record_is_adopted_only_with_its_own_chunking(
    tmp_path: Path,
) -> None:
    with ChunkStore(tmp_path / "old.db") as store:
        store.init_schema()
        store.replace_doc_chunks("d", [Chunk("d:0", "d", 0, "old text", "d#p1@0-8")])
        with pytest.raises(
            IndexSettingsMismatch, match="RAGSPINE_CHUNK_CHARS: 480 -> 300"
        ):
            check_index_settings(store, IndexSettings("en-stem", 300, 80))
        assert recorded_index_settings(store) is None  # a refusal records nothing
        assert (
            check_index_settings(store, IndexSettings("en-stem", 480, 80)) is None
        )  # adopted
        assert recorded_index_settings(store) == IndexSettings("en-stem", 480, 80)
    with ChunkStore(":memory:") as memory:  # recorded for the store's lifetime, like any store
        memory.init_schema()
        assert check_index_settings(memory, IndexSettings("spec", 100, 0)) is None
        with pytest.raises(IndexSettingsMismatch, match="RAGSPINE_ANALYZER: spec -> en-stem"):
            check_index_settings(memory, IndexSettings("en-stem", 100, 0))
