"""Typed parsers for setting values: each turns a raw string into a value or raises ValueError.

Invariant: a parser's `accepts` text is what the docs table shows, and its error messages say
what is accepted (choices are listed from the same tuple the parser checks), so the two can
never drift. `ragspine.settings.config` adds the variable's name and source to every error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar, cast
from urllib.parse import urlsplit

from ragspine.models.hub import hub_spelling, parse_hub_ref
from ragspine.secret import Secret
from ragspine.settings.api_keys import ApiKey

MIN_API_KEY_CHARS = 16
# An API key must also not be guessable from its shape: at least this many distinct characters,
# this many bits of empirical (Shannon) entropy over its characters, not one short unit repeated,
# and not a run of the alphabet, the digits or a keyboard row.
MIN_API_KEY_DISTINCT = 8
MIN_API_KEY_BITS = 40
_SEQUENCES = ("0123456789abcdefghijklmnopqrstuvwxyz", "qwertyuiopasdfghjklzxcvbnm", "1234567890")
GENERATE_KEY = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"

T = TypeVar("T", covariant=True)
C = TypeVar("C", bound=str)
N = TypeVar("N", int, float)


@dataclass(frozen=True)
class Parser(Generic[T]):
    """Turns a raw string into a typed value (ValueError if it cannot); `accepts` documents it."""

    fn: Callable[[str], T]
    accepts: str

    def __call__(self, raw: str) -> T:
        return self.fn(raw)


def _text(raw: str) -> str:
    return raw


def _db(raw: str) -> str:
    scheme = urlsplit(raw).scheme.lower()
    if scheme in ("postgresql", "postgres"):
        return raw  # a PostgreSQL chunk store (extra `ragspine[postgres]`)
    if "://" in raw:
        raise ValueError("expected a SQLite file path, :memory: or a postgresql:// URL")
    return raw


def _existing_file(raw: str) -> str:
    if not Path(raw).is_file():
        raise ValueError("no such file")
    return raw


def component(*names: str) -> Parser[str]:
    """A registry name among `names` (case-insensitive) or a dotted path `package.module:Class`
    to a third-party implementation of that stage (imported and checked when it is built)."""

    def parse(raw: str) -> str:
        value = raw.strip()
        if value.lower() in names:
            return value.lower()
        module, sep, attr = value.partition(":")
        if sep and module and attr and " " not in value:
            return value
        raise ValueError(f"accepted: {', '.join(names)}, or a dotted path package.module:Class")

    return Parser(parse, " \\| ".join(names) + " \\| package.module:Class")


def component_list(*names: str) -> Parser[str]:
    """A comma-separated chain of `component` names, in order ("none" alone for an empty chain)."""
    one = component(*names)

    def parse(raw: str) -> str:
        parts = [one(part) for part in raw.split(",") if part.strip()]
        if not parts:
            raise ValueError(f"empty list; accepted: a comma-separated chain of {', '.join(names)}")
        return ",".join(parts)

    return Parser(parse, f"comma-separated: {one.accepts}")


def embedding_name(*choices: C) -> Parser[C]:
    """`choice` among the embedding backends, plus the spelling `hub:ORG/NAME[@REVISION]`, kept
    whole here and split by the loader into the `hub` backend and RAGSPINE_EMBEDDING_MODEL."""
    plain = choice(*choices)

    def parse(raw: str) -> C:
        value, model = raw.strip(), hub_spelling(raw)
        if model is not None:
            if parse_hub_ref(model) is None:
                raise ValueError(f"{value!r} is not a hub id: hub:ORG/NAME or hub:ORG/NAME@REVISION")
            return cast(C, "hub:" + model)
        return plain(value)

    return Parser(parse, plain.accepts)  # the spelling is documented in the setting's help


def choice(*choices: C, note: str = "") -> Parser[C]:
    """A case-insensitive choice among `choices` (the error lists them); typed as their Literal."""

    def parse(raw: str) -> C:
        value = raw.lower()
        if value not in choices:
            raise ValueError(f"{note}accepted: {', '.join(choices)}")
        return value

    return Parser(parse, " \\| ".join(choices))


def _bounded(convert: Callable[[str], N], low: N, high: N, expected: str) -> Callable[[str], N]:
    """A parse function: `convert(raw)` when that works and lies in [low, high], else
    ValueError("expected <expected>")."""

    def parse(raw: str) -> N:
        try:
            value = convert(raw)
        except ValueError:
            raise ValueError(f"expected {expected}") from None
        if not low <= value <= high:
            raise ValueError(f"expected {expected}")
        return value

    return parse


def int_range(low: int, high: int) -> Parser[int]:
    """An integer in [low, high]."""
    return Parser(_bounded(int, low, high, f"an integer from {low} to {high}"), f"integer {low}–{high}")


def int_or_off(low: int, high: int) -> Parser[int | str]:
    """An integer in [low, high], or the string "off"."""
    number = int_range(low, high)

    def parse(raw: str) -> int | str:
        if raw.strip().lower() == "off":
            return "off"
        try:
            return int(number(raw))
        except ValueError:
            raise ValueError(f"expected `off` or an integer from {low} to {high}") from None

    return Parser(parse, f"`off` or integer {low}–{high}")


def float_range(low: float, high: float) -> Parser[float]:
    """A number in [low, high]."""
    return Parser(_bounded(float, low, high, f"a number from {low:g} to {high:g}"), f"number {low:g}–{high:g}")


def float_list(count: int, names: str, *, minimum: float | None = None) -> Parser[tuple[float, ...]]:
    """Exactly `count` comma-separated finite numbers (`names` spells them, e.g. "LEXICAL,DENSE"),
    each >= `minimum` when given; parsed to a tuple of floats."""
    bound = "" if minimum is None else f", each >= {minimum:g}"

    def parse(raw: str) -> tuple[float, ...]:
        parts = [p.strip() for p in raw.split(",")]
        try:
            values = tuple(float(p) for p in parts)
        except ValueError:
            values = ()
        if len(values) != count or not all(math.isfinite(v) for v in values):
            raise ValueError(f"expected {count} comma-separated numbers {names}{bound}, e.g. {_example(count)}")
        if minimum is not None and min(values) < minimum:
            raise ValueError(f"expected {count} comma-separated numbers {names}{bound}")
        return values

    return Parser(parse, f"{count} comma-separated numbers {names}")


def _example(count: int) -> str:
    return ",".join((["1", "0.5", "0.2", "0.6"] + ["0.3"] * count)[:count])


def _http_url(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("expected an http:// or https:// URL, e.g. http://127.0.0.1:11434/v1")
    return raw.rstrip("/")


def _host(raw: str) -> str:
    if any(c.isspace() for c in raw) or "/" in raw:
        raise ValueError("expected a host name or IP address, e.g. 127.0.0.1")
    return raw


def _secret(raw: str) -> Secret:
    return Secret(raw)


def _api_keys(raw: str) -> tuple[Secret, ...]:
    keys = [ApiKey.parse(k.strip()) for k in raw.split(",") if k.strip()]
    if any(len(k.reveal()) < MIN_API_KEY_CHARS for k in keys):
        raise ValueError(f"every key must have at least {MIN_API_KEY_CHARS} characters")
    for number, key in enumerate(keys, start=1):
        why = weak_key_reason(key.reveal())
        if why:  # the key itself is never echoed
            raise ValueError(f"key {number} is too weak ({why}); generate one with {GENERATE_KEY}")
        if any(key.matches(earlier.reveal()) for earlier in keys[: number - 1]):  # which role would it have?
            raise ValueError(f"key {number} repeats an earlier key; give each key once, with one role")
    return tuple(keys)


def weak_key_reason(key: str) -> str:
    """Why `key` is too weak to be an API key ('' when it is not; see MIN_API_KEY_* above).

    >>> weak_key_reason("a" * 16), weak_key_reason("Zx4-pQ9_mW2rT7vL")
    ('only 1 distinct characters, at least 8 needed', '')
    """
    if len(key) < MIN_API_KEY_CHARS:
        return f"{len(key)} characters, at least {MIN_API_KEY_CHARS} needed"
    distinct = len(set(key))
    if distinct < MIN_API_KEY_DISTINCT:
        return f"only {distinct} distinct characters, at least {MIN_API_KEY_DISTINCT} needed"
    for size in range(1, len(key) // 2 + 1):
        if key == (key[:size] * (len(key) // size + 1))[: len(key)]:
            return f"one {size}-character unit repeated"
    lowered = key.lower()
    if any(lowered in seq or lowered in seq[::-1] for seq in _SEQUENCES):
        return "a run of the alphabet, the digits or a keyboard row"
    bits = -len(key) * sum(c / len(key) * math.log2(c / len(key)) for c in map(key.count, set(key)))
    if bits < MIN_API_KEY_BITS:
        return f"about {bits:.0f} bits of character entropy, at least {MIN_API_KEY_BITS} needed"
    return ""


def check_levels(levels: Sequence[str]) -> tuple[str, ...]:
    """`levels` (already spelled canonically) when they are at least two distinct labels ending
    with RESTRICTED, the strictest; else ValueError. The one check of a set of sensitivity levels:
    RAGSPINE_SENSITIVITY_LEVELS and a sensitivity rule file's `levels` both go through it, so no
    level can sit above RESTRICTED and RESTRICTED cannot be left out.

    >>> check_levels(["PUBLIC", "RESTRICTED"])
    ('PUBLIC', 'RESTRICTED')
    """
    if len(levels) < 2 or len(set(levels)) != len(levels):
        raise ValueError("expected at least two distinct labels, least strict first, e.g. PUBLIC,INTERNAL,RESTRICTED")
    if levels[-1] != "RESTRICTED":
        raise ValueError("RESTRICTED must be the last (strictest) level")
    return tuple(levels)


def _levels(raw: str) -> str:
    return ",".join(check_levels([part.strip().upper() for part in raw.split(",") if part.strip()]))


TEXT = Parser(_text, "text")
DB = Parser(_db, "SQLite file path, `:memory:` or a `postgresql://` URL")
EXISTING_FILE = Parser(_existing_file, "path of an existing file")
HTTP_URL = Parser(_http_url, "http(s) URL")
HOST = Parser(_host, "host name or IP address")
SENSITIVITY_LEVELS = Parser(_levels, "comma-separated labels, least strict first, ending with RESTRICTED")
SECRET = Parser(_secret, "secret text")
API_KEYS = Parser(
    _api_keys,
    f"comma-separated keys, each `read:KEY`, `write:KEY`, `admin:KEY` or a bare `KEY` (write); "
    f"each key ≥ {MIN_API_KEY_CHARS} characters, ≥ {MIN_API_KEY_DISTINCT} distinct, "
    f"≥ {MIN_API_KEY_BITS} bits of character entropy, not repeated or sequential",
)
