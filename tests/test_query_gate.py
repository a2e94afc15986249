"""The security gate: rules, budgets, refusals with reasons; properties over random variants and rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.query.gate import (
    QUERY_ORIGIN,
    GateRules,
    SecurityGate,
    fold,
    load_gate_rules,
)
from ragspine.retrieval.query.glossary import Glossary

GLOSSARY = Glossary.from_dict({"entities": {"RIVAL_CO": ["对手公司", "Rival Corp"], "ACME_CN": ["艾克美中国"]}})


def test_a_denied_entity_is_refused_under_every_synonym_case_and_width() -> None:
    gate = SecurityGate(GateRules(deny_entities=("RIVAL_CO",)), GLOSSARY)
    for text in ("对手公司2024年营收", "rival corp revenue", "ＲＩＶＡＬ＿ＣＯ margins", "RIVAL_CO"):
        assert gate.check(text, origin="rag_fusion") == "names the denied entity 'RIVAL_CO'"
    assert gate.check("艾克美中国2024年营收") is None


def test_ascii_names_match_whole_words_only() -> None:
    gate = SecurityGate(GateRules(deny_entities=("Rival",)))
    assert gate.check("rival's revenue") is not None
    assert gate.check("arrival times and rivalry") is None


def test_denied_patterns_match_case_insensitively_after_nfkc() -> None:
    gate = SecurityGate(GateRules(deny_patterns=(r"salar(y|ies)", r"工资")))
    assert gate.check("CEO SALARY 2024") == "matches the denied pattern 'salar(y|ies)'"
    assert gate.check("员工工资") == "matches the denied pattern '工资'"
    assert gate.check("revenue") is None


def test_patterns_with_back_references_are_still_matched_one_by_one() -> None:
    gate = SecurityGate(GateRules(deny_patterns=(r"(x)y", r"(a)\1", r"(?P<w>b)(?P=w)")))
    backref = r"(a)\1"
    assert gate.check("aa") == f"matches the denied pattern {backref!r}"
    assert gate.check("bb") == "matches the denied pattern '(?P<w>b)(?P=w)'"
    assert gate.check("ab") is None
    flagged = SecurityGate(GateRules(deny_patterns=(r"x", r"(?i)secret")))  # inline flags: not combinable
    assert flagged.check("a SECRET plan") == "matches the denied pattern '(?i)secret'"


def test_the_length_budget_holds_generated_text_not_the_callers_query() -> None:
    gate = SecurityGate(GateRules(max_chars=10))
    assert gate.check("x" * 11, origin=QUERY_ORIGIN) is None
    assert gate.check("x" * 11, origin="hyde") == "longer than the budget of 10 characters (11)"
    assert gate.check("x" * 10, origin="hyde") is None


def test_screen_keeps_order_drops_duplicates_and_refuses_past_the_count_budget() -> None:
    gate = SecurityGate(GateRules(deny_entities=("RIVAL_CO",), max_variants=3), GLOSSARY)
    screened = gate.screen(
        ["q", "a", "q", "对手公司 q", "b", "c", " "],
        origins=["query", "rewriter", "rewriter", "rag_fusion", "rag_fusion", "rag_fusion", "rag_fusion"],
    )
    assert screened.allowed == ["q", "a", "b"]
    assert screened.origins == ["query", "rewriter", "rag_fusion"]
    assert [(r.query, r.origin, r.reason.split(" ")[0]) for r in screened.refused] == [
        ("对手公司 q", "rag_fusion", "names"),
        ("c", "rag_fusion", "over"),
        (" ", "rag_fusion", "blank"),
    ]
    assert screened.refused[0].to_dict() == {
        "query": "对手公司 q", "origin": "rag_fusion", "reason": "names the denied entity 'RIVAL_CO'"
    }  # fmt: skip


def test_screen_needs_one_origin_per_variant() -> None:
    with pytest.raises(ValueError, match="2 variants but 1 origins"):
        SecurityGate().screen(["a", "b"], origins=["query"])


def test_rules_from_a_file_and_their_errors(tmp_path: Path) -> None:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps({"deny_entities": ["RIVAL_CO"], "deny_patterns": ["x+"], "max_chars": 50,
                                "_comment": "ignored"}), "utf-8")  # fmt: skip
    assert load_gate_rules(path) == GateRules(("RIVAL_CO",), ("x+",), 50)
    assert load_gate_rules(None) == GateRules()
    for data, message in [
        ({"deny": []}, "unknown key"),
        ({"deny_patterns": ["("]}, "not a valid regular expression"),
        ({"max_variants": 0}, "budgets must be >= 1"),
        ({"deny_entities": "RIVAL_CO"}, "must be a list of strings"),
        ({"max_chars": "10"}, "must be an integer"),
        ([], "expected a JSON object"),
    ]:
        path.write_text(json.dumps(data), "utf-8")
        with pytest.raises(ValueError, match=message):
            load_gate_rules(path)
    with pytest.raises(ValueError, match="not found"):
        load_gate_rules(tmp_path / "missing.json")


# -- properties -------------------------------------------------------------------------------
_TEXT = st.text(alphabet=st.sampled_from("ab xyz营收对手公司RIVAL_co竞品 ,.?"), max_size=30)
_RULES = st.builds(
    GateRules,
    deny_entities=st.lists(st.sampled_from(["RIVAL_CO", "竞品", "xyz", "对手"]), max_size=3).map(tuple),
    deny_patterns=st.lists(st.sampled_from([r"a{3}", r"营收\s*\?", r"^z"]), max_size=2).map(tuple),
    max_chars=st.integers(1, 40),
    max_variants=st.integers(1, 6),
)


@settings(max_examples=300, deadline=None)
@given(rules=_RULES, variants=st.lists(_TEXT, max_size=10), first_is_query=st.booleans())
def test_screen_partitions_its_input_and_never_lets_a_refusable_variant_through(
    rules: GateRules, variants: list[str], first_is_query: bool
) -> None:
    gate = SecurityGate(rules, GLOSSARY)
    origins = [QUERY_ORIGIN if first_is_query and i == 0 else "llm" for i in range(len(variants))]
    screened = gate.screen(variants, origins=origins)
    assert screened == gate.screen(variants, origins=origins)  # deterministic
    assert len(screened.allowed) <= rules.max_variants
    assert len(set(screened.allowed)) == len(screened.allowed)
    for text, origin in zip(screened.allowed, screened.origins, strict=True):
        assert gate.check(text, origin=origin) is None
    # every input is allowed, refused (with a reason) or a duplicate of an allowed one
    refused = [r.query for r in screened.refused]
    for text in variants:
        assert text in screened.allowed or text in refused
    assert all(r.reason for r in screened.refused)
    # order is kept
    positions = [variants.index(t) for t in screened.allowed]
    assert positions == sorted(positions)


@settings(max_examples=300, deadline=None)
@given(before=_TEXT, after=_TEXT, term=st.sampled_from(["对手公司", "Rival Corp", "rival_co", "ＲＩＶＡＬ＿ＣＯ"]))
def test_a_denied_entity_anywhere_is_refused(before: str, after: str, term: str) -> None:
    gate = SecurityGate(GateRules(deny_entities=("RIVAL_CO",)), GLOSSARY)
    text = f"{before} {term} {after}"
    assert gate.check(text, origin="sub_question") is not None
    assert not gate.screen([text], origins="sub_question").allowed
    assert fold(term) in fold(text)
