"""The channel slot: built-in and user channels pass one suite; an extra channel is fused beside
BM25 from Python and from RAGSPINE_EXTRA_CHANNELS; RESTRICTED and filters hold for it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ragspine import http_retry
from ragspine.assembly import build_retriever, load_settings
from ragspine.background import DaemonCall, DaemonPool
from ragspine.http_retry import request_deadline
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline import channels
from ragspine.retrieval.pipeline.channels import (
    EXTRA_CHANNELS,
    ChannelQuery,
    ChannelRanking,
    DenseRanker,
    DenseSlot,
    LexicalChannel,
    make_channel,
    make_channels,
)
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.types import ChunkSource
from ragspine.retrieval.vector.dense.channel import DenseChannel, recent_query_vector
from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend
from ragspine.settings import config
from ragspine.settings.config import ConfigError
from ragspine.testing.channel import CHUNKS, VARIANTS, ChannelSuite


# -- a channel a user would write (reached by dotted path) -------------------------------------
class KeywordChannel:
    """Ranks the allowed chunks containing a synonym of a query word (a tiny thesaurus)."""

    name = "keyword"
    weight = 1.0
    SYNONYMS = {"payout": ("dividend",), "派息": ("dividend", "股息")}

    def attach(self, index: IndexSnapshot, source: ChunkSource) -> KeywordRanker:
        return KeywordRanker(source)


class KeywordRanker:
    def __init__(self, source: ChunkSource) -> None:
        self.source = source

    def rank(self, query: ChannelQuery) -> ChannelRanking:
        positions = query.allowed.tolist()
        texts = [c.text.lower() for c in self.source.chunks_at(positions)]
        rankings, scores = [], []
        for variant in query.variants:
            words = [s for w in variant.lower().split() for s in KeywordChannel.SYNONYMS.get(w, ())]
            hits = {p: float(sum(t.count(w) for w in words)) for p, t in zip(positions, texts, strict=True)}
            ranked = sorted((p for p, s in hits.items() if s > 0), key=lambda p: (-hits[p], p))[: query.depth]
            rankings.append(ranked)
            scores.append({p: hits[p] for p in ranked})
        return ChannelRanking(rankings, scores)


class NotAChannel:
    name = "broken"


class TestLexicalChannel(ChannelSuite):
    @pytest.fixture
    def channel(self) -> Any:
        return LexicalChannel()


class TestDenseChannelLazy(ChannelSuite):
    @pytest.fixture
    def channel(self) -> Any:
        return DenseSlot(DenseChannel(make_embedding_backend("deterministic", dim=16)), lazy=True)


class TestDenseChannelAttached(ChannelSuite):
    @pytest.fixture
    def channel(self) -> Any:
        return DenseSlot(DenseChannel(make_embedding_backend("deterministic", dim=16)))


class TestUserChannel(ChannelSuite):
    @pytest.fixture
    def channel(self) -> Any:
        return make_channel("test_channels:KeywordChannel")


def test_the_setting_accepts_exactly_the_registry_names() -> None:
    assert list(config.EXTRA_CHANNELS) == EXTRA_CHANNELS.names


def test_errors_name_what_is_valid() -> None:
    with pytest.raises(ValueError, match=r"unknown channel 'sparse'; valid: none, or a dotted path"):
        make_channel("sparse")
    with pytest.raises(TypeError, match="does not implement the Channel protocol"):
        make_channel("test_channels:NotAChannel")
    with pytest.raises(ValueError, match="given twice"):
        make_channels("test_channels:KeywordChannel, test_channels:KeywordChannel")
    assert make_channels("none") == [] and make_channels("") == []
    with pytest.raises(ConfigError, match="RAGSPINE_EXTRA_CHANNELS"):
        load_settings({"RAGSPINE_EXTRA_CHANNELS": "sparse"})


def test_an_extra_channel_brings_what_bm25_cannot_find_and_the_filter_still_holds() -> None:
    plain = HybridRetriever(CHUNKS)
    assert plain.search("payout", top_k=5) == []  # no chunk shares a token with the query
    with_keyword = HybridRetriever(CHUNKS, extra_channels=[KeywordChannel()])
    hits = with_keyword.search("payout", top_k=5)
    assert [h.chunk.chunk_id for h in hits] == ["c:0"]
    assert hits[0].channel_scores == (("keyword", 1.0),)
    assert with_keyword.search("payout", top_k=5, topic="revenue") == []
    # BM25's own order is kept where the extra channel has nothing to say.
    assert [h.chunk.chunk_id for h in with_keyword.search("revenue", top_k=5)] == [
        h.chunk.chunk_id for h in plain.search("revenue", top_k=5)
    ]


def test_the_setting_reaches_the_snippets_through_the_assembly() -> None:
    settings = load_settings({
        "RAGSPINE_DB": ":memory:", "RAGSPINE_RETRIEVAL_MODE": "bm25",
        "RAGSPINE_EXTRA_CHANNELS": "test_channels:KeywordChannel",
    })  # fmt: skip
    retriever, store = build_retriever(settings)
    try:
        retriever.index.ingest("The board approved a higher dividend.", DocumentMeta("d1", sensitivity="PUBLIC"))
        retriever.index.ingest("Dividend cuts: the confidential plan.", DocumentMeta("d2", sensitivity="RESTRICTED"))
        snippets = retriever.retrieve("payout")
        assert [s["doc_id"] for s in snippets] == ["d1"]
        assert snippets[0]["scores"]["keyword"] == 1.0
    finally:
        retriever.index.close()
        store.close()


class Oversharing:
    """A channel that ranks only allowed positions but puts every position in its score maps,
    with a score that may not be finite (both allowed by the Protocol: ranked positions count)."""

    name = "overshare"
    weight = 1.0

    def __init__(self, score: float = 5.0) -> None:
        self.score = score

    def attach(self, index: IndexSnapshot, source: ChunkSource) -> Oversharing:
        self.size = index.n_positions  # every position, the RESTRICTED one included
        return self

    def rank(self, query: ChannelQuery) -> ChannelRanking:
        allowed = query.allowed.tolist()[:1]
        every = {p: (self.score if p in allowed else 99.0) for p in range(self.size)}
        return ChannelRanking([allowed for _ in query.variants], [dict(every) for _ in query.variants])


@pytest.mark.parametrize("score", [5.0, float("inf"), float("nan")])
def test_score_fusion_fuses_only_ranked_positions_and_survives_a_non_finite_score(score: float) -> None:
    """Under the default (zscore) fusion with a dense channel, a position an extra channel scored
    but did not rank (here the RESTRICTED chunk and the filtered-out ones) never comes back,
    and a non-finite score does not empty the result list."""
    backend = make_embedding_backend("deterministic")
    retriever = HybridRetriever(CHUNKS, embedding_backend=backend, extra_channels=[Oversharing(score)])
    assert retriever.fusion.fuses_scores
    hidden = {c.chunk_id for c in CHUNKS if c.sensitivity.upper() == "RESTRICTED"}
    assert hidden, "the fixture has a RESTRICTED chunk"
    for query in ("revenue", "dividend payout", "营收"):
        hits = retriever.search(query, top_k=2)  # fewer than the candidates: a cut is made
        assert len(hits) == 2 and not {h.chunk.chunk_id for h in hits} & hidden
        governance = retriever.search(query, top_k=10, topic="governance")
        assert [h.chunk.chunk_id for h in governance] == ["c:0"], "the filter holds"


class NotingBackend:
    """A deterministic backend that notes which thread embeds each query, whether that thread is
    a daemon and the request deadline it sees (and can fail, or wait for `gate`)."""

    def __init__(self, *, fail: bool = False, remote: bool = False) -> None:
        self.inner = make_embedding_backend("deterministic", dim=16)
        self.dim, self.model_id, self.fail, self.is_remote = self.inner.dim, self.inner.model_id, fail, remote
        self.query_threads: list[str] = []
        self.daemons: list[bool] = []
        self.deadlines: list[float | None] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_texts(texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        self.query_threads.append(threading.current_thread().name)
        self.daemons.append(threading.current_thread().daemon)
        self.deadlines.append(http_retry._DEADLINE.get())
        if self.fail:
            raise RuntimeError("the encoder broke")
        return self.inner.embed_texts([f"query: {t}" for t in texts])


def _hybrid(backend: NotingBackend) -> HybridRetriever:
    return HybridRetriever(CHUNKS, dense=DenseChannel(backend))  # attached: the view is made once


def test_the_query_is_embedded_while_bm25_ranks_with_identical_results(monkeypatch: pytest.MonkeyPatch) -> None:
    ahead_backend, inline_backend = NotingBackend(), NotingBackend()
    ahead, inline = _hybrid(ahead_backend), _hybrid(inline_backend)
    monkeypatch.setattr(DenseRanker, "ahead", True)
    queries = [*VARIANTS, "dividend payout", "股息", "zzz unmatched"]
    with request_deadline(30.0):
        got = {q: [(r.chunk.chunk_id, r.fused_score, r.bm25_score, r.vector_score) for r in ahead.search(q, top_k=5)] for q in queries}
    assert recent_query_vector(ahead_backend, queries[-1]) is not None  # the caller thread sees it (RAPTOR reuses it)
    assert ahead_backend.query_threads and all(n.startswith("ragspine-query-embed") for n in ahead_backend.query_threads)
    assert all(ahead_backend.daemons), "an exiting interpreter (Ctrl-C, SIGTERM) must not wait for the encoder"
    assert all(d is not None for d in ahead_backend.deadlines), "the caller's request deadline holds on the worker"
    monkeypatch.setattr(DenseRanker, "ahead", False)
    for q in queries:
        assert [(r.chunk.chunk_id, r.fused_score, r.bm25_score, r.vector_score) for r in inline.search(q, top_k=5)] == got[q]
    assert set(inline_backend.query_threads) == {threading.current_thread().name}
    assert any(got.values())


def test_an_encoder_error_on_the_worker_thread_reaches_the_caller() -> None:
    retriever = _hybrid(NotingBackend(fail=True))
    with pytest.raises(RuntimeError, match="the encoder broke"):
        retriever.search("revenue", top_k=3)


def _lexical_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """BM25's filter raises (as `IndexSnapshot._field` does for a field it does not know)."""

    def fail(self: IndexSnapshot, name: str) -> Any:
        raise ValueError(f"unknown filter field {name!r}")

    monkeypatch.setattr(IndexSnapshot, "_field", fail)


