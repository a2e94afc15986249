"""docs/operations.md lists every file beside a store: its table is `store_files.FILE_KINDS`, and
the files a real ingest + embed + search (+ graph, RAPTOR and page builds) leave beside a store
are exactly the kinds it lists, so the page cannot drift from what the code writes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import ragspine
from ragspine.cli import main
from ragspine.store_files import FILE_KINDS, UNKNOWN, classify, files_beside

sys.path.insert(0, str(Path(__file__).resolve().parent / "ingest"))
from ingest_fixtures import write_pdf  # noqa: E402 - tests/ingest, put on the path above

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
# kinds that only exist while a process has a file open, or after damage or a crash
TRANSIENT = {"sqlite companion", "vectors companion", "moved aside", "temporary", "embed marker"}


def _table() -> list[tuple[str, str]]:
    """(file, kind) of each row of the table under "## Files beside a store"."""
    section = DOC.read_text("utf-8").split("## Files beside a store", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 5:
            rows.append((cells[0].strip("`"), cells[1]))
    return rows


def test_the_table_is_the_list_of_file_kinds() -> None:
    assert _table() == [(k.shown, k.name) for k in FILE_KINDS]


def test_a_real_store_leaves_exactly_the_listed_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("faiss", reason="the ann extra (faiss-cpu) is in the test extra")
    for name, value in {"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_ANN_MIN_VECTORS": "0",
                        "RAGSPINE_VISUAL_EMBEDDER": "tiny"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"d{i}.md").write_text(f"# Note {i}\n\nThe margin fell {i} points in region {i % 2}.", "utf-8")
    write_pdf(docs / "report.pdf", ["Quarterly revenue", "Margin chart", "Outlook"])
    db = tmp_path / "store" / "chunks.db"
    commands = [["ingest", str(docs), "--visual"], ["embed"], ["search", "margin"], ["graph", "build"]]
    for args in commands:
        result = CliRunner().invoke(main, [*args, "--db", str(db)])
        assert result.exit_code == 0, (args, result.output)
    monkeypatch.setenv("RAGSPINE_RAPTOR", "on")
    assert CliRunner().invoke(main, ["raptor", "build", "--db", str(db)]).exit_code == 0
    with ragspine.open(db) as ws:  # the .matrix as a store of 10,000 vectors gets it
        dense = ws.retriever.index.dense
        assert dense is not None
        dense.cache_min_vectors = 1
        ws.search("margin fell", top_k=3)
    made = {path.name: classify(db, path) for path in files_beside(db)}
    assert UNKNOWN not in made.values(), made
    listed = {kind for _, kind in _table()}
    assert set(made.values()) == listed - TRANSIENT, made
    assert any(re.fullmatch(r"chunks\.db\.ctx-[\w-]+\.vectors\.sqlite", n) for n in made), "the default vectors file carries its tag"
    checked = CliRunner().invoke(main, ["check", "--db", str(db)])  # every checker on a healthy store
    assert checked.exit_code == 0 and len(checked.stdout.splitlines()) == len(made), checked.output
    assert all(line.startswith("ok ") for line in checked.stdout.splitlines()), checked.stdout
