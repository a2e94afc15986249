"""The gate's word boundaries are the tokenizer's (issue 34, item 8): every variant the tokenizer
would match to a denied name is refused, and one it keeps as another word passes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.link.guarded import QueryPlan
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.query.gate import GateRules, SecurityGate
from ragspine.retrieval.query.glossary import Glossary

DENIED = "names the denied entity 'BOREALIS'"


@pytest.fixture(scope="module")
def gate() -> SecurityGate:
    return SecurityGate(GateRules(deny_entities=("BOREALIS",)))


@pytest.mark.parametrize(
    "text",
    ["borealis_zzz", "_borealis_", "zzz_borealis", "BOREALIS-ASA", "borealis.com", "ＢＯＲＥＡＬＩＳ",
     "ＢＯＲＥＡＬＩＳ＿ｚｚｚ", "Borealis's revenue", "营收borealis_2024", "x/borealis/y", "BoReAlIs"],
)  # fmt: skip
def test_every_spelling_the_tokenizer_splits_out_is_refused(gate: SecurityGate, text: str) -> None:
    assert "borealis" in tokenize(text)  # the tokenizer would retrieve Borealis for it
    assert gate.check(text, origin="rag_fusion") == DENIED
    assert gate.check(text) == DENIED
    assert gate.screen([text]).allowed == []


@pytest.mark.parametrize("text", ["borealisx", "xborealis", "borealis2", "bore alis", "arrival"])
def test_a_word_the_tokenizer_keeps_whole_passes(gate: SecurityGate, text: str) -> None:
    # "borealisx" is one token for the tokenizer (and for en-stem): it never retrieves "borealis"
    assert "borealis" not in tokenize(text)
    assert gate.check(text) is None


def test_a_denied_cjk_name_is_refused_wherever_its_characters_run_in_order() -> None:
    gate = SecurityGate(GateRules(deny_entities=("北极光",)))
    for text in ("北极光", "查询北极光公司营收", "ABC北极光2024", "北极 光", "北_极-光", "北极光_zzz"):
        assert gate.check(text) == "names the denied entity '北极光'", text
    for text in ("北极", "光北极", "北光极", "极光"):
        assert gate.check(text) is None, text


def test_glossary_aliases_of_a_denied_name_use_the_same_boundaries() -> None:
    glossary = Glossary.from_dict({"entities": {"BOREALIS": ["Borealis ASA", "北极光"]}})
    gate = SecurityGate(GateRules(deny_entities=("BOREALIS",)), glossary)
    for text in ("borealis_asa results", "BOREALIS-ASA", "ｂｏｒｅａｌｉｓ　ａｓａ", "北极光_2024"):
        assert gate.check(text) == DENIED, text


def test_the_stemmed_form_the_default_analyzer_matches_is_refused_too() -> None:
    gate = SecurityGate(GateRules(deny_entities=("Rival",)))
    assert gate.check("rivals revenue") == "names the denied entity 'Rival'"  # en-stem: rivals -> rival
    assert gate.check("arrival times and rivalry") is None


def test_words_are_the_tokenizers_in_text_order() -> None:
    from ragspine.retrieval.lexical.words import mentions, words  # here: the file also runs on ebe533d

    assert words("ＢＯＲＥＡＬＩＳ_zzz 北极光") == ["borealis", "zzz", "北", "极", "光"]
    assert mentions(words("a borealis_asa b"), words("Borealis ASA"))
    assert not mentions(words("anything"), words("..."))


# -- properties -------------------------------------------------------------------------------
# fillers none of which is, or stems to, the denied word; separators the tokenizer splits on, or none
_FILLERS = st.sampled_from(["borealisx", "xborealis", "bore", "alis", "aurora", "zzz", "arrival", "2024", "营收"])
_NAMES = st.sampled_from(["borealis", "BOREALIS", "Borealis", "ＢＯＲＥＡＬＩＳ", "ｂｏｒｅａｌｉｓ"])
_SEPARATORS = st.sampled_from(["", " ", "_", "-", ".", "/", "＿", "\u3000", ",", "'"])


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.one_of(_FILLERS, _NAMES), max_size=6), seps=st.lists(_SEPARATORS, min_size=7, max_size=7))
def test_refused_exactly_when_the_tokenizer_finds_the_denied_word(
    gate: SecurityGate, parts: list[str], seps: list[str]
) -> None:
    text = seps[0] + "".join(p + s for p, s in zip(parts, seps[1:], strict=False))
    if not text.strip():
        return  # blank: refused for that, not for a name
    refused = gate.check(text, origin="sub_question") is not None
    assert refused == ("borealis" in tokenize(text)), (text, tokenize(text))


_CJK_SEPARATORS = " _-.,/，。\u3000"


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("北极光南 _-.,/，。\u3000"), min_size=1, max_size=12))
def test_a_cjk_name_is_refused_exactly_when_its_characters_run_in_order(text: str) -> None:
    gate = SecurityGate(GateRules(deny_entities=("北极光",)))
    if not text.strip():
        return
    joined = re.sub(f"[{re.escape(_CJK_SEPARATORS)}]", "", text)  # separators split, never join, words
    assert (gate.check(text) is not None) == ("北极光" in joined)


# -- end to end -------------------------------------------------------------------------------
def test_a_refused_spelling_retrieves_nothing_through_the_pipeline() -> None:
    plan = QueryPlan(gate=SecurityGate(GateRules(deny_entities=("BOREALIS",))))
    retriever, store = build_narrative_retriever(":memory:", query_plan=plan)
    try:
        retriever.index.ingest("Borealis revenue fell in 2024", DocumentMeta("b"))
        retriever.index.ingest("Aurora revenue rose in 2024", DocumentMeta("a"))
        for query in ("borealis_zzz", "_borealis_", "BOREALIS-ASA revenue", "borealis.com", "ＢＯＲＥＡＬＩＳ"):
            run = retriever.retrieve_run(query)
            assert run.snippets == [] and retriever.retrieve(query) == [], query
            assert run.refusal == "security gate: the query names the denied entity 'BOREALIS'"
        assert [s["doc_id"] for s in retriever.retrieve("aurora revenue")][:1] == ["a"]
    finally:
        store.close()
