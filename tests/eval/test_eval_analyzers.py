"""Named analyzers: spec is `tokenize`; en-stem stems ASCII words only; auto is en-stem everywhere."""

from __future__ import annotations

import sys
import threading

import pytest

from ragspine.retrieval.lexical.analyzers import AnalyzerError, make_analyzer
from ragspine.retrieval.lexical.tokenize import tokenize

TEXT = "Running cells divided quickly; ACME营收下滑 3.5% café ÉTUDES"


def test_spec_is_the_specification_tokenizer() -> None:
    spec = make_analyzer("spec")
    assert spec.name == "spec" and spec(TEXT) == tokenize(TEXT)
    assert make_analyzer(None).name == "spec"


def test_en_stem_changes_only_ascii_words() -> None:
    pytest.importorskip("Stemmer")
    stem = make_analyzer("EN-STEM")
    tokens = stem(TEXT)
    assert tokens[:4] == ["run", "cell", "divid", "quick"]
    base = tokenize(TEXT)
    unchanged = [t for t in base if not (t.isascii() and t.isalpha())]
    assert [t for t in tokens if not (t.isascii() and t.isalpha())] == unchanged  # CJK, numbers, accents
    assert "营收" in tokens and "3.5" in tokens and "café" in tokens
    assert len(tokens) == len(base)


def test_en_stem_is_safe_across_threads() -> None:
    pytest.importorskip("Stemmer")
    stem = make_analyzer("en-stem")
    expected = stem(TEXT)
    seen: list[list[str]] = []
    threads = [threading.Thread(target=lambda: seen.extend(stem(TEXT) for _ in range(200))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(tokens == expected for tokens in seen) and len(seen) == 800


def test_auto_is_en_stem_on_every_install() -> None:
    # PyStemmer is a core dependency (pyproject `dependencies`), so auto never depends on extras
    chosen = make_analyzer("auto")
    assert chosen.name == "en-stem" and chosen.note == "auto: en-stem (the default)"
    assert chosen(TEXT) == make_analyzer("en-stem")(TEXT)
    assert chosen.analyzer_id == make_analyzer("en-stem").analyzer_id  # one persisted index


def test_errors_name_the_valid_choices_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AnalyzerError, match="unknown analyzer 'porter'; valid: auto, spec, en-stem"):
        make_analyzer("porter")
    monkeypatch.setitem(sys.modules, "Stemmer", None)  # import Stemmer now raises ImportError
    for name in ("en-stem", "auto"):
        with pytest.raises(AnalyzerError, match=r"pip install PyStemmer .*RAGSPINE_ANALYZER=spec"):
            make_analyzer(name)
