"""A secret string (an API key) that never prints and is never serialised.

Invariants: `str`, `repr` and f-strings show a mask, never the value; pickling refuses, and
`json.dumps` fails on it (it is not a str); the only way to the value is `reveal()`, called where
the value is sent (an Authorization header) and nowhere else. Comparison is constant-time.

>>> key = Secret("sk-example-not-a-real-key")
>>> print(key, repr(key))
**** Secret('****')
>>> key.matches("sk-example-not-a-real-key")
True
"""

from __future__ import annotations

import hmac
from typing import Any, NoReturn

MASK = "****"


class Secret:
    """Holds one secret value; see the module docstring."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError("a secret must be a non-empty string")
        self._value = value

    def reveal(self) -> str:
        """The value itself: only for sending it where it belongs, never for printing."""
        return self._value

    def matches(self, candidate: str) -> bool:
        """Constant-time comparison with `candidate`."""
        return hmac.compare_digest(self._value.encode("utf-8"), candidate.encode("utf-8", "replace"))

    def __str__(self) -> str:
        return MASK

    def __repr__(self) -> str:
        return f"Secret({MASK!r})"

    def __format__(self, spec: str) -> str:
        return format(MASK, spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and self.matches(other._value)

    def __hash__(self) -> int:
        return hash((Secret, len(self._value)))

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret is never serialised")
