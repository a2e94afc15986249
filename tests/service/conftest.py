"""Fixtures for the service tests: a real uvicorn server on 127.0.0.1 and a stub LLM server.

`stub_llm` is a mock: the shared stub OpenAI-compatible chat server of tests/llm_stub.py (scripted
answers, failures, timeouts, garbage; every request recorded), answering the listwise judge in
reverse order and anything else with STUB_ANSWER.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import ragspine
from ragspine.service import running_server
from ragspine.workspace import Workspace

from llm_stub import LLMStubServer, StubLLM
from service_helpers import AUTH, BM25_ENV, ROLE_KEYS, STUB_ANSWER


def _reply_for(body: dict[str, Any]) -> str:
    """The judge gets the passages in reverse order; any other prompt gets STUB_ANSWER."""
    prompt = body["messages"][-1]["content"]
    if "Rank the passages" in prompt:
        count = len(re.findall(r"^\[\d+\] ", prompt, re.MULTILINE))
        return " > ".join(f"[{n}]" for n in range(count, 0, -1))
    return STUB_ANSWER


@pytest.fixture
def stub_llm() -> Iterator[StubLLM]:
    """The shared stub LLM server (tests/llm_stub.py) answering as `_reply_for` says."""
    with LLMStubServer(StubLLM(responder=_reply_for)) as stub:
        yield stub


@dataclass
class Served:
    """A running service: its URL, its workspace and a client that sends the API key."""

    url: str
    ws: Workspace
    client: httpx.Client


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """`serve(**settings)` opens a workspace (keys: `ROLE_KEYS`, one of each role; the client
    sends the bare, write, key) (settings by field name, the process environment
    ignored; no dense channel unless `embedding=` is given) and runs the real uvicorn server for
    it on 127.0.0.1; all stopped at teardown."""
    with ExitStack() as stack:
        count = 0

        def start(**overrides: Any) -> Served:
            nonlocal count
            count += 1
            overrides.setdefault("api_keys", ROLE_KEYS)
            ws = stack.enter_context(ragspine.open(tmp_path / f"ws{count}", env=BM25_ENV, **overrides))
            url = stack.enter_context(running_server(ws))
            client = stack.enter_context(httpx.Client(base_url=url, headers=AUTH, timeout=30))
            return Served(url, ws, client)

        yield start

