"""docs/security.md's issue-34 table names, for each failure, the tests that prove it: every one it
names exists (a file under tests/ holding a test function of that name), so the table cannot
point at a test that was renamed or removed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rows() -> list[str]:
    text = (ROOT / "docs" / "security.md").read_text("utf-8")
    section = text.split("### Issue 34: fail closed at the edges", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| #")]


def _named(row: str) -> list[tuple[str, str]]:
    """(file, test) for every `file::test` and `::test` (the file named before it) in the row."""
    found, current = [], ""
    for path, name in re.findall(r"`(tests/[\w/]+\.py)?::(test_\w+)`", row):
        current = path or current
        found.append((current, name))
    return found


def test_every_row_names_a_test_and_every_named_test_exists() -> None:
    rows = _rows()
    assert len(rows) >= 16, "one row per failure issue 34 lists"
    assert {row.split("|")[1].strip() for row in rows} == {str(n) for n in range(1, 10)}, "items 1 to 9"
    for row in rows:
        named = _named(row)
        assert named, f"a row names no test: {row[:80]}"
        for path, name in named:
            file = ROOT / path
            assert file.is_file(), f"docs/security.md names a missing file {path}"
            assert re.search(rf"^(async )?def {name}\(", file.read_text("utf-8"), re.MULTILINE), f"{path}::{name}"
