"""The analyzer shared by indexing and querying.

`tokenize(text)` emits, in text order:
- text is NFKC-normalised (full-width letters and digits become ASCII, half-width katakana
  become full-width) and lower-cased;
- each run of Han ideographs (with 〇) or kana emits every character (unigrams), then every
  adjacent pair (bigrams) — the specification's CJK design, which needs no segmenter;
- a number with internal separators ("1,234.5", "3.5") is one token;
- every other run of letters and digits in any script (ASCII, accented Latin, Greek, Cyrillic,
  Hangul, Arabic, …) is one token; underscores, punctuation, symbols and spaces separate tokens.
For ASCII text this is exactly the specification's rule (lower-cased alphanumeric runs).
"""

from __future__ import annotations

import re
import unicodedata

_CJK_CLASS = (
    "\u3007\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002ebef\U00030000-\U0003134f"
)
CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_WORD = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Tokens of `text` per the module docstring; never raises on any `str`.

    >>> tokenize("ACME营收下滑 3.5%")
    ['acme', '营', '收', '下', '滑', '营收', '收下', '下滑', '3.5']
    """
    normal = unicodedata.normalize("NFKC", text).lower()
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
