"""How one setting is declared: a `Settings` field made by `setting(...)`, documented in its metadata.

    chunk_chars: int = setting("1000", "Chunk budget in characters ...", int_range(1, 1_000_000))

Invariants: the field name gives the variable (`chunk_chars` → RAGSPINE_CHUNK_CHARS); the typed
default is the documented default string read by the field's own parser, so the docs, `config
show` and `Settings()` can never disagree; `table()` reads the `Setting` rows from the fields in
declaration order, which is the order of the docs table, `config show` and resolution.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from ragspine.settings.values import TEXT, Parser

ENV_PREFIX = "RAGSPINE_"
_METADATA_KEY = "ragspine.setting"

T = TypeVar("T")


@dataclass(frozen=True)
class Setting:
    """One documented variable: its name, default and meaning (the docs table is built from these)."""

    env: str
    default: str | None
    help: str
    parse: Parser[Any] = TEXT
    secret: bool = False
    aliases: tuple[str, ...] = ()

    @property
    def field_name(self) -> str:
        """The Settings attribute that holds the parsed value: RAGSPINE_LLM_MODEL → llm_model."""
        return self.env.removeprefix(ENV_PREFIX).lower()


@dataclass(frozen=True)
class _Declared:
    """A `Setting` before its field's name (and so its variable) is known."""

    default: str | None
    help: str
    parse: Parser[Any]
    secret: bool
    aliases: tuple[str, ...]


@overload
def setting(default: str, help: str, parse: Parser[T], *, secret: bool = ..., aliases: tuple[str, ...] = ...) -> T: ...
@overload
def setting(default: str, help: str, *, secret: bool = ..., aliases: tuple[str, ...] = ...) -> str: ...
@overload
def setting(default: None, help: str, parse: Parser[T], *, secret: bool = ..., unset: T) -> T: ...
@overload
def setting(default: None, help: str, parse: Parser[T], *, secret: bool = ...) -> T | None: ...
@overload
def setting(default: None, help: str) -> str | None: ...
def setting(
    default: str | None,
    help: str,
    parse: Parser[Any] = TEXT,
    *,
    secret: bool = False,
    aliases: tuple[str, ...] = (),
    unset: Any = None,
) -> Any:
    """A `Settings` field for one variable: `default` as documented (None: unset, the field then
    holds `unset`), `help` for the docs, `parse` turning a raw value into the field's type,
    `secret` masking it everywhere, `aliases` other variable names read from the environment."""
    value = unset if default is None else parse(default)
    return dataclasses.field(
        default=value, metadata={_METADATA_KEY: _Declared(default, help, parse, secret, aliases)}
    )


def table(cls: type) -> tuple[Setting, ...]:
    """The `Setting` rows of a dataclass whose fields are all made by `setting`, in field order."""
    rows = []
    for f in dataclasses.fields(cls):
        declared: _Declared = f.metadata[_METADATA_KEY]
        env = ENV_PREFIX + f.name.upper()
        rows.append(Setting(env, declared.default, declared.help, declared.parse, declared.secret, declared.aliases))
    return tuple(rows)
