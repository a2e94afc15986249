"""The tokenizer per script: the specification's ASCII and CJK behaviour, and nothing else
dropped (module docstring of ragspine.retrieval.lexical.tokenize)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragspine.retrieval.lexical.tokenize import tokenize


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Revenue FELL, 2024!", ["revenue", "fell", "2024"]),  # ASCII runs, lower-cased
        ("营收下滑", ["营", "收", "下", "滑", "营收", "收下", "下滑"]),  # CJK unigrams then bigrams
        ("〇一", ["〇", "一", "〇一"]),
        ("Café naïve Ångström", ["café", "naïve", "ångström"]),  # Latin with diacritics
        ("cafe\u0301", ["café"]),  # decomposed accents are composed (NFKC)
        ("Москва и Санкт-Петербург", ["москва", "и", "санкт", "петербург"]),  # Cyrillic
        ("Αθήνα και Σπάρτη", ["αθήνα", "και", "σπάρτη"]),  # Greek
        ("ひらがな", ["ひ", "ら", "が", "な", "ひら", "らが", "がな"]),  # hiragana as CJK
        ("カタカナー", ["カ", "タ", "カ", "ナ", "ー", "カタ", "タカ", "カナ", "ナー"]),
        ("ｶﾀ", ["カ", "タ", "カタ"]),  # half-width katakana → full-width
        ("한국어 텍스트", ["한국어", "텍스트"]),  # Hangul: words at spaces
        ("ＡＢＣ１２３", ["abc123"]),  # full-width forms → ASCII
        ("ﬁnance", ["finance"]),  # compatibility ligature unfolded
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # combining marks stay in their word
        ("مرحبا بالعالم", ["مرحبا", "بالعالم"]),  # Arabic
        ("1,234.5 and 3.5% of 2024-06", ["1,234.5", "and", "3.5", "of", "2024", "06"]),
        ("snake_case e.g. x", ["snake", "case", "e", "g", "x"]),  # separators
        ("ACME营收 up", ["acme", "营", "收", "营收", "up"]),  # mixed runs in text order
        ("", []),
        ("!? —", []),
    ],
)
def test_tokens_per_script(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


@given(st.text())
def test_tokenize_never_raises_and_emits_no_separators(text: str) -> None:
    for token in tokenize(text):
        assert token and not any(ch.isspace() or ch == "_" for ch in token)


@given(st.text(alphabet=st.characters(codec="ascii")))
def test_ascii_is_the_specifications_rule(text: str) -> None:
    import re

    assert tokenize(text) == [t.lower() for t in re.findall(r"\d+(?:[.,]\d+)+|[A-Za-z0-9]+", text)]


@given(st.text(alphabet=st.characters(codec="ascii")))
def test_the_ascii_shortcut_gives_the_general_paths_tokens(text: str) -> None:
    from ragspine.retrieval.lexical.tokenize import unicode_tokens

    assert tokenize(text) == unicode_tokens(text)
