"""Sensitivity labels: the one spelling rule, the one RESTRICTED test, the known-levels check.

Invariants:
- `normalize_label` is the only spelling rule for a label: NFKC, case-folded, invisible and
  control characters dropped (format characters such as the zero-width space, soft hyphen and
  BOM; NUL and other C0/C1 controls; combining marks, so the Turkish `İ` is `I`), letters that
  look like Latin ones mapped to them (Cyrillic `Е`, Greek `Ε`, small capitals: the Unicode
  TR39 confusables table of `confusable-homoglyphs` with a small hand table over it), surrounding
  whitespace and punctuation trimmed (`RESTRICTED.`), then the canonical upper-case spelling.
  So the full-width `ＲＥＳＴＲＩＣＴＥＤ`, `" restricted\\u3000"` and `Restricted` are all
  `RESTRICTED`. The chunk stores apply it to every row they write, so nothing un-normalised is
  ever stored. It is idempotent.
- Anything confusable with RESTRICTED is RESTRICTED (fails closed): when a label's skeleton (the
  normalised letters and digits alone, with look-alike digits read as letters: `0`→O, `1`→I)
  spells RESTRICTED, the label is RESTRICTED, e.g. `R.E.S.T.R.I.C.T.E.D` or `RESTR1CTED`.
- `is_restricted(x)` is exactly `normalize_label(x) == RESTRICTED_SENSITIVITY`. Every exit
  (rerank #1, link #2, multi-library search, ask, chunks, the HTTP API) and the remote-embedding
  guard call it, so a label an older version stored in another spelling is still RESTRICTED.
- `check_label` is the ingest gate: a label that is not one of the known levels after
  normalisation raises `UnknownSensitivityError` naming the label, the levels and its origin;
  it never passes silently.
- `fold_key` spells a metadata key (a sidecar's, a front matter's) by the same folding as a
  label (NFKC, case-folded, invisible characters and marks dropped, look-alike letters mapped,
  surrounding whitespace/punctuation trimmed), so `SENSITIVITY`, `sеnsitivity` (Cyrillic е),
  `ｓｅｎｓｉｔｉｖｉｔｙ` and `"sensitivity "` are all the key `sensitivity`.
- `match_form` is the one form sensitivity rule keywords and document text are compared in:
  NFKC, case-folded, look-alike letters mapped, invisible characters dropped, every run of
  whitespace and hyphens (any dash) one space; so `strictly confidential` matches
  `STRICTLY\\nCONFIDENTIAL`, `strictly\\u00a0 confidential`, `strictly-confidential`, full-width
  letters, and `绝密` matches `绝\\u200b密`.
- `strictest` picks the strictest of several labels by their order in the levels (least strict
  first); labels are only ever combined that way, so adding a source can only tighten.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from ragspine.errors import RagspineError

RESTRICTED_SENSITIVITY = "RESTRICTED"
# Least strict first; a sensitivity rule file may declare others (`levels = [...]`).
DEFAULT_LEVELS: tuple[str, ...] = ("PUBLIC", "INTERNAL", "CONFIDENTIAL", RESTRICTED_SENSITIVITY)

# Letters (after case-folding) that render like a Latin letter: Cyrillic, Greek, Latin small
# capitals and dotless i, read over the Unicode TR39 confusables table (`_lookalikes`); this
# hand table wins where both map a character, and covers what TR39 does not (small capitals,
# Greek τ, Cyrillic г).
_LOOKALIKES = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "ё": "e", "һ": "h", "н": "h", "і": "i",
        "ї": "i", "ј": "j", "к": "k", "ӏ": "l", "м": "m", "п": "n", "о": "o", "р": "p", "ԛ": "q",
        "г": "r", "ѕ": "s", "т": "t", "џ": "u", "у": "y", "ү": "y", "х": "x", "ԝ": "w", "з": "3",
        # Greek
        "α": "a", "β": "b", "ϲ": "c", "δ": "d", "ε": "e", "η": "n", "ι": "i", "κ": "k", "μ": "m",
        "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ζ": "z",
        # Latin small capitals and look-alikes
        "ᴀ": "a", "ʙ": "b", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ɢ": "g", "ʜ": "h", "ɪ": "i", "ı": "i",
        "ᴊ": "j", "ᴋ": "k", "ʟ": "l", "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p", "ʀ": "r", "ꜱ": "s",
        "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ʏ": "y", "ᴢ": "z",
    }
)  # fmt: skip
# Digits and signs read as letters, for the RESTRICTED skeleton only.
_SKELETON_DIGITS = str.maketrans({"0": "o", "1": "i", "3": "e", "5": "s", "7": "t", "|": "i", "!": "i"})
_RESTRICTED_SKELETON = "restricted"


class UnknownSensitivityError(RagspineError, ValueError):
    """A sensitivity label that is not one of the known levels (after normalisation)."""


def normalize_label(label: object) -> str:
    """The canonical spelling of a sensitivity label (see the module docstring).

    >>> [normalize_label(x) for x in ("ＲＥＳＴＲＩＣＴＥＤ", " restricted\\u3000", "Public", "RЕSTRICTED.")]
    ['RESTRICTED', 'RESTRICTED', 'PUBLIC', 'RESTRICTED']
    """
    return _normalize(str(label))


@lru_cache(maxsize=4096)
def _normalize(text: str) -> str:
    """The full normalisation (labels take few distinct values, so results are kept)."""
    for _ in range(4):  # to a fixed point: upper-casing can produce what NFKC folds again
        folded = _fold(text)
        if _skeleton(folded) == _RESTRICTED_SKELETON:
            return RESTRICTED_SENSITIVITY
        spelled = folded.upper()
        if spelled == text:
            break
        text = spelled
    return text


def fold_key(key: object) -> str:
    """A metadata key folded like a label, lower case (see the module docstring).

    >>> [fold_key(k) for k in ("SENSITIVITY", "s\u0435nsitivity", "ｓｅｎｓｉｔｉｖｉｔｙ", " Title ")]
    ['sensitivity', 'sensitivity', 'sensitivity', 'title']
    """
    return _fold(str(key))


_RUNS = re.compile(r"[\s\-\u2010-\u2015\u2212\ufe58\ufe63]+")
_DROPPED = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000e0000-\U000e0fff]"
)


def match_form(text: str) -> str:
    """`text` in the form rule keywords are matched in (see the module docstring).

    >>> match_form("STRICTLY\\nCONFIDENTIAL") == match_form("strictly-confidential") == "strictly confidential"
    True
    >>> match_form("绝\\u200b密")
    '绝密'
    """
    text = _DROPPED.sub("", unicodedata.normalize("NFKC", text).casefold())
    return _RUNS.sub(" ", text.translate(_lookalikes()))


@lru_cache(maxsize=1)
def _lookalikes() -> dict[int, str]:
    """Every non-ASCII character the Unicode TR39 confusables table (the `confusable-homoglyphs`
    package, a core dependency) lists as confusable with one ASCII letter, read as that letter
    in lower case, with the hand table `_LOOKALIKES` over it. Built once, at first use."""
    from confusable_homoglyphs import confusables

    table: dict[int, str] = {}
    for char, entries in confusables.confusables_data.items():
        if len(char) != 1 or char.isascii():
            continue
        latin = [e["c"] for e in entries if len(e["c"]) == 1 and e["c"].isascii() and e["c"].isalpha()]
        if latin:
            table[ord(char)] = latin[0].lower()
    return {**table, **_LOOKALIKES}


def _fold(text: str) -> str:
    """NFKC, case-folded, invisible/control characters and marks dropped, look-alike letters
    mapped to Latin, whitespace and punctuation trimmed from both ends."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = unicodedata.normalize("NFKD", text)  # İ -> I + COMBINING DOT ABOVE
    text = "".join(ch for ch in text if unicodedata.category(ch) not in _INVISIBLE)
    text = unicodedata.normalize("NFKC", text).translate(_lookalikes())
    return text.strip("".join(ch for ch in set(text) if _trimmed(ch)))


