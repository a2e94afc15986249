"""The HTTP service: FastAPI routes as thin handlers over `ragspine.workspace.Workspace`.

`create_app(workspace)` builds the app; `serve(settings)` checks the bind address and runs it
under uvicorn (what `ragspine serve` calls); `running_server` runs it in a background thread.
FastAPI and uvicorn come with the `service` extra and are imported only here.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the HTTP service needs its extra: pip install 'ragspine[service]'") from exc

from ragspine.service.app import create_app, openapi_schema
from ragspine.service.server import check_bind, running_server, serve
from ragspine.settings.api_keys import describe_keys

__all__ = ["check_bind", "create_app", "describe_keys", "openapi_schema", "running_server", "serve"]
