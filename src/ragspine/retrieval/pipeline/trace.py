"""A query's trace: each stage of the pipeline, what came in, what went out, what it decided, how long it took.

    trace = Trace()
    retriever.retrieve_run("为什么营收下滑", trace=trace)
    print(trace.render())            # what `ragspine search --explain` prints

Invariants: recording is opt-in — a stage given no trace records nothing and computes nothing
for it; a trace holds names, counts, decisions, scores and chunk ids, never chunk text; the chunk
ids it holds are of chunks the caller may see (RESTRICTED ones are masked before the channels
and dropped at the exits, and the exits record only counts). Steps are in the order the stages
ran (a decomposed question or a corrective retry runs some stages again: each run is a step).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

#: The stages, in the order a query meets them (docs/architecture.md).
STAGES = (
    "gate",
    "variants",
    "filters",
    "channels",
    "fusion",
    "rerank",
    "exit",
    "postprocess",
    "snippets",
)


@dataclass
class Step:
    """One stage's run: its name, counts in and out (None: not a count of results), its
    decisions (JSON-ready values) and its wall time in milliseconds."""

    stage: str
    came_in: int | None = None
    went_out: int | None = None
    decisions: dict[str, Any] = field(default_factory=dict)
    ms: float = 0.0
    data: dict[str, Any] | None = None  # a detailed trace's full inputs (benchmarks); never shown
    started_ns: int = field(default_factory=time.time_ns)  # wall clock at the step's start (spans)

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "in": self.came_in, "out": self.went_out, "ms": round(self.ms, 3),
                "decisions": dict(self.decisions)}  # fmt: skip


@dataclass
class Trace:
    """The steps of one query run, appended by each stage (see the module docstring).
    `detail`: stages also keep their full inputs in `Step.data` (the fusion stage: every
    channel's rankings and scores by chunk id, the query's signals and weights), for offline
    analysis such as `bench.fusion_learn record`; off, nothing of that is computed."""

    steps: list[Step] = field(default_factory=list)
    detail: bool = False

    @contextmanager
    def stage(self, name: str, *, came_in: int | None = None) -> Iterator[Step]:
        """Time the block as one step of `name`; the block fills in `went_out` and decisions."""
        step = Step(name, came_in=came_in)
        started = time.perf_counter()
        try:
            yield step
        finally:
            step.ms = (time.perf_counter() - started) * 1000
            self.steps.append(step)

    def add(self, name: str, *, came_in: int | None = None, went_out: int | None = None,
            ms: float = 0.0, **decisions: Any) -> Step:  # fmt: skip
        """Record a step whose work was timed elsewhere (or took no time worth timing)."""
        step = Step(name, came_in, went_out, dict(decisions), ms, started_ns=time.time_ns() - int(ms * 1e6))
        self.steps.append(step)
        return step

    def of(self, name: str) -> list[Step]:
        """Every step of stage `name`, in order."""
        return [s for s in self.steps if s.stage == name]

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [s.to_dict() for s in self.steps], "ms": round(sum(s.ms for s in self.steps), 3)}

    def render(self) -> str:
        """The steps as text, one block per step (what `ragspine search --explain` prints)."""
        lines = []
        for n, step in enumerate(self.steps, start=1):
            counts = "" if step.came_in is None and step.went_out is None else f" {_count(step.came_in)} -> {_count(step.went_out)}"
            lines.append(f"{n:>2}. {step.stage}{counts}  ({step.ms:.1f} ms)")
            lines.extend(f"      {key}: {_short(value)}" for key, value in step.decisions.items())
        return "\n".join(lines)


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _short(value: Any, limit: int = 400) -> str:
    """One line for a decision's value: floats rounded, long values cut."""
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, Mapping):
        text = ", ".join(f"{k}={_short(v, 200)}" for k, v in value.items()) or "{}"
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(_short(v, 80) for v in value) + "]"
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
