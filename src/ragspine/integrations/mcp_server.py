"""The MCP server: `search`, `ask`, `list_libraries` and `get_chunk` as Model Context Protocol
tools over one or more workspaces, on stdio (`ragspine mcp`) or streamable HTTP (mounted at /mcp
by `ragspine serve`, behind its API keys).

Invariants:
- Every tool is one call on a `Workspace` (built by `ragspine.assembly` through
  `Workspace.from_settings`); results pass `common.passages` (RESTRICTED dropped, again).
- A passage is the one snippet type (`ragspine.retrieval.snippet.Snippet`, its model derived
  from it) with its rank and citation; `query`, `where` and `top_k` are checked as on every
  surface (`SearchRequest`, `check_top_k`: `top_k: "3"` is refused, as over HTTP).
- `search` and `ask` answer with `filters_dropped` at the top level (the filter fields that
  matched nothing and were dropped, RAGSPINE_FILTER_FALLBACK=retry or `filter_fallback`).
- `get_chunk` refuses a RESTRICTED chunk (a tool error; its text never leaves).
- Every tool states its input and output JSON schemas and answers twice: compact text for the
  LLM (`mcp_text`: numbered passages, citations inline, scores rounded, and a first line saying
  whether the filters held) and the same result as structured content for clients that read it.
- Bad input is a tool error (`isError`) of one line, never a traceback nor a multi-line schema
  report (`_one_line`), and `search`/`ask` check their request as HTTP does (`SearchRequest`).
- The `mcp` package (`ragspine[mcp]`) is imported only here; importing this module without it
  is a `MissingExtraError` naming the extra.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from ragspine import __version__
from ragspine.extras import MissingExtraError, require

require("mcp", extra="mcp", purpose="The MCP server")  # the basic install has neither it nor pydantic

from mcp_types import CallToolResult, TextContent  # noqa: E402
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError  # noqa: E402

from ragspine.integrations import mcp_text  # noqa: E402
from ragspine.integrations.common import passages  # noqa: E402
from ragspine.retrieval.pipeline.request import MIN_SCORE_HELP, SearchRequest, check_relevance_floor, check_top_k  # noqa: E402
from ragspine.retrieval.snippet import Snippet  # noqa: E402
from ragspine.retrieval.typed_model import model_from_typeddict  # noqa: E402
from ragspine.search_libraries import LibrarySpec  # noqa: E402
from ragspine.workspace import DEFAULT_SEARCH_TOP_K, Workspace, store_path  # noqa: E402

DEFAULT_LIBRARY = "default"
MAX_TOP_K = 50
INSTRUCTIONS = (
    "RAGSpine retrieval over Chinese and English documents. `search` returns ranked passages, each "
    "with a citation (title [source_locator]) and its chunk_id; cite them when you use them. `ask` "
    "answers with numbered citations. `get_chunk` reads one passage by chunk_id. RESTRICTED text is "
    "never returned. Filters (`where`): {field: value}, {field: {op: value}} (ops eq, ne, in, nin, gt, "
    "gte, lt, lte, between), {\"and\"|\"or\": [...]}, or a string such as \"period>=2024\". The first "
    "line of a search or ask result says whether the filters held; \"NOT filtered\" means nothing matched "
    "them and the passages ignore them."
)
WHERE_HELP = (
    "Optional filter: {\"entity\": \"ACME_CN\"}, {\"period\": {\"gte\": \"2024\"}}, {\"and\": [...]}, or an "
    "expression string such as \"period>=2024\", \"entity in ACME_CN,ACME_HK\" or "
    "\"period>=2024 and entity=ACME_CN\" (fields: topic, entity, geography, period, language, doc_id, "
    "valid_as_of, user metadata)."
)

Where = Annotated[dict[str, Any] | str | None, Field(description=WHERE_HELP)]
FilterFallback = Annotated[
    Literal["strict", "retry"] | None,
    Field(description="When nothing matches `where`: strict (no passage) or retry (searched once without it; "
                      "filters_dropped names the dropped fields). Default: the server's RAGSPINE_FILTER_FALLBACK."),
]  # fmt: skip
Library = Annotated[str | None, Field(description="A library name from list_libraries (default: the default one)")]


# `top_k`: a whole number from 1 to MAX_TOP_K, checked by `check_top_k` (as on every surface).
_CHECK_TOP_K = BeforeValidator(lambda value: check_top_k(value, MAX_TOP_K))
SearchTopK = Annotated[int, Field(ge=1, le=MAX_TOP_K, description="How many passages"), _CHECK_TOP_K]
AskTopK = Annotated[int, Field(ge=1, le=MAX_TOP_K, description="Passages to answer from"), _CHECK_TOP_K]
MinScore = Annotated[float | None, BeforeValidator(check_relevance_floor), Field(description=MIN_SCORE_HELP)]


# A ranked, cited passage (never RESTRICTED): the snippet, with its rank and citation first; its
# optional keys ride along, and `scores` keeps every channel's score.
Passage = model_from_typeddict(
    Snippet,
    name="Passage",
    doc="A ranked, cited passage (never RESTRICTED); the other snippet fields ride along.",
    first={"rank": (int, "1 for the best passage"), "citation": (str, "How to cite it: title [source_locator]")},
    defaults={"version": None, "valid_as_of": "", "lineage": {}},
    types={"scores": dict[str, float | None]},
    descriptions={
        "chunk_id": "Pass to get_chunk to read this passage again (null: a visual page pointer)",
        "source_locator": "Where in the document: file#pages@char-offsets",
        "scores": "Per channel: bm25, vector (null: no dense channel), fused",
        "lineage": "How it was found: filters applied, extracted, fallbacks",
    },
    extra="allow",
)


DROPPED_HELP = ("Filter fields that matched nothing and were dropped (the passages are then NOT filtered by "
                "them); empty: the filters held")


class SearchResult(BaseModel):
    model_config = ConfigDict(extra="allow")
    library: str
    query: str
    where: dict[str, Any] | str | None = Field(None, description="The filter as asked")
    filters_dropped: list[str] = Field(default_factory=list, description=DROPPED_HELP)
    passages: list[Passage]  # type: ignore[valid-type]


class AskResult(BaseModel):
    model_config = ConfigDict(extra="allow")
    question: str
    where: dict[str, Any] | str | None = Field(None, description="The filter as asked")
    filters_dropped: list[str] = Field(default_factory=list, description=DROPPED_HELP)
    answer: str = Field(description="The answer; [n] cites citations[n-1]")
    mode: str = Field(description="llm (the configured model wrote it) or extractive (top passages)")
    note: str = ""
    citations: list[Passage]  # type: ignore[valid-type]


class LibraryInfo(BaseModel):
    name: str
    description: str
    documents: int
    chunks: int
    retrieval: str = Field(description="What every search runs: hybrid, vector or bm25")


class Libraries(BaseModel):
    libraries: list[LibraryInfo]


class ChunkResult(BaseModel):
    """One stored passage (never RESTRICTED); its labels and user metadata ride along."""

    model_config = ConfigDict(extra="allow")
    citation: str = Field(description="How to cite it: title [source_locator]")
    text: str
    chunk_id: str
    doc_id: str
    seq: int = Field(description="Its position in the document, from 0")
    source_locator: str = Field(description="Where in the document: file#pages@char-offsets")
    version: int = Field(description="The document version it belongs to (the active one)")


@dataclass(frozen=True)
class _Library:
    name: str
    description: str
    workspace: Workspace


def build_mcp_server(
    workspace: Workspace, *, libraries: Sequence[tuple[LibrarySpec, Workspace]] = (), name: str = "ragspine"
) -> Any:
    """An `mcp.server.mcpserver.MCPServer` whose tools search `workspace` (library "default") and
    the named `libraries`. The caller keeps the workspaces open while it serves and closes them."""
    mcpserver = require("mcp.server.mcpserver", extra="mcp", purpose="The MCP server")
    ToolError = require("mcp.server.mcpserver.exceptions", extra="mcp", purpose="The MCP server").ToolError
    table = {DEFAULT_LIBRARY: _Library(DEFAULT_LIBRARY, "the served store", workspace)}
    for spec, ws in libraries:
        if spec.library_id in table:
            raise ValueError(f"library name {spec.library_id!r} is used twice (or is the reserved {DEFAULT_LIBRARY!r})")
        table[spec.library_id] = _Library(spec.library_id, spec.description, ws)
    server = _one_line_errors(mcpserver.MCPServer, ToolError)(
        name=name, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def pick(library: str | None) -> _Library:
        chosen = table.get(library or DEFAULT_LIBRARY)
        if chosen is None:
            raise ToolError(f"unknown library {library!r}; known: {', '.join(table)} (see list_libraries)")
        return chosen

    def guarded(call: Any) -> Any:
        try:
            return call()
        except (ValueError, PermissionError, MissingExtraError) as exc:
            raise ToolError(str(exc)) from exc

    @server.tool(title="Search", annotations=_read_only())
    def search(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="What to look for, in any language")],
        where: Where = None,
        top_k: SearchTopK = DEFAULT_SEARCH_TOP_K,
        library: Library = None,
        filter_fallback: FilterFallback = None,
        min_score: MinScore = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Ranked, cited passages for a query (BM25 + dense fused; RESTRICTED never returned).
        The first line of the text says whether the filters held or were dropped."""
        lib = pick(library)
        request = guarded(lambda: SearchRequest(query, where=where, top_k=top_k, max_top_k=MAX_TOP_K,
                                                filter_fallback=filter_fallback, min_score=min_score))  # fmt: skip
        found = guarded(lambda: lib.workspace.search(request.query, where=request.where, top_k=request.top_k,
                                                     filter_fallback=request.filter_fallback,
                                                     min_score=request.min_score))  # fmt: skip
        result = SearchResult(library=lib.name, query=query, where=where or None,
                              filters_dropped=found.filters_dropped, passages=_passages(found))  # fmt: skip
        return _answer(result, mcp_text.search_text)

    @server.tool(title="Ask", annotations=_read_only())
    def ask(
        question: Annotated[str, Field(min_length=1, max_length=2000, description="A question, in any language")],
        where: Where = None,
        top_k: AskTopK = 5,
        library: Library = None,
        filter_fallback: FilterFallback = None,
        min_score: MinScore = None,
    ) -> Annotated[CallToolResult, AskResult]:
        """An answer with numbered citations: from the configured LLM, else extractive."""
        lib = pick(library)
        request = guarded(lambda: SearchRequest(question, where=where, top_k=top_k, max_top_k=MAX_TOP_K,
                                                filter_fallback=filter_fallback, min_score=min_score))  # fmt: skip
        answer = guarded(lambda: lib.workspace.ask(request.query, where=request.where, top_k=request.top_k,
                                                   filter_fallback=request.filter_fallback,
                                                   min_score=request.min_score)).to_dict()  # fmt: skip
        answer.update(citations=_passages(answer["citations"]), where=where or None)
        return _answer(AskResult.model_validate(answer), mcp_text.answer_text)

    @server.tool(title="List libraries", annotations=_read_only())
    def list_libraries() -> Annotated[CallToolResult, Libraries]:
        """The libraries this server searches, with their document and chunk counts (those a
        caller may see: RESTRICTED ones are not counted)."""
        infos = []
        for lib in table.values():
            stats = lib.workspace.stats(internals=False)
            infos.append(LibraryInfo(name=lib.name, description=lib.description, documents=stats["documents"],
                                     chunks=stats["chunks"], retrieval=stats["index"]["retrieval"]))  # fmt: skip
        return _answer(Libraries(libraries=infos), mcp_text.libraries_text)

    @server.tool(title="Get chunk", annotations=_read_only())
    def get_chunk(
        chunk_id: Annotated[str, Field(min_length=1, max_length=1100, description="A passage's chunk_id")],
        library: Library = None,
    ) -> Annotated[CallToolResult, ChunkResult]:
        """One passage by its chunk_id, with its citation; a RESTRICTED chunk is refused."""
        row = guarded(lambda: pick(library).workspace.chunk(chunk_id))
        return _answer(ChunkResult.model_validate({**row, "citation": mcp_text.citation(row)}), mcp_text.chunk_text)

    return server


