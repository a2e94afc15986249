"""Where agents and people already are: an MCP server, LangChain and LlamaIndex retrievers.

Each adapter is a thin face over `ragspine.workspace.Workspace` (built by `ragspine.assembly`,
the one Settings → components path) or over the HTTP API (`RemoteWorkspace`); none assembles a
pipeline of its own. Their frameworks are optional extras, imported only by the module that
needs them (`mcp_server` → `ragspine[mcp]`, `langchain` → `ragspine[langchain]`, `llamaindex` →
`ragspine[llamaindex]`); a missing one is a `MissingExtraError` naming the extra.

Invariant: no adapter returns RESTRICTED text. The workspace strips it at its exits; the
adapters check the label again on every snippet they hand over (`passages`).
"""

from __future__ import annotations

from ragspine.integrations.common import RemoteWorkspace, Searcher, passages, snippet_metadata

__all__ = ["RemoteWorkspace", "Searcher", "passages", "snippet_metadata"]
