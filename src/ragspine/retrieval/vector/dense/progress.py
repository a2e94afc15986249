"""How an embedding run reports progress: tqdm's bar on a terminal, plain lines elsewhere.

Invariant: progress goes to stderr only and never changes what is embedded.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def embed_progress(total: int, progress: bool | None) -> Iterator[Any]:
    """What `embed_chunks` reports progress to (an object with `update(n)`): on a terminal,
    tqdm's bar (chunks done, chunks/s, elapsed < ETA); `progress=True` elsewhere (a log, a pipe),
    one plain line per 10% of the work or per 30 s, with the same figures; False: nothing;
    None: the bar on a terminal only."""
    from tqdm import tqdm  # only when embedding: a search never imports it

    terminal = sys.stderr.isatty()
    if terminal or not progress:  # the bar, or nothing
        with tqdm(total=total, desc="embed", unit="chunk", disable=not terminal or progress is False) as bar:
            yield bar
        return
    yield _ProgressLines(total, tqdm.format_interval)


class _ProgressLines:
    """`embed_progress` off a terminal: "embed: 640/6400 chunks (10%), 21.3 chunks/s, elapsed
    00:30, ETA 04:30" on stderr at each 10% of the work, every 30 s, and at the end."""

    def __init__(self, total: int, interval: Any) -> None:
        self.total, self.done, self.interval = total, 0, interval
        self.started = self.last = time.perf_counter()
        self.next_share = 0.1

    def update(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        share = self.done / max(1, self.total)
        if share < self.next_share and now - self.last < 30 and self.done < self.total:
            return
        while self.next_share <= share:
            self.next_share += 0.1
        self.last = now
        elapsed = now - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        print(
            f"embed: {self.done}/{self.total} chunks ({share:.0%}), {rate:.1f} chunks/s, "
            f"elapsed {self.interval(elapsed)}, ETA {self.interval(eta)}",
            file=sys.stderr, flush=True,
        )  # fmt: skip

