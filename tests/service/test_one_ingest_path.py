"""One ingest path: the same folder or text through `ragspine ingest`, `Workspace` and HTTP stores
the same chunks and the same registry rows (`IngestPipeline` behind all three)."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from service_helpers import BM25_ENV

import ragspine
from ragspine.cli import main
from ragspine.ingest.registry import WITHDRAWN, DocumentRegistry
from ragspine.retrieval.store.sqlite import ChunkStore

SAMPLE = Path(ragspine.__file__).parent / "data" / "sample_corpus"
# What a registry row says about the document (not where or when it was read: a CLI run knows
# the folder and the file's path, a workspace or an upload only the file's name).
SAME = ("doc_id", "content_hash", "ingest_key", "version", "chunks", "status", "loader", "encoding",
        "pages", "size_bytes", "metadata")  # fmt: skip
LABELLED = (
    "---\ntitle: 夜鹰计划\nentity: ACME_CN\nsensitivity: confidential\nowner: board\n---\n\n裁员计划尚未批准。\n"
)


def _folder(root: Path) -> Path:
    """The sample corpus's Markdown files, plus one that labels itself in its front matter."""
    folder = root / "corpus"
    folder.mkdir()
    for path in sorted(SAMPLE.glob("*.md")):
        shutil.copy(path, folder / path.name)
    (folder / "labelled.md").write_text(LABELLED, "utf-8")
    return folder


def _chunks(db: str) -> list[dict[str, Any]]:
    """The active chunks, every field but when they were written."""
    with ChunkStore(db) as store:
        rows = [{k: v for k, v in asdict(c).items() if k != "ingested_at"} for c in store.iter_chunks()]
    return sorted(rows, key=lambda c: c["chunk_id"])


def _rows(db: str) -> list[dict[str, Any]]:
    with DocumentRegistry(db) as registry:
        return [{name: getattr(row, name) for name in SAME} for row in registry.all()]


def _cli_ingest(folder: Path, db: str, *flags: str) -> None:
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", db, *flags], env=BM25_ENV)
    assert result.exit_code == 0, result.output


def test_a_folder_through_the_cli_a_workspace_and_http_stores_the_same(tmp_path: Path, serve: Any) -> None:
    folder = _folder(tmp_path)
    files = sorted(folder.iterdir())
    cli_db = str(tmp_path / "cli.db")
    _cli_ingest(folder, cli_db)
    with ragspine.open(tmp_path / "ws.db", env=BM25_ENV) as ws:
        results = [ws.ingest(path) for path in files]
    assert [(r.doc_id, r.version) for r in results] == [(p.name, 1) for p in files]
    served = serve()
    for path in files:
        upload = {"file": (path.name, path.read_bytes(), "text/markdown")}
        response = served.client.post("/documents/upload", files=upload)
        assert response.status_code == 201, response.text
    http_db = served.ws.settings.db

    expected = _chunks(cli_db)
    assert len({c["doc_id"] for c in expected}) == len(files)
    assert _chunks(str(tmp_path / "ws.db")) == expected
    assert _chunks(http_db) == expected
    labelled = [c for c in expected if c["doc_id"] == "labelled.md"]
    assert {c["sensitivity"] for c in labelled} == {"CONFIDENTIAL"} and labelled[0]["entity"] == "ACME_CN"

    rows = _rows(cli_db)
    assert [r["doc_id"] for r in rows] == [p.name for p in files] and {r["status"] for r in rows} == {"active"}
    labelled_row = next(r for r in rows if r["doc_id"] == "labelled.md")
    assert json.loads(labelled_row["metadata"])["sensitivity_from"] == "document"
    assert _rows(str(tmp_path / "ws.db")) == rows
    assert _rows(http_db) == rows


def test_a_sidecar_labels_a_file_the_same_through_the_cli_and_a_workspace(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "memo.md").write_text("# Memo\n\nThe plant closes in May.\n", "utf-8")
    sidecar = {"sensitivity": "RESTRICTED", "entity": "ACME_CN"}
    (folder / "memo.md.meta.json").write_text(json.dumps(sidecar), "utf-8")
    cli_db = str(tmp_path / "cli.db")
    _cli_ingest(folder, cli_db, "--entity", "OTHER")
    with ragspine.open(tmp_path / "ws.db", env=BM25_ENV) as ws:
        ws.ingest(folder / "memo.md", entity="OTHER")  # the sidecar wins over the default, in both
    assert _chunks(str(tmp_path / "ws.db")) == _chunks(cli_db)
    assert {c["sensitivity"] for c in _chunks(cli_db)} == {"RESTRICTED"}
    assert _rows(str(tmp_path / "ws.db")) == _rows(cli_db)


def test_a_text_through_a_workspace_and_http_stores_the_same(tmp_path: Path, serve: Any) -> None:
    body = {"doc_id": "cn/report", "text": "营收下滑的原因是出口订单减少。\n\n毛利率同比下降。", "entity": "ACME_CN",
            "sensitivity": "public", "valid_as_of": "2025-01-01"}  # fmt: skip
    with ragspine.open(tmp_path / "ws.db", env=BM25_ENV) as ws:
        fields = {k: v for k, v in body.items() if k not in ("doc_id", "text", "valid_as_of")}
        result = ws.ingest_text(body["text"], body["doc_id"], valid_as_of=body["valid_as_of"], **fields)
    served = serve()
    response = served.client.post("/documents", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["version"] == result.version == 1
    assert _chunks(served.ws.settings.db) == _chunks(str(tmp_path / "ws.db"))
    rows = _rows(str(tmp_path / "ws.db"))
    assert len(rows) == 1 and rows[0]["loader"] == "text" and rows[0]["chunks"] == result.chunks
    assert json.loads(rows[0]["metadata"])["sensitivity"] == "PUBLIC"
    assert _rows(served.ws.settings.db) == rows


def test_a_workspace_records_new_versions_and_withdrawals_in_the_registry(tmp_path: Path) -> None:
    db = str(tmp_path / "ws.db")
    with ragspine.open(db, env=BM25_ENV) as ws:
        ws.ingest("Exports fell.", doc_id="d")
        ws.ingest("Exports fell again.", doc_id="d")
        with DocumentRegistry(db) as registry:
            first = registry.get("d")
            assert first is not None and (first.version, first.status) == (2, "active")
        assert ws.withdraw("d") == 1
    with DocumentRegistry(db) as registry:
        row = registry.get("d")
        assert row is not None and (row.status, row.chunks) == (WITHDRAWN, 0)
