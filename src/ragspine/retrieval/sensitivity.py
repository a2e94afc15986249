"""Sensitivity labels: the one spelling rule, the one RESTRICTED test, the known-levels check.

Invariants:
- `normalize_label` is the only spelling rule for a label: NFKC, default-ignorable format
  characters (zero-width space, soft hyphen, BOM) dropped, case-folded, trimmed, then the
  canonical upper-case spelling. So the full-width `ＲＥＳＴＲＩＣＴＥＤ`, `" restricted\\u3000"`
  and `Restricted` are all `RESTRICTED`. The chunk stores apply it to every row they write, so
  nothing un-normalised is ever stored.
- `is_restricted(x)` is exactly `normalize_label(x) == RESTRICTED_SENSITIVITY`. Every exit
  (rerank #1, link #2, multi-library search, ask, chunks, the HTTP API) and the remote-embedding
  guard call it, so a label an older version stored in another spelling is still RESTRICTED:
  anything that normalises to RESTRICTED is restricted (fails closed).
- `check_label` is the ingest gate: a label that is not one of the known levels after
  normalisation raises `UnknownSensitivityError` naming the label, the levels and its origin;
  it never passes silently.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from functools import lru_cache

RESTRICTED_SENSITIVITY = "RESTRICTED"
# Least strict first; a sensitivity rule file may declare others (`levels = [...]`).
DEFAULT_LEVELS: tuple[str, ...] = ("PUBLIC", "INTERNAL", "CONFIDENTIAL", RESTRICTED_SENSITIVITY)


class UnknownSensitivityError(ValueError):
    """A sensitivity label that is not one of the known levels (after normalisation)."""


def normalize_label(label: object) -> str:
    """The canonical spelling of a sensitivity label (see the module docstring).

    >>> [normalize_label(x) for x in ("ＲＥＳＴＲＩＣＴＥＤ", " restricted\\u3000", "Public")]
    ['RESTRICTED', 'RESTRICTED', 'PUBLIC']
    """
    text = str(label)
    if text.isascii():  # the common case: NFKC and case-folding change nothing ASCII upper() does not
        return text.strip().upper()
    return _normalize_unicode(text)


@lru_cache(maxsize=1024)
def _normalize_unicode(text: str) -> str:
    """The full normalisation (labels take few distinct values, so results are kept)."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return unicodedata.normalize("NFKC", text.casefold()).strip().upper()


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
