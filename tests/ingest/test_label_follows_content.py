"""The label follows the content (issue 34 item 3) and every entry reads front matter (issue 34 item
1's gap): a RESTRICTED file's bytes or text cannot come back lower under another doc_id without
`--lower-label`; `.txt` and `Workspace.ingest_text` read front matter labels like `.md`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import ragspine
from ragspine.cli import main
from ragspine.ingest.content import text_hash
from ragspine.ingest.pipeline import ingest_paths
from ragspine.retrieval.store.sqlite import ChunkStore

SECRET = "The Borealis merger closes in March.\n\nThe price is 41 dollars a share.\n"
RULES = '[[rules]]\nlabel = "RESTRICTED"\nkeywords = ["borealis merger"]\n'
BM25 = {"RAGSPINE_EMBEDDING": "none"}


def _labels(db: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    with ChunkStore(str(db)) as store:
        for chunk in store.iter_chunks():
            out.setdefault(chunk.doc_id, set()).add(chunk.sensitivity)
    return out


def _restricted_by_rules(tmp_path: Path) -> tuple[Path, Path]:
    """A store holding `first/memo.md`, labelled RESTRICTED by a rule file."""
    first = tmp_path / "first"
    first.mkdir()
    (first / "memo.md").write_text(SECRET, "utf-8")
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES, "utf-8")
    db = tmp_path / "s.db"
    assert not ingest_paths([first], str(db), rules=rules).failures
    assert _labels(db) == {"memo.md": {"RESTRICTED"}}
    return db, first


def test_the_same_bytes_under_another_root_are_refused_without_lower_label(tmp_path: Path) -> None:
    db, _ = _restricted_by_rules(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "copy.md").write_text(SECRET, "utf-8")
    report = ingest_paths([other], str(db))  # no rules: would be INTERNAL
    [failure] = report.failures
    assert failure.path == other / "copy.md" and "\n" not in failure.reason
    assert "'copy.md': its content is already stored as 'memo.md', labelled RESTRICTED" in failure.reason
    assert "--lower-label copy.md" in failure.reason and "copy.md" not in _labels(db)
    lowered = ingest_paths([other], str(db), lower_labels=["copy.md"])
    assert lowered.ingested == ["copy.md"] and _labels(db)["copy.md"] == {"INTERNAL"}


def test_a_rename_with_prune_is_refused_and_stays_refused(tmp_path: Path) -> None:
    db, first = _restricted_by_rules(tmp_path)
    (first / "memo.md").rename(first / "renamed.md")
    report = ingest_paths([first], str(db), prune=True)
    assert [f.path.name for f in report.failures] == ["renamed.md"] and report.withdrawn == ["memo.md"]
    again = ingest_paths([first], str(db))  # the RESTRICTED row is withdrawn, its label still counts
    assert [f.path.name for f in again.failures] == ["renamed.md"] and _labels(db) == {}


def test_a_re_encoded_copy_is_caught_by_its_text(tmp_path: Path) -> None:
    first = tmp_path / "first"
    first.mkdir()
    text = "博瑞合并案将于三月完成。\r\n\r\n每股价格为四十一元。"
    (first / "memo.txt").write_bytes(text.encode("utf-8"))
    db = tmp_path / "s.db"
    assert not ingest_paths([first], str(db), sensitivity="RESTRICTED").failures
    other = tmp_path / "other"
    other.mkdir()
    (other / "memo-gbk.txt").write_bytes(text.replace("\r\n", "\n").encode("gb18030"))
    report = ingest_paths([other], str(db))
    assert len(report.failures) == 1 and "labelled RESTRICTED" in report.failures[0].reason
    assert text_hash(text) == text_hash(text.replace("\r\n", "\n"))


def test_workspace_ingest_text_of_restricted_content_is_refused_without_naming_the_other(tmp_path: Path) -> None:
    db, _ = _restricted_by_rules(tmp_path)
    with ragspine.open(str(db), env=BM25, chunker="paragraph", chunk_chars=480, contextual="none") as ws:
        with pytest.raises(ValueError) as refused:
            ws.ingest_text(SECRET, "pasted", sensitivity="PUBLIC")
        message = str(refused.value)
        assert "'pasted': its content is already stored at a stricter label" in message
        assert "memo.md" not in message and "RESTRICTED" not in message and "\n" not in message
        assert ws.search("Borealis merger price", top_k=5) == []
        assert ws.ingest_text(SECRET, "pasted", sensitivity="PUBLIC", lower_label=True).chunks >= 1
        assert ws.ingest_text("An unrelated public note.", "note", sensitivity="PUBLIC").version == 1


def test_a_txt_file_reads_its_front_matter_label_and_drops_the_block(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "plain.txt").write_text("---\nsensitivity: RESTRICTED\ntopic: merger\n---\nThe merger closes.", "utf-8")
    (folder / "quoted.txt").write_text('---\n"sensitivity": RESTRICTED\n---\nSecret text.', "utf-8")
    (folder / "wide.txt").write_text("---\nsensitivity：RESTRICTED\n---\nSecret text.", "utf-8")  # a full-width colon
    (folder / "open.txt").write_text("No front matter here.\n\nJust text.", "utf-8")
    db = tmp_path / "s.db"
    report = ingest_paths([folder], str(db))
    assert _labels(db) == {"plain.txt": {"RESTRICTED"}, "quoted.txt": {"RESTRICTED"}, "open.txt": {"INTERNAL"}}
    with ChunkStore(str(db)) as store:
        [chunk] = list(store.iter_chunks(doc_id="plain.txt"))
    assert chunk.text == "The merger closes." and chunk.topic == "merger"
    [failure] = report.failures
    assert failure.path.name == "wide.txt" and "line 2" in failure.reason and "refused" in failure.reason


def test_workspace_ingest_text_reads_front_matter(tmp_path: Path) -> None:
    with ragspine.open(tmp_path / "ws", env=BM25) as ws:
        ws.ingest_text("---\nsensitivity: RESTRICTED\n---\nThe Borealis price is 41.", "fm", sensitivity="PUBLIC")
        [row] = ws.store.iter_chunks(doc_id="fm")
        assert row.sensitivity == "RESTRICTED" and row.text == "The Borealis price is 41."
        assert ws.search("Borealis price", top_k=5) == []
        with pytest.raises(ValueError, match="line 2"):
            ws.ingest_text("---\nsensitivity：RESTRICTED\n---\nText.", "fw")  # a full-width colon


def test_ingest_exit_status_is_zero_for_the_same_permanent_failures(tmp_path: Path) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "page.md").write_text("# Page\n\nSome text.", "utf-8")
    (folder / "_index.md").write_text("", "utf-8")  # empty: fails every run
    db = str(tmp_path / "s.db")

    def run(*extra: str) -> tuple[int, str]:
        result = CliRunner().invoke(main, ["ingest", str(folder), "--db", db, *extra])
        return result.exit_code, result.stdout

    code, out = run()
    assert code == 1 and "exit 1: 1 new failure(s) since the last run" in out
    code, out = run()
    assert code == 0 and "exit 0: the 1 failure(s) are the same as the last run's" in out
    assert "known failures (the same as the last run): 1" in out and "_index.md" in out
    code, out = run("--strict")
    assert code == 1 and "--strict" in out
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 broken")
    code, out = run()
    assert code == 1 and "exit 1: 1 new failure(s)" in out
    (folder / "broken.pdf").unlink()
    (folder / "_index.md").write_text("# Index\n\nNow it has text.", "utf-8")
    code, out = run()
    assert code == 0 and "exit 0: no failure" in out


def test_a_txt_stored_by_an_older_release_is_read_again(tmp_path: Path) -> None:
    from dataclasses import replace

    from ragspine.ingest.document import content_hash, ingest_key
    from ragspine.ingest.metadata import read_sidecar
    from ragspine.ingest.pipeline import resolve_labels
    from ragspine.ingest.registry import DocumentRegistry

    folder = tmp_path / "d"
    folder.mkdir()
    path = folder / "memo.txt"
    path.write_text("---\nsensitivity: RESTRICTED\n---\nThe merger closes.", "utf-8")
    db = tmp_path / "s.db"
    ingest_paths([folder], str(db))
    older = ingest_key("memo.txt", content_hash(path.read_bytes()), read_sidecar(path), resolve_labels({}))
    with DocumentRegistry(db) as registry:  # the key an older release (no front matter in .txt) wrote
        row = registry.get("memo.txt")
        assert row is not None and row.ingest_key != older
        registry.record(replace(row, ingest_key=older))
    assert ingest_paths([folder], str(db)).ingested == ["memo.txt"], "the loader's revision is in the key"
    assert ingest_paths([folder], str(db)).unchanged == ["memo.txt"]
