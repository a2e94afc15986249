"""A derived, memory-mapped copy of a chunk vectors file's matrix, so a fresh process attaches
without reading every vector record (issue 20, "instant start").

The SQLite vectors file (`ChunkVectors`) stays the source of truth. Beside it live two derived
files, each written whole by `ragspine.atomic.write_atomic` (temporary name, fsync, rename, folder
fsync: a reader never sees half a file; one that already mapped the old file keeps reading it):

- `<vectors>.matrix`: the float32 rows (one per chunk id, in the order the dense channel numbers
  them), each row's chunk id and language code, and the ids the vectors file reported damaged.
  Its header names what it reflects (`MatrixKey`: model id, dimension, the vectors file's
  `file_id`, `version()` and `stamp()`: its size and modification time), and a random
  `cache_id` that changes with every write.
- `<vectors>.align`: for one `.matrix` (its `cache_id`), the matrix row and language code of every
  position of each lexical segment (keyed by the segment's storage name, first position and size:
  a written segment never changes), and the language-centring result (means and 1/|v - mean| per
  position) under a digest of exactly what it was computed from (`centring_key`).

Invariants:
- `read_matrix` / `read_alignment` return None for an absent file and, with a WARNING, for one
  that cannot be used: wrong magic or format, a header that fails its crc32, a size other than
  its header says (truncated), a section that fails its crc32 or has the wrong shape. The caller
  then reads the vectors file as before and writes a new cache. Nothing here raises on a bad file.
- Every section is checked at open: the small ones (ids, languages, the alignment: a few MB at
  100k chunks) by one crc32 each over the mapping, the matrix rows (154 MB at 100k × 384) by a
  crc32 per `_BLOCK_BYTES` block, read with plain reads (not through the mapping) so that no page
  of the file is mapped into the process (what that costs at open: docs/dense.md). A flipped byte anywhere in the rows makes the file unusable (WARNING, the
  caller reads the vectors file, the source of truth, and writes a new cache): a damaged row is
  never ranked. A file written without block checksums (format v1) is rebuilt the same way.
- Whether a cache is *fresh* is the caller's decision (`DenseChannel`): this module only stores and
  returns the keys.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import struct
import uuid
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ragspine.atomic import write_atomic

log = logging.getLogger(__name__)

MATRIX_SUFFIX = ".matrix"  # beside the vectors file: `<db>.vectors.sqlite.matrix`
ALIGN_SUFFIX = ".align"  # `<db>.vectors.sqlite.align`
DEFAULT_MIN_VECTORS = 10_000  # below this a full read costs ~0.15 s or less: no cache files
_MATRIX_MAGIC = b"RSMATRX1"
_ALIGN_MAGIC = b"RSALIGN1"
_PREFIX = struct.Struct("<8sII")  # magic, header length, header crc32
_ALIGN = 64  # every section starts at a multiple of this many bytes
# Written in pieces of this size: the page cache then holds the file in folios no larger than
# this (one huge write gives multi-MB folios, and touching one row through the mmap maps its
# whole folio: 400 scattered rows mapped +150 MB on Linux 6.18, +31 MB with 64 KiB pieces).
_WRITE_PIECE = 1 << 16
_BLOCKED = frozenset({"matrix"})  # sections checked by a crc32 per block, read without the mapping (see the module docstring)
_BLOCK_BYTES = 1 << 20  # bytes of a checked block of the matrix rows

SegmentKey = tuple[str, int, int]  # a written segment's (storage name, first position, positions)


@dataclass(frozen=True)
class MatrixKey:
    """What a cached matrix reflects: the vectors file (`file_id`) at `version`, for one model;
    `meaning` names how the caller encodes what it stores (its language codes, its centring
    rules), so a cache written by code that reads them otherwise is never used."""

    model_id: str
    dim: int
    file_id: str
    version: int
    meaning: str = ""
    stamp: str = ""  # the vectors file's `ChunkVectors.stamp()` when the rows were read from it


class RowReader:
    """Reads chosen rows of a `.matrix` file with `pread` (the file stays open; a file renamed
    over it later is not seen): a few hundred re-ranked candidates cost a few hundred small
    reads and map no page of the file into the process."""

    def __init__(self, handle: BinaryIO, offset: int, matrix: np.ndarray) -> None:
        self._handle, self._offset, self._matrix = handle, offset, matrix
        self._dim = int(matrix.shape[1])

    def close(self) -> None:
        """Close the file (the rows can no longer be read)."""
        self._handle.close()

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """The (len(rows), dim) float32 rows `rows` (any order, repeats allowed)."""
        if not hasattr(os, "preadv"):  # Windows: through the mapping
            return np.array(self._matrix[rows])
        out = np.empty((len(rows), self._dim), dtype=np.float32)
        fd, stride, offset = self._handle.fileno(), 4 * self._dim, self._offset
        for i, row in enumerate(rows.tolist()):
            if os.preadv(fd, [out[i].data], offset + row * stride) != stride:
                raise OSError(f"short read of row {row} in {self._handle.name}")
        return out


@dataclass(frozen=True)
class CachedMatrix:
    """A `.matrix` file, memory-mapped: `matrix` is read-only and its pages are read on use
    (an exact scan maps them all); `read_rows` reads chosen rows without mapping any."""

    key: MatrixKey
    cache_id: str
    ids: list[str]  # chunk id of each row
    matrix: np.ndarray  # (len(ids), dim) float32, read-only
    languages: np.ndarray  # int8 language code of each row (-1: unknown)
    damaged: list[str]  # ids the vectors file reported damaged when the cache was written
    read_rows: RowReader


@dataclass(frozen=True)
class Centring:
    """The language centring of one attach: None means plain cosine."""

    key: str  # `centring_key` of its inputs
    centres: np.ndarray | None  # (languages, dim) float32
    inverse_norms: np.ndarray | None  # float32 per position


@dataclass(frozen=True)
class CachedAlignment:
    """An `.align` file for the `.matrix` whose id is `cache_id`."""

    cache_id: str
    segments: dict[SegmentKey, tuple[np.ndarray, np.ndarray]]  # (rows int64, language codes int64), writable
    centring: Centring | None


def matrix_path(vectors_path: str) -> str | None:
    """Where the matrix cache of a vectors file lives; None for vectors in memory."""
    return None if vectors_path == ":memory:" else vectors_path + MATRIX_SUFFIX


def align_path(vectors_path: str) -> str | None:
    """Where the alignment cache of a vectors file lives; None for vectors in memory."""
    return None if vectors_path == ":memory:" else vectors_path + ALIGN_SUFFIX


def centring_key(cache_id: str, arrays: Sequence[np.ndarray]) -> str:
    """A digest naming centring inputs: the matrix (`cache_id`) and the given arrays' bytes."""
    digest = hashlib.sha1(cache_id.encode(), usedforsecurity=False)  # a name, not a secret: the fastest here
    for array in arrays:
        digest.update(str((array.dtype.str, array.shape)).encode())
        digest.update(np.ascontiguousarray(array).data)
    return digest.hexdigest()


