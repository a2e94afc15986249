"""Per-document metadata from a sidecar `NAME.meta.json` or Markdown front matter.

Invariants: the known fields (`KNOWN_FIELDS`: title and the dimensions entity, period, topic,
geography, language, sensitivity) come out as stripped strings (a number or date becomes its
text: `period: 2024` gives "2024"); every other key is a free field, kept as JSON-compatible
data; a sidecar or front matter that cannot be parsed fails its document with the reason, it is
never silently ignored. The sidecar of `a/report.pdf` is `a/report.pdf.meta.json`, else
`a/report.meta.json`. Precedence per field, highest first: sidecar, front matter, CLI default.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.retrieval.model import check_user_metadata

KNOWN_FIELDS = ("title", "entity", "period", "topic", "geography", "language", "sensitivity")
SIDECAR_SUFFIX = ".meta.json"
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_YAML_KEY_LINE = re.compile(r"^[\w\-]+[ \t]*:", re.MULTILINE)


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


def sidecar_path(path: Path) -> Path | None:
    """The sidecar file of `path`, when one exists."""
    for name in (path.name, path.stem):
        candidate = path.with_name(name + SIDECAR_SUFFIX)
        if candidate.is_file():
            return candidate
    return None


def read_sidecar(path: Path) -> Sidecar:
    """The validated sidecar of `path` (empty when none); ValueError naming the sidecar if bad."""
    found = sidecar_path(path)
    if found is None:
        return Sidecar(DocumentFields())
    raw = found.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"sidecar {found.name}: not valid UTF-8 JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"sidecar {found.name}: expected a JSON object, got {type(data).__name__}")
    return Sidecar(to_fields(data, f"sidecar {found.name}"), hashlib.sha256(raw).hexdigest())


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter mapping, the rest of the text); ({}, text) when the text has none.

    A leading `---` block counts as front matter only when it holds `key:` lines, so a document
    that merely opens with a horizontal rule is left alone.
    """
    match = _FRONT_MATTER.match(text)
    if match is None or not _YAML_KEY_LINE.search(match.group(1)):
        return {}, text
    import yaml  # PyYAML, a core dependency; imported only for files that have front matter

    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise ValueError(f"front matter is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"front matter must be a mapping of keys to values, got {type(data).__name__}")
    return data, text[match.end() :]


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
