"""Where each setting's value comes from: a flag, the environment, the config file, the default.

Invariants: no other module reads the environment for a setting. Precedence, highest first: a
command-line flag, the environment (a variable or one of its aliases, which must agree), the
TOML file named by RAGSPINE_CONFIG (or `--config`), the store's record of what it was built with
(offered by the caller's `adopt` hook: it replaces defaults only, never a value the user gave),
the default. One spelling sets two settings: RAGSPINE_EMBEDDING=hub:ORG/NAME[@REV] is the `hub`
backend with RAGSPINE_EMBEDDING_MODEL=ORG/NAME[@REV] (from the same source). Every value is parsed by its
setting's parser; a bad one raises ConfigError naming the variable, where the value came from
and the value (masked for a secret, redacted otherwise). The source of every value is kept
(`ResolvedSettings.sources`) for `ragspine config show`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.models.hub import hub_spelling
from ragspine.secret import MASK, redact_text
from ragspine.settings.checks import check_combinations
from ragspine.settings.declare import Setting
from ragspine.settings.errors import ConfigError
from ragspine.settings.schema import SETTINGS, Settings


@dataclass(frozen=True)
class ResolvedSettings:
    """Settings plus, for each variable, where its value came from."""

    settings: Settings
    sources: Mapping[str, str] = field(default_factory=dict)  # "default" | "environment" | "file" | "flag" | "store"


EXPLICIT_SOURCES = ("flag", "environment", "file")  # values the user gave; "store" and "default" are not
STORE_SOURCE = "store"  # a value adopted from the store's record of what it was built with

# Given the settings read so far (unchecked), the raw values the store recorded that should
# replace defaults, by variable name (`ragspine.assembly` reads them from the store).
Adopter = Callable[[ResolvedSettings], Mapping[str, str]]


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
    adopt: Adopter | None = None,
) -> ResolvedSettings:
    """Read, parse and validate every setting from `flags` (keyed by variable name; None means
    not given), `env` (default: the process environment), the config file (`config_file`, else
    RAGSPINE_CONFIG) and the defaults, in that order of precedence; then `adopt` (when given)
    may replace defaults by the store's recorded values (source "store")."""
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
    _take_hub_model(values, sources)
    settings = Settings(**{k: v for k, v in values.items() if v is not None})
    if adopt is not None:
        settings = _adopt(adopt(ResolvedSettings(settings, dict(sources))), values, sources)
    check_combinations(settings, sources)
    return ResolvedSettings(settings, sources)


def _take_hub_model(values: dict[str, Any], sources: dict[str, str]) -> None:
    """RAGSPINE_EMBEDDING=hub:ORG/NAME[@REV] (kept whole by its parser, `embedding_name`) is the
    `hub` backend with RAGSPINE_EMBEDDING_MODEL=ORG/NAME[@REV]; a different
    RAGSPINE_EMBEDDING_MODEL given beside it is refused."""
    model = hub_spelling(str(values.get("embedding") or ""))
    if model is None:
        return
    source = sources.get("RAGSPINE_EMBEDDING", "default")
    values["embedding"] = "hub"
    given = values.get("embedding_model")
    if given is not None and given != model:
        raise ConfigError(
            f"RAGSPINE_EMBEDDING='hub:{model}' (from {source}) names the model, but RAGSPINE_EMBEDDING_MODEL="
            f"{redact_text(given)!r} (from {sources.get('RAGSPINE_EMBEDDING_MODEL')}) names another; set only one"
        )
    values["embedding_model"], sources["RAGSPINE_EMBEDDING_MODEL"] = model, source


def _adopt(recorded: Mapping[str, str], values: dict[str, Any], sources: dict[str, str]) -> Settings:
    """The settings with each recorded value that replaces a default (never a value the user gave)."""
    by_env = {s.env: s for s in SETTINGS}
    for var, raw in recorded.items():
        setting = by_env.get(var)
        if setting is None or sources.get(var) != "default":
            continue
        values[setting.field_name] = _parse(setting, raw, STORE_SOURCE)
        sources[var] = STORE_SOURCE
    return Settings(**{k: v for k, v in values.items() if v is not None})


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


