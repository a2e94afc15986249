"""What the integration tests share (the demo corpus, keys): imported by name, not through conftest."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from ragspine.workspace import Workspace

API_KEY = "integration-key-0123456789"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
ENV = {"RAGSPINE_EMBEDDING": "none"}  # BM25 alone, every ranked snippet: the adapters are tested
MEMO = "internal_memo_restructuring"


@dataclass(frozen=True)
class Demo:
    """The demo store: its path and the text of every RESTRICTED chunk (what must never show)."""

    path: Path
    restricted_texts: tuple[str, ...]
    restricted_ids: tuple[str, ...]

    def leaks(self, shown: Any) -> bool:
        """True when what a caller was shown (text, or a result whose echo of the question,
        `query`/`question`, is left out) carries a line of a RESTRICTED chunk or the memo's
        code name (no public document has either)."""
        text = str(_without_echo(shown))
        lines = {line.strip() for r in self.restricted_texts for line in r.splitlines() if len(line.strip()) >= 12}
        return "Nightjar" in text or "夜鹰" in text or any(line in text for line in lines)


def _without_echo(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_echo(v) for k, v in value.items() if k not in ("query", "question")}
    if isinstance(value, list):
        return [_without_echo(v) for v in value]
    return value


def ingest_demo(ws: Workspace) -> None:
    """The bundled sample corpus with its manifest's labels (one document RESTRICTED)."""
    corpus = files("ragspine") / "data" / "sample_corpus"
    manifest = json.loads(corpus.joinpath("manifest.json").read_text("utf-8"))
    for doc in manifest["documents"]:
        meta = {k: doc[k] for k in ("title", "topic", "entity", "geography", "period", "language", "sensitivity")}
        ws.ingest_text(corpus.joinpath(doc["file"]).read_text("utf-8"), doc["doc_id"], **meta)




def call_mcp(ws: Workspace, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each (tool, arguments) called in order on the MCP server over `ws`, in process, through
    the SDK's own client (skips when the `mcp` extra is missing)."""
    import pytest

    pytest.importorskip("mcp", reason="the MCP checks need the `mcp` extra")
    from mcp import Client

    from ragspine.integrations.mcp_server import build_mcp_server

    async def session() -> list[Any]:
        async with Client(build_mcp_server(ws), read_timeout_seconds=60) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return asyncio.run(session())
