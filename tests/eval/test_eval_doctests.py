"""The usage examples in the eval package's docstrings run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "ragspine.eval",
    "ragspine.eval.metrics",
    "ragspine.eval.modes",
    "ragspine.eval.runner",
    "ragspine.eval.report",
    "ragspine.eval.product",
    "ragspine.retrieval.lexical.index.identity",
    "ragspine.retrieval.lexical.analyzers",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    failures, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert attempted > 0 and failures == 0
