"""Running the app under uvicorn: in the foreground (`serve`) or in a background thread.

Invariants: `check_bind` passes before any socket is opened (no keys: loopback only); the
workspace outlives the server and is closed after it stops; `running_server` yields only once
the socket listens, and on exit stops the server and joins its thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from ragspine.settings.config import Settings
from ragspine.service.app import create_app
from ragspine.service.security import check_bind
from ragspine.workspace import Workspace

__all__ = ["check_bind", "running_server", "serve"]
START_TIMEOUT_S = 20.0


def serve(settings: Settings, *, log_level: str = "info") -> None:
    """Serve the workspace of `settings` on settings.host:settings.port until interrupted."""
    check_bind(settings)
    with Workspace.from_settings(settings) as workspace:
        config = uvicorn.Config(
            create_app(workspace),
            host=settings.host,
            port=settings.port,
            log_level=log_level,
            server_header=False,
        )
        uvicorn.Server(config).run()


@contextmanager
def running_server(workspace: Workspace, *, port: int = 0, log_level: str = "warning") -> Iterator[str]:
    """Serve `workspace` on its settings' host (port 0: a free port) in a background thread;
    yields the base URL, e.g. "http://127.0.0.1:41234"."""
    settings = workspace.settings
    check_bind(settings)
    config = uvicorn.Config(
        create_app(workspace),
        host=settings.host,
        port=port,
        log_level=log_level,
        server_header=False,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="ragspine-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the HTTP server did not start on {settings.host}:{port}")
        time.sleep(0.01)
    host, bound = server.servers[0].sockets[0].getsockname()[:2]
    try:
        yield f"http://{f'[{host}]' if ':' in host else host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
