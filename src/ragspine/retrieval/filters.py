"""Typed metadata predicates: one filter language for Python, the CLI and JSON.

Invariants:
- A predicate never matches a record whose field is missing or empty (not even `ne` / `nin`).
- Values compare as numbers when both sides are numbers, in time order when both sides are ISO
  dates or periods (2024, 2024-H1, 2024-Q3, 2024-06, 2024-06-30), else as exact strings; `gt`,
  `gte`, `lt`, `lte`, `between` on values of different kinds never match.
- A period is an interval: `>= 2024` matches periods starting on/after 2024-01-01, `<= 2024`
  those ending on/before 2024-12-31, `> 2024` those starting after it, `< 2024` those ending
  before it; `eq` means the same interval.
- Evaluation is pure and deterministic; filtering a list keeps its order.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Union

from ragspine.retrieval.sensitivity import normalize_label

OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between")
CORE_FIELDS = ("topic", "entity", "geography", "period", "language", "doc_id", "sensitivity",
               "valid_as_of")  # fmt: skip
_CLI_OPS = (("between", " between "), ("nin", " nin "), ("nin", " not in "), ("in", " in "),
            ("gte", ">="), ("lte", "<="), ("ne", "!="), ("gt", ">"), ("lt", "<"), ("eq", "="))  # fmt: skip
_NUMBER = re.compile(r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_PERIOD = re.compile(
    r"^(?:FY)?(?P<y>\d{4})(?:[- ]?(?P<q>Q[1-4])|[- ]?(?P<h>H[12])|-(?P<m>\d{2})(?:-(?P<d>\d{2}))?)?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Predicate:
    """`field op value`; `value` is a list for in/nin and a pair for between."""

    field: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        if self.op not in OPERATORS:
            raise ValueError(f"unknown operator {self.op!r}; valid: {', '.join(OPERATORS)}")
        if not isinstance(self.field, str) or not _FIELD_NAME.match(self.field):
            raise ValueError(f"invalid field name {self.field!r}")
        if self.op in ("in", "nin"):
            if not isinstance(self.value, (list, tuple)) or not self.value:
                raise ValueError(f"{self.field} {self.op}: needs a non-empty list of values")
            _check_size(f"{self.field} {self.op}", len(self.value), "values")
            object.__setattr__(self, "value", tuple(_scalar(self.field, v) for v in self.value))
        elif self.op == "between":
            if not isinstance(self.value, (list, tuple)) or len(self.value) != 2:
                raise ValueError(f"{self.field} between: needs exactly two values [low, high]")
            object.__setattr__(self, "value", tuple(_scalar(self.field, v) for v in self.value))
        else:
            object.__setattr__(self, "value", _scalar(self.field, self.value))


@dataclass(frozen=True)
class And:
    """Every member matches (an empty And matches everything)."""

    items: tuple[Filter, ...]


@dataclass(frozen=True)
class Or:
    """At least one member matches (an empty Or matches nothing)."""

    items: tuple[Filter, ...]


Filter = Union[Predicate, And, Or]


MAX_DEPTH = 32  # nesting of and/or/lists a filter may have
MAX_ITEMS = 1024  # values of one in/nin list, and members of one and/or list


def _check_size(what: str, size: int, unit: str) -> None:
    """ValueError when one list of a filter holds more than MAX_ITEMS entries (judging a
    filter costs time in proportion to its size: it is bounded, like its depth)."""
    if size > MAX_ITEMS:
        raise ValueError(
            f"{what}: {size} {unit}, more than the {MAX_ITEMS} a filter list may hold; "
            "use a broader field, or split the request"
        )


def parse_filter(spec: Any, _depth: int = 0) -> Filter | None:
    """Build a filter from its dict form (also accepts Filter objects, lists, AND-ed, and the
    string form of `parse_expression`).

    `{"entity": "ACME"}` · `{"period": {"gte": "2024"}}` · `{"entity": {"in": ["A", "B"]}}` ·
    `{"or": [{...}, {...}]}` · `{"and": [...]}`; several keys in one dict are AND-ed.
    `None` or `{}` means no filter.
    """
    if _depth > MAX_DEPTH:
        raise ValueError(f"filter nested deeper than {MAX_DEPTH} levels")
    if spec is None:
        return None
    if isinstance(spec, (Predicate, And, Or)):
        return spec
    if isinstance(spec, str):
        return parse_expression(spec)
    if isinstance(spec, (list, tuple)):
        _check_size("filter list", len(spec), "filters")
        return _all_of(_parse_members(spec, _depth))
    if not isinstance(spec, Mapping):
        raise ValueError(f"a filter must be a dict, a list, a string or a Predicate, got {type(spec).__name__}")
    parts: list[Filter] = []
    for key, value in spec.items():
        parts.extend(_parse_entry(key, value, _depth))
    return _all_of(parts)


def _parse_members(specs: Iterable[Any], depth: int) -> tuple[Filter, ...]:
    """The filters of a list's members (one level deeper), those meaning "no filter" left out."""
    return tuple(p for p in (parse_filter(item, depth + 1) for item in specs) if p is not None)


