"""The usage examples in the vector modules' docstrings run."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from ragspine.retrieval.vector import (
    deterministic_backend,
    e5_backend,
    embedding_backends,
    onnx_backend,
    openai_backend,
    st_backend,
    store,
)


@pytest.mark.parametrize(
    "module",
    [deterministic_backend, embedding_backends, onnx_backend, openai_backend, st_backend, e5_backend, store],
    ids=lambda m: m.__name__.rsplit(".", 1)[-1],
)
def test_docstring_examples(module: ModuleType) -> None:
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failures == 0
