"""`ragspine embed --ray` (issue 21 item 3): batches of missing chunks fanned out to Ray workers
on a real local Ray cluster (2 CPUs). A worker process killed (SIGKILL) in the middle of a batch
is restarted by Ray and the run finishes with exactly the vectors a sequential run makes; a
driver that stops after some batches leaves them saved, and the next run embeds only the rest.
The backend is the deterministic one, wrapped so that one worker kills itself once (the only
test-only part: a real crash, not a mock of one)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ray
from click.testing import CliRunner

from ragspine.cli import main
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors, embed_chunks
from ragspine.retrieval.vector.dense.ray_embed import RayBatchEmbedder
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers do not import tests/
DIM = 64
DOCS = 60


class KillOnce:
    """Builds the deterministic backend; the worker that embeds the batch holding `trigger`
    first kills its own process (SIGKILL), once per `marker` file."""

    def __init__(self, marker: Path, trigger: str) -> None:
        self.marker, self.trigger = marker, trigger

    def __call__(self) -> Any:
        marker, trigger = self.marker, self.trigger

        class Dying(DeterministicEmbeddingBackend):
            def embed_texts(self, texts: list[str]) -> list[list[float]]:
                if trigger in texts and not marker.exists():
                    marker.write_text(str(os.getpid()))
                    os.kill(os.getpid(), signal.SIGKILL)
                return super().embed_texts(texts)

        return Dying(dim=DIM)


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 2**20)
    yield
    ray.shutdown()


def _store(tmp_path: Path) -> ChunkStore:
    store = ChunkStore(tmp_path / "chunks.db")
    store.init_schema()
    for d in range(DOCS):
        text = [f"doc {d} part {s}: revenue {d % 7} exports {s} 营收{d % 5}" for s in range(4)]
        store.replace_doc_chunks(f"d{d}", [Chunk(f"d{d}:{s}", f"d{d}", s, t, f"d{d}#{s}") for s, t in enumerate(text)])
    store.replace_doc_chunks("secret", [Chunk("secret:0", "secret", 0, "SECRETMARK memo", "s#0", sensitivity="RESTRICTED")])
    return store


def _expected(store: ChunkStore) -> dict[str, np.ndarray]:
    chunks = store.iter_chunks()
    rows = DeterministicEmbeddingBackend(dim=DIM).embed_texts([c.text for c in chunks])
    return {c.chunk_id: np.asarray(r, dtype=np.float32) for c, r in zip(chunks, rows, strict=True)}


def _check(vectors: ChunkVectors, expected: dict[str, np.ndarray]) -> None:
    ids = sorted(expected)
    assert vectors.ids() == ids
    rows, present = vectors.get(ids)
    assert present.all()
    np.testing.assert_allclose(rows, np.stack([expected[i] for i in ids]), atol=1e-6)


def test_a_killed_worker_is_restarted_and_the_run_completes(cluster: None, tmp_path: Path) -> None:
    store = _store(tmp_path)
    backend = DeterministicEmbeddingBackend(dim=DIM)
    vectors = ChunkVectors(tmp_path / "vectors.sqlite", model_id=backend.model_id, dim=DIM)
    marker = tmp_path / "killed"
    trigger = "doc 30 part 2: revenue 2 exports 2 营收0"
    with RayBatchEmbedder(KillOnce(marker, trigger), workers=2) as pool:
        before = pool.pids()
        report = embed_chunks(store, vectors, backend, batch_size=16, embed_batches=pool, progress=False)
        after = pool.pids()
    assert marker.exists(), "no worker died: the test did not test a crash"
    assert int(marker.read_text()) in before and int(marker.read_text()) not in after  # restarted
    assert report.embedded == DOCS * 4 + 1 and report.present == 0
    _check(vectors, _expected(store))


def test_a_stopped_driver_resumes_with_only_the_missing_batches(cluster: None, tmp_path: Path) -> None:
    store = _store(tmp_path)
    backend = DeterministicEmbeddingBackend(dim=DIM)
    vectors = ChunkVectors(tmp_path / "vectors.sqlite", model_id=backend.model_id, dim=DIM)

    class DriverDied(Exception):
        pass

    with RayBatchEmbedder(lambda: DeterministicEmbeddingBackend(dim=DIM), workers=2) as pool:

        def dies_after_three(batches: Sequence[list[str]]) -> Iterator[tuple[int, Any]]:
            for n, item in enumerate(pool(batches)):
                if n == 3:
                    raise DriverDied
                yield item

        with pytest.raises(DriverDied):
            embed_chunks(store, vectors, backend, batch_size=16, embed_batches=dies_after_three, progress=False)
        assert vectors.count() == 3 * 16  # the three finished batches were saved
        report = embed_chunks(store, vectors, backend, batch_size=16, embed_batches=pool, progress=False)
    assert (report.embedded, report.present) == (DOCS * 4 + 1 - 3 * 16, 3 * 16)
    _check(vectors, _expected(store))


def test_cli_embed_on_ray_matches_the_plain_run(cluster: None, tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.close()
    db = str(tmp_path / "chunks.db")
    env = {"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RETRIEVAL_MODE": "hybrid", "RAGSPINE_CONTEXTUAL": "none",
           "RAGSPINE_CHUNKER": "paragraph", "RAGSPINE_CHUNK_CHARS": "480"}  # what _store recorded
    result = CliRunner().invoke(main, ["embed", "--db", db, "--ray", "--ray-workers", "2", "--batch-size", "32"], env=env)
    assert result.exit_code == 0, result.output
    assert f"embedded {DOCS * 4 + 1} chunk(s)" in result.output
    again = CliRunner().invoke(main, ["embed", "--db", db, "--ray"], env=env)
    assert again.exit_code == 0 and "embedded 0 chunk(s)" in again.output, again.output
    backend = DeterministicEmbeddingBackend()
    with ChunkStore(db) as reopened, ChunkVectors(db + ".vectors.sqlite", model_id=backend.model_id) as vectors:
        chunks = reopened.iter_chunks()
        expected = backend.embed_texts([c.text for c in chunks])
        rows, present = vectors.get([c.chunk_id for c in chunks])
    assert present.all()
    np.testing.assert_allclose(rows, np.asarray(expected, dtype=np.float32), atol=1e-6)