# -- the matrix -------------------------------------------------------------------------------
def write_matrix(
    path: str, key: MatrixKey, ids: Sequence[str], matrix: np.ndarray, languages: np.ndarray, damaged: Sequence[str]
) -> str | None:
    """Write a `.matrix` file (atomically); its new cache_id, or None when `ids` cannot be
    stored (an id holding a newline). OSError propagates (the caller logs it)."""
    blob = "\n".join(ids).encode("utf-8")
    if any("\n" in i for i in ids) or any("\n" in i for i in damaged):
        log.info("matrix cache %s not written: a chunk id holds a newline", path)
        return None
    cache_id = uuid.uuid4().hex
    header = {
        "format": "ragspine-matrix-v2", "model_id": key.model_id, "dim": key.dim, "file_id": key.file_id,
        "version": key.version, "meaning": key.meaning, "stamp": key.stamp, "count": len(ids), "cache_id": cache_id,
    }  # fmt: skip
    sections = {
        "ids": np.frombuffer(blob, dtype=np.uint8),
        "damaged": np.frombuffer("\n".join(damaged).encode("utf-8"), dtype=np.uint8),
        "languages": np.ascontiguousarray(languages, dtype=np.int8),
        "matrix": np.ascontiguousarray(matrix, dtype="<f4"),
    }
    _write(path, _MATRIX_MAGIC, header, sections)
    return cache_id


def read_matrix(path: str) -> CachedMatrix | None:
    """The `.matrix` file at `path`, memory-mapped, or None (see the module docstring)."""
    opened = _read(path, _MATRIX_MAGIC)
    if opened is None:
        return None
    header, sections, offsets, handle = opened
    try:
        if header.get("format") != "ragspine-matrix-v2":  # v1: rows without block checksums
            raise ValueError(f"format {header.get('format')!r}")
        count, dim = int(header["count"]), int(header["dim"])
        text = sections["ids"].tobytes().decode("utf-8")
        ids = text.split("\n") if count else []
        damaged_text = sections["damaged"].tobytes().decode("utf-8")
        matrix, languages = sections["matrix"], sections["languages"]
        if len(ids) != count or matrix.shape != (count, dim) or languages.shape != (count,):
            raise ValueError(f"sections do not match {count} rows of dimension {dim}")
        key = MatrixKey(
            str(header["model_id"]), dim, str(header["file_id"]), int(header["version"]), str(header.get("meaning", "")),
            str(header.get("stamp", "")),
        )
        reader = RowReader(handle, offsets["matrix"], matrix)
        return CachedMatrix(
            key, str(header["cache_id"]), ids, matrix, languages, damaged_text.split("\n") if damaged_text else [], reader
        )
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        handle.close()
        log.warning("matrix cache %s cannot be used (%s): ignored; it is rebuilt from the vectors file", path, exc)
        return None


