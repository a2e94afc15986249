"""Read-only .npy arrays over memory maps that notice when their file changes underneath.

A memory map of a file that another process truncates raises SIGBUS (killing the process) when
a page past the new end is touched; one overwritten in place silently changes what is read.
Invariant: every mapped array comes with a `MappedFile` holding an open descriptor of the very
inode that was mapped and its size and mtime at mapping time; `changed()` (one fstat) is True
once that inode has another size or mtime, and a caller that sees True never reads the array
again. A file below `MAP_MIN_BYTES` is read into memory instead (nothing to check, no
descriptor kept), so only the few large postings arrays cost a check.
"""

from __future__ import annotations

import mmap
import os
import weakref
from pathlib import Path

import numpy as np

MAP_MIN_BYTES = 1 << 20  # smaller files are read into memory, larger ones mapped

_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


class MappedFile:
    """The size and mtime of one mapped file, checked through its descriptor (so a file replaced
    under the same name is not this one: only a change to the mapped file itself counts)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        weakref.finalize(self, os.close, fd)
        st = os.fstat(fd)
        self._identity = (st.st_size, st.st_mtime_ns)

    def changed(self) -> bool:
        """True when the mapped file now has another size or mtime (or cannot be checked)."""
        try:
            st = os.fstat(self._fd)
        except OSError:
            return True
        return (st.st_size, st.st_mtime_ns) != self._identity


def load_array(path: Path) -> tuple[np.ndarray, MappedFile | None]:
    """The array saved in `path` (read-only), and its `MappedFile` when it is memory-mapped."""
    if path.stat().st_size < MAP_MIN_BYTES:
        array = np.load(path, allow_pickle=False)
        array.flags.writeable = False
        return array, None
    fd = os.open(path, os.O_RDONLY)
    try:
        watch = MappedFile(path, fd)
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "rb", closefd=False) as handle:
        version = np.lib.format.read_magic(handle)
        reader = _HEADER_READERS.get(version)
        if reader is None:
            raise ValueError(f"{path.name}: unsupported .npy format version {version}")
        shape, fortran, dtype = reader(handle)
        offset = handle.tell()
    if dtype.hasobject:
        raise ValueError(f"{path.name}: object arrays are not allowed")
    count = int(np.prod(shape, dtype=np.int64))
    if offset + count * dtype.itemsize > watch._identity[1]:
        raise ValueError(f"{path.name}: shorter than its header says")
    mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    flat = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order="F" if fortran else "C"), watch
