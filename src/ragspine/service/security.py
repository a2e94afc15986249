"""API keys and the bind rule.

Invariants: with RAGSPINE_API_KEYS set, every route but /health needs one of the keys, as
`Authorization: Bearer KEY` or `X-API-Key: KEY`, compared in constant time; a missing or wrong key
is a 401 that never echoes what was sent. Without keys the service binds only a loopback address
(`check_bind` refuses anything else before a socket is opened).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from fastapi import Depends, HTTPException
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ragspine.settings.config import ConfigError, Settings
from ragspine.secret import Secret

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
        if not keys:
            return
        given = bearer.credentials if bearer is not None else header
        if given is None or not any([key.matches(given) for key in keys]):  # check every key
            raise HTTPException(
                status_code=401,
                detail="missing or wrong API key: send `Authorization: Bearer KEY` or `X-API-Key: KEY`",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return require_key
