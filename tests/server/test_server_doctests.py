"""The usage examples in the server-tier modules' docstrings run (those needing a server are skipped)."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from ragspine.retrieval.store import factory as stores, postgres as pg_store
from ragspine.retrieval.vector.stores import pgvector as pgvector_store


@pytest.mark.parametrize(
    "module", [pg_store, stores, pgvector_store], ids=lambda m: m.__name__.rsplit(".", 1)[-1]
)
def test_docstring_examples(module: ModuleType) -> None:
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failures == 0
