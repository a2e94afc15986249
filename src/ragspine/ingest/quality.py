"""Garbled-text detection: text a loader extracted that is not readable language.

Invariant: `garbled_share(text)` is the share (0..1) of the text's non-space characters that a
reader would not read:
- PDF glyph-name tokens (`/g18`, `/uni4E2D`, `/C0_12`, `/glyph42`, `(cid:12)`: a font without a
  usable ToUnicode map);
- unprintable characters: the replacement character U+FFFD, controls, private use,
  noncharacters and lone surrogates, and `锟斤拷` (UTF-8 replacement bytes read as GBK);
- mojibake: UTF-8 read as windows-1252/Latin-1 (`Ã©`, `â€™`, `Â `), and letter soup, the
  impossible script mix of East Asian (or any multi-byte) text read one byte per character:
  every word holding two adjacent Latin-1/windows-1252 letters or symbols (`Ä¿Â¼ ¹Ø ÓÚ ºì
  ¾ü` is GBK 目录 关于红军 read as Latin-1) where such characters are at least a third of
  the word, and the word also holds a symbol no word holds (`¹`, `¾`), three of them in a row,
  or no ASCII letter, counts whole; quotes, dashes, `¿ ¡ ° · × ÷` never start it (`«Ça»`,
  `—“Hi”`, German `Größe`, and `××市`, a Chinese placeholder, are real text).
It is deterministic and linear in the text. A document at or above `GARBLED_SHARE` is marked
garbled by the ingest (a warning in the summary, `garbled` in its registry metadata;
`--skip-garbled` fails it instead). Readable Chinese, Korean, English and accented European text
scores near 0; a document of extraction garbage near 1.
"""

from __future__ import annotations

import re

# A share this high is not a few odd characters in a real text.
GARBLED_SHARE = 0.2

_GLYPH_NAMES = re.compile(r"/(?:g\d+|G\d+|uni[0-9A-Fa-f]{4,6}|u[0-9A-Fa-f]{4,6}|C\d+_\d+|glyph\d+|cid:?\d+)")
_CID = re.compile(r"\(cid:\d+\)")
# UTF-8 lead bytes read as cp1252/latin-1 (Ã Â Ä Å Æ Ð Ñ â ã ä å æ ç è é ï ð ...) followed by a
# continuation byte read the same way (U+0080..U+00BF or the cp1252 punctuation it maps to).
_MOJIBAKE = re.compile("[\u00c2-\u00c3\u00c5\u00e2\u00e3\u00e4\u00e5\u00e6\u00e7\u00e8\u00e9\u00ef\u00f0]"
                       "[\u0080-\u00bf\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc"
                       "\u2013\u2014\u2018-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122]")  # fmt: skip
# The characters one byte of a multi-byte encoding turns into when read as windows-1252/Latin-1
# (bytes 0x80..0xFF), besides the no-break space.
SINGLE_BYTE = ("\u0080-\u009f\u00a1-\u00ff\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc"
               "\u2013\u2014\u2018-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122")  # fmt: skip
# Those of them real text puts next to a letter or each other: quotes, dashes, ¿ ¡, the
# placeholder ×, the name dot ·, ° and ÷.
_PUNCTUATION = "«»¿¡°·×÷\u2013\u2014\u2018-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a"
# Two of them side by side, neither a punctuation mark real text puts there.
_IS_SINGLE_BYTE, _IS_PUNCTUATION = re.compile(f"[{SINGLE_BYTE}]"), re.compile(f"[{_PUNCTUATION}]")
_SOUP_CHARS = re.escape("".join(
    ch for ch in map(chr, range(0x80, 0x2200)) if _IS_SINGLE_BYTE.match(ch) and not _IS_PUNCTUATION.match(ch)
))  # fmt: skip
LETTER_SOUP = re.compile(f"[{_SOUP_CHARS}]{{2}}")
# What makes such a pair soup rather than a German `öß`: a symbol real words do not hold
# (¢ £ ¤ ¥ ¦ § ¨ © ª ¬ ® ¯ ± ² ³ ´ µ ¶ ¸ ¹ º ¼ ½ ¾, C1 controls, ƒ ˆ ˜), a third such character
# in a row, or no ASCII letter in the word at all.
_SYMBOL = re.compile("[\u0080-\u009f\u00a2-\u00a9\u00ac\u00ae\u00af\u00b1-\u00b6\u00b8-\u00ba\u00bc-\u00be"
                     "\u0192\u02c6\u02dc]")  # fmt: skip
