"""The ingest pipeline: doc_ids, locators, metadata precedence, incremental runs, failures, prune."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest
from ingest_fixtures import BIG5_TEXT, GBK_TEXT, write_pdf

from ragspine.ingest.loaders import load_document
from ragspine.ingest.pipeline import ingest_paths
from ragspine.ingest.registry import DocumentRegistry
from ragspine.ingest.sensitivity_rules import SensitivityRule, SensitivityRules
from ragspine.retrieval.store import sql_base as chunk_store  # where every store builds its rows
from ragspine.retrieval.store.sqlite import ChunkStore, StoredChunk
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex

_SPAN = re.compile(r"@(\d+)-(\d+)(?:;pages=(\d+)(?:-(\d+))?)?$")


def _active(db: Path) -> dict[str, list[StoredChunk]]:
    with ChunkStore(db) as store:
        chunks = store.iter_chunks()
    out: dict[str, list[StoredChunk]] = {}
    for chunk in chunks:
        out.setdefault(chunk.doc_id, []).append(chunk)
    return out


def _records(db: Path) -> dict[str, dict]:
    with DocumentRegistry(db) as registry:
        return {r.doc_id: {**r.__dict__, "metadata": r.metadata_dict()} for r in registry.all()}


def _file_digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def test_a_mixed_folder_is_ingested_with_relative_doc_ids(mixed_folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    report = ingest_paths([mixed_folder], str(db))
    expected = {"board/minutes.docx", "cn/big5.txt", "cn/gbk.txt", "notes.md", "reports/annual.pdf", "web.html"}
    assert set(report.ingested) == expected and not report.failures
    active = _active(db)
    assert set(active) == expected
    assert active["cn/gbk.txt"][0].text == GBK_TEXT and active["cn/big5.txt"][0].text == BIG5_TEXT
    assert active["cn/gbk.txt"][0].language == "zh" and active["web.html"][0].language == "en"
    (annual,) = active["reports/annual.pdf"]  # two short pages packed into one chunk
    assert annual.source_locator == f"reports/annual.pdf#p1-2@0-{len(annual.text)};pages=1-2"
    assert report.chunks == sum(len(chunks) for chunks in active.values())


def test_every_chunk_is_a_substring_at_its_locator(mixed_folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest_paths([mixed_folder], str(db))
    for doc_id, chunks in _active(db).items():
        path = mixed_folder / doc_id
        text = load_document(path, path.read_bytes()).text
        for chunk in chunks:
            match = _SPAN.search(chunk.source_locator)
            assert match and chunk.source_locator.startswith(f"{doc_id}#p")
            assert text[int(match.group(1)) : int(match.group(2))] == chunk.text


def test_pdf_locators_name_the_pages(tmp_path: Path) -> None:
    pages = [f"Page {n} says: " + " ".join(f"sentence {n}.{i} about exports." for i in range(12)) for n in (1, 2, 3)]
    root = tmp_path / "docs"
    write_pdf(root / "r.pdf", pages)
    db = tmp_path / "s.db"
    ingest_paths([root], str(db), max_chars=200, overlap_chars=0)
    chunks = _active(db)["r.pdf"]
    assert len(chunks) > 3
    for chunk in chunks:
        match = _SPAN.search(chunk.source_locator)
        assert match and match.group(3), chunk.source_locator
        first, last = int(match.group(3)), int(match.group(4) or match.group(3))
        cited = {int(n) for n in re.findall(r"sentence (\d)\.", chunk.text)}
        assert cited and cited <= set(range(first, last + 1)), (chunk.source_locator, chunk.text)
    assert {_SPAN.search(c.source_locator).group(3) for c in chunks} == {"1", "2", "3"}
    with ChunkStore(db) as store:
        hits = NarrativeIndex(store).retrieve("sentence 3.7 exports", top_k=1)
    assert hits[0].chunk.source_locator.endswith(";pages=3")


def test_metadata_from_sidecar_front_matter_and_defaults(mixed_folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest_paths([mixed_folder], str(db), entity="DEFAULT_CO", period="2022", geography="CN")
    active = _active(db)
    minutes = active["board/minutes.docx"][0]  # sidecar: entity, period (a number), sensitivity
    assert (minutes.entity, minutes.period, minutes.geography) == ("BOREALIS", "2023", "CN")
    assert minutes.sensitivity == "CONFIDENTIAL" and minutes.title == "Board minutes"
    notes = active["notes.md"][0]  # front matter: entity, topic; title from the first heading
    assert (notes.entity, notes.topic, notes.period, notes.title) == ("ACME_CN", "strategy", "2022", "Strategy notes")
    assert "entity:" not in notes.text and notes.text.startswith("# Strategy notes\n\n")
    assert active["cn/gbk.txt"][0].entity == "DEFAULT_CO"
    records = _records(db)
    assert records["board/minutes.docx"]["metadata"]["free"] == {"owner": "legal", "tags": ["board", "q4"]}
    assert records["notes.md"]["metadata"]["free"] == {"reviewer": "Li Wei"}
    assert records["reports/annual.pdf"]["pages"] == 2 and records["cn/big5.txt"]["encoding"] == "cp950"


def test_a_sidecar_wins_over_front_matter(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    (root / "a.md").write_text("---\nentity: FROM_FRONT\nperiod: 2020\n---\nBody.\n", "utf-8")
    (root / "a.meta.json").write_text('{"entity": "FROM_SIDECAR"}', "utf-8")
    db = tmp_path / "s.db"
    ingest_paths([root], str(db))
    chunk = _active(db)["a.md"][0]
    assert (chunk.entity, chunk.period) == ("FROM_SIDECAR", "2020")


def test_sensitivity_rules_and_the_sidecar_the_strictest_wins(tmp_path: Path) -> None:
    root = tmp_path / "d"
    (root / "hr").mkdir(parents=True)
    (root / "hr" / "pay.txt").write_text("Salary bands for 2024.", "utf-8")
    (root / "memo.txt").write_text("本文件绝密，请勿外传。", "utf-8")
    (root / "plain.txt").write_text("Canteen menu for Monday.", "utf-8")
    (root / "public.txt").write_text("This press release is strictly confidential until noon.", "utf-8")
    (root / "public.txt.meta.json").write_text('{"sensitivity": "PUBLIC"}', "utf-8")
    (root / "board.txt").write_text("Board notes.", "utf-8")
    (root / "board.txt.meta.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    rules = SensitivityRules((
        SensitivityRule("CONFIDENTIAL", paths=("hr/",)),
        SensitivityRule("RESTRICTED", keywords=("绝密", "Strictly Confidential")),
    ))  # fmt: skip
    db = tmp_path / "s.db"
    ingest_paths([root], str(db), rules=rules)
    labels = {doc_id: chunks[0].sensitivity for doc_id, chunks in _active(db).items()}
    assert labels == {
        "hr/pay.txt": "CONFIDENTIAL",
        "memo.txt": "RESTRICTED",
        "plain.txt": "INTERNAL",  # no rule matches: the default
        # a stray `sensitivity: public` never un-restricts what a rule restricts (issue 14 #6)
        "public.txt": "RESTRICTED",
        "board.txt": "RESTRICTED",  # the sidecar is stricter than the default
    }
    records = _records(db)
    assert records["memo.txt"]["metadata"]["sensitivity_from"] == "rule"
    assert records["public.txt"]["metadata"]["sensitivity_from"] == "rule"
    assert records["board.txt"]["metadata"]["sensitivity_from"] == "document"


def test_no_rules_mark_nothing(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    (root / "memo.txt").write_text("本文件绝密 RESTRICTED", "utf-8")
    db = tmp_path / "s.db"
    ingest_paths([root], str(db), sensitivity="public")
    assert _active(db)["memo.txt"][0].sensitivity == "PUBLIC"


def test_rerun_writes_nothing_and_changes_are_reversioned(mixed_folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = ingest_paths([mixed_folder], str(db))
    with ChunkStore(db) as store:
        version_before = store.data_version()
    digest, records = _file_digest(db), _records(db)
    again = ingest_paths([mixed_folder], str(db))
    assert again.ingested == [] and sorted(again.unchanged) == sorted(first.ingested)
    assert again.unchanged_chunks == first.chunks and again.chunks == 0
    assert _file_digest(db) == digest and _records(db) == records, "an unchanged re-run writes nothing"
    with ChunkStore(db) as store:
        assert store.data_version() == version_before

    (mixed_folder / "cn" / "gbk.txt").write_bytes((GBK_TEXT + "新增一句。").encode("gbk"))
    (mixed_folder / "board" / "minutes.docx.meta.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    third = ingest_paths([mixed_folder], str(db))
    assert sorted(third.ingested) == ["board/minutes.docx", "cn/gbk.txt"] == sorted(third.changed)
    assert len(third.unchanged) == 4
    active = _active(db)
    assert active["cn/gbk.txt"][0].version == 2 and active["cn/gbk.txt"][0].text.endswith("新增一句。")
    assert active["board/minutes.docx"][0].sensitivity == "RESTRICTED", "a sidecar change re-versions"
    assert active["notes.md"][0].version == 1
    with ChunkStore(db) as store:
        old = [c for c in store.iter_chunks(doc_id="cn/gbk.txt", include_inactive=True) if not c.active]
    assert old and old[0].version == 1


def test_changed_defaults_or_rules_reingest_and_force_reingests(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    (root / "a.txt").write_text("Alpha.", "utf-8")
    db = tmp_path / "s.db"
    ingest_paths([root], str(db))
    assert ingest_paths([root], str(db), entity="ACME").ingested == ["a.txt"]
    assert ingest_paths([root], str(db), entity="ACME").unchanged == ["a.txt"]
    assert ingest_paths([root], str(db), entity="ACME", force=True).ingested == ["a.txt"]
    assert _active(db)["a.txt"][0].version == 3


def test_a_document_withdrawn_behind_the_registrys_back_is_reingested(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    (root / "a.txt").write_text("Alpha.", "utf-8")
    db = tmp_path / "s.db"
    ingest_paths([root], str(db))
    with ChunkStore(db) as store:
        NarrativeIndex(store).withdraw("a.txt")
    assert ingest_paths([root], str(db)).ingested == ["a.txt"]
    assert "a.txt" in _active(db)


def test_a_corrupt_pdf_among_good_files_fails_alone(mixed_folder: Path, tmp_path: Path) -> None:
    (mixed_folder / "reports" / "broken.pdf").write_bytes(b"%PDF-1.7\n%garbage, no xref, no trailer")
    db = tmp_path / "s.db"
    report = ingest_paths([mixed_folder], str(db))
    assert len(report.ingested) == 6
    assert [(f.path.name, "not a readable PDF" in f.reason) for f in report.failures] == [("broken.pdf", True)]
    assert "reports/broken.pdf" not in _active(db) and "reports/broken.pdf" not in _records(db)
    again = ingest_paths([mixed_folder], str(db))
    assert len(again.unchanged) == 6 and len(again.failures) == 1, "a failed file is retried, the rest skipped"


def test_a_file_that_turns_corrupt_keeps_its_previous_version(tmp_path: Path) -> None:
    root = tmp_path / "d"
    write_pdf(root / "r.pdf", ["Good text on page one."])
    db = tmp_path / "s.db"
    ingest_paths([root], str(db))
    (root / "r.pdf").write_bytes(b"%PDF-1.4 truncated")
    report = ingest_paths([root], str(db))
    assert len(report.failures) == 1 and not report.ingested
    assert _active(db)["r.pdf"][0].text == "Good text on page one."


def test_a_failure_inside_the_store_write_leaves_no_half_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "d"
    root.mkdir()
    (root / "a.txt").write_text("\n\n".join(f"Paragraph {i}. " + "x" * 300 for i in range(6)), "utf-8")
    (root / "b.txt").write_text("Short and fine.", "utf-8")
    real_row, calls = chunk_store._row, {"n": 0}

    def failing_row(chunk, **ingest):  # noqa: ANN001, ANN202 - fails on a.txt's third chunk
        calls["n"] += 1
        if chunk.doc_id == "a.txt" and chunk.seq == 2:
            raise ValueError("disk trouble")
        return real_row(chunk, **ingest)

    monkeypatch.setattr(chunk_store, "_row", failing_row)
    db = tmp_path / "s.db"
    report = ingest_paths([root], str(db))
    assert report.ingested == ["b.txt"] and report.failures[0].reason == "disk trouble"
    with ChunkStore(db) as store:
        assert store.iter_chunks(doc_id="a.txt", include_inactive=True) == []
    assert "a.txt" not in _records(db)


def test_a_missing_extra_fails_only_its_files(
    mixed_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pypdf", None)
    monkeypatch.setitem(sys.modules, "pypdfium2", None)  # the `pdf` extra's extractor (issue 37) as well
    report = ingest_paths([mixed_folder], str(tmp_path / "s.db"))
    assert len(report.ingested) == 5
    assert [f.reason for f in report.failures] == [
        "reading .pdf files needs the optional package 'pypdf': pip install 'ragspine[pdf]'"
    ]


def test_prune_withdraws_only_vanished_files_under_the_given_folder(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        (root / "sub").mkdir(parents=True)
        (root / "sub" / f"{root.name}-keep.txt").write_text(f"Keep me ({root.name}).", "utf-8")  # distinct texts:
        (root / f"{root.name}-gone.txt").write_text(f"Delete me ({root.name}).", "utf-8")  # no duplicates
    db = tmp_path / "s.db"
    ingest_paths([one, two], str(db))
    (one / "one-gone.txt").unlink()
    (two / "two-gone.txt").unlink()
    without = ingest_paths([one], str(db))
    assert without.withdrawn == [] and "one-gone.txt" in _active(db)
    report = ingest_paths([one], str(db), prune=True)
    assert report.withdrawn == ["one-gone.txt"]
    active = _active(db)
    assert "one-gone.txt" not in active and "two-gone.txt" in active, "another folder is left alone"
    assert _records(db)["one-gone.txt"]["status"] == "withdrawn"
    assert ingest_paths([one], str(db), prune=True).withdrawn == [], "pruning twice writes nothing"


def test_prune_on_an_emptied_folder(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    (root / "a.txt").write_text("Alpha.", "utf-8")
    db = tmp_path / "s.db"
    ingest_paths([root], str(db))
    (root / "a.txt").unlink()
    assert ingest_paths([root], str(db), prune=True).withdrawn == ["a.txt"]
    with pytest.raises(ValueError, match="no .txt"):
        ingest_paths([root], str(db))


def test_include_exclude_hidden_and_lock_files(mixed_folder: Path, tmp_path: Path) -> None:
    (mixed_folder / ".git").mkdir()
    (mixed_folder / ".git" / "x.md").write_text("hidden", "utf-8")
    (mixed_folder / "board" / "~$minutes.docx").write_bytes(b"lock")
    db = tmp_path / "s.db"
    report = ingest_paths([mixed_folder], str(db), include=["*.txt", "*.md"], exclude=["cn/big5*"])
    assert sorted(report.ingested) == ["cn/gbk.txt", "notes.md"]


def test_the_same_doc_id_from_two_folders_in_one_run_fails_the_second(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.txt").write_text(f"From {name}.", "utf-8")
    report = ingest_paths([tmp_path / "a", tmp_path / "b"], str(tmp_path / "s.db"))
    assert report.ingested == ["x.txt"]
    assert "already used by" in report.failures[0].reason


def test_the_registry_lives_in_its_own_table(mixed_folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest_paths([mixed_folder], str(db))
    with ChunkStore(db) as store:
        tables = {row[0] for row in store.execute_read("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"narrative_chunk", "ragspine_document"} <= tables
    record = _records(db)["notes.md"]
    assert record["root"] == str(mixed_folder.resolve()) and record["status"] == "active"
    assert json.loads(json.dumps(record["metadata"]))["language"] == "en"
