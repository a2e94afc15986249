"""Fuzz the served OpenAPI schema with schemathesis against the real server: no 5xx, ever.

Every operation gets generated requests (valid and invalid bodies, odd strings, path
parameters with slashes and unicode) with a valid API key; the check is that the server never
answers 5xx and that every response matches its documented schema. Bounded: a fixed number of
examples per operation, derandomised, so the run is short and repeatable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from service_helpers import AUTH, BM25_ENV, doc

import ragspine
from ragspine.service import openapi_schema, running_server

EXAMPLES_PER_OPERATION = 30


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("fuzz")
    with ragspine.open(root / "ws", env=BM25_ENV, api_keys=[AUTH["Authorization"].split()[1]]) as ws:
        with running_server(ws) as url:
            client = httpx.Client(base_url=url, headers=AUTH)
            for i in range(5):
                client.post("/documents", json=doc(f"d/{i}", f"营收 revenue doc {i}\n\npara two {i}", entity="E"))
            client.post("/documents", json=doc("secret", "hidden words", sensitivity="RESTRICTED"))
            yield url


SCHEMA = schemathesis.openapi.from_dict(openapi_schema())
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
def test_no_server_errors(live: str, operation: Any, mode: GenerationMode) -> None:
    @given(case=operation.as_strategy(mode))
    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    def run(case: Any) -> None:
        response = case.call(base_url=live, headers=AUTH, timeout=30)
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}"
        )
        assert "hidden words" not in response.text

    try:
        run()
    except Unsatisfiable:
        if mode is GenerationMode.POSITIVE:
            raise
        pytest.skip(f"{operation.label} takes no input that could be made invalid")