def discard_if_damaged(vectors_path: str) -> list[str]:
    """Verify the `.matrix` file beside `vectors_path` (every checksum, as at open) and delete it,
    with its `.align` file, when it cannot be used; the names deleted (`ragspine embed` says so;
    the next open rebuilds them from the vectors file)."""
    path = matrix_path(vectors_path)
    if path is None or not os.path.exists(path):
        return []
    cached = read_matrix(path)  # a WARNING names the problem
    if cached is not None:
        cached.read_rows.close()
        return []
    removed = []
    for name in (path, align_path(vectors_path)):
        if name is not None and os.path.exists(name):
            os.remove(name)
            removed.append(name)
    return removed


# -- the alignment ----------------------------------------------------------------------------
def write_alignment(
    path: str,
    cache_id: str,
    segments: Sequence[tuple[SegmentKey, np.ndarray, np.ndarray]],
    centring: Centring | None,
) -> None:
    """Write an `.align` file (atomically) for the matrix `cache_id`: each segment's (key, rows,
    language codes), and the centring when given. OSError propagates (the caller logs it)."""
    empty = np.zeros(0, dtype=np.int64)
    header: dict[str, Any] = {
        "format": "ragspine-align-v1", "cache_id": cache_id, "segments": [list(k) for k, _, _ in segments],
        "centring": None if centring is None else centring.key,
        "centred": centring is not None and centring.centres is not None,
    }  # fmt: skip
    sections: dict[str, np.ndarray] = {
        "rows": np.concatenate([r for _, r, _ in segments]).astype(np.int64) if segments else empty,
        "groups": np.concatenate([g for _, _, g in segments]).astype(np.int8) if segments else empty.astype(np.int8),
    }
    if centring is not None and centring.centres is not None and centring.inverse_norms is not None:
        sections["centres"] = np.ascontiguousarray(centring.centres, dtype=np.float32)
        sections["inverse"] = np.ascontiguousarray(centring.inverse_norms, dtype=np.float32)
    _write(path, _ALIGN_MAGIC, header, sections)


def read_alignment(path: str, cache_id: str) -> CachedAlignment | None:
    """The `.align` file at `path` when it was made for the matrix `cache_id`, else None (a
    file for another matrix: logged at INFO; an unusable one: WARNING)."""
    opened = _read(path, _ALIGN_MAGIC)
    if opened is None:
        return None
    header, sections, _, handle = opened
    handle.close()  # every section is copied out below
    try:
        if header.get("format") != "ragspine-align-v1":
            raise ValueError(f"format {header.get('format')!r}")
        if header["cache_id"] != cache_id:
            log.info("alignment cache %s belongs to another matrix: recomputed", path)
            return None
        rows, groups = sections["rows"], sections["groups"]
        if rows.shape != groups.shape:
            raise ValueError("rows and languages differ in length")
        found: dict[SegmentKey, tuple[np.ndarray, np.ndarray]] = {}
        start = 0
        for name, first, n_docs in header["segments"]:
            end = start + int(n_docs)
            if end > len(rows):
                raise ValueError("segments overrun the rows")
            found[(str(name), int(first), int(n_docs))] = (
                rows[start:end].astype(np.int64), groups[start:end].astype(np.int64)
            )
            start = end
        centring = None
        if header["centring"] is not None:
            centred = bool(header["centred"])
            centring = Centring(
                str(header["centring"]),
                np.array(sections["centres"]) if centred else None,
                np.array(sections["inverse"]) if centred else None,
            )
        return CachedAlignment(cache_id, found, centring)
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("alignment cache %s cannot be used (%s): ignored; it is recomputed", path, exc)
        return None


