"""The specification's path for `make_embedding_backend` (body: `retrieval.vector.embeddings`)."""

from __future__ import annotations

from ragspine.retrieval.vector.embeddings.factory import *  # noqa: F403
from ragspine.retrieval.vector.embeddings.factory import __all__ as __all__
