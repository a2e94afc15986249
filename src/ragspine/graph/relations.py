"""The relations file the user keeps: entity -> parent and peers (and aliases), document ->
the documents it derives from, as YAML or CSV; every row remembers its file and line.

    # relations.yaml                      # relations.csv
    entities:                             entity,parent,peers,aliases
      - entity: ACME_HK                   ACME_HK,ACME,RIVAL_CO,艾克美香港
        parent: ACME
        peers: [RIVAL_CO]
        aliases: [艾克美香港]
    documents:
      - document: summary-2024
        derived_from: [filing-2024]

Invariants: a bad file is a ValueError naming the file, the line and what is accepted; nothing is
guessed (an unknown column or key is an error, not ignored). In CSV, lists are separated by `;`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ENTITY_KEYS = ("entity", "parent", "peers", "aliases")
DOCUMENT_KEYS = ("document", "derived_from")


@dataclass(frozen=True)
class RelationRow:
    """One row: an entity with its parent, peers and aliases, or a document with its sources."""

    file: str
    line: int
    entity: str = ""
    parent: str = ""
    peers: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    document: str = ""
    derived_from: tuple[str, ...] = ()


class _LineLoader(yaml.SafeLoader):
    """A SafeLoader that keeps each mapping's first line under `__line__`."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        mapping["__line__"] = node.start_mark.line + 1
        return mapping


def load_relations(path: str | Path) -> list[RelationRow]:
    """The rows of the YAML (.yaml/.yml) or CSV (.csv) relations file at `path`."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"relations file {str(path)!r} does not exist (RAGSPINE_GRAPH_RELATIONS)")
    text = path.read_text(encoding="utf-8-sig")
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _from_yaml(text, str(path))
    if suffix == ".csv":
        return _from_csv(text, str(path))
    raise ValueError(f"relations file {str(path)!r}: use a .yaml, .yml or .csv file")


def _from_yaml(text: str, name: str) -> list[RelationRow]:
    try:
        data = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ValueError(f"relations file {name!r} is not valid YAML: {exc}") from None
    if data is None:
        return []
    if isinstance(data, list):
        items: Iterable[Any] = data
    elif isinstance(data, dict):
        unknown = sorted(k for k in data if k not in ("entities", "documents", "__line__"))
        if unknown:
            raise ValueError(f"relations file {name!r}: unknown top-level key(s) {unknown}; valid: entities, documents")
        items = [*(data.get("entities") or []), *(data.get("documents") or [])]
    else:
        raise ValueError(f"relations file {name!r}: expected a mapping with entities/documents, or a list of rows")
    rows = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"relations file {name!r}: each row must be a mapping, got {item!r}")
        line = int(item.pop("__line__", 0))
        rows.append(_row(item, name, line))
    return rows


def _from_csv(text: str, name: str) -> list[RelationRow]:
    reader = csv.DictReader(io.StringIO(text))
    rows = []
    for record in reader:
        if None in record:
            raise ValueError(f"relations file {name!r} line {reader.line_num}: more cells than columns")
        cells = {k.strip(): v for k, v in record.items() if v is not None and v.strip()}
        rows.append(_row({k: [p for p in v.split(";")] if k in ("peers", "aliases", "derived_from") else v
                          for k, v in cells.items()}, name, reader.line_num))  # fmt: skip
    return rows


def _row(item: dict[str, Any], name: str, line: int) -> RelationRow:
    where = f"relations file {name!r} line {line}"
    keys = ENTITY_KEYS if "entity" in item else DOCUMENT_KEYS if "document" in item else ()
    if not keys:
        raise ValueError(f"{where}: a row needs an 'entity' (with {', '.join(ENTITY_KEYS[1:])}) "
                         f"or a 'document' (with derived_from)")  # fmt: skip
    unknown = sorted(str(k) for k in item if k not in keys)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; valid: {', '.join(keys)}")
    values: dict[str, Any] = {}
    for key, value in item.items():
        if key in ("peers", "aliases", "derived_from"):
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not all(isinstance(v, (str, int)) for v in names):
                raise ValueError(f"{where}: {key} must be a name or a list of names")
            values[key] = tuple(dict.fromkeys(str(v).strip() for v in names if str(v).strip()))
        else:
            if not isinstance(value, (str, int)) or not str(value).strip():
                raise ValueError(f"{where}: {key} must be a non-blank name, got {value!r}")
            values[key] = str(value).strip()
    return RelationRow(file=name, line=line, **values)