def _parse_entry(key: str, value: Any, depth: int) -> list[Filter]:
    """The filters one `key: value` entry of a dict form stands for: an and/or group, one
    predicate per operator of `{op: operand}`, or an `eq` predicate."""
    if key in ("and", "or"):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"'{key}' takes a list of filters")
        _check_size(f"'{key}'", len(value), "filters")
        members = _parse_members(value, depth)
        return [And(members) if key == "and" else Or(members)]
    if isinstance(value, Mapping):
        if not value:
            raise ValueError(f"filter on {key!r} has no operator; valid: {', '.join(OPERATORS)}")
        return [Predicate(key, op, operand) for op, operand in value.items()]
    return [Predicate(key, "eq", value)]


def _all_of(parts: Sequence[Filter]) -> Filter | None:
    """`parts` AND-ed: None when there are none, the one filter alone, else an And."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def parse_where(expression: str) -> Predicate:
    """Parse one CLI `--where` expression: `period>=2024`, `entity in ACME_CN,ACME_HK`,
    `entity!=X`, `period between 2023,2024`, `entity nin A,B`, `entity=ACME`."""
    text = expression.strip()
    for op, token in _CLI_OPS:
        head, sep, tail = text.partition(token)
        if sep and head.strip():
            field, raw = head.strip(), tail.strip()
            if not raw:
                raise ValueError(f"--where {expression!r}: no value after {token.strip()!r}")
            if op in ("in", "nin", "between"):
                return Predicate(field, op, [v.strip() for v in raw.split(",") if v.strip()])
            return Predicate(field, op, raw)
    raise ValueError(
        f"--where {expression!r}: expected FIELD OP VALUE with OP one of "
        "=, !=, >, >=, <, <=, in, nin, between (e.g. \"period>=2024\", \"entity in A,B\")"
    )


def parse_expression(text: str) -> Filter | None:
    """The string form: one `parse_where` expression, or several joined by ` and ` (AND-ed):
    `"period>=2024 and entity=ACME_CN"`. Blank text is no filter. A value that itself holds
    " and " (`"title=R and D"`) is read as one expression when the parts are not all
    expressions; the dict form says anything the string form cannot.

    >>> parse_expression("period>=2024 and entity=ACME_CN") == And((Predicate("period", "gte", "2024"), Predicate("entity", "eq", "ACME_CN")))
    True
    """
    if not text.strip():
        return None
    parts = text.split(" and ")
    if len(parts) > 1:
        _check_size("filter expression", len(parts), "clauses")
        try:
            return And(tuple(parse_where(part) for part in parts))
        except ValueError:
            pass
    return parse_where(text)


def matches(spec: Filter | None, record: Mapping[str, Any]) -> bool:
    """Whether `record` (field → value) satisfies the filter; None matches everything."""
    if spec is None:
        return True
    if isinstance(spec, And):
        return all(matches(item, record) for item in spec.items)
    if isinstance(spec, Or):
        return any(matches(item, record) for item in spec.items)
    return _match_predicate(spec, record.get(spec.field))


def filter_records(spec: Filter | None, records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The matching records, in their given order."""
    return [r for r in records if matches(spec, r)]


