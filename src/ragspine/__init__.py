"""RAGSpine: the narrative half of RAG for LLM agents.

Ingest documents (Chinese and English mixed), chunk and version them, retrieve with BM25
(CJK unigram+bigram) fused by RRF, rerank, and hand an agent cited snippets. Text marked
RESTRICTED never reaches a prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ragspine.errors import DamagedFile, ModelMismatch, RagspineError

if TYPE_CHECKING:
    from ragspine.workspace import Workspace

__version__ = "0.1.0"
__all__ = ["DamagedFile", "ModelMismatch", "RagspineError", "__version__", "open"]


def open(  # noqa: A001 - `ragspine.open(...)` is the intended spelling
    target: str | Path | None = None,
    *,
    config: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: object,
) -> Workspace:
    """Open a workspace: `ws = ragspine.open(".ragspine")`, then `ws.ingest(path_or_text, **meta)`,
    `ws.search(query, where=..., top_k=...)`, `ws.ask(question)`; close it (or use `with`).

    `target` is a folder (store `FOLDER/chunks.db`), a store file or ":memory:" (None:
    RAGSPINE_DB); settings come from `overrides`, the environment and the config file, exactly as
    for the CLI and the HTTP service (see `ragspine.workspace.open_workspace`).
    """
    from ragspine.workspace import open_workspace

    return open_workspace(target, config=config, env=env, **overrides)
