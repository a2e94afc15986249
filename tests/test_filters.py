from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.filters import (
    OPERATORS,
    And,
    Or,
    Predicate,
    fields_of,
    filter_records,
    matches,
    parse_filter,
    parse_where,
    to_dict,
)

RECORD = {"entity": "ACME_CN", "period": "2024-Q3", "pages": "120", "score": 3.5,
          "valid_as_of": "2024-09-30", "topic": ""}  # fmt: skip


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("eq", "ACME_CN", True), ("eq", "ACME_HK", False),
        ("ne", "ACME_HK", True), ("ne", "ACME_CN", False),
        ("in", ["ACME_HK", "ACME_CN"], True), ("in", ["X"], False),
        ("nin", ["X", "Y"], True), ("nin", ["ACME_CN"], False),
    ],
)  # fmt: skip
def test_equality_operators_on_strings(op: str, value: object, expected: bool) -> None:
    assert matches(Predicate("entity", op, value), RECORD) is expected


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("gt", "99", True), ("gt", 120, False), ("gte", 120, True), ("lt", "1,000", True),
        ("lte", 119.5, False), ("between", [100, 200], True), ("between", ["121", "200"], False),
    ],
)  # fmt: skip
def test_numbers_compare_as_numbers(op: str, value: object, expected: bool) -> None:
    assert matches(Predicate("pages", op, value), RECORD) is expected  # "120" > "99" as numbers


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("gte", "2024", True), ("gt", "2024", False), ("lte", "2024", True), ("lt", "2025", True),
        ("gte", "2024-H2", True), ("gte", "2024-08", False), ("lte", "2024-09", True),
        ("between", ["2024-07", "2024-12"], True), ("between", ["2023", "2024-06"], False),
        ("eq", "2024Q3", True), ("eq", "2024", False), ("lt", "2024-07-01", False),
    ],
)  # fmt: skip
def test_periods_compare_in_time_order(op: str, value: object, expected: bool) -> None:
    assert matches(Predicate("period", op, value), RECORD) is expected


def test_dates_and_years() -> None:
    assert matches(parse_where("valid_as_of>=2024-06-30"), RECORD)
    assert not matches(parse_where("valid_as_of>2024-09-30"), RECORD)
    assert matches(parse_where("valid_as_of<=2024"), RECORD)
    assert matches(parse_where("period>=FY2024"), RECORD)
    assert matches(Predicate("year", "gt", 2023), {"year": "2024"})


def test_missing_or_empty_fields_never_match() -> None:
    for op, value in (("eq", "x"), ("ne", "x"), ("in", ["x"]), ("nin", ["x"]), ("gt", 1)):
        assert not matches(Predicate("geography", op, value), RECORD)
        assert not matches(Predicate("topic", op, value), RECORD)


def test_mixed_kinds_do_not_order() -> None:
    assert not matches(Predicate("entity", "gt", 5), RECORD)
    assert not matches(Predicate("entity", "gt", "2024"), RECORD)
    assert not matches(Predicate("pages", "lt", "2024-Q3"), {"pages": "abc"})


def test_and_or_and_dict_forms() -> None:
    spec = parse_filter({"or": [{"entity": "ACME_HK"}, {"period": {"gte": "2024"}}], "pages": {"lt": 200}})
    assert isinstance(spec, And) and isinstance(spec.items[0], Or)
    assert matches(spec, RECORD)
    assert not matches(spec, {**RECORD, "pages": "500"})
    assert parse_filter({"entity": "ACME_CN"}) == Predicate("entity", "eq", "ACME_CN")
    assert parse_filter(None) is None and parse_filter({}) is None and parse_filter([]) is None
    assert matches(None, RECORD) and matches(And(()), RECORD) and not matches(Or(()), RECORD)
    assert fields_of(spec) == {"entity", "period", "pages"}


def test_dict_form_round_trips() -> None:
    spec = parse_filter({"and": [{"entity": {"in": ["A", "B"]}}, {"period": {"between": ["2023", "2024"]}}]})
    assert parse_filter(to_dict(spec)) == spec


