"""Cheap, offline language detection for the `language` metadata field: 'zh', 'en' or 'other'.

Invariant: deterministic and linear in a bounded sample (the first `SAMPLE_CHARS` characters), so
it costs the same on a 10 KB note and a 100 MB report. Rules, on that sample:
- Han characters count one unit each, words of any other script one unit each;
- kana above a tenth of the Han+kana characters means Japanese: 'other';
- Han at least a fifth of all units: 'zh' (Chinese with English terms stays 'zh');
- Latin words the majority: 'en', unless the function words of another common Latin-script
  language (French, German, Spanish, Italian, Portuguese, Dutch) outnumber the English ones and
  are at least `OTHER_STOPWORD_SHARE` of the words: then 'other' (term lists and tables stay 'en');
- anything else with letters: 'other'; no letters at all: '' (unknown).
"""

from __future__ import annotations

import re

SAMPLE_CHARS = 20_000
OTHER_STOPWORD_SHARE = 0.08
_HAN = re.compile("[\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_LATIN_WORD = re.compile("[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]+")
_LETTER_RUN = re.compile(r"[^\W\d_]+")
EN_STOPWORDS = frozenset(
    "a an and are as at be been but by for from had has have he her his i if in into is it its "
    "not of on or our she that the their them there these they this to was we were which who will "
    "with would you".split()
)
_OTHER_STOPWORDS: dict[str, frozenset[str]] = {
    "fr": frozenset("le la les des du une est et en dans pour pas que qui sur au aux avec ce cette".split()),
    "de": frozenset("der die das und ist nicht ein eine mit den dem des zu von auf sich auch für".split()),
    "es": frozenset("el la los las del que y en un una es por con para se lo su al".split()),
    "it": frozenset("il la le di che e è un una per non con del della sono gli nel".split()),
    "pt": frozenset("o a os as do da dos das que e em um uma é não com para se por".split()),
    "nl": frozenset("de het een en van is dat niet op te zijn met voor die er ook".split()),
}


def detect_language(text: str) -> str:
    """'zh', 'en', 'other', or '' when the text has no letters; see the module docstring."""
    sample = text[:SAMPLE_CHARS]
    han = len(_HAN.findall(sample))
    kana = len(_KANA.findall(sample))
    latin = [word.lower() for word in _LATIN_WORD.findall(sample)]
    other_words = sum(
        1 for run in _LETTER_RUN.findall(_LATIN_WORD.sub(" ", _HAN.sub(" ", _KANA.sub(" ", sample))))
    )
    units = han + kana + len(latin) + other_words
    if units == 0:
        return ""
    if kana > 0.1 * (han + kana):
        return "other"
    if han >= 0.2 * units:
        return "zh"
    if len(latin) > 0.5 * units:
        return "en" if _looks_english(latin) else "other"
    return "other"


def _looks_english(words: list[str]) -> bool:
    english = sum(1 for word in words if word in EN_STOPWORDS)
    for stopwords in _OTHER_STOPWORDS.values():
        hits = sum(1 for word in words if word in stopwords)
        if hits > english and hits >= OTHER_STOPWORD_SHARE * len(words):
            return False
    return True
