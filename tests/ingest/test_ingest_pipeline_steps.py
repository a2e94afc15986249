"""`IngestPipeline`'s steps on their own: labels read in one place (unknown ones refused, a
stricter stored one kept), the registry row written after the chunks, withdrawals recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine.ingest.files import SourceFile
from ragspine.ingest.pipeline import IngestPipeline, resolve_labels
from ragspine.ingest.registry import ACTIVE, WITHDRAWN, DocumentRegistry
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.sqlite import ChunkStore


@pytest.fixture
def pipeline() -> IngestPipeline:
    store = ChunkStore(":memory:")
    store.init_schema()
    return IngestPipeline(NarrativeIndex(store), registry=DocumentRegistry(":memory:"))


def test_a_document_meta_is_labelled_like_any_other_source(pipeline: IngestPipeline) -> None:
    with pytest.raises(ValueError, match=r"label .secret. \(from the sensitivity of .d.\) is not a known level"):
        pipeline.ingest_document("Exports fell.", DocumentMeta("d", sensitivity="secret"))
    assert pipeline.store.iter_chunks(doc_id="d") == [] and pipeline.registry is not None
    assert pipeline.registry.get("d") is None
    first = pipeline.ingest_document("Exports fell.", DocumentMeta("d", sensitivity="ｃｏｎｆｉｄｅｎｔｉａｌ"))
    assert (first.version, first.warnings) == (1, ())
    second = pipeline.ingest_document("Exports fell again.", DocumentMeta("d", sensitivity="PUBLIC"))
    assert second.version == 2 and "kept the stored label CONFIDENTIAL" in second.warnings[0]
    assert {c.sensitivity for c in pipeline.store.iter_chunks(doc_id="d")} == {"CONFIDENTIAL"}
    row = pipeline.registry.get("d")
    assert row is not None and (row.version, row.status, row.metadata_dict()["sensitivity_from"]) == (2, ACTIVE, "kept")


def test_a_file_and_a_text_get_rows_and_a_withdrawal_is_recorded(pipeline: IngestPipeline) -> None:
    settings = resolve_labels({"entity": "ACME"}, "internal", levels="PUBLIC,INTERNAL,RESTRICTED")
    data = b"---\nsensitivity: restricted\n---\n\n# Plan\n\nThe plant closes.\n"
    written = pipeline.ingest_file(SourceFile(Path("plan.md"), "plan.md", Path(".")), data, settings)
    assert written.chunks >= 1
    text = pipeline.ingest_text("note", "Margins fell.", settings)
    assert registry_of(pipeline).get("plan.md") is not None and text.version == 1
    rows = {r.doc_id: r for r in registry_of(pipeline).all()}
    assert (rows["plan.md"].loader, rows["note"].loader) == ("markdown", "text")
    assert rows["plan.md"].metadata_dict()["sensitivity"] == "RESTRICTED"  # the strictest source wins
    assert rows["note"].metadata_dict()["entity"] == "ACME" and rows["plan.md"].size_bytes == len(data)
    pipeline.withdraw("note")
    withdrawn = registry_of(pipeline).get("note")
    assert withdrawn is not None and (withdrawn.status, withdrawn.chunks) == (WITHDRAWN, 0)
    assert pipeline.store.iter_chunks(doc_id="note") == []
    with pytest.raises(ValueError, match="label .top. .* is not a known level"):
        resolve_labels({}, "top", levels="PUBLIC,INTERNAL")


def registry_of(pipeline: IngestPipeline) -> DocumentRegistry:
    assert pipeline.registry is not None
    return pipeline.registry