def test_a_remote_backend_embeds_the_query_only_once_bm25_has_ranked(monkeypatch: pytest.MonkeyPatch) -> None:
    """No embedding ahead for a remote backend: the query is sent once the search got that far,
    so a search that fails in BM25 sends nothing."""
    backend = NotingBackend(remote=True)
    retriever = _hybrid(backend)
    assert retriever.search("revenue", top_k=3)
    assert backend.query_threads == [threading.current_thread().name]
    _lexical_fails(monkeypatch)
    with pytest.raises(ValueError, match="unknown filter field"):
        retriever.search("dividend payout", top_k=3, topic="governance")
    assert backend.query_threads == [threading.current_thread().name], "the failed search sent its query"


def test_a_search_that_fails_in_bm25_abandons_the_embedding_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    retriever = _hybrid(NotingBackend())
    abandoned: list[bool] = []
    monkeypatch.setattr(DaemonCall, "abandon", lambda self: abandoned.append(True))
    _lexical_fails(monkeypatch)
    with pytest.raises(ValueError, match="unknown filter field"):
        retriever.search("revenue", top_k=3, topic="governance")
    assert abandoned == [True]


def test_an_abandoned_call_that_had_not_begun_never_runs() -> None:
    ran: list[int] = []
    call = DaemonCall(lambda: ran.append(1), start=False)  # as queued for a pool's worker
    call.abandon()
    call.run()
    assert ran == [] and call.result(5.0) is None
    done = DaemonPool("t-pool").submit(lambda: ran.append(2))
    assert done.result(5.0) is None and ran == [2]