# -- the container: magic, header (JSON, crc32), 64-byte aligned sections ---------------------------
def _write(path: str, magic: bytes, header: Mapping[str, Any], sections: Mapping[str, np.ndarray]) -> None:
    """Write the container atomically (`write_atomic`), the sections in `_WRITE_PIECE` pieces."""
    layout: dict[str, dict[str, Any]] = {}
    at = 0  # offsets are relative to the first section, which follows the header, aligned
    for name, array in sections.items():
        data = np.ascontiguousarray(array).data.cast("B")
        layout[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": at}
        if name in _BLOCKED:
            layout[name].update(crc=None, block_bytes=_BLOCK_BYTES, block_crcs=block_crcs(data, _BLOCK_BYTES))
        else:
            layout[name]["crc"] = zlib.crc32(data)
        at = _aligned(at + array.nbytes)
    encoded = json.dumps(dict(header, sections=layout, data_size=at)).encode("utf-8")
    base = _aligned(_PREFIX.size + len(encoded))

    def pieces() -> Iterator[bytes | memoryview]:
        yield _PREFIX.pack(magic, len(encoded), zlib.crc32(encoded)) + encoded
        written = _PREFIX.size + len(encoded)
        for name, array in sections.items():
            yield b"\0" * (base + layout[name]["offset"] - written)
            data = np.ascontiguousarray(array).data.cast("B")
            yield from (data[start : start + _WRITE_PIECE] for start in range(0, len(data), _WRITE_PIECE))
            written = base + layout[name]["offset"] + len(data)
        yield b"\0" * (base + at - written)

    write_atomic(Path(path), pieces())


def _read(path: str, magic: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, int], BinaryIO] | None:
    """(header, sections as read-only arrays over one mmap, each section's offset in the file,
    the open file), or None when absent or unusable."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - kept open by the matrix's RowReader
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cache file %s cannot be read (%s): ignored; it is rebuilt", path, exc)
        return None
    try:
        size = os.fstat(handle.fileno()).st_size
        if size < _PREFIX.size:
            raise ValueError(f"{size} bytes: truncated")
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        found, length, crc = _PREFIX.unpack_from(mapped, 0)
        if found != magic:
            raise ValueError("not a cache file of this kind")
        encoded = mapped[_PREFIX.size : _PREFIX.size + length]
        if len(encoded) != length or zlib.crc32(encoded) != crc:
            raise ValueError("header damaged")
        header = json.loads(encoded)
        base = _aligned(_PREFIX.size + length)
        if base + int(header["data_size"]) != size:
            raise ValueError(f"{size} bytes, header says {base + int(header['data_size'])}: truncated or damaged")
        sections: dict[str, np.ndarray] = {}
        offsets: dict[str, int] = {}
        for name, entry in header["sections"].items():
            dtype, shape = np.dtype(entry["dtype"]), tuple(int(n) for n in entry["shape"])
            count = int(np.prod(shape, dtype=np.int64))
            offset = base + int(entry["offset"])
            if offset + count * dtype.itemsize > size:
                raise ValueError(f"section {name} runs past the end")
            array = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset).reshape(shape)
            if name in _BLOCKED:
                _check_blocks(handle, offset, count * dtype.itemsize, int(entry["block_bytes"]), entry["block_crcs"], name)
            elif zlib.crc32(array.data) != int(entry["crc"]):
                raise ValueError(f"section {name} fails its checksum")
            sections[name], offsets[name] = array, offset
        return header, sections, offsets, handle
    except (OSError, KeyError, TypeError, ValueError, struct.error, json.JSONDecodeError) as exc:
        handle.close()
        log.warning("cache file %s cannot be used (%s): ignored; it is rebuilt", path, exc)
        return None


def block_crcs(data: memoryview, block_bytes: int) -> list[int]:
    """The crc32 of each `block_bytes` block of `data` (the last one may be shorter)."""
    return [zlib.crc32(data[start : start + block_bytes]) for start in range(0, len(data), block_bytes)]


def _check_blocks(handle: BinaryIO, offset: int, nbytes: int, block_bytes: int, crcs: Sequence[int], name: str) -> None:
    """Read `nbytes` at `offset` of `handle` block by block (no mapping) and compare each block's
    crc32 with `crcs`; ValueError naming the first damaged block otherwise."""
    if block_bytes <= 0 or len(crcs) != -(-nbytes // block_bytes):
        raise ValueError(f"section {name} has no valid block checksums")
    handle.seek(offset)
    for block, expected in enumerate(crcs):
        size = min(block_bytes, nbytes - block * block_bytes)
        data = handle.read(size)
        if len(data) != size:
            raise ValueError(f"section {name}: short read in block {block}")
        if zlib.crc32(data) != int(expected):
            raise ValueError(f"section {name} fails its checksum in block {block} (bytes {block * block_bytes}…{block * block_bytes + size})")


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN
