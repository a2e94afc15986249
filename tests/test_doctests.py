"""Every docstring example in the package runs as written (the usage examples are documentation)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import ragspine

MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages(ragspine.__path__, prefix="ragspine.")
    if name != "ragspine.__main__"
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
