"""The FastAPI app: each route is one call on the `Workspace` and nothing more.

(No `from __future__ import annotations` here: FastAPI reads the handlers' annotations at run time.)

Invariants: every route but /health and the search page's static files depends on the API-key
check (/mcp, the MCP streamable HTTP transport, through `KeyGuard`), with the least role it needs:
read for searches and reads, write for document and graph writes, and /stats shows its internals
to admin keys only; a POST never replaces an existing doc_id unless it asks to (`replace`) and the
document has no RESTRICTED chunk, and a taken doc_id is one 409 whatever its label; no response
carries a RESTRICTED chunk (search, ask and chunks go through the workspace, which drops them); every
error is the JSON shape of `errors.py`; sync handlers run in the thread pool, and the workspace
is thread-safe.
"""

from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Depends, FastAPI, File, Form, HTTPException, UploadFile

from ragspine import __version__
from ragspine.settings.config import Settings
from ragspine.service import models as m
from ragspine.retrieval.filters import CORE_FIELDS, OPERATORS
from ragspine.service.errors import GuardMiddleware, SafeJSONResponse, error_response, install_error_handlers
from ragspine.service.browse import browse_routes
from ragspine.service.graph_routes import graph_routes
from ragspine.service.page import page_routes
from ragspine.service.security import KeyGuard, api_key_dependency
from ragspine.settings.api_keys import Role, role_allows
from ragspine.workspace import Existing, Workspace

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": m.ErrorOut, "description": text}
    for code, text in {400: "Bad request", 401: "Missing or wrong API key", 403: "The API key's role may not do this",
                       413: "Body too large", 422: "Invalid request body",
                       507: "Storage full (free disk space)"}.items()  # fmt: skip
}
_TAKEN: dict[int | str, dict[str, Any]] = {409: {"model": m.ErrorOut, "description": "doc_id taken (any label)"}}


