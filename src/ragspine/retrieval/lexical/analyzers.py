"""Named analyzers (text → index terms), selectable by a spec string.

Invariants: every analyzer starts from the specification's `tokenize` (NFKC, lower-case, CJK
unigrams + bigrams, alphanumeric runs) and only rewrites ASCII alphabetic tokens, so Chinese and
Japanese terms are identical under every analyzer; the same analyzer must tokenize chunks and
queries. Optional libraries are imported only when their analyzer is built; a missing one is an
`AnalyzerError` that names the extra to install.

| name    | terms                                                                             |
|---------|-----------------------------------------------------------------------------------|
| spec    | `tokenize` exactly (the specification's analyzer, no dependency)                   |
| en-stem | `tokenize`, then the Snowball English (Porter2) stemmer on ASCII alphabetic words |
|         | (PyStemmer, extra `[stem]`)                                                      |
| auto    | en-stem when PyStemmer is importable, else spec; `.name` says which was chosen    |
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ragspine.retrieval.lexical import tokenize as _tokenize_module
from ragspine.retrieval.lexical.tokenize import tokenize

SPEC = "spec"
EN_STEM = "en-stem"
AUTO = "auto"
ANALYZER_NAMES: tuple[str, ...] = (AUTO, SPEC, EN_STEM)


class AnalyzerError(ValueError):
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


def stemmer_available() -> bool:
    """Whether PyStemmer (the `[stem]` extra) can be imported."""
    return importlib.util.find_spec("Stemmer") is not None


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
    if name == AUTO:
        if stemmer_available():
            stemmer = _EnglishStemmer()
            return Analyzer(EN_STEM, stemmer, "auto: PyStemmer is installed", stemmer.version)
        return Analyzer(SPEC, tokenize, "auto: PyStemmer not installed (extra [stem])")
    if name == EN_STEM:
        try:
            stemmer = _EnglishStemmer()
        except ImportError:
            raise AnalyzerError(
                "analyzer 'en-stem' needs PyStemmer: pip install 'ragspine[stem]' "
                "(or choose the analyzer 'spec')"
            ) from None
        return Analyzer(EN_STEM, stemmer, version=stemmer.version)
    return Analyzer(SPEC, tokenize)
