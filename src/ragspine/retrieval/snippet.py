"""The snippet: what every search surface returns (Python, CLI, HTTP, MCP, LangChain, LlamaIndex).

`Snippet` is declared once, here, as a `TypedDict`: a snippet is a plain dict (it indexes,
compares and serialises like one) whose keys a type checker knows. The HTTP API's response model
and the MCP tools' passages are derived from it (`ragspine.retrieval.typed_model`), never written
again; the LangChain and LlamaIndex adapters build their metadata from it with one function
(`ragspine.integrations.common.snippet_metadata`).

Invariants: the required keys are in every snippet any code path returns (a text chunk's, a
visual page pointer's, a RAPTOR node's and a node's or pointer's members); the `NotRequired` keys
appear only on the snippets that say what they name (none is ever None when present); a
`Scores` carries the declared keys and, under their own names, the scores of any extra channel
(sparse, ...) or fusion step (`library_fused`) that ranked it; `relevance` is set once, at the
retriever's exit (`ragspine.retrieval.relevance.rate`: 0.0 until then). This module imports nothing from
ragspine and no third-party package. (No `from __future__ import annotations` here: `TypedDict`
reads `NotRequired` from the evaluated annotations.)

A bare string in `Annotated[...]` is the key's description (the HTTP schema shows it).
"""

from typing import Annotated, Any, NotRequired, TypedDict

__all__ = ["Citation", "Scores", "Snippet"]


class Scores(TypedDict):
    """The channels' scores and the fused one (more channels ride along under their names)."""

    bm25: Annotated[float | None, "null for a visual page pointer"]
    vector: float | None
    fused: float
    visual: NotRequired[Annotated[float | None, "MaxSim of a visual page pointer (RAGSPINE_VISUAL_EMBEDDER)"]]
    library_fused: NotRequired[Annotated[float, "The RRF score across libraries (several libraries searched)"]]


class Snippet(TypedDict):
    """A ranked, cited chunk (never RESTRICTED)."""

    text: str
    doc_id: str
    title: str
    source_locator: str
    chunk_id: Annotated[str | None, "null for a visual page pointer (is_visual: a page, never a citable fact)"]
    topic: str
    entity: str
    geography: str
    period: str
    language: str
    sensitivity: str
    version: int | None
    valid_as_of: NotRequired[str]  # a visual page pointer has none
    scores: Scores
    relevance: Annotated[float, "The estimated probability that the passage is relevant, in [0, 1]: calibrated per "
                               "retrieval mode, comparable across queries, never increasing down the list "
                               "(`min_score` cuts on it)"]
    lineage: dict[str, Any]
    # generation-only expansion (post-processors, parent sections / sentence windows)
    prompt_text: NotRequired[str]
    prompt_spans: NotRequired[list[list[int]]]
    heading: NotRequired[str]
    parent_id: NotRequired[str]
    parent_locator: NotRequired[str]
    # a visual page pointer (RAGSPINE_VISUAL_EMBEDDER): a page, never a citable fact
    is_visual: NotRequired[bool]
    page: NotRequired[int]
    # a pointer's or a RAPTOR node's citable chunks
    members: NotRequired[list["Snippet"]]
    # a RAPTOR synthesis node (RAGSPINE_RAPTOR), and a member's node
    is_synthesis: NotRequired[bool]
    citable: NotRequired[bool]
    level: NotRequired[int]
    via: NotRequired[str]
    # several libraries searched (`MultiIndexRetriever`, `ragspine search --library`)
    library_id: NotRequired[str]


class Citation(Snippet):
    """A snippet an answer cites, numbered."""

    ref: Annotated[int, "The number the answer cites it by: [ref]"]
    cited: Annotated[bool, "Whether the answer text cites it"]