def fields_of(spec: Filter | None) -> set[str]:
    """Every field name the filter mentions."""
    if spec is None:
        return set()
    if isinstance(spec, Predicate):
        return {spec.field}
    return set().union(*(fields_of(item) for item in spec.items)) if spec.items else set()


def to_dict(spec: Filter | None) -> Any:
    """The dict form of a filter (round-trips through `parse_filter`); for lineage and JSON."""
    if spec is None:
        return {}
    if isinstance(spec, And):
        return {"and": [to_dict(item) for item in spec.items]}
    if isinstance(spec, Or):
        return {"or": [to_dict(item) for item in spec.items]}
    value = list(spec.value) if isinstance(spec.value, tuple) else spec.value
    return {spec.field: {spec.op: value}}


def _scalar(field: str, value: Any) -> str | int | float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"filter value for {field!r} must be a string or a number, got {value!r}")
    if field == "sensitivity" and isinstance(value, str):
        return normalize_label(value)  # stored labels are normalised: compare like with like
    return value


def _match_predicate(predicate: Predicate, actual: Any) -> bool:
    if actual is None or (isinstance(actual, str) and not actual.strip()):
        return False
    op, value = predicate.op, predicate.value
    if op == "eq":
        return _equal(actual, value)
    if op == "ne":
        return not _equal(actual, value)
    if op == "in":
        return any(_equal(actual, v) for v in value)
    if op == "nin":
        return not any(_equal(actual, v) for v in value)
    if op == "between":
        return _compare(actual, "gte", value[0]) and _compare(actual, "lte", value[1])
    return _compare(actual, op, value)


def _equal(actual: Any, value: Any) -> bool:
    left, right = _as_number(actual), _as_number(value)
    if left is not None and right is not None:
        return left == right
    left_t, right_t = _as_interval(actual), _as_interval(value)
    if left_t is not None and right_t is not None:
        return left_t == right_t
    return str(actual) == str(value)


def _compare(actual: Any, op: str, value: Any) -> bool:
    left, right = _as_number(actual), _as_number(value)
    if left is not None and right is not None:
        return {"gt": left > right, "gte": left >= right, "lt": left < right, "lte": left <= right}[op]
    left_t, right_t = _as_interval(actual), _as_interval(value)
    if left_t is None or right_t is None:
        return False
    (l_start, l_end), (r_start, r_end) = left_t, right_t
    return {"gt": l_start > r_end, "gte": l_start >= r_start, "lt": l_end < r_start,
            "lte": l_end <= r_end}[op]  # fmt: skip


def compares_as_text(value: Any) -> bool:
    """Whether `matches` compares `value` only as a string: a str that reads as neither a number
    nor a date or period. A store pushing a filter down may test such a value by string equality.

    >>> compares_as_text("ACME"), compares_as_text("2024-Q3"), compares_as_text("1,200")
    (True, False, False)
    """
    return isinstance(value, str) and _as_number(value) is None and _as_interval(value) is None


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if not _NUMBER.fullmatch(text):
        return None
    return float(text.replace(",", ""))


def _as_interval(value: Any) -> tuple[date, date] | None:
    """The first and last day a date or period covers; None when it is neither."""
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    if isinstance(value, int) and 1000 <= value <= 9999:
        text = str(value)
    match = _PERIOD.match(text[:10] if re.match(r"^\d{4}-\d{2}-\d{2}[T ]", text) else text)
    if not match:
        return None
    year = int(match["y"])
    try:
        if match["q"]:
            quarter = int(match["q"][1])
            return date(year, 3 * quarter - 2, 1), _month_end(year, 3 * quarter)
        if match["h"]:
            half = int(match["h"][1])
            return date(year, 6 * half - 5, 1), _month_end(year, 6 * half)
        if match["m"]:
            month = int(match["m"])
            if match["d"]:
                day = date(year, month, int(match["d"]))
                return day, day
            return date(year, month, 1), _month_end(year, month)
        return date(year, 1, 1), date(year, 12, 31)
    except ValueError:
        return None


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])

