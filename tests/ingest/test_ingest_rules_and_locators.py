"""Globs, sensitivity rule files, and page numbers in locators."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine.ingest.globs import glob_match
from ragspine.ingest.pages import page_range, with_pages
from ragspine.ingest.sensitivity_rules import SensitivityRule, SensitivityRules
from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import DocumentMeta


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.pdf", "a/b/c.PDF", True),
        ("*.pdf", "a/b/c.pdf.txt", False),
        ("hr/", "hr/2024/pay.xlsx.txt", True),
        ("hr/", "shr/pay.txt", False),
        ("hr/*", "hr/x/y.md", True),
        ("**/notes.md", "notes.md", True),
        ("**/notes.md", "a/notes.md", True),
        ("*salary*", "people/Salary-2024.txt", True),
        ("drafts/*.md", "final/drafts.md", False),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected


def test_rule_file_in_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "rules.toml"
    toml.write_text(
        '[[rules]]\nlabel = "confidential"\npaths = ["board/"]\n\n'
        '[[rules]]\nlabel = "RESTRICTED"\nkeywords = ["绝密"]\n',
        "utf-8",
    )
    rules = SensitivityRules.from_file(toml)
    assert rules.classify("board/m.docx", "minutes") == "CONFIDENTIAL"
    assert rules.classify("board/m.docx", "本文件绝密") == "RESTRICTED", "the strictest match wins"
    assert rules.classify("x.txt", "plain", title="绝密 memo") == "RESTRICTED"
    assert rules.classify("x.txt", "plain") is None
    as_json = tmp_path / "rules.json"
    as_json.write_text('{"rules": [{"label": "CONFIDENTIAL", "paths": ["board/"]}, '
                       '{"label": "RESTRICTED", "keywords": ["绝密"]}]}', "utf-8")  # fmt: skip
    assert SensitivityRules.from_file(as_json).fingerprint() == rules.fingerprint()


def test_rules_built_in_python() -> None:
    rules = SensitivityRules((SensitivityRule("RESTRICTED", paths=("*",)),))
    assert rules.classify("r.pdf", "") == "RESTRICTED"
    with pytest.raises(ValueError, match="'TOP' .*not a known level"):
        SensitivityRules((SensitivityRule("TOP", paths=("*",)),))
    full_width = SensitivityRules((SensitivityRule("ｒｅｓｔｒｉｃｔｅｄ", paths=("*",)),))
    assert full_width.classify("r.pdf", "") == "RESTRICTED"


def test_custom_levels_order_the_labels() -> None:
    rules = SensitivityRules.from_dict({
        "levels": ["OPEN", "SECRET", "RESTRICTED"],
        "rules": [{"label": "secret", "paths": ["*"]}, {"label": "open", "paths": ["*.md"]}],
    })  # fmt: skip
    assert rules.classify("a.md", "") == "SECRET"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[[rules]]\nlabel = "TOP"\npaths = ["*"]\n', "'TOP' .*not a known level"),
        ('[[rules]]\nlabel = "RESTRICTED"\n', "neither paths nor keywords"),
        ('[[rules]]\nlabel = "RESTRICTED"\npath = ["*"]\n', "unknown key"),
        ('[[rules]]\nlabel = "RESTRICTED"\npaths = "*"\n', "must be a list of strings"),
        ("rules = [", "cannot parse"),
        ('colour = "red"\n', "unknown key"),
    ],
)
def test_bad_rule_files_are_rejected_with_the_reason(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(content, "utf-8")
    with pytest.raises(ValueError, match=message) as info:
        SensitivityRules.from_file(path)
    assert str(path) in str(info.value)


def test_page_range_maps_character_spans_to_pages() -> None:
    spans, numbers = [(0, 10), (12, 20), (22, 30)], [1, 2, 5]
    assert page_range(0, 10, spans, numbers) == (1, 1)
    assert page_range(5, 15, spans, numbers) == (1, 2)
    assert page_range(12, 30, spans, numbers) == (2, 5)
    assert page_range(22, 23, spans, numbers) == (5, 5)


def test_with_pages_only_appends_to_the_locator() -> None:
    text = "Page one.\n\nPage two is here."
    chunks = chunk_document(text, DocumentMeta("r.pdf"))
    paged = with_pages(chunks, [(0, 9), (11, len(text))], [1, 2])
    assert [c.source_locator for c in paged] == [f"r.pdf#p1-2@0-{len(text)};pages=1-2"]
    assert [(c.chunk_id, c.text) for c in paged] == [(c.chunk_id, c.text) for c in chunks]
    assert with_pages(chunks, [], []) == chunks
