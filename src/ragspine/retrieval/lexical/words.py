"""The words of a text in text order, as an analyzer sees them: what "mentions a term" means.

    from ragspine.retrieval.lexical.words import words, mentions

    words("ＢＯＲＥＡＬＩＳ_zzz 北极光")   # ['borealis', 'zzz', '北', '极', '光']

Invariants:
- `words(text, analyzer)` is the analyzer's own token list with each CJK run's bigrams left out,
  so the word boundaries, NFKC / case folding and CJK handling are the analyzer's (by default the
  specification's `tokenize`), never a second definition: each CJK character is one word, every
  other token is one word, in the order the text holds them.
- `mentions(text_words, term_words)` (and `first_mention`, over many terms) is true exactly when the term's words occur contiguously in
  the text's words: a denied "Borealis" is mentioned by "borealis_zzz", "_borealis_",
  "BOREALIS-ASA" and "borealis.com" (the tokenizer splits on `_`, `-` and `.`), not by "borealisx"
  (one token); a CJK name is mentioned wherever its characters appear in that order.
- An analyzer given here must keep `tokenize`'s positions (`analyzers.Analyzer` only rewrites ASCII
  alphabetic tokens, so CJK bigrams stay recognisable and are dropped alike).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from ragspine.retrieval.lexical.tokenize import CJK_RUN, tokenize

T = TypeVar("T")


def words(text: str, analyzer: Callable[[str], list[str]] = tokenize) -> list[str]:
    """`analyzer(text)` in text order, CJK bigrams left out (see the module docstring).

    >>> words("RIVAL_CO 营收下滑, borealis.com")
    ['rival', 'co', '营', '收', '下', '滑', 'borealis', 'com']
    """
    return [t for t in analyzer(text) if not (len(t) == 2 and CJK_RUN.fullmatch(t))]


def mentions(text_words: Sequence[str], term_words: Sequence[str]) -> bool:
    """Whether `term_words` occur contiguously in `text_words` (an empty term is never mentioned).

    >>> mentions(words("_borealis_ retrieves"), words("BOREALIS"))
    True
    >>> mentions(words("borealisx"), words("BOREALIS"))
    False
    """
    return first_mention(text_words, index_terms([(tuple(term_words), True)])) is not None


def index_terms(terms: Iterable[tuple[tuple[str, ...], T]]) -> dict[str, list[tuple[tuple[str, ...], T]]]:
    """`(words, value)` pairs keyed by their first word, longest first (terms with no words left out)."""
    index: dict[str, list[tuple[tuple[str, ...], T]]] = {}
    for term_words, value in terms:
        if term_words:
            index.setdefault(term_words[0], []).append((term_words, value))
    for entries in index.values():
        entries.sort(key=lambda entry: -len(entry[0]))
    return index


def first_mention(text_words: Sequence[str], index: Mapping[str, Sequence[tuple[tuple[str, ...], T]]]) -> T | None:
    """The value of the first term of `index` (`index_terms`) occurring contiguously in
    `text_words`: the earliest position, the longest term there; None when there is none."""
    for start, word in enumerate(text_words):
        for term_words, value in index.get(word, ()):
            if tuple(text_words[start : start + len(term_words)]) == term_words:
                return value
    return None
