"""All RAGSPINE_* settings, read and validated in one place: the names importers use.

Invariants: no other module reads the environment. Every variable is declared once, as a field
of `Settings` (`ragspine.settings.schema`: name, type, default, choices, help, secret-ness); the
table in docs/configuration.md (`python -m ragspine.settings.docs`) and `ragspine config show`
are generated from it. A value comes from, highest precedence first: a command-line flag, the
environment, the TOML file named by RAGSPINE_CONFIG (or `--config`), the default
(`ragspine.settings.load`). `load_settings()` returns a frozen Settings; a bad value (or a bad
combination, `ragspine.settings.checks`) raises ConfigError naming the variable, where the value
came from, the value (masked for secrets) and what is accepted. Secrets are held as `Secret`
and never printed.

This package is a leaf: it imports nothing from `ragspine.retrieval`; the component names a
setting accepts come from `ragspine.catalog`, below both. It checks each value and the
combinations that need no component; `ragspine.assembly` (the only Settings → components path)
adds the checks that do (an embedding backend that resolves, fusion weights `Fusion` accepts, a
known e5 variant) and builds everything from these values.
"""

from __future__ import annotations

from ragspine.settings.checks import check_combinations, query_stage_value
from ragspine.settings.choices import (
    ADAPTIVE_CLASSIFIERS,
    CHUNKERS,
    CORRECTIVE_GRADERS,
    DEFAULT_DB,
    DENSE_MODES,
    E5_EMBEDDINGS,
    E5_ENGINE_CHOICES,
    EMBEDDING_CHOICES,
    EMBEDDING_MODEL_OPTION,
    EXTRA_CHANNELS,
    FILTER_EXTRACTORS,
    FUSION_METHODS,
    GRAPH_STORES,
    INDEX_TEXTS,
    LEXICAL_MODES,
    LOCAL_MODEL_PATH,
    ONNX_EMBEDDINGS,
    POSTPROCESSORS,
    QUERY_DECOMPOSERS,
    QUERY_REWRITERS,
    QUERY_STAGE,
    QUERY_TRANSFORMS,
    RELATION_EXTRACTORS,
    REMOTE_EMBEDDINGS,
    RERANKER_APIS,
    RERANKER_MODEL_FOLDER,
    RERANKERS,
    RETRIEVAL_MODES,
    ROUTERS,
    THREADED_EMBEDDINGS,
    TORCH_EMBEDDINGS,
    VECTOR_STORES,
    VISUAL_DEVICES,
    VISUAL_EMBEDDERS,
    VISUAL_MODEL_FOLDER,
)
from ragspine.settings.declare import Setting
from ragspine.settings.errors import ConfigError
from ragspine.settings.load import ResolvedSettings, load_settings, resolve_settings
from ragspine.settings.report import describe, show_value
from ragspine.settings.schema import SETTINGS, Settings
from ragspine.settings.table import markdown_table

__all__ = [
    "ADAPTIVE_CLASSIFIERS",
    "CHUNKERS",
    "CORRECTIVE_GRADERS",
    "DEFAULT_DB",
    "DENSE_MODES",
    "E5_EMBEDDINGS",
    "E5_ENGINE_CHOICES",
    "EMBEDDING_CHOICES",
    "EMBEDDING_MODEL_OPTION",
    "EXTRA_CHANNELS",
    "FILTER_EXTRACTORS",
    "FUSION_METHODS",
    "GRAPH_STORES",
    "INDEX_TEXTS",
    "LEXICAL_MODES",
    "LOCAL_MODEL_PATH",
    "ONNX_EMBEDDINGS",
    "POSTPROCESSORS",
    "QUERY_DECOMPOSERS",
    "QUERY_REWRITERS",
    "QUERY_STAGE",
    "QUERY_TRANSFORMS",
    "RELATION_EXTRACTORS",
    "REMOTE_EMBEDDINGS",
    "RERANKERS",
    "RERANKER_APIS",
    "RERANKER_MODEL_FOLDER",
    "RETRIEVAL_MODES",
    "ROUTERS",
    "SETTINGS",
    "THREADED_EMBEDDINGS",
    "TORCH_EMBEDDINGS",
    "VECTOR_STORES",
    "VISUAL_DEVICES",
    "VISUAL_EMBEDDERS",
    "VISUAL_MODEL_FOLDER",
    "ConfigError",
    "ResolvedSettings",
    "Setting",
    "Settings",
    "check_combinations",
    "describe",
    "load_settings",
    "markdown_table",
    "query_stage_value",
    "resolve_settings",
    "show_value",
]
