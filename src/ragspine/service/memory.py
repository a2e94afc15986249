"""Hand freed heap memory back to the operating system after a large request body.

A request body of megabytes is parsed into many objects and freed when the request ends, but
glibc's malloc keeps freed memory in its per-thread arenas: a server's RSS grew by hundreds of
MB after hostile 4-10 MB bodies and stayed there. `release_heap` asks glibc to return it
(`malloc_trim(0)`: a few milliseconds, run only after a body of `RELEASE_AFTER_BYTES` or more).
Invariant: never an error; a no-op where the C library has no `malloc_trim` (macOS, Windows, musl).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Callable

_LOG = logging.getLogger("ragspine.service")
RELEASE_AFTER_BYTES = 1 << 20  # a body this large or larger is followed by `release_heap`


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is None:
        _LOG.debug("no malloc_trim in the C library: freed heap memory is kept by the allocator")
    return trim


def release_heap() -> bool:
    """Return freed heap memory to the operating system; False where that is not possible."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
