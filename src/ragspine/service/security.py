"""API keys and the bind rule.

Invariants: with RAGSPINE_API_KEYS set, every route but /health and the search page's static
files (which hold no data) needs one of the keys (mounted apps such as /mcp through `KeyGuard`), as
`Authorization: Bearer KEY` or `X-API-Key: KEY`, compared in constant time; a missing or wrong key
is a 401 that never echoes what was sent. Without keys the service binds only a loopback address
(`check_bind` refuses anything else before a socket is opened).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from fastapi import Depends, HTTPException
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from ragspine.settings.config import ConfigError, Settings
from ragspine.secret import Secret
from ragspine.service.errors import error_response

MISSING_KEY = "missing or wrong API key: send `Authorization: Bearer KEY` or `X-API-Key: KEY`"
_bearer = HTTPBearer(auto_error=False, description="One of RAGSPINE_API_KEYS")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="One of RAGSPINE_API_KEYS")


def is_loopback(host: str) -> bool:
    """True for localhost and loopback IP addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(settings: Settings) -> None:
    """Refuse to serve a non-loopback address without API keys."""
    if not settings.api_keys and not is_loopback(settings.host):
        raise ConfigError(
            f"refusing to bind {settings.host}: it is not a loopback address and RAGSPINE_API_KEYS "
            "is empty; set API keys, or bind 127.0.0.1"
        )


def api_key_dependency(keys: tuple[Secret, ...]) -> Callable[..., None]:
    """A FastAPI dependency that admits a request carrying one of `keys` (all when none set)."""

    def require_key(
        bearer: HTTPAuthorizationCredentials | None = Depends(_bearer),
        header: str | None = Depends(_header),
    ) -> None:
        given = bearer.credentials if bearer is not None else header
        if not key_accepted(keys, given):
            raise HTTPException(status_code=401, detail=MISSING_KEY, headers={"WWW-Authenticate": "Bearer"})

    return require_key


def key_accepted(keys: tuple[Secret, ...], given: str | None) -> bool:
    """True when no keys are set or `given` is one of them (every key compared)."""
    if not keys:
        return True
    return given is not None and any([key.matches(given) for key in keys])  # check every key


class KeyGuard:
    """An ASGI app (for a mounted sub-app such as /mcp) admitting only requests with a key."""

    def __init__(self, app: ASGIApp, keys: tuple[Secret, ...]) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        scheme, _, token = headers.get("authorization", "").partition(" ")
        given = token.strip() if scheme.lower() == "bearer" and token.strip() else headers.get("x-api-key")
        if key_accepted(self.keys, given):
            await self.app(scope, receive, send)
            return
        await error_response(401, MISSING_KEY, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
