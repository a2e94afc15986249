"""Embedding fanned out to Ray workers: the `embed_batches` of `embed_chunks` on a Ray cluster.

    from ragspine.retrieval.vector.dense.ray_embed import RayBatchEmbedder
    with RayBatchEmbedder(make_backend, address="auto") as pool:      # or None: a local cluster
        embed_chunks(store, vectors, backend, embed_batches=pool)

Invariants:
- Each worker is a Ray actor that builds its embedding backend once (`make_backend()`, run on
  the worker: a picklable zero-argument callable, e.g. `functools.partial(make_embedding,
  settings)`), and embeds the batches it is sent; only texts go out and float32 rows come back.
  Which texts may be sent is decided by `embed_chunks` (a RESTRICTED chunk never reaches a
  remote backend), never here.
- The driver writes every batch to the vector store as it comes back (`embed_chunks`: upsert
  by chunk id, idempotent), so a driver that dies leaves only finished batches behind and the
  next run embeds what is still missing.
- A worker that dies is restarted by Ray (`MAX_RESTARTS`), which loads the backend again and
  re-runs the batches it held (`MAX_TASK_RETRIES`); a batch that still fails stops the run
  with the cause, the batches done so far staying committed.
- At most `in_flight` batches per worker are outstanding, so the driver never holds the whole
  corpus's vectors at once. The cluster is shut down on exit only when this object started it.

Needs `pip install 'ragspine[ray]'`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ragspine.closing import Closeable
from ragspine.extras import require

MAX_RESTARTS = 4  # times Ray restarts a worker that died (each restart reloads the backend)
MAX_TASK_RETRIES = 4  # times a batch held by a dead worker is re-run on its restarted worker


def _ray() -> Any:
    return require("ray", extra="ray", purpose="ragspine embed --ray")


class _Worker:
    """One Ray actor: one backend, many batches."""

    def __init__(self, make_backend: Callable[[], Any]) -> None:
        self.backend = make_backend()
        if self.backend is None:
            raise ValueError("the embedding settings resolve to no backend on this worker")

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.backend.embed_texts(texts), dtype=np.float32)

    def pid(self) -> int:
        return os.getpid()


class RayBatchEmbedder(Closeable):
    """A pool of `workers` Ray actors (None: one per CPU the cluster offers), each holding one
    backend; call it with batches of texts to get (index, vectors) as batches finish.

    `address`: None starts a local cluster (`ray.init()`) unless this process already joined
    one; "auto" joins the cluster started on this machine (`ray start --head`); "ray://host:port"
    joins a remote one. `num_gpus` per worker (e.g. 1 for a GPU backend), `num_cpus` per worker.
    """

    def __init__(
        self,
        make_backend: Callable[[], Any],
        *,
        address: str | None = None,
        workers: int | None = None,
        num_cpus: float = 1,
        num_gpus: float = 0,
        in_flight: int = 2,
    ) -> None:
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        if in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, got {in_flight!r}")
        ray = _ray()
        self._started = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except ConnectionError as exc:
                raise ValueError(f"cannot join the Ray cluster at {address!r}: {exc}") from None
            self._started = True
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1) // max(num_cpus, 1e-9)))
        remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_restarts=MAX_RESTARTS,
                            max_task_retries=MAX_TASK_RETRIES)(_Worker)  # fmt: skip
        self.workers = [remote.remote(make_backend) for _ in range(workers)]
        self.in_flight = in_flight

    def __call__(self, batches: Sequence[list[str]]) -> Iterator[tuple[int, np.ndarray]]:
        """Embed every batch; yield (its index, its vectors) in the order they finish."""
        ray = _ray()
        pending: dict[Any, tuple[int, int]] = {}  # object ref -> (batch index, worker index)
        queue = iter(range(len(batches)))

        def submit(worker: int) -> None:
            i = next(queue, None)
            if i is not None:
                pending[self.workers[worker].embed.remote(list(batches[i]))] = (i, worker)

        for worker in range(len(self.workers)):
            for _ in range(self.in_flight):
                submit(worker)
        while pending:
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            i, worker = pending.pop(ready)
            try:
                vectors = ray.get(ready)
            except ray.exceptions.RayError as exc:
                raise RuntimeError(
                    f"embedding batch {i} failed on Ray worker {worker} after {MAX_TASK_RETRIES} "
                    f"retries: {exc}; the batches embedded so far are saved, run it again to resume"
                ) from exc
            yield i, vectors
            submit(worker)

    def pids(self) -> list[int]:
        """Each worker's process id (a restarted worker has a new one)."""
        ray = _ray()
        return [int(pid) for pid in ray.get([w.pid.remote() for w in self.workers])]

    def close(self) -> None:
        ray = _ray()
        for worker in self.workers:
            ray.kill(worker)
        self.workers = []
        if self._started:
            ray.shutdown()
            self._started = False
