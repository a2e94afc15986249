"""Every error the service answers is JSON `{"status", "error", "message"}`, never a traceback.

Invariants: a client mistake is a 4xx with a message that says what to change; anything
unexpected is a 500 whose body says only "internal error" (the traceback goes to the log); a
doc_id taken is a 409 (`DocumentExists`: one message whatever the stored label); a body over
its route's limit is a 413 before the handler runs, without reading the rest of it, and freed
heap memory is handed back after a large one; a full storage (whatever reported it, as
`storage_full` recognises it) is a 507 whose message is one line, logged as one WARNING at most
every `FULL_WARNING_EVERY_S` seconds and never as a traceback; error bodies are ASCII-escaped
JSON, so any input echoed in a message is encoded safely.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragspine.errors import DocumentExists, RagspineError
from ragspine.extras import MissingExtraError
from ragspine.retrieval.store.full import StorageFull, storage_full
from ragspine.secret import redact_text
from ragspine.service.memory import RELEASE_AFTER_BYTES, release_heap

_LOG = logging.getLogger("ragspine.service")
FULL_WARNING_EVERY_S = 60.0  # a full disk is logged once, then at most once a minute


class SafeJSONResponse(JSONResponse):
    """JSON as UTF-8; text that cannot be UTF-8 (a lone surrogate) is sent \\u-escaped instead."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> SafeJSONResponse:
    """The one error body shape."""
    phrase = HTTPStatus(status).phrase.lower().replace(" ", "_")
    body = {"status": status, "error": phrase, "message": redact_text(message)}
    return SafeJSONResponse(body, status_code=status, headers=headers)


class BodyTooLarge(HTTPException, RagspineError):
    """Raised from `receive` when a streamed body passes the limit (`setting` names it)."""

    def __init__(self, limit: int, setting: str = "RAGSPINE_MAX_BODY_BYTES") -> None:
        super().__init__(413, f"request body is larger than {limit} bytes ({setting})")


# Routes whose body is a document (up to RAGSPINE_MAX_BODY_BYTES); every other body is a query,
# filters or a JSON-RPC call (up to RAGSPINE_MAX_QUERY_BODY_BYTES)
DOCUMENT_ROUTES = frozenset({"/documents", "/documents/upload"})


def install_error_handlers(app: FastAPI) -> None:
    """Map library and framework errors to the error shape."""

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        if isinstance(exc.__cause__, UnicodeDecodeError):  # FastAPI's body parser: invalid UTF-8
            return error_response(422, "request body is not valid UTF-8: send JSON text encoded as UTF-8")
        return error_response(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', 'invalid')}"
            for err in exc.errors()[:5]
        ]
        return error_response(422, "; ".join(problems) or "invalid request")

    @app.exception_handler(ValueError)
    async def _value(_: Request, exc: ValueError) -> JSONResponse:
        return error_response(400, str(exc))

    @app.exception_handler(DocumentExists)
    async def _taken(_: Request, exc: DocumentExists) -> JSONResponse:
        return error_response(409, str(exc))  # one message whatever the stored label

    @app.exception_handler(MissingExtraError)
    async def _missing(_: Request, exc: MissingExtraError) -> JSONResponse:
        return error_response(415, str(exc))  # a loader's optional extra is not installed


class GuardMiddleware:
    """Outermost guard: refuses a body over its route's limit (413: `max_body_bytes` for
    `DOCUMENT_ROUTES`, `max_query_body_bytes` for every other) by its Content-Length before
    reading it, or once the bytes streamed pass it (the rest is never read); hands freed heap
    memory back after a body of `RELEASE_AFTER_BYTES` or more (`memory.release_heap`); answers a
    full storage with a 507 and turns any other exception that escaped the handlers into a bare 500."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, max_query_body_bytes: int | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_query_body_bytes = max_body_bytes if max_query_body_bytes is None else max_query_body_bytes
        self._full_warned_at: float | None = None  # monotonic time of the last full-disk WARNING
        self._full_unwarned = 0  # full-disk answers since that WARNING

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        documents = scope.get("path", "").rstrip("/") in DOCUMENT_ROUTES
        limit = self.max_body_bytes if documents else self.max_query_body_bytes
        setting = "RAGSPINE_MAX_BODY_BYTES" if documents else "RAGSPINE_MAX_QUERY_BODY_BYTES"
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and not declared.isdigit():
            await error_response(400, "bad Content-Length header")(scope, receive, send)
            return
        if declared is not None and int(declared) > limit:
            await error_response(413, str(BodyTooLarge(limit, setting).detail))(scope, receive, send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit, setting)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: a 507 for a full disk, else a 500
            full = storage_full(exc)
            if full is not None:
                self._warn_full(full)
            else:
                _LOG.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if not started:
                answer = error_response(500, "internal error") if full is None else error_response(507, str(full))
                await answer(scope, receive, send)
        finally:
            if received >= RELEASE_AFTER_BYTES:
                await asyncio.to_thread(release_heap)  # off the event loop: other requests go on

    def _warn_full(self, full: StorageFull) -> None:
        """One WARNING for a full storage, then at most one every FULL_WARNING_EVERY_S seconds."""
        now = time.monotonic()
        if self._full_warned_at is not None and now - self._full_warned_at < FULL_WARNING_EVERY_S:
            self._full_unwarned += 1
            return
        _LOG.warning(
            "answering 507 Insufficient Storage: %s (%d more since the last warning)", full, self._full_unwarned
        )
        self._full_warned_at, self._full_unwarned = now, 0
