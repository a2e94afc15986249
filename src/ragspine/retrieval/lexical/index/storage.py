"""Index files on disk: immutable segment folders, tombstone records and one manifest.

Layout of an index folder: `manifest.json` (replaced atomically, never edited in place),
`seg-*/` (one segment's .npy arrays + segment.json), `del-*.npz` (tombstoned positions and the
df they take away), `.lock`. Invariants: a file is written once under a fresh name and only
then referenced by a new manifest; every referenced file's size and CRC-32 are recorded and
checked on load, so a missing, truncated or altered file is an `IndexFileError`, never a
silently wrong index; writers hold an exclusive lock, loaders a shared one, and a writer
removes unreferenced files only while holding it. Arrays are read-only: the large ones
memory-mapped, each with a `MappedFile` (see `mapped`) the segment keeps, so that a file changed
under a running process is noticed before its map is read again; the small ones read into memory.
"""

from __future__ import annotations

import json
import shutil
import uuid
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.atomic import write_atomic
from ragspine.errors import DamagedFile
from ragspine.retrieval.model import INDEXED_FIELDS
from ragspine.retrieval.lexical.index.mapped import load_array
from ragspine.retrieval.lexical.index.segment import Segment
from ragspine.retrieval.lexical.index.strings import (
    DICT_VOCAB_MAX,
    StringColumn,
    encode_strings,
    hash_table,
    make_vocab,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
    fcntl = None  # type: ignore[assignment]

FORMAT = 2  # 2: fields are INDEXED_FIELDS (doc_id, sensitivity, valid_as_of, metadata added)
MANIFEST = "manifest.json"
_CRC_BLOCK = 1 << 22


class IndexFileError(DamagedFile, RuntimeError):
    """An index file is missing, damaged, or does not match its manifest."""


class IndexFolder:
    """Reads and writes one index folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)  # what warnings print: the folder, never `<IndexFolder object …>`

    def __repr__(self) -> str:
        return f"IndexFolder({str(self.path)!r})"

    # -- locking ----------------------------------------------------------------------------
    @contextmanager
    def locked(self, exclusive: bool) -> Iterator[None]:
        """Hold the folder's lock (shared or exclusive) across processes."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / ".lock", "a+b") as handle:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    # -- manifest ---------------------------------------------------------------------------
    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest, or None when there is none or it cannot be read as one."""
        try:
            data = json.loads((self.path / MANIFEST).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("format") == FORMAT else None

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        write_atomic(self.path / MANIFEST, json.dumps({**manifest, "format": FORMAT}, indent=1).encode("utf-8"))

    def remove_unreferenced(self, manifest: Mapping[str, Any]) -> None:
        """Delete segment folders, records and temp files the manifest does not name."""
        keep = {s["name"] for s in manifest.get("segments", [])}
        keep |= {d["name"] for d in manifest.get("deletes", [])}
        keep |= {MANIFEST, ".lock"}
        for entry in self.path.iterdir():
            if entry.name in keep:
                continue
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

    # -- segments ---------------------------------------------------------------------------
    def write_segment(self, segment: Segment) -> dict[str, Any]:
        """Write `segment` under a fresh name; return its manifest entry."""
        name = f"seg-{uuid.uuid4().hex[:16]}"
        folder = self.path / name
        folder.mkdir(parents=True)
        term_blob, term_off = segment.terms.encoded()
        id_blob, id_off = segment.chunk_ids.encoded()
        arrays = {
            "indptr": segment.indptr, "docs": segment.docs, "tfs": segment.tfs,
            "max_tf": segment.max_tf, "min_ratio": segment.min_ratio,
            "lengths": segment.lengths, "row_ids": segment.row_ids,
            "field_codes": segment.field_codes,
            "term_blob": term_blob, "term_off": term_off, "id_blob": id_blob, "id_off": id_off,
        }  # fmt: skip
        if len(segment.terms) > DICT_VOCAB_MAX:
            arrays["term_hash"], arrays["term_ids"] = hash_table(segment.terms)
        files = {}
        for key, array in arrays.items():
            target = folder / f"{key}.npy"
            np.save(target, np.ascontiguousarray(array), allow_pickle=False)
            files[f"{key}.npy"] = _fingerprint(target)
        meta = {"first": segment.first, "field_values": segment.field_values}
        (folder / "segment.json").write_text(json.dumps(meta, ensure_ascii=False), "utf-8")
        files["segment.json"] = _fingerprint(folder / "segment.json")
        return {"name": name, "first": segment.first, "n_docs": segment.n_docs, "files": files}

    def read_segment(self, entry: Mapping[str, Any]) -> Segment:
        """The segment named by a manifest entry, its files checked and memory-mapped."""
        folder = self.path / str(entry["name"])
        files: Mapping[str, Any] = entry["files"]
        for filename, expected in files.items():
            _check(folder / filename, expected)
        try:
            meta = json.loads((folder / "segment.json").read_text("utf-8"))
            # Plain ndarrays over the maps: slicing a np.memmap is several times slower.
            a, watched = {}, []
            for f in files:
                if f.endswith(".npy"):
                    a[f[:-4]], watch = load_array(folder / f)
                    if watch is not None:
                        watched.append(watch)
            terms = StringColumn(blob=a["term_blob"], offsets=a["term_off"])
            vocab = make_vocab(terms, a.get("term_hash"), a.get("term_ids"))
            segment = Segment(
                first=int(meta["first"]), terms=terms, vocab=vocab,
                indptr=a["indptr"], docs=a["docs"], tfs=a["tfs"],
                max_tf=a["max_tf"], min_ratio=a["min_ratio"],
                lengths=a["lengths"], row_ids=a["row_ids"],
                chunk_ids=StringColumn(blob=a["id_blob"], offsets=a["id_off"]),
                field_values={f: list(meta["field_values"][f]) for f in INDEXED_FIELDS},
                field_codes=a["field_codes"], name=str(entry["name"]), files=tuple(watched),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise IndexFileError(f"segment {folder.name} cannot be read: {exc}") from exc
        _check_shapes(segment, int(entry["n_docs"]))
        return segment

    # -- tombstones -------------------------------------------------------------------------
    def write_deletes(self, positions: np.ndarray, dead: Mapping[str, int]) -> dict[str, Any]:
        """A record of tombstoned positions and the df they remove; its manifest entry."""
        name = f"del-{uuid.uuid4().hex[:16]}.npz"
        terms = list(dead)
        blob, offsets = encode_strings(terms)
        counts = np.array([dead[t] for t in terms], dtype=np.int64)
        target = self.path / name
        with open(target, "wb") as handle:
            np.savez(handle, positions=np.asarray(positions, dtype=np.int64),
                     term_blob=blob, term_off=offsets, counts=counts)  # fmt: skip
        return {"name": name, **_fingerprint(target)}

    def read_deletes(self, entry: Mapping[str, Any]) -> tuple[np.ndarray, dict[str, int]]:
        target = self.path / str(entry["name"])
        _check(target, entry)
        try:
            with np.load(target, allow_pickle=False) as data:
                positions = np.asarray(data["positions"], dtype=np.int64)
                terms = StringColumn(blob=data["term_blob"], offsets=data["term_off"]).to_list()
                counts = data["counts"].tolist()
        except (KeyError, ValueError, OSError) as exc:
            raise IndexFileError(f"tombstone record {target.name} cannot be read: {exc}") from exc
        if len(terms) != len(counts):
            raise IndexFileError(f"tombstone record {target.name} is inconsistent")
        return positions, dict(zip(terms, counts, strict=True))

    def size_bytes(self) -> int:
        """Bytes of every file in the folder."""
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())


def _fingerprint(path: Path) -> dict[str, int]:
    return {"size": path.stat().st_size, "crc32": _crc32(path)}


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while block := handle.read(_CRC_BLOCK):
            crc = zlib.crc32(block, crc)
    return crc


def _check(path: Path, expected: Mapping[str, Any]) -> None:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise IndexFileError(f"index file {path.name} is missing: {exc}") from exc
    if size != expected.get("size") or _crc32(path) != expected.get("crc32"):
        raise IndexFileError(f"index file {path.name} does not match its manifest (damaged)")


def _check_shapes(segment: Segment, n_docs: int) -> None:
    n_terms = len(segment.terms)
    ok = (
        segment.n_docs == n_docs
        and len(segment.indptr) == n_terms + 1
        and len(segment.max_tf) == n_terms == len(segment.min_ratio)
        and int(segment.indptr[-1]) == len(segment.docs) == len(segment.tfs)
        and len(segment.row_ids) == n_docs == len(segment.chunk_ids)
        and segment.field_codes.shape == (len(INDEXED_FIELDS), n_docs)
    )
    if not ok:
        raise IndexFileError(f"segment {segment.name} has inconsistent array shapes")
