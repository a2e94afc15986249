"""Options and checks the CLI's commands share that are not the commands themselves.

Invariant: an option that is a setting reaches the command only as a RAGSPINE_* flag for
`load_settings` (so the CLI, the config file and the environment resolve it one way).
"""

from __future__ import annotations

import functools
from typing import Any

import click


def min_score_option(func: Any) -> Any:
    """--min-score, added to the command's `query_flags` as RAGSPINE_MIN_SCORE (place it under
    `_query_stage_options`, which makes `query_flags`)."""

    @functools.wraps(func)
    def wrapper(*args: Any, min_score: float | None, query_flags: dict[str, Any], **kwargs: Any) -> Any:
        flags = {**query_flags, "RAGSPINE_MIN_SCORE": None if min_score is None else f"{min_score:g}"}
        return func(*args, query_flags=flags, **kwargs)

    return click.option(
        "--min-score", type=click.FloatRange(0.0, 1.0), default=None, metavar="0-1",
        help="Least relevance (0 to 1) a snippet needs; relevance never increases down the list "
             "[env RAGSPINE_MIN_SCORE].",
    )(wrapper)  # fmt: skip


def parse_filters(items: tuple[str, ...]) -> dict[str, str]:
    """`--filter KEY=VALUE` options as exact-match filters; ValueError naming a malformed one."""
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--filter {item!r}: expected KEY=VALUE, e.g. --filter entity=ACME_CN")
        parsed[key.strip()] = value.strip()
    return parsed


def check_visual(settings: Any, visual: bool, *, libraries: bool = False) -> None:
    """--visual needs RAGSPINE_VISUAL_EMBEDDER, and one store."""
    if visual and settings.visual_embedder == "none":
        raise ValueError("--visual needs RAGSPINE_VISUAL_EMBEDDER: colpali or colqwen2 (with RAGSPINE_VISUAL_MODEL, "
                         "a local weights folder; pip install 'ragspine[colpali]'), or tiny to try the path")  # fmt: skip
    if visual and libraries:
        raise ValueError("--visual searches one store; drop --library/--libraries")
