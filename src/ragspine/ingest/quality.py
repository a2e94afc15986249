"""Garbled-text detection: text a loader extracted that is not readable language.

Invariant: `garbled_share(text)` is the share (0..1) of the text's non-space characters that sit
in garbage: PDF glyph-name tokens (`/g18`, `/uni4E2D`, `/C0_12`, `/glyph42`: a font without a
usable ToUnicode map), the replacement character U+FFFD, controls and private-use characters,
and mojibake (UTF-8 read as windows-1252/Latin-1: `Ã©`, `â€™`, `Â `). It is deterministic and
linear in the text. A document at or above `GARBLED_SHARE` is marked garbled by the ingest (a
warning in the summary, `garbled` in its registry metadata; `--skip-garbled` fails it instead).
Readable Chinese, English and accented European text scores near 0.
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
_JUNK = re.compile("[\ufffd\ue000-\uf8ff\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def garbled_share(text: str) -> float:
    """The share of non-space characters that are garbage (see the module docstring).

    >>> garbled_share("/g18/g152/g3/g77 /g18/g90")
    1.0
    >>> garbled_share("营收下滑的原因是出口减少。Revenue fell; café prices rose.")
    0.0
    """
    visible = len(text) - sum(1 for ch in text if ch.isspace())
    if visible <= 0:
        return 0.0
    bad = sum(len(m.group()) for m in _GLYPH_NAMES.finditer(text))
    bad += sum(len(m.group()) for m in _CID.finditer(text))
    bad += sum(len(m.group()) for m in _MOJIBAKE.finditer(text))
    bad += len(_JUNK.findall(text))
    return min(1.0, bad / visible)
