"""Post-processing after rerank, before prompt assembly: `make_postprocessor("a,b")` (RAGSPINE_POSTPROCESSOR).

    from ragspine.retrieval.postprocess import make_postprocessor

    chain = make_postprocessor("mmr,lost_in_middle")               # run in the order written
    chain = make_postprocessor("mmr,compress", mmr={"lambda_mult": 0.5, "top_n": 5})
    chain = make_postprocessor("my_pkg.post:Dedupe")               # a class of your own

Shipped: `mmr` (diversity; chunk vectors when the dense channel has them, token overlap
otherwise), `lost_in_middle` (best results at both ends of the prompt), `compress` (extractive:
the query-relevant sentences of each result in `prompt_text`, exact substrings with offsets).
An LLM compressor (LLMLingua-2 or a chat model) is a later member of this registry, not built.

Invariants: names and errors come from the POSTPROCESSORS registry
(`ragspine.catalog.POSTPROCESSORS`, whose names RAGSPINE_POSTPROCESSOR accepts); members run in the order written
inside a `PostprocessorChain`, which refuses any member that adds a result or changes a chunk;
"none" (or an empty spec) is None, so the link builds snippets exactly as without this stage.
"""

from __future__ import annotations

from typing import Any

from ragspine import catalog
from ragspine.registry import Registry
from ragspine.retrieval.postprocess.chain import PostprocessorChain
from ragspine.retrieval.postprocess.protocol import Postprocessor, PostprocessorError

__all__ = ["POSTPROCESSORS", "Postprocessor", "PostprocessorChain", "PostprocessorError", "make_postprocessor"]

POSTPROCESSORS: Registry[Postprocessor] = catalog.POSTPROCESSORS.bind(Postprocessor)


def make_postprocessor(spec: str = "none", **options: dict[str, Any]) -> PostprocessorChain | None:
    """The chain `spec` names (comma-separated, run in order), or None for "none"/"".
    `options` maps a member's name to its constructor options (`mmr={"lambda_mult": 0.5}`);
    options for a name not in the chain are a ValueError.

    >>> make_postprocessor("none") is None
    True
    >>> try:
    ...     make_postprocessor("mmr2")
    ... except ValueError as exc:
    ...     print(exc)
    unknown post-processor 'mmr2'; valid: none, mmr, lost_in_middle, compress, or a dotted path package.module:Class
    """
    names = [part.strip() for part in spec.split(",") if part.strip()]
    keys = [POSTPROCESSORS.normalize(n) for n in names]
    stray = sorted(set(options) - set(keys))
    if stray:
        raise ValueError(f"post-processor options for {', '.join(stray)}, which the chain {spec!r} does not name")
    built = (POSTPROCESSORS.make(n, **options.get(k, {})) for n, k in zip(names, keys, strict=True))
    members = [m for m in built if m is not None]
    return PostprocessorChain(members) if members else None
