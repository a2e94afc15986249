"""What every conformance suite here shares: the fixture a `Test*` subclass must provide.

Invariant: a suite names the implementation under test through one fixture (`chunker`,
`reranker`, …) that its subclass overrides; used without the override, it fails with a
`NotImplementedError` naming the suite and the fixture.
"""

from __future__ import annotations

from typing import Any

import pytest


def required_fixture(name: str, suite: str) -> Any:
    """A class-level pytest fixture `name` that a subclass of `suite` must override.

    >>> class ChunkerSuite:
    ...     chunker = required_fixture("chunker", "ChunkerSuite")
    """
    article = "an" if suite[:1].lower() in "aeiou" else "a"

    def missing(self: object) -> Any:
        raise NotImplementedError(f"{article} {suite} subclass must provide the {name} fixture")

    missing.__name__ = name
    return pytest.fixture(missing, name=name)
