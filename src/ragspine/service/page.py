"""The search page at / : plain HTML, one script and one stylesheet, all served by the app.

Invariants: the page holds no data (it needs no API key to load; every call it makes goes to
the keyed API, the key kept in the browser's sessionStorage only); its script builds the DOM
with text nodes, never HTML from data, and the Content-Security-Policy admits only this
app's own script and style, so text from a document cannot run as code.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

STATIC = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _read(name: str) -> bytes:
    return files("ragspine.service").joinpath("static", name).read_bytes()


def page_routes() -> APIRouter:
    """GET / (the page) and GET /static/{app.js, style.css}."""
    router = APIRouter()

    @router.get("/")
    def page() -> Response:
        return Response(_read("index.html"), media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    @router.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in STATIC:
            raise HTTPException(404, f"no static file {name!r}")
        return Response(_read(name), media_type=STATIC[name], headers=SECURITY_HEADERS)

    return router
