from __future__ import annotations

from typing import Any

import pytest

from ragspine.retrieval.query.filter_extraction import (
    LLMFilterExtractor,
    RuleFilterExtractor,
    combine,
    safe_extract,
)
from ragspine.retrieval.filters import And, Predicate, parse_filter
from ragspine.retrieval.query.glossary import Glossary

GLOSSARY = Glossary.from_dict(
    {"entities": {"ACME_CN": ["艾克美中国", "艾克美"], "ACME_HK": ["艾克美香港"], "BOREALIS": ["Borealis"]},
     "metrics": {"revenue": ["营收"]}}
)  # fmt: skip


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("艾克美中国为什么营收下滑", Predicate("entity", "eq", "ACME_CN")),
        ("艾克美香港的营收", Predicate("entity", "eq", "ACME_HK")),
        ("二〇二五年营收", Predicate("period", "between", ["2025", "2025"])),
        ("2025年上半年营收", Predicate("period", "between", ["2025", "2025"])),
        ("FY2024 revenue", Predicate("period", "between", ["2024", "2024"])),
        ("revenue Q3 2024", Predicate("period", "between", ["2024", "2024"])),
        ("revenue 2023-H2 vs 2024 Q1", Predicate("period", "between", ["2023", "2024"])),
        ("revenue in 2022", Predicate("period", "between", ["2022", "2022"])),
        ("sales in Hong Kong", Predicate("geography", "eq", "HK")),
        ("shipped 2000 units", None),
        ("营收", None),
    ],
)
def test_rule_extractor(query: str, expected: Any) -> None:
    assert RuleFilterExtractor(GLOSSARY).extract(query) == expected


def test_rule_extractor_combines_fields() -> None:
    spec = RuleFilterExtractor(GLOSSARY).extract("Borealis revenue in 2024 Norway")
    assert spec == And((Predicate("entity", "eq", "BOREALIS"), Predicate("period", "between", ["2024", "2024"]),
                        Predicate("geography", "eq", "NO")))  # fmt: skip


def test_combine_never_overrides_explicit_fields() -> None:
    extracted = And((Predicate("entity", "eq", "ACME_HK"), Predicate("period", "between", ["2024", "2024"])))
    explicit = parse_filter({"entity": "ACME_CN"})
    combined = combine(explicit, extracted)
    assert combined == And((explicit, Predicate("period", "between", ["2024", "2024"])))
    assert combine(explicit, None) == explicit
    assert combine(None, extracted) == extracted
    assert combine(explicit, Predicate("entity", "eq", "X")) == explicit


class Provider:
    def __init__(self, reply: str | Exception) -> None:
        self.reply = reply

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_llm_extractor_keeps_known_fields_and_failures_are_contained() -> None:
    reply = 'Sure: {"entity": "ACME_CN", "period": {"gte": "2024"}, "mood": "happy"}'
    assert LLMFilterExtractor(Provider(reply)).extract("q") == And(
        (Predicate("entity", "eq", "ACME_CN"), Predicate("period", "gte", "2024"))
    )
    assert LLMFilterExtractor(Provider("{}")).extract("q") is None
    for bad in (RuntimeError("timeout"), "not json {", '{"entity": {"like": "x"}}'):
        spec, error = safe_extract(LLMFilterExtractor(Provider(bad)), "q")
        assert spec is None and error
    assert safe_extract(None, "q") == (None, None)
