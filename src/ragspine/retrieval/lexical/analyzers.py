"""Named analyzers (text → index terms), selectable by a spec string.

Invariants: every analyzer starts from the specification's `tokenize` (NFKC, lower-case, CJK
unigrams + bigrams, alphanumeric runs) and only rewrites ASCII alphabetic tokens, so Chinese and
Japanese terms are identical under every analyzer; the same analyzer must tokenize chunks and
queries (a store records the analyzer that indexed it: `index.identity.check_index_settings`).
PyStemmer is a core dependency, so `auto` is en-stem on every install; it is imported only when
an analyzer that needs it is built, and a broken install is an `AnalyzerError` saying so.

| name    | terms                                                                             |
|---------|-----------------------------------------------------------------------------------|
| spec    | `tokenize` exactly (the specification's analyzer, no dependency)                   |
| en-stem | `tokenize`, then the Snowball English (Porter2) stemmer on ASCII alphabetic words |
|         | (PyStemmer, a core dependency)                                                    |
| auto    | en-stem (the product default, RAGSPINE_ANALYZER=auto); `.name` says "en-stem"      |
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ragspine.errors import RagspineError
from ragspine.retrieval.lexical import tokenize as _tokenize_module
from ragspine.retrieval.lexical.tokenize import tokenize

SPEC = "spec"
EN_STEM = "en-stem"
AUTO = "auto"
ANALYZER_NAMES: tuple[str, ...] = (AUTO, SPEC, EN_STEM)


class AnalyzerError(RagspineError, ValueError):
    """Unknown analyzer name, or its optional dependency is not installed."""


@dataclass(frozen=True)
class Analyzer:
    """A callable analyzer with the name it was resolved to (e.g. "auto" → "en-stem").

    >>> a = make_analyzer("spec"); (a.name, a("Cells divided 营收"))
    ('spec', ['cells', 'divided', '营', '收', '营收'])
    """

    name: str
    fn: Callable[[str], list[str]] = field(repr=False)
    note: str = ""
    version: str = ""  # of the optional library behind it, when there is one

    def __call__(self, text: str) -> list[str]:
        return self.fn(text)

    @property
    def analyzer_id(self) -> str:
        """A stable identity for persisted indexes: name, library version, tokenizer source digest."""
        return f"ragspine-analyzer:{self.name}:{self.version}:tokenize-{_TOKENIZE_DIGEST}"


def _source_digest() -> str:
    try:
        return hashlib.sha256(inspect.getsource(_tokenize_module).encode()).hexdigest()[:16]
    except (OSError, TypeError):  # no source available (e.g. a zipped install)
        return "unknown"


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


_TOKENIZE_DIGEST = _source_digest()


class _EnglishStemmer:
    """`tokenize` + Snowball English on ASCII alphabetic tokens (one PyStemmer per thread)."""

    def __init__(self) -> None:
        import Stemmer  # PyStemmer; raises ImportError when the extra is missing

        self._module = Stemmer
        self._local = threading.local()
        self.version = _distribution_version("PyStemmer")

    def _stem(self) -> Callable[[str], str]:
        stem = getattr(self._local, "stem", None)
        if stem is None:  # PyStemmer objects must not be shared between threads
            stem = self._local.stem = self._module.Stemmer("english").stemWord
        return stem

    def __call__(self, text: str) -> list[str]:
        stem = self._stem()
        return [stem(t) if t.isascii() and t.isalpha() else t for t in tokenize(text)]


def make_analyzer(spec: str | None = None) -> Analyzer:
    """The analyzer named `spec` (case-insensitive; None → "spec").

    >>> try:
    ...     make_analyzer("porter")
    ... except AnalyzerError as exc:
    ...     print(exc)
    unknown analyzer 'porter'; valid: auto, spec, en-stem
    """
    name = (spec or SPEC).strip().lower()
    if name not in ANALYZER_NAMES:
        raise AnalyzerError(f"unknown analyzer {spec!r}; valid: {', '.join(ANALYZER_NAMES)}")
    if name in (AUTO, EN_STEM):
        try:
            stemmer = _EnglishStemmer()
        except ImportError:
            raise AnalyzerError(
                f"analyzer {name!r} (en-stem) needs PyStemmer, a dependency of ragspine that is "
                "missing from this install: pip install PyStemmer (or choose the analyzer 'spec', "
                "RAGSPINE_ANALYZER=spec)"
            ) from None
        note = "auto: en-stem (the default)" if name == AUTO else ""
        return Analyzer(EN_STEM, stemmer, note, stemmer.version)
    return Analyzer(SPEC, tokenize)
