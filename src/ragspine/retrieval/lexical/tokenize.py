"""The analyzer shared by indexing and querying.

`tokenize(text)` emits, in text order:
- text is NFKC-normalised (full-width letters and digits become ASCII, half-width katakana
  become full-width, compatibility forms such as "ﬁ" or "①" are unfolded) and lower-cased
  (`str.lower`: "ß" stays "ß", "İ" becomes "i" + combining dot above);
- each run of Han ideographs (with 〇) or kana (hiragana, katakana with ー) emits every
  character (unigrams), then every adjacent pair (bigrams) — the specification's CJK design,
  which needs no segmenter;
- a number with internal separators ("1,234.5", "3.5") is one token;
- every other run of letters, digits and combining marks in any script (ASCII, accented Latin,
  Greek, Cyrillic, Hangul syllables or jamo, Arabic, Hebrew, Devanagari, Thai, …) is one token:
  combining marks (Unicode category M) stay inside the word they modify, so "हिन्दी" is one token;
  underscores, punctuation, symbols and spaces separate tokens, and are never emitted.
Nothing is dropped but separators. Scripts written without spaces other than CJK (Thai, Lao,
Khmer, Myanmar) give one token per run; Hangul is split at spaces, not into syllables. For ASCII
text this is exactly the specification's rule (lower-cased alphanumeric runs), and ASCII text
takes a shorter path with the same output (no CJK, no marks, NFKC changes nothing).
"""

from __future__ import annotations

import re
import unicodedata

from ragspine.retrieval.lexical.marks import UNICODE_VERSION, mark_ranges

_CJK_CLASS = (
    "\u3007\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002ebef\U00030000-\U0003134f"
)
CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")


def scan_mark_ranges() -> list[tuple[int, int]]:
    """(first, last) ranges of every combining mark in planes 0-1, scanned from this Python's
    Unicode database (what `marks.MARK_RANGES` holds for its version)."""
    ranges: list[tuple[int, int]] = []
    for c in range(0x20000):
        if unicodedata.category(chr(c))[0] != "M":
            continue
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1] = (ranges[-1][0], c)
        else:
            ranges.append((c, c))
    return ranges


def _mark_class() -> str:
    """Character-class ranges of every combining mark (category M) in planes 0-1 and the
    variation selectors supplement, from this Python's Unicode database."""
    ranges = mark_ranges() if unicodedata.unidata_version == UNICODE_VERSION else scan_mark_ranges()
    ranges.append((0xE0100, 0xE01EF))
    return "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges)


# Underscores are turned into spaces first, so \w means letters, digits (and marks, added).
_WORD = re.compile(rf"\d+(?:[.,]\d+)+|[\w{_mark_class()}]+")
# `_WORD` on lower-cased ASCII text without underscores (\w is then [a-z0-9]).
_ASCII_WORD = re.compile(r"\d+(?:[.,]\d+)+|[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Tokens of `text` per the module docstring; never raises on any `str`.

    >>> tokenize("ACME营收下滑 3.5%")
    ['acme', '营', '收', '下', '滑', '营收', '收下', '下滑', '3.5']
    >>> tokenize("Café Москва Αθήνα ｶﾀ 한국어 ＡＢＣ１ हिन्दी snake_case")
    ['café', 'москва', 'αθήνα', 'カ', 'タ', 'カタ', '한국어', 'abc1', 'हिन्दी', 'snake', 'case']
    """
    if text.isascii():
        return _ASCII_WORD.findall(text.lower().replace("_", " "))
    return unicode_tokens(text)


def unicode_tokens(text: str) -> list[str]:
    """`tokenize` without its ASCII shortcut (the same tokens for any text)."""
    normal = unicodedata.normalize("NFKC", text).lower().replace("_", " ")
    tokens: list[str] = []
    cursor = 0
    for run in CJK_RUN.finditer(normal):
        tokens.extend(_WORD.findall(normal, cursor, run.start()))
        chars = run.group()
        tokens.extend(chars)
        tokens.extend(chars[i : i + 2] for i in range(len(chars) - 1))
        cursor = run.end()
    tokens.extend(_WORD.findall(normal, cursor))
    return tokens
