"""Post-processing after rerank, before prompt assembly: `make_postprocessor("a,b")` (RAGSPINE_POSTPROCESSOR).

    from ragspine.retrieval.postprocess import make_postprocessor

    chain = make_postprocessor("my_pkg.post:Dedupe")   # or a comma-separated chain of names

Invariants: names and errors come from the POSTPROCESSORS registry (a test keeps
`ragspine.settings.config.POSTPROCESSORS` equal to its names); members run in the order written
inside a `PostprocessorChain`, which refuses any member that adds a result; "none" (or an empty
spec) is None, so the link builds snippets exactly as without this stage. MMR,
lost-in-the-middle and compression plug into the registry (issue 19).
"""

from __future__ import annotations

from typing import Any

from ragspine.registry import Registry
from ragspine.retrieval.postprocess.chain import PostprocessorChain
from ragspine.retrieval.postprocess.protocol import Postprocessor, PostprocessorError

__all__ = ["POSTPROCESSORS", "Postprocessor", "PostprocessorChain", "PostprocessorError", "make_postprocessor"]

POSTPROCESSORS: Registry[Postprocessor] = Registry(
    "post-processor", {}, protocol=Postprocessor, none_names=("none",)
)


def make_postprocessor(spec: str = "none", **options: Any) -> PostprocessorChain | None:
    """The chain `spec` names (comma-separated, run in order), or None for "none"/"".
    `options` go to every member that is built.

    >>> make_postprocessor("none") is None
    True
    >>> try:
    ...     make_postprocessor("mmr2")
    ... except ValueError as exc:
    ...     print(exc)
    unknown post-processor 'mmr2'; valid: none, or a dotted path package.module:Class
    """
    names = [part.strip() for part in spec.split(",") if part.strip()]
    members = [m for m in (POSTPROCESSORS.make(n, **options) for n in names) if m is not None]
    return PostprocessorChain(members) if members else None