_RUN_OF_THREE = re.compile(f"[{_SOUP_CHARS}]{{3}}")
_ASCII_LETTER = re.compile("[A-Za-z]")
_SINGLE_BYTE_CHAR = re.compile(f"[{SINGLE_BYTE}]")
_WORD = re.compile(r"\S+")
_GBK_REPLACEMENT = re.compile("锟斤拷")
# Controls (not line ends or tabs), surrogates, private use (BMP and planes 15-16), noncharacters
# and the replacement character.
_UNREADABLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ue000-\uf8ff\ufdd0-\ufdef\ufffd-\uffff"
    "\U000f0000-\U0010ffff]"
)


def is_letter_soup(word: str) -> bool:
    """Whether one whitespace-free `word` is letter soup (see the module docstring).

    >>> is_letter_soup("¹ØÓÚ"), is_letter_soup("ÖÐ"), is_letter_soup("Größe"), is_letter_soup("«Ça»")
    (True, True, False, False)
    """
    if not LETTER_SOUP.search(word) or 3 * len(_SINGLE_BYTE_CHAR.findall(word)) < len(word):
        return False
    return bool(_SYMBOL.search(word) or _RUN_OF_THREE.search(word) or not _ASCII_LETTER.search(word))


def soup_words(text: str) -> list[tuple[int, int]]:
    """The `(start, end)` spans of the whitespace-delimited words of `text` that are letter soup,
    in order (only the words around a soup pair are looked at: linear and fast on clean text).

    >>> soup_words("ok ¹ØÓÚ Größe ºì")
    [(3, 7), (14, 16)]
    """
    out: list[tuple[int, int]] = []
    checked = 0  # the end of the last word looked at: each word is looked at once
    for pair in LETTER_SOUP.finditer(text):
        if pair.start() < checked:
            continue
        word = _WORD.search(text, _word_start(text, pair.start(), checked))
        if word is not None:
            checked = word.end()
            if is_letter_soup(word.group()):
                out.append(word.span())
    return out


def _word_start(text: str, at: int, floor: int) -> int:
    """Where the word holding `text[at]` starts (not before `floor`, a word boundary)."""
    while at > floor and not text[at - 1].isspace():
        at -= 1
    return at


def garbled_share(text: str) -> float:
    """The share of non-space characters that are garbage (see the module docstring).

    >>> garbled_share("/g18/g152/g3/g77 /g18/g90")
    1.0
    >>> garbled_share("营收下滑的原因是出口减少。Revenue fell; café prices rose.")
    0.0
    >>> garbled_share("Ä¿Â¼ ¹ØÓÚºì¾ü×÷Õ½µÄ¼¸¸öÎÊÌâ")
    1.0
    """
    visible = len("".join(text.split()))
    if visible <= 0:
        return 0.0
    bad = bytearray(len(text))  # 1 where a character is garbage; each counted once
    for pattern in (_GLYPH_NAMES, _CID, _MOJIBAKE, _GBK_REPLACEMENT):
        for match in pattern.finditer(text):
            bad[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    for start, end in soup_words(text):
        bad[start:end] = b"\x01" * (end - start)
    for match in _UNREADABLE.finditer(text):
        bad[match.start()] = 1
    return min(1.0, sum(bad) / visible)
