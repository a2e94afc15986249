"""API keys, their roles, and the bind rule.

Invariants: with RAGSPINE_API_KEYS set, every route but /health and the search page's static
files (which hold no data) needs one of the keys (mounted apps such as /mcp through `KeyGuard`), as
`Authorization: Bearer KEY` or `X-API-Key: KEY`, compared in constant time; a missing or wrong key
is a 401 that never echoes what was sent. Each route names the least role it needs (read, write,
admin: `settings.api_keys`); a key below it is a 403 naming the role needed, never the key. Without
keys the service binds only a loopback address (`check_bind` refuses anything else before a socket
is opened) and every caller is admin.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from fastapi import Depends, HTTPException
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from ragspine.settings.api_keys import NO_KEYS_ROLE, ROLES, Role, role_allows, role_of
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


def api_key_dependency(keys: tuple[Secret, ...], needed: Role = "read") -> Callable[..., Role]:
    """A FastAPI dependency admitting a request whose key has role `needed` or above (everyone
    when no keys are set); it returns the caller's role (for routes that answer by role)."""

    def require_key(
        bearer: HTTPAuthorizationCredentials | None = Depends(_bearer),
        header: str | None = Depends(_header),
    ) -> Role:
        role = caller_role(keys, bearer.credentials if bearer is not None else header)
        if role is None:
            raise HTTPException(status_code=401, detail=MISSING_KEY, headers={"WWW-Authenticate": "Bearer"})
        if not role_allows(role, needed):
            raise HTTPException(status_code=403, detail=forbidden(needed))
        return role

    return require_key


def forbidden(needed: Role) -> str:
    """The 403 message: the role a route needs (the key is never named)."""
    return f"this API key may not do this: it needs a {needed} key (RAGSPINE_API_KEYS, docs/security.md)"


def caller_role(keys: tuple[Secret, ...], given: str | None) -> Role | None:
    """The role of the key `given` (every key compared); admin when no keys are set; None when
    `given` is missing or none of the keys."""
    if not keys:
        return NO_KEYS_ROLE
    if given is None:
        return None
    matched = [role_of(key) for key in keys if key.matches(given)]  # check every key
    return max(matched, key=ROLES.index) if matched else None


class KeyGuard:
    """An ASGI app (for a mounted sub-app such as /mcp) admitting only requests with a key of
    role `needed` or above."""

    def __init__(self, app: ASGIApp, keys: tuple[Secret, ...], needed: Role = "read") -> None:
        self.app, self.keys, self.needed = app, keys, needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        scheme, _, token = headers.get("authorization", "").partition(" ")
        given = token.strip() if scheme.lower() == "bearer" and token.strip() else headers.get("x-api-key")
        role = caller_role(self.keys, given)
        if role is None:
            await error_response(401, MISSING_KEY, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
        elif not role_allows(role, self.needed):
            await error_response(403, forbidden(self.needed))(scope, receive, send)
        else:
            await self.app(scope, receive, send)
