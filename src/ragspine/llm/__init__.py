"""LLM providers behind the agent's `LLMProvider` Protocol (declared in ragspine.agent.agent).

`ragspine.assembly.make_provider(settings)` is the one way the CLI, the service and
`ragspine.open` get a provider: None when no LLM is configured (the default loop needs no LLM).
"""

from __future__ import annotations

from ragspine.llm.openai_compatible import LLMProviderError, OpenAICompatibleProvider

__all__ = ["LLMProviderError", "OpenAICompatibleProvider"]
