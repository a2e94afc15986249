"""Read a BEIR-layout folder: corpus.jsonl, queries.jsonl and qrels/<split>.tsv.

Invariants: every problem with the layout is a `DatasetError` that names the missing file, or
the file and line number of the malformed entry, and what was expected; nothing is skipped
silently. The indexed text of a document is `title + "\\n\\n" + text` (the BEIR convention;
just `text` when the title is empty), so every chunk is a verbatim substring of it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.errors import RagspineError

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"
TITLE_SEPARATOR = "\n\n"


class DatasetError(RagspineError, ValueError):
    """The folder is not a usable BEIR dataset; the message names the file (and line)."""


@dataclass(frozen=True)
class CorpusDoc:
    """One corpus entry."""

    doc_id: str
    title: str
    text: str

    @property
    def indexed_text(self) -> str:
        """What is ingested: title and text as separate paragraphs (BEIR: title + text)."""
        return f"{self.title}{TITLE_SEPARATOR}{self.text}" if self.title.strip() else self.text


@dataclass(frozen=True)
class BeirDataset:
    """A loaded dataset restricted to one split's judged queries."""

    name: str
    path: Path
    split: str
    corpus: list[CorpusDoc]
    queries: dict[str, str]  # query id → text, only the queries that appear in the split's qrels
    qrels: dict[str, dict[str, int]]  # query id → doc id → grade
    corpus_sha256: str
    unknown_judged_docs: int = 0  # judged doc ids that are not in the corpus
    splits: tuple[str, ...] = field(default=())


def load_beir(path: str | Path, split: str) -> BeirDataset:
    """Load `path` (a BEIR folder) for `split`; raise DatasetError for any layout problem.

    The corpus fingerprint is the SHA-256 of corpus.jsonl's bytes.
    """
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"dataset folder not found: {root}")
    corpus_path = _require(root, CORPUS_FILE)
    queries_path = _require(root, QUERIES_FILE)
    splits = available_splits(root)
    qrels_path = root / QRELS_DIR / f"{split}.tsv"
    if not qrels_path.is_file():
        have = ", ".join(splits) if splits else "none"
        raise DatasetError(
            f"{root}: missing {QRELS_DIR}/{split}.tsv for split {split!r} (splits found: {have})"
        )
    raw = corpus_path.read_bytes()
    corpus = _read_corpus(corpus_path, raw)
    all_queries = _read_queries(queries_path)
    qrels = _read_qrels(qrels_path, root)
    missing = [qid for qid in qrels if qid not in all_queries]
    if missing:
        raise DatasetError(
            f"{qrels_path}: {len(missing)} query id(s) not in {QUERIES_FILE}, e.g. {missing[0]!r}"
        )
    doc_ids = {doc.doc_id for doc in corpus}
    unknown = sum(1 for rel in qrels.values() for doc in rel if doc not in doc_ids)
    return BeirDataset(
        name=root.resolve().name,
        path=root,
        split=split,
        corpus=corpus,
        queries={qid: all_queries[qid] for qid in qrels},
        qrels=qrels,
        corpus_sha256=hashlib.sha256(raw).hexdigest(),
        unknown_judged_docs=unknown,
        splits=tuple(splits),
    )


def available_splits(root: Path) -> list[str]:
    """Names of the qrels/*.tsv files, sorted."""
    folder = root / QRELS_DIR
    return sorted(p.stem for p in folder.glob("*.tsv")) if folder.is_dir() else []


def _require(root: Path, name: str) -> Path:
    path = root / name
    if not path.is_file():
        raise DatasetError(
            f"{root}: missing {name} (a BEIR folder holds {CORPUS_FILE}, {QUERIES_FILE} "
            f"and {QRELS_DIR}/<split>.tsv)"
        )
    return path


def _json_lines(path: Path, raw: bytes | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    data = path.read_bytes() if raw is None else raw
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad_line = data[: exc.start].count(b"\n") + 1
        raise DatasetError(f"{path} line {bad_line}: not UTF-8 ({exc.reason})") from None
    # split on "\n" only: str.splitlines would also cut at U+2028 and friends, which JSON
    # writers may leave unescaped inside strings
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path} line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path} line {number}: expected a JSON object, got {type(obj).__name__}")
        yield number, obj


def _field(path: Path, number: int, obj: dict[str, Any], key: str, *, required: bool) -> str:
    if key not in obj:
        if required:
            raise DatasetError(f"{path} line {number}: missing {key!r}")
        return ""
    value = obj[key]
    if key == "_id" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # some exports write numeric ids
    if not isinstance(value, str):
        raise DatasetError(f"{path} line {number}: {key!r} must be a string, got {type(value).__name__}")
    if key == "_id" and not value.strip():
        raise DatasetError(f"{path} line {number}: '_id' is empty")
    return value


def _read_corpus(path: Path, raw: bytes) -> list[CorpusDoc]:
    docs: list[CorpusDoc] = []
    seen: dict[str, int] = {}
    for number, obj in _json_lines(path, raw):
        doc_id = _field(path, number, obj, "_id", required=True)
        if doc_id in seen:
            raise DatasetError(
                f"{path} line {number}: duplicate _id {doc_id!r} (first on line {seen[doc_id]})"
            )
        seen[doc_id] = number
        title = _field(path, number, obj, "title", required=False)
        text = _field(path, number, obj, "text", required=True)
        docs.append(CorpusDoc(doc_id, title, text))
    if not docs:
        raise DatasetError(f"{path}: no documents")
    return docs


def _read_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for number, obj in _json_lines(path):
        qid = _field(path, number, obj, "_id", required=True)
        if qid in queries:
            raise DatasetError(f"{path} line {number}: duplicate _id {qid!r}")
        queries[qid] = _field(path, number, obj, "text", required=True)
    return queries


def _read_qrels(path: Path, root: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    try:
        lines = path.read_text("utf-8-sig").split("\n")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 ({exc.reason})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.rstrip("\r").split("\t")
        if number == 1 and parts[0].strip().lower() in ("query-id", "query_id", "qid"):
            continue  # header
        if len(parts) != 3:
            raise DatasetError(
                f"{path} line {number}: expected 3 tab-separated fields "
                f"(query-id, corpus-id, score), got {len(parts)}: {line[:80]!r}"
            )
        qid, doc_id, grade = (p.strip() for p in parts)
        try:
            score = int(grade)
        except ValueError:
            raise DatasetError(f"{path} line {number}: score {grade!r} is not an integer") from None
        if not qid or not doc_id:
            raise DatasetError(f"{path} line {number}: empty query-id or corpus-id")
        qrels.setdefault(qid, {})[doc_id] = score
    if not qrels:
        raise DatasetError(f"{path}: no judgements")
    return qrels
