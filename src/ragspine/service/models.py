"""Request and response bodies of the HTTP API (they are its OpenAPI schema).

Invariants: every string a client sends is valid Unicode (no lone surrogates) and bounded in
length; `top_k` is bounded by RAGSPINE_MAX_TOP_K (the request models are built per app, so the
schema states the configured bound); filter keys are exactly FILTER_FIELDS; responses never carry
a RESTRICTED chunk (the workspace guarantees it; the models only describe the shape).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, create_model

from ragspine.retrieval import snippet as core
from ragspine.retrieval.model import FILTER_FIELDS
from ragspine.retrieval.pipeline.request import FILTER_FALLBACKS, MIN_SCORE_HELP, check_relevance_floor, check_top_k
from ragspine.retrieval.typed_model import model_from_typeddict
from ragspine.settings.config import RETRIEVAL_MODES

MAX_QUERY_CHARS = 2000
MAX_META_CHARS = 500


def _unicode(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


Text = Annotated[str, AfterValidator(_unicode)]
Meta = Annotated[str, Field(max_length=MAX_META_CHARS), AfterValidator(_unicode)]
DocId = Annotated[str, Field(min_length=1, max_length=512), AfterValidator(_unicode)]
Mode = Literal[RETRIEVAL_MODES]  # type: ignore[valid-type]
MinScore = Annotated[float | None, BeforeValidator(check_relevance_floor), Field(description=MIN_SCORE_HELP)]

WHERE_HELP = (
    "Typed filter, AND-ed with `filters`: {field: value}, {field: {op: value}} with op in eq, ne, "
    "in, nin, gt, gte, lt, lte, between, and {\"and\": [...]} / {\"or\": [...]}, or the string form "
    "\"period>=2024 and entity=ACME_CN\"; fields: the five dimensions, doc_id, sensitivity, "
    "valid_as_of, user metadata (docs/filters.md)."
)
FALLBACK_HELP = (
    "When nothing matches the filters: strict (no snippet) or retry (searched once without them; "
    "`filters_dropped` names them). Default: the service's RAGSPINE_FILTER_FALLBACK (strict unless set)."
)
DROPPED_HELP = (
    "The filter fields that matched nothing and were dropped to find these results (filter_fallback "
    "retry); empty when every result matches every filter asked"
)
FilterFallback = Literal[FILTER_FALLBACKS]  # type: ignore[valid-type]

Filters = create_model(  # type: ignore[call-overload]
    "Filters",
    __config__=ConfigDict(extra="forbid"),
    __doc__="Metadata filters, AND-ed, exact match.",
    **{name: (Meta | None, None) for name in FILTER_FIELDS},
)


class DocumentIn(BaseModel):
    """A document to ingest as text under a new `doc_id`; with `replace`, the new active
    version of an existing one (docs/security.md: a doc_id taken is a 409 whatever its label)."""

    model_config = ConfigDict(extra="forbid")
    doc_id: DocId
    text: Annotated[Text, Field(min_length=1)]
    title: Meta = ""
    topic: Meta = ""
    entity: Meta = ""
    geography: Meta = ""
    period: Meta = ""
    language: Meta = ""
    sensitivity: Meta = "INTERNAL"
    valid_as_of: Meta = ""
    replace: bool = Field(False, description="Make this the new version of an existing doc_id (else 409 if it exists)")


class IngestOut(BaseModel):
    doc_id: str
    chunks: int
    version: int
    # e.g. a stricter stored label kept, garbled text (docs/security.md)
    warnings: list[str] = []


class WithdrawOut(BaseModel):
    doc_id: str
    withdrawn_chunks: int


# The snippet is declared once (`ragspine.retrieval.snippet`); these are its HTTP schema: what a
# client may find omitted has a default, the other optional keys ride along (`extra="allow"`),
# and Scores keeps only its declared channels.
_SNIPPET_DEFAULTS: dict[str, Any] = {"version": None, "valid_as_of": "", "lineage": {}}
Scores = model_from_typeddict(core.Scores, defaults={"vector": None, "visual": None})
Snippet = model_from_typeddict(
    core.Snippet, doc=core.Snippet.__doc__, defaults=_SNIPPET_DEFAULTS, types={"scores": Scores}, extra="allow"
)
Citation = model_from_typeddict(
    core.Citation, name="Citation", defaults=_SNIPPET_DEFAULTS, types={"scores": Scores}, extra="allow"
)


class SearchOut(BaseModel):
    mode: str = Field(description="What ran: bm25, hybrid (BM25 + dense, fused) or vector (dense alone)")
    filters_dropped: list[str] = Field(description=DROPPED_HELP)
    snippets: list[Snippet]  # type: ignore[valid-type]


class AskOut(BaseModel):
    question: str
    answer: str
    mode: Literal["llm", "extractive"]
    note: str = Field("", description="Set when the LLM failed and the answer fell back to extractive")
    filters_dropped: list[str] = Field(description=DROPPED_HELP)
    citations: list[Citation]  # type: ignore[valid-type]


class ChunkOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    chunk_id: str
    doc_id: str
    seq: int
    text: str
    source_locator: str
    version: int


class ChunksOut(BaseModel):
    doc_id: str
    chunks: list[ChunkOut]


class FieldsOut(BaseModel):
    fields: list[str] = Field(description="Built-in filterable fields")
    metadata: list[str] = Field(description="User metadata fields that some active document carries")
    operators: list[str]


class HealthOut(BaseModel):
    status: Literal["ok"]
    version: str


class VectorStoreOut(BaseModel):
    kind: Literal["in_process", "pgvector", "qdrant"] = Field(description="RAGSPINE_VECTOR_STORE")
    location: str = Field(description="Where the vectors are (credentials masked)")
    collection: str | None = Field(None, description="pgvector table / Qdrant collection; null: one per model")


class DenseOut(BaseModel):
    """The dense channel's vectors; the coverage counts are as of the last search (all zero
    before the first one)."""

    stored_vectors: int | None = Field(description="Vectors stored for this model (null: the vectors cannot be read)")
    active: int = Field(description="Active chunks the last search ranked")
    with_vector: int
    lexical_only: int = Field(description="RESTRICTED chunks a remote backend may not see")
    missing: int = Field(description="Active chunks without a vector (`ragspine embed` fills them)")
    damaged: int = Field(0, description="Stored vectors that failed their checksum (ranked by BM25 until `ragspine embed`)")
    problem: str | None = Field(None, description="Why the stored vectors cannot be read at all (search runs on BM25)")
    healthy: bool = Field(True, description="No damaged or unreadable vectors")
    note: str | None = Field(
        None,
        description="While some chunks have no vector (ranked by BM25 only): no vectors for the store yet, "
        "embedding in progress (X of N), or X of N with `ragspine embed` to fill the rest; null: all have one",
    )


class VisualOut(BaseModel):
    """The visual page index (RAGSPINE_VISUAL_EMBEDDER)."""

    model: str
    dim: int
    pages: int = Field(description="Pages indexed (RESTRICTED pages never are)")
    documents: int
    vectors: int = Field(description="Patch vectors stored")
    segments: int
    bytes: int = Field(description="Size of the vector segments")
    bytes_per_page: int
    path: str | None


class IndexOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    data_version: int | None = Field(None, description="The store's write counter (admin keys only; null otherwise)")
    retrieval: Literal["hybrid", "vector", "bm25"] = Field(description="What every search runs")
    embedding_model: str | None = Field(None, description="model_id of the embedding backend; null: no dense channel")
    embedding_device: str | None = Field(
        None, description="Where the embedding model runs (cuda, cpu; admin keys only); null: no dense channel"
    )
    dense: DenseOut | None = None
    vector_store: VectorStoreOut | None = None
    visual: VisualOut | None = None


class StatsOut(BaseModel):
    """Counts of what a read or write key may see (RESTRICTED left out); for admin keys the
    operator's view: whole-store counts and the internals (paths, vector store, channels, RAPTOR
    tree)."""

    documents: int
    chunks: int
    index: IndexOut
    channels: dict[str, str]
    raptor: dict[str, Any] | None = None  # the tree's status when RAGSPINE_RAPTOR=on


class ErrorOut(BaseModel):
    status: int
    error: str
    message: str


def query_models(max_top_k: int) -> tuple[type[BaseModel], type[BaseModel]]:
    """(SearchIn, AskIn) with `top_k` bounded by `max_top_k`: `check_top_k` decides, as on
    every surface (`true`, `"3"` and `2.0` are not a number of snippets)."""
    check = BeforeValidator(lambda value: check_top_k(value, max_top_k))
    TopK = Annotated[int, Field(strict=True, ge=1, le=max_top_k), check]

    class SearchIn(BaseModel):
        """A search: query, optional filters, how many snippets, and the retrieval mode."""

        model_config = ConfigDict(extra="forbid")
        query: Annotated[Text, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
        filters: Filters | None = None  # type: ignore[valid-type]
        where: dict[str, Any] | Text | None = Field(None, description=WHERE_HELP)
        top_k: TopK = min(10, max_top_k)
        mode: Mode | None = Field(None, description="auto (default), or a preset the service can run")
        filter_fallback: FilterFallback | None = Field(None, description=FALLBACK_HELP)
        min_score: MinScore = None

    class AskIn(BaseModel):
        """A question, answered from the store with numbered citations."""

        model_config = ConfigDict(extra="forbid")
        question: Annotated[Text, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
        filters: Filters | None = None  # type: ignore[valid-type]
        where: dict[str, Any] | Text | None = Field(None, description=WHERE_HELP)
        top_k: TopK = min(5, max_top_k)
        filter_fallback: FilterFallback | None = Field(None, description=FALLBACK_HELP)
        min_score: MinScore = None

    return SearchIn, AskIn