def test_a_search_embeds_inline_when_no_thread_can_be_started(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = NotingBackend()
    retriever = _hybrid(backend)
    first = [r.chunk.chunk_id for r in retriever.search(VARIANTS[0], top_k=3)]
    start = threading.Thread.start

    def refuse(self: threading.Thread) -> None:
        if self.name.startswith("ragspine-query-embed"):
            raise RuntimeError("can't create new thread at interpreter shutdown")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", refuse)
    monkeypatch.setattr(channels, "_AHEAD", DaemonPool("ragspine-query-embed"))  # no idle worker to reuse
    assert [r.chunk.chunk_id for r in retriever.search(VARIANTS[0], top_k=3)] == first
    assert backend.query_threads[-1] == threading.current_thread().name


def test_a_forked_process_embeds_ahead_and_finds_the_same() -> None:
    """A child forked while another thread held the pool's lock (or with the parent's idle
    workers, which do not exist in it) searches on a pool of its own."""
    backend = NotingBackend()
    retriever = _hybrid(backend)
    first = [r.chunk.chunk_id for r in retriever.search(VARIANTS[0], top_k=3)]
    read, write = os.pipe()
    with channels._AHEAD._lock:  # noqa: SLF001 - as if another search thread held it at the fork
        pid = os.fork()
    if pid == 0:  # the child: search, write what it found and on which thread, leave
        code = 1
        try:
            found = [r.chunk.chunk_id for r in retriever.search(VARIANTS[0], top_k=3)]
            os.write(write, json.dumps([found, backend.query_threads[-1]]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + 30
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on the parent's pool lock")
        time.sleep(0.05)
    with os.fdopen(read, "rb") as answer:
        found, thread = json.loads(answer.read() or b"null")
    assert found == first and thread.startswith("ragspine-query-embed")


_CTRL_C = """
import signal, sys, threading, time
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.vector.dense.channel import DenseChannel
from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend
from ragspine.testing.channel import CHUNKS

class Slow:
    is_remote = False
    def __init__(self):
        self.inner = make_embedding_backend("deterministic", dim=16)
        self.dim, self.model_id, self.slow = self.inner.dim, self.inner.model_id, False
    def embed_texts(self, texts):
        return self.inner.embed_texts(texts)
    def embed_queries(self, texts):
        if self.slow:
            time.sleep(60)  # an encoder (or a remote call) that takes minutes
        return self.inner.embed_texts(texts)

backend = Slow()
retriever = HybridRetriever(CHUNKS, dense=DenseChannel(backend))
backend.slow = True
signal.signal(signal.SIGALRM, signal.default_int_handler)  # Ctrl-C, half a second in
signal.setitimer(signal.ITIMER_REAL, 0.5)
retriever.search("revenue", top_k=3)
"""


def test_ctrl_c_during_a_search_does_not_wait_for_the_query_encoder(tmp_path: Path) -> None:
    """A real interpreter: interrupted while the query is being embedded ahead, it exits at once
    (a non-daemon worker would keep it alive until the encoder returned)."""
    script = tmp_path / "ctrl_c.py"
    script.write_text(_CTRL_C, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(channels.__file__).parents[3])}
    started = time.monotonic()
    command = [sys.executable, str(script)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=50, check=False)
    assert "KeyboardInterrupt" in done.stderr, done.stderr
    assert time.monotonic() - started < 30, "the interpreter waited for the encoder"
