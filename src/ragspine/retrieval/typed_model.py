"""A pydantic model derived from a `TypedDict` (the HTTP API's and MCP's schemas of a snippet).

Invariants: the model's fields, their order, types and descriptions come from the TypedDict (a
bare string in `Annotated[...]` is a description); only what a schema adds is given here: a
default for a key the schema lets a client omit, a type standing in for a nested TypedDict
(pydantic takes only `typing_extensions.TypedDict` below Python 3.12), and fields of its own. A
key that is neither required nor given a default is not declared: with `extra="allow"` it rides
along as it is, with `extra="ignore"` it is dropped, as today's HTTP `Scores` drops the extra
channels. pydantic is imported when a model is built (it is an extra, not a core dependency).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, Required, get_args, get_origin, get_type_hints

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["fields_of", "model_from_typeddict"]


def fields_of(typed: type) -> dict[str, tuple[Any, str | None, bool]]:
    """Each key of the TypedDict `typed` in order: (its type, its description, whether it is required)."""
    out: dict[str, tuple[Any, str | None, bool]] = {}
    required: frozenset[str] = getattr(typed, "__required_keys__", frozenset())
    for key, hint in get_type_hints(typed, include_extras=True).items():
        while get_origin(hint) in (NotRequired, Required):
            hint = get_args(hint)[0]
        description = None
        if get_origin(hint) is Annotated:
            hint, *meta = get_args(hint)
            description = next((m for m in meta if isinstance(m, str)), None)
        out[key] = (hint, description, key in required)
    return out


def model_from_typeddict(
    typed: type,
    *,
    name: str | None = None,
    doc: str | None = None,
    defaults: Mapping[str, Any] | None = None,
    types: Mapping[str, Any] | None = None,
    descriptions: Mapping[str, str] | None = None,
    first: Mapping[str, tuple[Any, str]] | None = None,
    extra: Literal["allow", "ignore", "forbid"] = "ignore",
) -> type[BaseModel]:
    """The pydantic model of `typed` (see the module docstring). `defaults`: key → the default of
    a key a client may omit; `types`: key → the type that stands in for its own (a nested model);
    `descriptions`: key → a description that replaces the TypedDict's; `first`: fields of the
    model's own, declared before the TypedDict's, as name → (type, description)."""
    from pydantic import ConfigDict, Field, create_model

    defaults, types, descriptions = defaults or {}, types or {}, descriptions or {}
    fields: dict[str, Any] = {key: (kind, Field(description=text)) for key, (kind, text) in (first or {}).items()}
    for key, (hint, description, required) in fields_of(typed).items():
        if not required and key not in defaults:
            continue
        default = defaults[key] if key in defaults else ...
        fields[key] = (types.get(key, hint), Field(default, description=descriptions.get(key, description)))
    model: type[BaseModel] = create_model(
        name or typed.__name__, __config__=ConfigDict(extra=extra), __doc__=doc, **fields
    )
    return model
