"""Typed settings read once from flags, environment, config file and defaults.

A leaf: imports nothing from `ragspine.retrieval`; `ragspine.assembly` turns Settings into
components. `ragspine.settings.config` holds the table of every RAGSPINE_* variable.
"""

from ragspine.settings.config import (
    SETTINGS,
    ConfigError,
    ResolvedSettings,
    Setting,
    Settings,
    describe,
    load_settings,
    markdown_table,
    resolve_settings,
)

__all__ = [
    "SETTINGS",
    "ConfigError",
    "ResolvedSettings",
    "Setting",
    "Settings",
    "describe",
    "load_settings",
    "markdown_table",
    "resolve_settings",
]
