"""The conformance suite every Postprocessor runs: a subset of its input, deterministic.

Subclass `PostprocessorSuite` in a `Test*` class and give it a `postprocessor` fixture.
"""

from __future__ import annotations

from typing import Any

from ragspine.retrieval.postprocess.compress import SEPARATOR as PROMPT_SEPARATOR
from ragspine.retrieval.postprocess.protocol import Postprocessor
from ragspine.testing.reranker import results
from ragspine.testing.suite import required_fixture


class PostprocessorSuite:
    """Tests every post-processor must pass."""

    postprocessor = required_fixture("postprocessor", "PostprocessorSuite")

    def test_satisfies_the_protocol(self, postprocessor: Any) -> None:
        assert isinstance(postprocessor, Postprocessor)

    def test_returns_a_subset_without_duplicates(self, postprocessor: Any) -> None:
        given = results(["PUBLIC"] * 6)
        out = postprocessor.process("revenue", list(given))
        ids = [r.chunk.chunk_id for r in out]
        assert len(set(ids)) == len(ids) and set(ids) <= {r.chunk.chunk_id for r in given}

    def test_keeps_citation_fields(self, postprocessor: Any) -> None:
        given = results(["PUBLIC"] * 6)
        originals = {r.chunk.chunk_id: r.chunk for r in given}
        for r in postprocessor.process("revenue", list(given)):
            original = originals[r.chunk.chunk_id]
            assert (r.chunk.text, r.chunk.source_locator, r.chunk.doc_id) == (
                original.text, original.source_locator, original.doc_id,
            )  # fmt: skip

    def test_chunks_are_the_objects_given_and_prompt_text_is_made_of_their_spans(self, postprocessor: Any) -> None:
        given = results(["PUBLIC"] * 6)
        originals = {r.chunk.chunk_id: r.chunk for r in given}
        for r in postprocessor.process("why did revenue fall", list(given)):
            assert r.chunk is originals[r.chunk.chunk_id]
            if r.prompt_text is not None:
                assert r.prompt_text == PROMPT_SEPARATOR.join(r.chunk.text[s:e] for s, e in r.prompt_spans)
                assert all(0 <= s < e <= len(r.chunk.text) for s, e in r.prompt_spans)

    def test_is_deterministic(self, postprocessor: Any) -> None:
        first = postprocessor.process("revenue", results(["PUBLIC"] * 6))
        again = postprocessor.process("revenue", results(["PUBLIC"] * 6))
        assert [r.chunk.chunk_id for r in first] == [r.chunk.chunk_id for r in again]

    def test_empty_input_gives_empty_output(self, postprocessor: Any) -> None:
        assert postprocessor.process("revenue", []) == []