def create_app(workspace: Workspace) -> FastAPI:
    """The HTTP API over `workspace` (the caller closes the workspace after the app stops)."""
    settings = workspace.settings
    app = FastAPI(
        title="RAGSpine",
        version=__version__,
        description="Cited, RESTRICTED-free retrieval over Chinese and English documents.",
        default_response_class=SafeJSONResponse,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    install_error_handlers(app)
    app.add_middleware(
        GuardMiddleware, max_body_bytes=settings.max_body_bytes, max_query_body_bytes=settings.max_query_body_bytes
    )
    require_key = Depends(api_key_dependency(settings.api_keys, "read"))
    app.get("/health", response_model=m.HealthOut, tags=["service"])(_health)
    app.include_router(page_routes(), include_in_schema=False)  # the search page: static, no data
    _mount_mcp(app, workspace)
    app.include_router(_routes(workspace), dependencies=[require_key], responses=_ERRORS)
    app.include_router(browse_routes(workspace), dependencies=[require_key], responses=_ERRORS)
    app.include_router(graph_routes(workspace, settings.max_top_k), dependencies=[require_key], responses=_ERRORS)

    @app.get("/openapi.json", include_in_schema=False, dependencies=[require_key])
    def openapi() -> dict[str, Any]:
        return app.openapi()

    return app


def _mount_mcp(app: FastAPI, workspace: Workspace) -> None:
    """The MCP streamable HTTP transport at /mcp behind the API keys, its session manager run by
    the app's lifespan; without the `mcp` extra, /mcp answers 501 naming it."""
    from starlette.routing import Route

    from ragspine.extras import MissingExtraError

    keys = workspace.settings.api_keys
    try:
        from ragspine.integrations.mcp_server import streamable_http  # without the extra: MissingExtraError

        endpoint, lifespan = streamable_http(workspace, host=workspace.settings.host)
    except MissingExtraError as exc:
        message = str(exc)

        async def missing(scope: Any, receive: Any, send: Any) -> None:
            await error_response(501, message)(scope, receive, send)

        app.router.routes.append(Route("/mcp", KeyGuard(missing, keys), include_in_schema=False))
        return
    app.router.lifespan_context = lifespan
    app.router.routes.append(Route("/mcp", KeyGuard(endpoint, keys), include_in_schema=False))


def openapi_schema(settings: Settings | None = None) -> dict[str, Any]:
    """The OpenAPI schema of the app built from `settings` (default: the defaults), as checked
    into docs/openapi.json. No embedding backend is built: the schema does not depend on it."""
    with Workspace.from_settings(replace(settings or Settings(), db=":memory:", embedding="none")) as ws:
        return create_app(ws).openapi()


def _health() -> dict[str, str]:
    """Liveness; needs no API key."""
    return {"status": "ok", "version": __version__}


def _routes(ws: Workspace) -> APIRouter:
    router = APIRouter()
    SearchIn, AskIn = m.query_models(ws.settings.max_top_k)
    caller = api_key_dependency(ws.settings.api_keys, "read")
    writer = [Depends(api_key_dependency(ws.settings.api_keys, "write"))]

    @router.get("/stats", response_model=m.StatsOut, tags=["service"])
    def stats(role: Role = Depends(caller)) -> dict[str, Any]:
        """Documents and chunks in the active set that a caller may see and the retrieval mode;
        for an admin key the operator's view: whole-store counts, the index state (data
        version, embedding model, dense coverage, vector store, paths) and the channels."""
        return ws.stats(internals=role_allows(role, "admin"))

    @router.get("/fields", response_model=m.FieldsOut, tags=["retrieval"])
    def fields() -> dict[str, Any]:
        """What `where` can filter on here: the built-in fields, the user metadata fields some
        document carries, and the operators."""
        return {"fields": list(CORE_FIELDS), "metadata": ws.metadata_fields(), "operators": list(OPERATORS)}

    @router.post("/documents", status_code=201, response_model=m.IngestOut, tags=["documents"],
                 dependencies=writer, responses=_TAKEN)  # fmt: skip
    def ingest(doc: m.DocumentIn, background: BackgroundTasks) -> dict[str, Any]:
        """Ingest a text as a new document (a write key). A `doc_id` that already has an active
        version is a 409, whatever its label, unless `replace` is set and the document has no
        RESTRICTED chunk: then the text becomes its new active version (atomically)."""
        fields = doc.model_dump()
        text, doc_id, valid_as_of = fields.pop("text"), fields.pop("doc_id"), fields.pop("valid_as_of")
        existing = _existing(fields.pop("replace"))
        result = ws.ingest_text(text, doc_id, valid_as_of=valid_as_of, existing=existing, **fields)
        background.add_task(ws.warm_lexical_index)  # once answered: the next search need not build the index
        return vars(result)

    @router.post("/documents/upload", status_code=201, response_model=m.IngestOut, tags=["documents"],
                 dependencies=writer, responses=_TAKEN)  # fmt: skip
    def upload(
        background: BackgroundTasks,
        file: UploadFile = File(description="The document file (.txt, .md, and the formats whose loaders are installed)"),
        doc_id: str | None = Form(None, max_length=512),
        title: str | None = Form(None, max_length=m.MAX_META_CHARS),
        topic: str | None = Form(None, max_length=m.MAX_META_CHARS),
        entity: str | None = Form(None, max_length=m.MAX_META_CHARS),
        geography: str | None = Form(None, max_length=m.MAX_META_CHARS),
        period: str | None = Form(None, max_length=m.MAX_META_CHARS),
        language: str | None = Form(None, max_length=m.MAX_META_CHARS),
        sensitivity: str | None = Form(None, max_length=m.MAX_META_CHARS),
        replace: bool = Form(False, description="Make this the new version of an existing doc_id (else 409)"),
    ) -> dict[str, Any]:
        """Ingest an uploaded file (a write key); `doc_id` defaults to the file name, and a taken
        one is a 409 as for POST /documents (`replace` as there). The file's front matter wins
        over the form fields, which fill what it leaves unset; for `sensitivity` the strictest
        of the two wins (neither: INTERNAL), and a replaced version's stricter label is kept
        (`warnings` says so; withdraw the document first to lower it)."""
        name = Path(file.filename or "").name
        if not name:
            raise ValueError("the uploaded file needs a file name (its suffix picks the loader)")
        meta: dict[str, Any] = dict(title=title, topic=topic, entity=entity, geography=geography, period=period,
                    language=language, sensitivity=sensitivity)  # fmt: skip
        result = ws.ingest_bytes(name, file.file.read(), doc_id=doc_id or name, existing=_existing(replace), **meta)
        background.add_task(ws.warm_lexical_index)  # as POST /documents
        return vars(result)

    @router.delete("/documents/{doc_id:path}", response_model=m.WithdrawOut, tags=["documents"], dependencies=writer,
                   responses={404: {"model": m.ErrorOut, "description": "No active document"}})  # fmt: skip
    def withdraw(doc_id: str) -> dict[str, Any]:
        """Withdraw a document from the active set (its rows stay, inactive, for lineage). A
        RESTRICTED document is answered as absent (404) and stays: its owner withdraws it
        (docs/security.md)."""
        count = ws.withdraw(doc_id, restricted=False)
        if not count:
            raise _not_found(doc_id)
        return {"doc_id": doc_id, "withdrawn_chunks": count}

    @router.get("/documents/{doc_id:path}/chunks", response_model=m.ChunksOut, tags=["documents"],
                responses={404: {"model": m.ErrorOut, "description": "No active document"}})  # fmt: skip
    def chunks(doc_id: str) -> dict[str, Any]:
        """The document's active chunks in order (RESTRICTED ones are never returned)."""
        found = ws.chunks(doc_id)
        if not found:
            raise _not_found(doc_id)
        return {"doc_id": doc_id, "chunks": found}

    @router.post("/search", response_model=m.SearchOut, tags=["retrieval"])
    def search(body: SearchIn) -> dict[str, Any]:  # type: ignore[valid-type]
        """Ranked, cited snippets (RESTRICTED never included)."""
        given: Any = body  # the model class is built at run time (its top_k bound)
        mode = ws.check_mode(given.mode)
        where = _where(given)
        found = ws.search(given.query, where=where, top_k=given.top_k, mode=given.mode,
                          filter_fallback=given.filter_fallback, min_score=given.min_score)  # fmt: skip
        return {"mode": mode, **found.to_dict()}

    @router.post("/ask", response_model=m.AskOut, tags=["retrieval"])
    def ask(body: AskIn) -> dict[str, Any]:  # type: ignore[valid-type]
        """An answer with numbered citations: from the LLM when configured, else extractive."""
        given: Any = body  # the model class is built at run time (its top_k bound)
        where = _where(given)
        return ws.ask(given.question, where=where, top_k=given.top_k, filter_fallback=given.filter_fallback,
                      min_score=given.min_score).to_dict()  # fmt: skip

    return router


def _existing(replace: bool) -> Existing:
    """An HTTP write never replaces a RESTRICTED document, and replaces another only when asked."""
    return "replace_visible" if replace else "refuse"


def _where(body: Any) -> Any:
    """The request's exact `filters` and typed `where`, AND-ed (None when neither is given)."""
    exact = body.filters.model_dump(exclude_none=True) if body.filters else {}
    if not body.where:
        return exact or None
    return [exact, body.where] if exact else body.where


def _not_found(doc_id: str) -> HTTPException:
    return HTTPException(404, f"no active document {doc_id!r}")
