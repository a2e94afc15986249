"""One call on a daemon thread, its answer taken back by the thread that started it.

Invariants:
- The thread is a daemon: an interpreter that exits (Ctrl-C on a search, SIGTERM on a server)
  never waits for it; an abandoned or timed-out call is left to finish there, unread.
- The call runs in a copy of the starting thread's context variables (`http_retry.request_deadline`
  and the like hold there as in the caller).
- `result` returns the call's value or raises its exception in the waiting thread (a
  BaseException that is not an Exception, as RuntimeError); TimeoutError when `timeout` passes first.
- `abandon` before the thread began: the call never runs. Nothing outlives a call (no pool, no
  module state), so a forked child inherits no thread and no lock.
- Starting raises RuntimeError when no thread can be started (at interpreter shutdown, or at
  the system's thread limit): the caller decides whether to run the call itself.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class DaemonCall(Generic[T]):
    """`fn()` started now on a daemon thread named `name`."""

    def __init__(self, fn: Callable[[], T], *, name: str) -> None:
        self._fn: Callable[[], T] | None = fn
        self._context = contextvars.copy_context()
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fn = self._fn
        if fn is None:  # abandoned before the thread began
            return
        try:
            self._value = self._context.run(fn)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            self._error = exc

    def abandon(self) -> None:
        """Nobody will read the answer: a call that has not begun never runs."""
        self._fn = None

    def result(self, timeout: float | None = None) -> T:
        """The call's value once it returned (its exception raised here)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"no answer within {timeout:g} s")
        error = self._error
        if error is not None:
            raise error if isinstance(error, Exception) else RuntimeError(repr(error))
        return cast(T, self._value)  # set: the call returned
