"""The page index: MaxSim through the shared scorer, filters before scoring, persistence,
replacement, model identity, crash leftovers, and RESTRICTED pages never embedded or stored."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ragspine.retrieval.filters import parse_filter
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.vector.late_interaction import maxsim
from ragspine.retrieval.visual import index as index_module
from ragspine.retrieval.visual.build import index_pages
from ragspine.retrieval.visual.index import MANIFEST, VisualIndex, VisualModelMismatch
from ragspine.retrieval.visual.protocol import PageRecord
from ragspine.retrieval.visual.tiny import TinyVisualEmbedder

EMBEDDER = TinyVisualEmbedder(dim=16, grid=4, patch=4, seed=2)


def vectors(seed: int, n: int = 5, dim: int = 16) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def record(doc: str, page: int, label: str = "INTERNAL", **fields: object) -> PageRecord:
    return PageRecord(doc, page, label, text=f"{doc} page {page}", version=1, fields=fields)


def brute(pages: dict[str, np.ndarray], query: np.ndarray) -> list[tuple[str, float]]:
    """The reference: `maxsim` per page, best first, ties by key."""
    scored = [(k, maxsim(query, v)) for k, v in pages.items()]
    return sorted(scored, key=lambda kv: (-kv[1], kv[0]))


def test_search_equals_maxsim_per_page_and_survives_a_reopen(tmp_path: Path) -> None:
    folder = tmp_path / "s.db.visual"
    index = VisualIndex(folder, model_id="m", dim=16)
    pages = {f"d{d}.pdf#page={p}": vectors(d * 10 + p, n=3 + p) for d in range(4) for p in range(1, 4)}
    index.write([(record(k.split("#")[0], int(k.rsplit("=", 1)[1])), v) for k, v in pages.items()])
    query = vectors(99, n=4)
    want = brute(pages, query)
    got = index.search(query, k=len(pages))
    assert [k for k, _ in got] == [k for k, _ in want]
    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-4)
    reopened = VisualIndex(folder, model_id="m", dim=16)
    assert reopened.search(query, k=5) == got[:5]
    assert reopened.stats()["pages"] == 12 and reopened.stats()["bytes_per_page"] > 0


def test_a_filter_narrows_before_scoring(tmp_path: Path) -> None:
    index = VisualIndex(tmp_path / "v", model_id="m", dim=16)
    index.write([(record("a.pdf", 1, entity="ACME"), vectors(1)), (record("b.pdf", 1, entity="OTHER"), vectors(2)),
                 (record("c.pdf", 1, period="2024"), vectors(3))])  # fmt: skip
    query = vectors(1)  # a.pdf's own vectors: it wins unfiltered
    assert index.search(query, k=3)[0][0] == "a.pdf#page=1"
    assert [k for k, _ in index.search(query, k=3, where=parse_filter({"entity": "OTHER"}))] == ["b.pdf#page=1"]
    assert [k for k, _ in index.search(query, k=3, where=parse_filter({"period": {"gte": "2023"}}))] == ["c.pdf#page=1"]
    assert index.search(query, k=3, where=parse_filter({"page": {"gt": 1}})) == []
    assert index.search(query, k=3, where=parse_filter({"topic": "missing"})) == []  # a missing field never matches


def test_writing_a_document_replaces_all_its_pages(tmp_path: Path) -> None:
    index = VisualIndex(tmp_path / "v", model_id="m", dim=16)
    index.write([(record("a.pdf", p), vectors(p)) for p in (1, 2, 3)] + [(record("b.pdf", 1), vectors(7))])
    index.write([(record("a.pdf", 1), vectors(11))])  # the new version has one page
    assert sorted(k for k, _ in index.search(vectors(0), k=10)) == ["a.pdf#page=1", "b.pdf#page=1"]
    index.write([], remove=["b.pdf"])
    assert [k for k, _ in index.search(vectors(0), k=10)] == ["a.pdf#page=1"]
    assert sorted(p.name for p in (tmp_path / "v").glob("seg-*.npy")) == ["seg-000002.npy"]  # the first is gone


def test_segments_are_merged_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "MAX_SEGMENTS", 3)
    index = VisualIndex(tmp_path / "v", model_id="m", dim=16)
    pages = {}
    for d in range(6):
        pages[f"d{d}.pdf#page=1"] = vectors(d)
        index.write([(record(f"d{d}.pdf", 1), vectors(d))])
    assert len(list((tmp_path / "v").glob("seg-*.npy"))) <= 3
    query = vectors(42)
    assert [k for k, _ in index.search(query, k=6)] == [k for k, _ in brute(pages, query)]


def test_another_model_is_refused(tmp_path: Path) -> None:
    VisualIndex(tmp_path / "v", model_id="m", dim=16).write([(record("a.pdf", 1), vectors(1))])
    with pytest.raises(VisualModelMismatch, match="delete .* and run `ragspine ingest --visual` again"):
        VisualIndex(tmp_path / "v", model_id="other", dim=16)


def test_a_segment_left_by_a_crash_is_removed_by_the_next_write(tmp_path: Path) -> None:
    index = VisualIndex(tmp_path / "v", model_id="m", dim=16)
    index.write([(record("a.pdf", 1), vectors(1))])
    (tmp_path / "v" / "seg-000777.npy").write_bytes(b"half written")
    assert VisualIndex(tmp_path / "v", model_id="m", dim=16).search(vectors(1), k=1)[0][0] == "a.pdf#page=1"
    index.write([(record("b.pdf", 1), vectors(2))])
    assert not (tmp_path / "v" / "seg-000777.npy").exists()


def test_wrong_vectors_are_refused(tmp_path: Path) -> None:
    index = VisualIndex(None, model_id="m", dim=16)
    with pytest.raises(ValueError, match="expected \\(patches >= 1, 16\\)"):
        index.write([(record("a.pdf", 1), np.ones((3, 8)))])
    with pytest.raises(ValueError, match="expected"):
        index.write([(record("a.pdf", 1), np.ones((0, 16)))])


LABELS = st.sampled_from(["PUBLIC", "INTERNAL", "CONFIDENTIAL", "RESTRICTED", "restricted", "ＲＥＳＴＲＩＣＴＥＤ",
                          " Restricted.", "R.E.S.T.R.I.C.T.E.D", "RESTR1CTED"])  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(st.lists(LABELS, min_size=0, max_size=4), min_size=1, max_size=5), rebuild=st.booleans())
def test_restricted_pages_never_reach_the_embedder_or_the_index(tmp_path: Path, docs: list[list[str]], rebuild: bool) -> None:
    """Any labels on any pages, built once or twice (labels reversed the second time, as a
    re-ingest that raises or lowers them): the embedder is never given a RESTRICTED page's
    pixels, and neither the manifest nor a search ever holds one."""
    folder = tmp_path / f"v{abs(hash((str(docs), rebuild)))}"
    index = VisualIndex(folder, model_id=EMBEDDER.model_id, dim=EMBEDDER.dim)
    seen: list[int] = []

    class Spy:
        model_id, dim = EMBEDDER.model_id, EMBEDDER.dim

        def embed_pages(self, images: list[np.ndarray]) -> list[np.ndarray]:
            seen.extend(int(image[0, 0, 0]) for image in images)
            return EMBEDDER.embed_pages(images)

        def embed_queries(self, queries: list[str]) -> list[np.ndarray]:
            return EMBEDDER.embed_queries(queries)

    def build(labelled: list[list[str]]) -> dict[int, str]:
        marks: dict[int, str] = {}
        documents = []
        for d, labels in enumerate(labelled):
            pages = []
            for p, label in enumerate(labels):
                mark = len(marks)
                marks[mark] = label
                pages.append((PageRecord(f"d{d}.pdf", p + 1, label), lambda m=mark: np.full((20, 20, 3), m, np.uint8)))
            documents.append((f"d{d}.pdf", pages))
        index_pages(documents, Spy(), index, batch_size=3)
        return marks

    final = docs
    for labelled in [docs, [list(reversed(labels)) for labels in docs]][: 2 if rebuild else 1]:
        seen.clear()
        marks = build(labelled)
        assert sorted(seen) == sorted(m for m, label in marks.items() if not is_restricted(label))
        final = labelled
    manifest = json.loads((folder / MANIFEST).read_text("utf-8")) if (folder / MANIFEST).exists() else {"pages": []}
    assert not any(is_restricted(item["record"]["sensitivity"]) for item in manifest["pages"])
    want = {(f"d{d}.pdf", p + 1) for d, labels in enumerate(final) for p, label in enumerate(labels)
            if not is_restricted(label)}  # fmt: skip
    assert {(item["record"]["doc_id"], item["record"]["page"]) for item in manifest["pages"]} == want
    hits = index.search(EMBEDDER.embed_queries(["revenue chart"])[0], k=100)
    assert all(not is_restricted(index.record(key).sensitivity) for key, _ in hits)  # type: ignore[union-attr]


@pytest.mark.parametrize("block_rows", [1, 7, 1 << 18])
def test_scoring_in_blocks_and_gathered_rows_equal_maxsim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_rows: int) -> None:
    monkeypatch.setattr(index_module, "BLOCK_ROWS", block_rows)
    index = VisualIndex(tmp_path / "v", model_id="m", dim=16)
    pages = {f"d{d}.pdf#page=1": vectors(d, n=1 + d % 4) for d in range(30)}
    index.write([(record(k.split("#")[0], 1, entity="A" if i % 3 else "B"), v) for i, (k, v) in enumerate(pages.items())])
    query = vectors(5, n=3)
    assert [k for k, _ in index.search(query, k=30)] == [k for k, _ in brute(pages, query)]
    kept = {k: v for i, (k, v) in enumerate(pages.items()) if i % 3}  # not contiguous in the segment
    got = index.search(query, k=30, where=parse_filter({"entity": "A"}))
    assert [k for k, _ in got] == [k for k, _ in brute(kept, query)]
    assert np.allclose([s for _, s in got], [s for _, s in brute(kept, query)], atol=1e-4)


def test_a_filter_sees_each_page_s_own_record(tmp_path: Path) -> None:
    """Filters are evaluated once per group of pages with equal fields: pages of one document
    that differ (a label) are told apart, and `page` itself can be filtered on."""
    index = VisualIndex(None, model_id="m", dim=16)
    index.write([(record("a.pdf", p, label), vectors(p)) for p, label in ((1, "PUBLIC"), (2, "INTERNAL"), (3, "PUBLIC"))])
    query = vectors(0)
    assert sorted(k for k, _ in index.search(query, 9, parse_filter({"sensitivity": "PUBLIC"}))) == ["a.pdf#page=1", "a.pdf#page=3"]
    assert sorted(k for k, _ in index.search(query, 9, parse_filter({"page": {"gte": 2}}))) == ["a.pdf#page=2", "a.pdf#page=3"]


@pytest.mark.parametrize("k", [1, 2, 5, 30])
def test_accept_gives_the_k_best_accepted_pages(k: int) -> None:
    """Pages `accept` refuses take no place: the answer is the brute ranking without them, cut to k."""
    index = VisualIndex(None, model_id="m", dim=16)
    pages = {f"d{d}.pdf#page=1": vectors(d, n=2) for d in range(20)}
    index.write([(record(key.split("#")[0], 1), v) for key, v in pages.items()])
    query = vectors(3, n=3)
    refused = {key for key, _ in brute(pages, query)[:7]}  # the best pages are the refused ones
    got = index.search(query, k, accept=lambda r: r.key not in refused)
    assert [key for key, _ in got] == [key for key, _ in brute(pages, query) if key not in refused][:k]
