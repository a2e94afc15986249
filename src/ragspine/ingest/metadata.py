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

Front matter is read by `ingest.front_matter` (`split_front_matter`, re-exported here). A
sidecar is read with every (key, value) pair seen, duplicates included, and keys are folded like
labels (`retrieval.sensitivity.fold_key`): every value of every key that folds to `sensitivity`
is a label (`ingest.labels.gather_labels`), kept in `DocumentFields.labels`, and the strictest
of all wins, so `{"sensitivity": "RESTRICTED", "SENSITIVITY": "PUBLIC"}` is RESTRICTED.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.ingest.front_matter import MAX_FRONT_MATTER_CHARS, MAX_FRONT_MATTER_DEPTH, split_front_matter
from ragspine.ingest.label_keys import LABEL_KEY, gather_labels
from ragspine.retrieval.model import check_user_metadata
from ragspine.retrieval.sensitivity import fold_key

__all__ = [
    "KNOWN_FIELDS",
    "MAX_FRONT_MATTER_CHARS",
    "MAX_FRONT_MATTER_DEPTH",
    "SIDECAR_SUFFIX",
    "DocumentFields",
    "Sidecar",
    "filterable",
    "read_sidecar",
    "sidecar_path",
    "split_front_matter",
    "to_fields",
]

KNOWN_FIELDS = ("title", "entity", "period", "topic", "geography", "language", "sensitivity")
SIDECAR_SUFFIX = ".meta.json"


@dataclass(frozen=True)
class DocumentFields:
    """Validated metadata: known fields as strings, free fields as JSON-compatible values;
    `labels`: every sensitivity label the source gave (its `sensitivity` field is the last)."""

    known: Mapping[str, str] = field(default_factory=dict)
    free: Mapping[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] = ()

    def over(self, lower: DocumentFields) -> DocumentFields:
        """These fields, falling back to `lower` for any field not set here (labels: both)."""
        return DocumentFields({**lower.known, **self.known}, {**lower.free, **self.free}, self.labels + lower.labels)


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
        data = json.loads(raw.decode("utf-8-sig"), object_pairs_hook=_JsonObject)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"sidecar {found.name}: not valid UTF-8 JSON ({exc})") from exc
    if not isinstance(data, _JsonObject):
        raise ValueError(f"sidecar {found.name}: expected a JSON object, got {type(data).__name__}")
    fields = to_fields(gather_labels(data.pairs), f"sidecar {found.name}")
    return Sidecar(fields, hashlib.sha256(raw).hexdigest(), warnings)


class _JsonObject(dict[str, Any]):
    """A JSON object that also keeps every (key, value) pair in order, duplicate keys included."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs


def to_fields(data: Mapping[Any, Any], source: str) -> DocumentFields:
    """Split raw metadata into validated known fields (keys folded by `fold_key`) and free fields
    (None values dropped); every value of a label key (a tuple from `gather_labels`, or one
    value per key spelling) is kept in `labels`."""
    known: dict[str, str] = {}
    free: dict[str, Any] = {}
    labels: list[str] = []
    for key, value in data.items():
        name = str(key).strip()
        if value is None or not name:
            continue
        folded = fold_key(name)
        if folded in KNOWN_FIELDS:
            values = value if folded == LABEL_KEY and isinstance(value, tuple) else (value,)
            for one in values:
                if isinstance(one, (dict, list, tuple)):
                    kind = type(one).__name__
                    raise ValueError(f"{source}: {name!r} must be a single value, got {kind}")
                if one is not None:
                    known[folded] = str(_jsonable(one)).strip()
                    if folded == LABEL_KEY and known[folded]:
                        labels.append(known[folded])
        else:
            free[name] = _jsonable(value)
    return DocumentFields(known, free, tuple(labels))


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
