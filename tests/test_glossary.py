from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragspine.settings.config import ConfigError, load_settings
from ragspine.retrieval.query.glossary import Glossary, GlossaryQueryRewriter, load_glossary


def test_builtin_glossary_knows_revenue_synonyms() -> None:
    glossary = load_glossary()
    revenue = next(g for g in glossary.groups if g.canonical == "revenue")
    assert {"营收", "营业收入", "收入", "revenue"} <= set(revenue.terms)


def test_rewrite_is_deterministic_original_first_and_deduplicated() -> None:
    rewriter = GlossaryQueryRewriter(load_glossary(), max_queries=5)
    variants = rewriter.rewrite("为什么营收下滑")
    assert variants[0] == "为什么营收下滑"
    assert len(variants) == len(set(variants)) <= 5
    assert "为什么营业收入下滑" in variants
    assert rewriter.rewrite("为什么营收下滑") == variants


def test_longest_term_wins_and_case_is_ignored() -> None:
    glossary = Glossary.from_dict({"metrics": {"revenue": ["营业收入", "收入", "Revenue"]}})
    rewriter = GlossaryQueryRewriter(glossary)
    assert rewriter.rewrite("营业收入为何下降") == [
        "营业收入为何下降", "revenue为何下降", "收入为何下降",
    ]  # "Revenue" differs from "revenue" only in case: no variant for it
    assert rewriter.rewrite("REVENUE drop") == ["REVENUE drop", "营业收入 drop", "收入 drop"]


def test_max_queries_caps_and_no_match_returns_original() -> None:
    glossary = Glossary.from_dict(
        {"entities": {"ACME": ["艾克美"]}, "metrics": {"revenue": ["营收", "收入", "sales"]}}
    )
    assert len(GlossaryQueryRewriter(glossary, max_queries=2).rewrite("艾克美营收")) == 2
    assert GlossaryQueryRewriter(glossary).rewrite("天气") == ["天气"]
    with pytest.raises(ValueError):
        GlossaryQueryRewriter(glossary, max_queries=0)


def test_glossary_file_from_environment(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"entities": {"ACME_CN": ["艾克美中国"]}}), "utf-8")
    settings = load_settings({"RAGSPINE_GLOSSARY": str(path)})
    assert load_glossary(settings.glossary).groups[0].terms == ("ACME_CN", "艾克美中国")
    with pytest.raises(ConfigError, match="RAGSPINE_GLOSSARY"):
        load_settings({"RAGSPINE_GLOSSARY": str(tmp_path / "missing.json")})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "could not be read"),
        ("[1, 2]", "expected a JSON object"),
        ('{"things": {}}', "unknown section"),
        ('{"metrics": {"revenue": "营收"}}', "list of non-empty strings"),
        ('{"metrics": []}', "must be an object"),
    ],
)
def test_bad_glossary_files_name_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, "utf-8")
    with pytest.raises(ValueError, match=message):
        load_glossary(path)