def _read_only() -> Any:
    types = require("mcp_types", extra="mcp", purpose="The MCP server")
    return types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


def _passages(snippets: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [
        Passage.model_validate({**s, "rank": n, "citation": mcp_text.citation(s)})
        for n, s in enumerate(passages(snippets), start=1)
    ]


def _answer(result: BaseModel, render: Callable[[Mapping[str, Any]], str]) -> CallToolResult:
    """The tool's result: `render`'s compact text for the LLM, `result` as structured content."""
    data = result.model_dump(mode="json")
    return CallToolResult(content=[TextContent(type="text", text=render(data))], structured_content=data)


def _one_line_errors(base: type, tool_error: type[Exception]) -> Any:
    """`base` (the SDK's MCPServer) whose argument errors are one line: `top_k must be >= 1,
    got 0`, not pydantic's multi-line report with a URL per error."""

    class OneLineErrors(base):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except tool_error as exc:
                if isinstance(exc.__cause__, ValidationError):
                    raise tool_error(f"invalid arguments for {name}: {_one_line(exc.__cause__)}") from exc.__cause__
                raise

    return OneLineErrors


def _one_line(error: ValidationError) -> str:
    """Each failing argument once, with its messages: `where: Input should be a valid
    dictionary or a valid string`; a message that names its argument is kept as it is."""
    by_field: dict[str, list[str]] = {}
    for item in error.errors(include_url=False):
        field = str(item["loc"][0]) if item["loc"] else "arguments"
        message = str(item["msg"]).removeprefix("Value error, ")
        if message not in by_field.setdefault(field, []):
            by_field[field].append(message)
    parts = []
    for field, messages in by_field.items():
        joined = " or ".join([messages[0], *(m.removeprefix("Input should be ") for m in messages[1:])])
        parts.append(joined if joined.startswith(f"{field} ") else f"{field}: {joined}")
    return "; ".join(parts)


def run_stdio(workspace: Workspace, specs: Sequence[LibrarySpec] = ()) -> None:
    """Serve the MCP tools over stdin/stdout until the client closes them (`ragspine mcp`); the
    extra libraries are opened through the same assembly as `workspace` and closed at exit."""
    with ExitStack() as stack:
        libraries = [(spec, stack.enter_context(_open_library(workspace, spec))) for spec in specs]
        build_mcp_server(workspace, libraries=libraries).run("stdio")


def _open_library(workspace: Workspace, spec: LibrarySpec) -> Workspace:
    path = store_path(spec.path)  # a folder holding chunks.db, as `ragspine.open` reads it
    if not Path(path).is_file():
        raise ValueError(f"library {spec.library_id!r}: no chunk store at {path}")
    return Workspace.from_settings(replace(workspace.settings, db=path))


def streamable_http(workspace: Workspace, *, host: str) -> tuple[Any, Callable[[Any], AbstractAsyncContextManager[None]]]:
    """(ASGI endpoint, lifespan) of the MCP streamable HTTP transport over `workspace`, for an app
    to route at /mcp (the caller guards it with its API keys) and to run the lifespan of (it
    starts and stops the session manager). On a loopback `host` the SDK's DNS-rebinding
    protection admits only loopback Host and Origin headers."""
    manager_module = require("mcp.server.streamable_http_manager", extra="mcp", purpose="The MCP server")
    server = build_mcp_server(workspace)
    server.streamable_http_app(streamable_http_path="/mcp", host=host)  # creates the session manager
    manager = server.session_manager

    def lifespan(_: Any) -> AbstractAsyncContextManager[None]:
        return cast(AbstractAsyncContextManager[None], manager.run())

    return manager_module.StreamableHTTPASGIApp(manager), lifespan
