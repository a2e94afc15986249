"""All RAGSPINE_* environment variables, read and validated in one place.

Invariant: no other module reads the environment. `load_settings()` returns a frozen Settings;
a bad value raises ConfigError naming the variable, the value and what is accepted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DB = ".ragspine/chunks.db"


class ConfigError(ValueError):
    """A RAGSPINE_* variable has a value that cannot be used."""


@dataclass(frozen=True)
class Setting:
    """One documented variable: its name, default and meaning (the docs table is built from these)."""

    env: str
    default: str | None
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting("RAGSPINE_DB", DEFAULT_DB, "Path of the SQLite chunk store used by the CLI."),
    Setting(
        "RAGSPINE_GLOSSARY",
        None,
        "Path of a glossary JSON file (entities and metrics with synonyms) for query rewriting; "
        "unset: the built-in glossary.",
    ),
)


@dataclass(frozen=True)
class Settings:
    """The effective configuration."""

    db: str = DEFAULT_DB
    glossary: str | None = None


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read and validate every RAGSPINE_* variable from `env` (default: the process environment)."""
    source = os.environ if env is None else env
    db = source.get("RAGSPINE_DB", "").strip() or DEFAULT_DB
    glossary = source.get("RAGSPINE_GLOSSARY", "").strip() or None
    if glossary is not None and not Path(glossary).is_file():
        raise ConfigError(
            f"RAGSPINE_GLOSSARY={glossary!r}: no such file; point it at a glossary JSON file "
            "or unset it to use the built-in glossary"
        )
    return Settings(db=db, glossary=glossary)
