"""The agent-side contracts, defined once here and imported by the retrieval link.

`NarrativeRetriever` is what the agent calls to get cited snippets; `LLMProvider` is what the
retrieval layer calls when it needs a model (the listwise judge). Both are structural Protocols.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class NarrativeRetriever(Protocol):
    """Returns RESTRICTED-free snippet dicts with full lineage, best first."""

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = 50
    ) -> Sequence[Mapping[str, Any]]: ...


@runtime_checkable
class LLMProvider(Protocol):
    """A chat model: takes OpenAI-style messages, returns the assistant's reply text."""

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str: ...
