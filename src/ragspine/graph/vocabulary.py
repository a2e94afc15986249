"""The controlled entity vocabulary and the one matcher that finds its names in text.

Invariants: names are matched in the gate's folded form (`retrieval.query.gate.fold`: NFKC,
case-folded), longest first at a position; a name that starts or ends with an ASCII word
character matches whole words only (ACME does not match inside ACMEX); `find` returns canonical
entity names, sorted, once each. One compiled pattern (a character trie), so matching costs
time in proportion to the text, not to the number of names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragspine.retrieval.query.gate import fold

_WORD = r"[0-9a-z_]"
_WORD_CHAR = re.compile(_WORD)


@dataclass
class Vocabulary:
    """Entity name -> its surface forms (the name itself and its aliases).

    >>> v = Vocabulary.from_names({"ACME": ["艾克美"], "ACME_HK": []})
    >>> v.find("艾克美 and acme_hk, not ACMEX")
    ['ACME', 'ACME_HK']
    """

    forms: dict[str, str] = field(default_factory=dict)  # folded form -> entity name
    _pattern: re.Pattern[str] | None = None

    @classmethod
    def from_names(cls, names: Mapping[str, Iterable[str]]) -> Vocabulary:
        vocab = cls()
        for name in sorted(names):
            for form in (name, *names[name]):
                folded = fold(form).strip()
                if folded:
                    vocab.forms.setdefault(folded, name)
        return vocab

    @property
    def names(self) -> list[str]:
        return sorted(set(self.forms.values()))

    def canonical(self, text: str) -> str | None:
        """The entity `text` names (any surface form), or None."""
        return self.forms.get(fold(text).strip())

    def find(self, text: str) -> list[str]:
        """The entities whose surface forms occur in `text`, sorted."""
        if not self.forms:
            return []
        if self._pattern is None:
            self._pattern = re.compile(_trie_pattern(sorted(self.forms)))
        return sorted({self.forms[m.group(0)] for m in self._pattern.finditer(fold(text))})


def _trie_pattern(forms: list[str]) -> str:
    """A regular expression matching any of `forms` (longest first), word-bounded for ASCII ends."""
    trie: dict[str, Any] = {}
    for form in forms:
        node = trie
        for char in form:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any], last: str) -> str:
        branches = [re.escape(c) + emit(child, c) for c, child in sorted(node.items()) if c]
        if "" in node:  # the form may end here: after the longer continuations, bounded if ASCII
            branches.append(f"(?!{_WORD})" if _WORD_CHAR.match(last) else "")
        if len(branches) == 1:
            return branches[0]
        return "(?:" + "|".join(branches) + ")"

    starts = [re.escape(c) + emit(child, c) for c, child in sorted(trie.items())]
    bounded = [s for (c, _), s in zip(sorted(trie.items()), starts, strict=True) if _WORD_CHAR.match(c)]
    free = [s for (c, _), s in zip(sorted(trie.items()), starts, strict=True) if not _WORD_CHAR.match(c)]
    parts = []
    if bounded:
        parts.append(f"(?<!{_WORD})(?:" + "|".join(bounded) + ")")
    if free:
        parts.append("(?:" + "|".join(free) + ")")
    return "|".join(parts)
