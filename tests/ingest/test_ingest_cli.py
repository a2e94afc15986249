"""`ragspine ingest`: summary table, exit codes, failures on stderr, rules, prune, globs."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from ingest_fixtures import write_pdf

from ragspine.cli import main
from ragspine.retrieval.store.sqlite import ChunkStore


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["ingest", *args])
    return result.exit_code, result.stdout, result.stderr


def _table(out: str) -> dict[str, tuple[str, str]]:
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in {"ingested", "unchanged", "failed", "withdrawn"}:
            rows[parts[0]] = (parts[1], parts[2])
    return rows


def test_summary_table_and_incremental_rerun(mixed_folder: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    code, out, err = _run(str(mixed_folder), "--db", db)
    assert code == 0, err
    table = _table(out)
    assert table["ingested"][0] == "6" and table["failed"] == ("0", "-") and table["withdrawn"] == ("0", "-")
    chunks = table["ingested"][1]
    code, out, _ = _run(str(mixed_folder), "--db", db)
    assert code == 0 and _table(out)["unchanged"] == ("6", chunks) and _table(out)["ingested"] == ("0", "0")


def test_a_corrupt_pdf_is_reported_and_the_rest_ingested(mixed_folder: Path, tmp_path: Path) -> None:
    (mixed_folder / "reports" / "broken.pdf").write_bytes(b"%PDF-1.4 broken")
    code, out, err = _run(str(mixed_folder), str(tmp_path / "missing"), "--db", str(tmp_path / "s.db"))
    assert code == 1
    assert "broken.pdf: not a readable PDF" in err and "missing: no such file or folder" in err
    assert _table(out)["ingested"][0] == "6" and _table(out)["failed"][0] == "2"


def test_rules_prune_include_and_exclude(tmp_path: Path) -> None:
    root = tmp_path / "d"
    write_pdf(root / "hr" / "pay.pdf", ["Salary bands."])
    (root / "memo.md").write_text("# Memo\n\nThe merger is strictly confidential.", "utf-8")
    (root / "draft.md").write_text("Draft text.", "utf-8")
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\nlabel = "RESTRICTED"\nkeywords = ["strictly confidential"]\n'
                     '[[rules]]\nlabel = "CONFIDENTIAL"\npaths = ["hr/"]\n', "utf-8")  # fmt: skip
    db = str(tmp_path / "s.db")
    code, out, err = _run(str(root), "--db", db, "--rules", str(rules), "--exclude", "draft*")
    assert code == 0, err
    with ChunkStore(db) as store:
        labels = {c.doc_id: c.sensitivity for c in store.iter_chunks()}
    assert labels == {"hr/pay.pdf": "CONFIDENTIAL", "memo.md": "RESTRICTED"}
    (root / "memo.md").unlink()
    code, out, _ = _run(str(root), "--db", db, "--rules", str(rules), "--include", "*.pdf", "--prune")
    assert code == 0 and _table(out)["withdrawn"][0] == "1" and _table(out)["unchanged"][0] == "1"


def test_a_bad_rule_file_is_a_clean_error(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Alpha.", "utf-8")
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\nlabel = "NOPE"\npaths = ["*"]\n', "utf-8")
    code, _, err = _run(str(tmp_path / "a.txt"), "--db", str(tmp_path / "s.db"), "--rules", str(rules))
    assert code == 1 and "'NOPE'" in err and "not a known level" in err and "Traceback" not in err
