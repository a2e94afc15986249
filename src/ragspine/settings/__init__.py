"""Typed settings read once from flags, environment, config file and defaults.

A leaf: imports nothing from `ragspine.retrieval`; `ragspine.assembly` turns Settings into
components. Every RAGSPINE_* variable is one field of `Settings` (`ragspine.settings.schema`);
`ragspine.settings.config` gathers the names importers use.
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
