"""Property: for every backend, no RESTRICTED text reaches a model input or a request body.

Each backend runs for real behind the guard; what it is given is recorded where the text enters
the model: the tokenizer of the ONNX cross-encoder and ColBERT models and of SPLADE, the HTTP
request bodies the loopback rerank server receives, the LLM provider's messages. Labels include
the spellings `is_restricted` folds (case, spaces, full-width).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine.retrieval.model import Chunk
from ragspine.retrieval.rerank.cross_encoder import make_reranker
from ragspine.retrieval.rerank.guard import rerank_traced
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.types import RetrievalResult

LABELS = ["PUBLIC", "INTERNAL", "RESTRICTED", " restricted ", "ＲＥＳＴＲＩＣＴＥＤ", "Restricted"]
SECRET_WORD = "secret"  # only RESTRICTED passages contain it (it is in the tiny models' vocabulary)


class TokenizerSpy:
    """Stands in front of a `tokenizers.Tokenizer` and records every text it is asked to encode."""

    def __init__(self, inner: Any, seen: list[str]) -> None:
        self._inner, self._seen = inner, seen

    def encode_batch(self, inputs: list[Any], *args: Any, **kwargs: Any) -> Any:
        for item in inputs:
            self._seen.extend(item if isinstance(item, tuple) else [item])
        return self._inner.encode_batch(inputs, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RecordingProvider:
    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        self.seen.extend(m["content"] for m in messages)
        return "[2] > [1]"


def _backend(kind: str, seen: list[str], folders: dict[str, Path], server: Any) -> Any:
    if kind in ("cross_encoder", "colbert"):
        reranker = make_reranker(kind, model_dir=folders[kind])
        reranker._model.tokenizer = TokenizerSpy(reranker._model.tokenizer, seen)  # noqa: SLF001
    elif kind == "splade":
        reranker = make_reranker("splade")
        reranker.encoder._tokenizer = TokenizerSpy(reranker.encoder._tokenizer, seen)  # noqa: SLF001
    elif kind in ("http-cohere", "http-tei"):
        reranker = make_reranker("http", url=server.url, api=kind.split("-")[1], max_retries=0)
    else:
        reranker = make_reranker("llm", provider=RecordingProvider(seen))
    return reranker


BACKENDS = ["cross_encoder", "colbert", "splade", "http-cohere", "http-tei", "llm"]


@pytest.mark.parametrize("kind", BACKENDS)
def test_no_restricted_text_reaches_a_model_input_or_request_body(
    kind: str, ce_folder: Path, colbert_dir: Path, rerank_server: Any
) -> None:
    seen: list[str] = []
    reranker = _backend(kind, seen, {"cross_encoder": ce_folder, "colbert": colbert_dir}, rerank_server)

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(labels=st.lists(st.sampled_from(LABELS), min_size=1, max_size=12), top_n=st.integers(0, 14))
    def check(labels: list[str], top_n: int) -> None:
        seen.clear()
        rerank_server.requests.clear()
        ranked = [
            RetrievalResult(Chunk(f"c{i}", "d", i, (f"{SECRET_WORD} ceo salary plan {i}" if is_restricted(label)
                                                    else f"revenue fell passage {i}"), "loc", sensitivity=label),
                            1.0, None, 1.0 / (61 + i))
            for i, label in enumerate(labels)
        ]  # fmt: skip
        out, lineage = rerank_traced("why did revenue fall", ranked, reranker.rerank, top_n=top_n, name=kind)
        given_texts = seen + [str(body) for body in rerank_server.requests]
        assert not any(SECRET_WORD in text for text in given_texts)
        open_head = sum(not is_restricted(r.chunk.sensitivity) for r in ranked[: max(top_n, 0)])
        if open_head >= 2:
            assert given_texts, "the backend was called with the open candidates"
            assert not lineage.fell_back
        for i, result in enumerate(ranked):
            if is_restricted(result.chunk.sensitivity) or i >= top_n:
                assert out[i] is result, "RESTRICTED and tail results keep their fused position"
        assert sorted(r.chunk.chunk_id for r in out) == sorted(r.chunk.chunk_id for r in ranked)

    check()
