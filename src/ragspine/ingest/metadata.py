"""Per-document metadata from a sidecar `NAME.meta.json` or Markdown front matter.

Invariants: the known fields (`KNOWN_FIELDS`: title and the dimensions entity, period, topic,
geography, language, sensitivity) come out as stripped strings (a number or date becomes its
text: `period: 2024` gives "2024"); every other key is a free field, kept as JSON-compatible
data; a sidecar or front matter that cannot be parsed fails its document with the reason, it is
never silently ignored. The sidecar of `a/report.pdf` is `a/report.pdf.meta.json`, else
`a/report.meta.json`; a file whose name differs from those only in case (`report.pdf.META.json`,
`report.PDF.meta.json`) is not read, and the document gets a warning naming it. Precedence per
field, highest first: sidecar, front matter, CLI default (for `sensitivity` the strictest wins:
see `ingest.document`).

Front matter is YAML between `---` lines or TOML between `+++` lines, at most
`MAX_FRONT_MATTER_CHARS` characters and `MAX_FRONT_MATTER_DEPTH` levels deep; YAML aliases
(`*name`) are refused, so a few hundred bytes cannot expand into gigabytes (an alias bomb).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.retrieval.model import check_user_metadata

KNOWN_FIELDS = ("title", "entity", "period", "topic", "geography", "language", "sensitivity")
SIDECAR_SUFFIX = ".meta.json"
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_TOML_FRONT_MATTER = re.compile(r"\A\+\+\+[ \t]*\n(.*?)\n\+\+\+[ \t]*(?:\n|\Z)", re.DOTALL)
_YAML_KEY_LINE = re.compile(r"^[\w\-]+[ \t]*:", re.MULTILINE)
MAX_FRONT_MATTER_CHARS = 65536
MAX_FRONT_MATTER_DEPTH = 16


@dataclass(frozen=True)
class DocumentFields:
    """Validated metadata: known fields as strings, free fields as JSON-compatible values."""

    known: Mapping[str, str] = field(default_factory=dict)
    free: Mapping[str, Any] = field(default_factory=dict)

    def over(self, lower: DocumentFields) -> DocumentFields:
        """These fields, falling back to `lower` for any field not set here."""
        return DocumentFields({**lower.known, **self.known}, {**lower.free, **self.free})


@dataclass(frozen=True)
class Sidecar:
    """A document's sidecar: its fields and a digest of its bytes ('' when there is none)."""

    fields: DocumentFields
    digest: str = ""
    warnings: tuple[str, ...] = ()


def sidecar_path(path: Path) -> Path | None:
    """The sidecar file of `path`, when one exists."""
    for name in _sidecar_names(path):
        candidate = path.with_name(name)
        if candidate.is_file():
            return candidate
    return None


def near_miss_sidecars(path: Path) -> list[str]:
    """Names in the folder of `path` that differ from its sidecar names only in case."""
    exact = _sidecar_names(path)
    wanted = {name.casefold() for name in exact}
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    return sorted(n for n in names if n.casefold() in wanted and n not in exact)


def _sidecar_names(path: Path) -> tuple[str, ...]:
    return (path.name + SIDECAR_SUFFIX, path.stem + SIDECAR_SUFFIX)


def read_sidecar(path: Path) -> Sidecar:
    """The validated sidecar of `path` (empty when none); ValueError naming the sidecar if bad.
    Near-miss names (see the module docstring) come back as warnings."""
    found = sidecar_path(path)
    warnings = tuple(
        f"{name} is not read as the sidecar (names are case-sensitive): rename it "
        f"{path.name + SIDECAR_SUFFIX}"
        for name in near_miss_sidecars(path)
        if found is None or name != found.name
    )
    if found is None:
        return Sidecar(DocumentFields(), warnings=warnings)
    raw = found.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"sidecar {found.name}: not valid UTF-8 JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"sidecar {found.name}: expected a JSON object, got {type(data).__name__}")
    return Sidecar(to_fields(data, f"sidecar {found.name}"), hashlib.sha256(raw).hexdigest(), warnings)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter mapping, the rest of the text); ({}, text) when the text has none.

    A leading `---` block counts as YAML front matter only when it holds `key:` lines, so a
    document that merely opens with a horizontal rule is left alone; a leading `+++` block is
    TOML front matter. Limits and refusals: see the module docstring.
    """
    toml = _TOML_FRONT_MATTER.match(text)
    match = toml or _FRONT_MATTER.match(text)
    if match is None or (toml is None and not _YAML_KEY_LINE.search(match.group(1))):
        return {}, text
    block = match.group(1)
    if len(block) > MAX_FRONT_MATTER_CHARS:
        raise ValueError(
            f"front matter is {len(block)} characters; at most {MAX_FRONT_MATTER_CHARS} are read "
            "(move long data into the text or a sidecar)"
        )
    if toml is not None:
        try:
            data: Any = tomllib.loads(block)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"front matter (+++) is not valid TOML: {exc}") from exc
    else:
        data = _load_yaml(block)
    if not isinstance(data, dict):
        raise ValueError(f"front matter must be a mapping of keys to values, got {type(data).__name__}")
    _check_depth(data, MAX_FRONT_MATTER_DEPTH)
    return data, text[match.end() :]


def _load_yaml(block: str) -> Any:
    """Safe YAML without aliases (refused) and nested at most MAX_FRONT_MATTER_DEPTH deep."""
    import yaml  # PyYAML, a core dependency; imported only for files that have front matter

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, "YAML aliases (*name) are not allowed in front matter", event.start_mark
                )
            self.depth += 1
            try:
                if self.depth > MAX_FRONT_MATTER_DEPTH:
                    raise yaml.composer.ComposerError(
                        None, None, f"nested deeper than {MAX_FRONT_MATTER_DEPTH} levels",
                        self.peek_event().start_mark,
                    )  # fmt: skip
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    try:
        return yaml.load(block, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ValueError(f"front matter is not valid YAML: {exc}") from exc


def _check_depth(data: Any, limit: int) -> None:
    """ValueError when `data` nests deeper than `limit` (TOML inline tables and arrays)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            raise ValueError(f"front matter is nested deeper than {limit} levels")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)


def to_fields(data: Mapping[Any, Any], source: str) -> DocumentFields:
    """Split raw metadata into validated known fields and free fields (None values dropped)."""
    known: dict[str, str] = {}
    free: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).strip()
        if value is None or not name:
            continue
        if name.lower() in KNOWN_FIELDS:
            if isinstance(value, (dict, list)):
                kind = type(value).__name__
                raise ValueError(f"{source}: {name!r} must be a single value, got {kind}")
            known[name.lower()] = str(_jsonable(value)).strip()
        else:
            free[name] = _jsonable(value)
    return DocumentFields(known, free)


def filterable(free: Mapping[str, Any]) -> dict[str, Any]:
    """The free fields that go onto the chunks as user metadata (filterable with `where`): string
    and number values under names that are not built-in fields. Lists, objects, booleans and
    other names stay in the registry only."""
    out: dict[str, Any] = {}
    for name, value in free.items():
        try:
            check_user_metadata({name: value})
        except ValueError:
            continue
        out[name] = value
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