@pytest.mark.parametrize(
    ("expression", "predicate"),
    [
        ("period>=2024", Predicate("period", "gte", "2024")),
        ("entity in ACME_CN,ACME_HK", Predicate("entity", "in", ["ACME_CN", "ACME_HK"])),
        ("entity not in X", Predicate("entity", "nin", ["X"])),
        ("entity nin X,Y", Predicate("entity", "nin", ["X", "Y"])),
        ("period between 2023, 2024", Predicate("period", "between", ["2023", "2024"])),
        ("entity != ACME", Predicate("entity", "ne", "ACME")),
        ("pages<10", Predicate("pages", "lt", "10")),
        ("pages <= 10", Predicate("pages", "lte", "10")),
        ("entity=ACME_CN", Predicate("entity", "eq", "ACME_CN")),
        ("language > en", Predicate("language", "gt", "en")),
    ],
)
def test_cli_expressions(expression: str, predicate: Predicate) -> None:
    assert parse_where(expression) == predicate


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (lambda: parse_where("period"), "expected FIELD OP VALUE"),
        (lambda: parse_where("period>="), "no value"),
        (lambda: Predicate("period", "like", "x"), "unknown operator 'like'"),
        (lambda: Predicate("bad field", "eq", "x"), "invalid field name"),
        (lambda: Predicate("entity", "in", []), "non-empty list"),
        (lambda: Predicate("period", "between", ["2024"]), "exactly two values"),
        (lambda: Predicate("entity", "eq", {"x": 1}), "string or a number"),
        (lambda: parse_filter({"entity": {}}), "no operator"),
        (lambda: parse_filter({"or": "x"}), "list of filters"),
        (lambda: parse_filter(42), "must be a dict"),
    ],
)
def test_errors_name_the_problem(bad: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bad()  # type: ignore[operator]


def test_operators_constant() -> None:
    assert OPERATORS == ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between")


_VALUES = st.one_of(st.sampled_from(["2023", "2024-Q1", "2024-06", "FY2025", "ACME", "12", "1,200", ""]),
                    st.integers(-5, 3000), st.text(max_size=8))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_VALUES, max_size=10), st.sampled_from(OPERATORS), _VALUES, _VALUES)
def test_filtering_is_order_preserving_and_narrowing(values: list[object], op: str, a: object,
                                                     b: object) -> None:  # fmt: skip
    records = [{"i": i, "f": v} for i, v in enumerate(values)]
    value = [a, b] if op in ("in", "nin", "between") else a
    try:
        spec = Predicate("f", op, value)
    except ValueError:
        return
    kept = filter_records(spec, records)
    assert [r["i"] for r in kept] == sorted(r["i"] for r in kept)
    assert all(r["f"] not in ("", None) for r in kept), "an empty field never matches"
    assert filter_records(And((spec, Predicate("f", "ne", "zzz"))), records) == [
        r for r in kept if r["f"] != "zzz"
    ]
    widened = filter_records(Or((spec, Predicate("f", "eq", "zzz"))), records)
    assert all(r in widened for r in kept)


def test_deep_nesting_is_refused() -> None:
    spec: dict[str, object] = {"entity": "A"}
    for _ in range(40):
        spec = {"and": [spec]}
    with pytest.raises(ValueError, match="nested deeper"):
        parse_filter(spec)


def test_a_sensitivity_filter_compares_normalised_labels() -> None:
    # Stored labels are normalised at write time (PUBLIC), so the filter value is normalised too.
    from ragspine.retrieval.filters import Predicate, matches, parse_filter

    assert Predicate("sensitivity", "eq", " public ").value == "PUBLIC"
    assert matches(parse_filter({"sensitivity": "ｐｕｂｌｉｃ"}), {"sensitivity": "PUBLIC"})
    assert not matches(parse_filter({"sensitivity": {"in": ["internal", "restricted"]}}), {"sensitivity": "PUBLIC"})
