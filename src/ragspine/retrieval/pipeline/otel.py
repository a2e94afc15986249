"""OpenTelemetry export of a query's `Trace`: one span per search, one child span per stage.

    RAGSPINE_OTEL=on ragspine serve        # spans go to the tracer provider OTEL_* configures

Invariants: off by default, and then nothing is imported or recorded (the caller makes no
`Trace`); a span's attributes are the step's counts and decisions as strings or numbers, so
they hold what the trace holds (chunk ids, query variants, scores) and never chunk text; the
spans keep the steps' own start times and durations. `opentelemetry-api` comes with the `otel`
extra (`pip install 'ragspine[otel]'`, with the SDK to export them).
"""

from __future__ import annotations

import json
from typing import Any

from ragspine.extras import require
from ragspine.retrieval.pipeline.trace import Trace

TRACER_NAME = "ragspine"


def export_trace(trace: Trace, *, name: str = "ragspine.search") -> None:
    """Send `trace` as a span named `name` with one child span per step."""
    if not trace.steps:
        return
    otel = require("opentelemetry.trace", extra="otel", purpose="RAGSPINE_OTEL=on")
    tracer = otel.get_tracer(TRACER_NAME)
    start = min(step.started_ns for step in trace.steps)
    end = max(step.started_ns + int(step.ms * 1e6) for step in trace.steps)
    root = tracer.start_span(name, start_time=start, attributes={"ragspine.steps": len(trace.steps)})
    context = otel.set_span_in_context(root)
    for step in trace.steps:
        span = tracer.start_span(f"ragspine.{step.stage}", context=context, start_time=step.started_ns,
                                 attributes=_attributes(step.stage, step.came_in, step.went_out, step.decisions))  # fmt: skip
        span.end(end_time=step.started_ns + int(step.ms * 1e6))
    root.end(end_time=end)


def _attributes(stage: str, came_in: int | None, went_out: int | None, decisions: dict[str, Any]) -> dict[str, Any]:
    """The step as span attributes: numbers and booleans as they are, everything else as JSON."""
    attributes: dict[str, Any] = {"ragspine.stage": stage}
    if came_in is not None:
        attributes["ragspine.in"] = came_in
    if went_out is not None:
        attributes["ragspine.out"] = went_out
    for key, value in decisions.items():
        if value is None:
            continue
        plain = isinstance(value, (bool, int, float, str))
        attributes[f"ragspine.{key}"] = value if plain else json.dumps(value, ensure_ascii=False, default=str)
    return attributes
