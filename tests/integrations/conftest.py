"""Fixtures for the adapter tests: the bundled demo corpus (with its RESTRICTED memo) in a real
SQLite store, opened as a workspace, and served by the real uvicorn server with an API key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import ragspine
from ragspine.service import running_server
from ragspine.workspace import Workspace

from integration_helpers import API_KEY, AUTH, ENV, MEMO, Demo, ingest_demo  # noqa: F401 - the tests' names


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    path = tmp_path_factory.mktemp("demo") / "chunks.db"
    with ragspine.open(path, env=ENV) as ws:
        ingest_demo(ws)
        memo = ws.store.iter_chunks(doc_id=MEMO)
    assert memo and all(c.sensitivity == "RESTRICTED" for c in memo), "the demo corpus lost its RESTRICTED memo"
    demo = Demo(path, tuple(c.text for c in memo), tuple(c.chunk_id for c in memo))
    assert demo.leaks({"text": memo[-1].text[-300:]}) and not demo.leaks({"query": "Nightjar"})  # the check can fail
    return demo


@pytest.fixture
def demo_ws(demo: Demo) -> Iterator[Workspace]:
    with ragspine.open(demo.path, env=ENV) as ws:
        yield ws


@pytest.fixture
def demo_url(demo: Demo) -> Iterator[str]:
    """The demo store served by the real HTTP service (uvicorn on 127.0.0.1) with an API key."""
    with ragspine.open(demo.path, env=ENV, api_keys=[API_KEY]) as ws, running_server(ws) as url:
        yield url
