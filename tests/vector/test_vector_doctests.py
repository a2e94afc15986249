"""The usage examples in the vector modules' docstrings run."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from ragspine.retrieval.vector.embeddings import deterministic as deterministic_backend
from ragspine.retrieval.vector.embeddings import e5 as e5_backend
from ragspine.retrieval.vector.embeddings import factory as embedding_backends
from ragspine.retrieval.vector.embeddings import onnx as onnx_backend
from ragspine.retrieval.vector.embeddings import openai as openai_backend
from ragspine.retrieval.vector.embeddings import sentence_transformers as st_backend
from ragspine.retrieval.vector.stores import inprocess as store


@pytest.mark.parametrize(
    "module",
    [deterministic_backend, embedding_backends, onnx_backend, openai_backend, st_backend, e5_backend, store],
    ids=lambda m: m.__name__.rsplit(".", 1)[-1],
)
def test_docstring_examples(module: ModuleType) -> None:
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failures == 0