_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me"})


def _trimmed(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch)[0] in "PZS"


def _skeleton(folded: str) -> str:
    """The letters and digits alone, look-alike digits as letters (for the RESTRICTED test)."""
    return "".join(ch for ch in folded.translate(_SKELETON_DIGITS) if ch.isalnum())


def is_restricted(label: object) -> bool:
    """True when `label` normalises to RESTRICTED (any case, width or surrounding whitespace)."""
    return normalize_label(label) == RESTRICTED_SENSITIVITY


def check_label(label: object, levels: Iterable[str] = DEFAULT_LEVELS, *, source: str = "") -> str:
    """`label` normalised, or UnknownSensitivityError when that is not one of `levels`.

    `source` says where the label came from (e.g. "front matter of memo.md"), for the message.

    >>> check_label(" confidential ")
    'CONFIDENTIAL'
    """
    known = [normalize_label(level) for level in levels]
    normalised = normalize_label(label)
    if normalised in known:
        return normalised
    origin = f" (from {source})" if source else ""
    raise UnknownSensitivityError(
        f"sensitivity label {str(label)!r}{origin} is not a known level; use one of "
        f"{', '.join(known)} (a sensitivity rule file's `levels` can declare others)"
    )


def strictest(labels: Iterable[str], levels: Iterable[str] = DEFAULT_LEVELS) -> str | None:
    """The strictest of `labels` (each normalised) by its place in `levels`, least strict
    first; None when there are none. A label outside `levels` is UnknownSensitivityError.

    >>> strictest(["public", "RESTRICTED", "internal"])
    'RESTRICTED'
    """
    known = [normalize_label(level) for level in levels]
    ranks = [known.index(check_label(label, known)) for label in labels]
    return known[max(ranks)] if ranks else None
