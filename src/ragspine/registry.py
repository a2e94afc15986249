"""One registry per seam: names → builders, a dotted path for third-party classes, errors from the keys.

    from ragspine.registry import Registry

    CHUNKERS = Registry("chunker", {"paragraph": Entry(ParagraphChunker, "spec 480/80")},
                        protocol=Chunker, setting="RAGSPINE_CHUNKER")
    chunker = CHUNKERS.make("paragraph", max_chars=600)
    chunker = CHUNKERS.make("my_pkg.chunkers:TableChunker")   # a class outside ragspine

Invariants:
- The valid names in every error come from the registry's keys, so they can never drift.
- A name is case-insensitive and trimmed; a spec containing ":" or "." that is not a key is a
  dotted path ("package.module:Class" or "package.module.Class"), imported then, and what it
  builds is checked against the seam's Protocol (a clear TypeError when it does not conform).
- Options are checked against the builder's signature before anything is built: an unknown or
  missing option is a ValueError naming the valid ones.
- A target given as a string ("module:attr") is imported only when that name is built, so a
  bare install never imports an optional dependency it does not use.
- `spec_from_env` is the only environment read outside `ragspine.settings`: what a factory's
  `spec=None` means (the specification's contract for `make_embedding_backend`), and the model
  folder `make_reranker("cross_encoder")` uses when given none (the specification's second
  example). The assembly never relies on it: it passes the values settings resolved.
- This module is a leaf: it imports nothing from ragspine.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
E = TypeVar("E")


@dataclass(frozen=True)
class Entry:
    """How one name builds its component: a callable, or "module:attr" imported on first use.
    `about` is one line for help texts and docs."""

    target: Callable[..., Any] | str
    about: str = ""

    def load(self, seam: str, name: str) -> Callable[..., Any]:
        """The builder, importing it now when it is given as a string."""
        if not isinstance(self.target, str):
            return self.target
        return import_target(self.target, what=f"{seam} {name!r}")


class Registry(Generic[T]):
    """The names one seam accepts and how each is built.

    >>> r: Registry[object] = Registry("greeter", {"plain": Entry(str, "str()")})
    >>> r.make("plain")
    ''
    >>> try:
    ...     r.make("fancy")
    ... except ValueError as exc:
    ...     print(exc)
    unknown greeter 'fancy'; valid: plain, or a dotted path package.module:Class
    """

    def __init__(
        self,
        seam: str,
        entries: Mapping[str, Entry],
        *,
        protocol: type | None = None,
        none_names: Iterable[str] = (),
    ) -> None:
        self.seam = seam
        self.entries = dict(entries)
        self.protocol = protocol
        self.none_names = tuple(dict.fromkeys(n.lower() for n in none_names))  # "this slot is empty"

    def bind(self, protocol: type) -> Registry[Any]:
        """This registry's names and builders, checking what they build against `protocol`
        (how retrieval binds a table of `ragspine.catalog` to its seam's Protocol)."""
        return Registry(self.seam, self.entries, protocol=protocol, none_names=self.none_names)

    @property
    def names(self) -> list[str]:
        """Every accepted name, in registration order."""
        return [*(n for n in self.none_names if n not in self.entries), *self.entries]

    def valid(self) -> str:
        """The text every error lists: the names, then the dotted-path form."""
        return f"{', '.join(self.names)}, or a dotted path package.module:Class"

    def normalize(self, spec: object) -> str:
        """The registry key for `spec` (trimmed, case-folded), or the dotted path as given."""
        if not isinstance(spec, str):
            raise ValueError(f"{self.seam} spec must be a string, got {type(spec).__name__}")
        name = spec.strip()
        return name.lower() if name.lower() in self.entries or name.lower() in self.none_names else name

    def builder(self, spec: str) -> tuple[str, Callable[..., Any]]:
        """(key or dotted path, the builder) for `spec`; ValueError for an unknown name."""
        name = self.normalize(spec)
        entry = self.entries.get(name)
        if entry is not None:
            return name, entry.load(self.seam, name)
        if _is_dotted(name):
            return name, import_target(name, what=f"{self.seam} {name!r}")
        raise ValueError(f"unknown {self.seam} {spec!r}; valid: {self.valid()}")

    def make(self, spec: str, **options: Any) -> T | None:
        """The component `spec` names, built with `options`; None for an empty-slot name."""
        name = self.normalize(spec)
        if name in self.none_names and name not in self.entries:
            if options:
                raise ValueError(f"{self.seam} {name!r} takes no options, got {', '.join(sorted(options))}")
            return None
        key, build = self.builder(name)
        check_options(f"{self.seam} {key!r}", build, options)
        built = build(**options)
        if built is not None and self.protocol is not None and not _conforms(built, self.protocol):
            raise TypeError(
                f"{self.seam} {key!r} built a {type(built).__name__}, which does not implement "
                f"the {self.protocol.__name__} protocol"
            )
        return built

    def about(self) -> dict[str, str]:
        """name → one-line description, for help texts and docs."""
        return {name: entry.about for name, entry in self.entries.items()}


def closed_lookup(seam: str, table: Mapping[str, E], spec: object) -> tuple[str, E]:
    """(name, entry) for `spec` in a table of fixed names with no dotted-path form (the vector
    stores, the embedding backends): the name trimmed and case-folded; a ValueError for a spec
    that is not a string, or for an unknown name (listing the table's keys).

    >>> closed_lookup("vector store", {"in_process": 1}, " In_Process ")
    ('in_process', 1)
    """
    if not isinstance(spec, str):
        raise ValueError(f"{seam} spec must be a string or None, got {type(spec).__name__}")
    name = spec.strip().lower()
    entry = table.get(name)
    if entry is None:
        raise ValueError(f"unknown {seam} {spec!r}; valid: {', '.join(table)}")
    return name, entry


def spec_from_env(names: Iterable[str], default: str) -> str:
    """The first of the variables `names` set (non-blank) in the environment, else `default`."""
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return default


def import_target(target: str, *, what: str) -> Callable[..., Any]:
    """The attribute a "package.module:attr" (or "package.module.attr") path names."""
    module_name, sep, attr = target.partition(":")
    if not sep:
        module_name, _, attr = target.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"{what}: not a dotted path; write package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and not module_name.startswith(exc.name):
            raise
        raise ImportError(f"{what}: module {module_name!r} cannot be imported ({exc})") from exc
    try:
        found: Callable[..., Any] = getattr(module, attr)
    except AttributeError:
        raise ImportError(f"{what}: module {module_name!r} has no attribute {attr!r}") from None
    return found


def check_options(
    what: str, build: Callable[..., Any], options: Mapping[str, Any], *, required: bool = True
) -> None:
    """ValueError naming the valid options when `options` has one `build` does not take, or
    (with `required`) lacks one it requires. A builder taking **kwargs accepts any option."""
    try:
        params = inspect.signature(build).parameters
    except (TypeError, ValueError):  # a builtin without a signature: let it decide
        return
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    named = [p for p, v in params.items() if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
    unknown = sorted(set(options) - set(named))
    if unknown:
        valid = ", ".join(named) or "none"
        raise ValueError(f"{what}: unknown option(s) {', '.join(unknown)}; valid: {valid}")
    missing = [p for p in named if params[p].default is params[p].empty and p not in options]
    if missing and required:
        raise ValueError(f"{what} needs the option(s) {', '.join(missing)}")


def _is_dotted(name: str) -> bool:
    return ":" in name or ("." in name and not name.startswith(".") and " " not in name)


def _conforms(built: object, protocol: type) -> bool:
    """isinstance for runtime-checkable Protocols; otherwise every public method is present."""
    try:
        return isinstance(built, protocol)
    except TypeError:
        wanted = [n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")]
        return all(callable(getattr(built, n, None)) for n in wanted)
