"""`Closeable`: the base of a resource that is its own context manager.

    class Client(Closeable):
        def close(self) -> None:
            self._http.close()

    with Client() as client:   # closed on the way out, whether or not an exception is raised
        ...

Invariant: `__enter__` returns the object itself and `__exit__` calls its `close()` and never
suppresses an exception. This module imports nothing from ragspine, so every layer may use it.
"""

from __future__ import annotations

from typing import Self


class Closeable:
    """A resource whose `close()` also runs at the end of a `with` block.

    >>> class Door(Closeable):
    ...     def close(self) -> None:
    ...         print("closed")
    >>> with Door() as door:
    ...     isinstance(door, Door)
    True
    closed
    """

    def close(self) -> None:
        """Release what the resource holds (each subclass says what)."""
        raise NotImplementedError(f"{type(self).__name__} must define close()")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
