"""Calls on daemon threads, their answers taken back by the thread that started them.

Invariants:
- Every thread is a daemon: an interpreter that exits (Ctrl-C on a search, SIGTERM on a server)
  never waits for one; an abandoned or timed-out call is left to finish there, unread.
- A call runs in a copy of the starting thread's context variables (`http_retry.request_deadline`
  and the like hold there as in the caller).
- `result` returns the call's value or raises its exception in the waiting thread (a
  BaseException that is not an Exception, as RuntimeError); TimeoutError when `timeout` passes first.
- `abandon` before the call began: it never runs.
- `DaemonPool.submit` hands a call to an idle worker of the pool, else to a new one: a call never
  waits behind another. A forked child starts with an empty pool and a fresh lock
  (`os.register_at_fork`): the parent's workers do not exist there, and its lock may have been
  held at the fork.
- Starting raises RuntimeError when no thread can be started (at interpreter shutdown, or at
  the system's thread limit): the caller decides whether to run the call itself.
"""

from __future__ import annotations

import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class DaemonCall(Generic[T]):
    """`fn()`, on a daemon thread named `name` started now (`start=False`: run by a pool's worker)."""

    def __init__(self, fn: Callable[[], T], *, name: str = "ragspine-call", start: bool = True) -> None:
        self._fn: Callable[[], T] | None = fn
        self._context = contextvars.copy_context()
        self._value: T | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        if start:
            threading.Thread(target=self.run, name=name, daemon=True).start()

    def run(self) -> None:
        """The call itself, on the thread that runs it (nothing if it was abandoned)."""
        fn = self._fn
        try:
            if fn is not None:
                self._value = self._context.run(fn)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            self._error = exc
        finally:
            self._done.set()

    def abandon(self) -> None:
        """Nobody will read the answer: a call that has not begun never runs."""
        self._fn = None

    def result(self, timeout: float | None = None) -> T:
        """The call's value once it returned (its exception raised here)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"no answer within {timeout:g} s")
        error = self._error
        if error is not None:
            raise error if isinstance(error, Exception) else RuntimeError(repr(error))
        return cast(T, self._value)  # set: the call returned


class DaemonPool:
    """Daemon workers named `name`, kept idle between calls (no thread start per call)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[DaemonCall[object] | None]] = []

    def submit(self, fn: Callable[[], T]) -> DaemonCall[T]:
        call: DaemonCall[T] = DaemonCall(fn, start=False)
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._work, args=(inbox,), name=self.name, daemon=True).start()
        inbox.put(cast("DaemonCall[object]", call))
        return call

    def _work(self, inbox: queue.SimpleQueue[DaemonCall[object] | None]) -> None:
        while True:
            call = inbox.get()
            if call is None:
                return
            call.run()
            del call  # an idle worker holds no answer
            with self._lock:
                self._idle.append(inbox)
