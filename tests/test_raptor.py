"""RAPTOR: deterministic clustering, a tree beside a real SQLite store, RESTRICTED never in a
cluster, a summary or a summary prompt, incremental updates keyed to data_version, the three
retrieval modes, `ask` citing member chunks (never a summary), settings, the CLI and /stats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import ragspine
from ragspine.answer import ask
from ragspine.assembly import build_retriever, load_settings
from ragspine.cli import main
from ragspine.retrieval.chunking.chunking import sentence_spans
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.raptor import (
    LLMSummarizer,
    RaptorConfig,
    RaptorRetriever,
    RaptorTree,
    make_raptor_retriever,
)
from ragspine.retrieval.raptor.cluster import update_clusters
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

THEMES = {
    "ex1": "Revenue fell because exports to Europe dropped. Export orders from Germany fell sharply.",
    "ex2": "Exports to Europe dropped in 2024. Revenue fell as export orders from France fell.",
    "ex3": "Export orders to Europe fell again. Revenue from exports dropped for the year.",
    "we1": "Sunny weather lifted tourism in the spring. Hotels were full in the warm weather.",
    "we2": "Warm sunny weather filled the hotels. Tourism grew in the spring weather.",
    "hi1": "The company hired engineers in Shenzhen. Hiring of software engineers doubled.",
    "hi2": "Engineers were hired in Shenzhen and Hangzhou. Software hiring grew fast.",
}
SECRET = {
    "memo": "Revenue fell because exports to Europe dropped: LAYOFFS of 300 staff are planned. Secret memo.",
    "memo2": "Sunny weather tourism hotels: the CEO BONUS plan is confidential.",
}
CONFIG = RaptorConfig(threshold=0.35, max_cluster=4, levels=3)


def _backend() -> DeterministicEmbeddingBackend:
    return DeterministicEmbeddingBackend(dim=128)


def _raptor(db: Path | str, mode: str = "collapsed", **kw: Any) -> tuple[RaptorRetriever, Any]:
    base, store = build_narrative_retriever(str(db), embedding_backend=_backend())
    return make_raptor_retriever(base, mode=mode, config=CONFIG, **kw), store


def _ingest(retriever: Any, docs: dict[str, str], label: str = "PUBLIC") -> None:
    for doc_id, text in docs.items():
        retriever.index.ingest(text, DocumentMeta(doc_id, title=doc_id.upper(), sensitivity=label))


@pytest.fixture
def built(tmp_path: Path) -> Any:
    raptor, store = _raptor(tmp_path / "chunks.db")
    _ingest(raptor, THEMES)
    _ingest(raptor, SECRET, label="RESTRICTED")
    raptor.build()
    yield raptor
    raptor.close()
    raptor.index.close()
    store.close()


# -- clustering -------------------------------------------------------------------------------
VECTORS = st.lists(st.lists(st.floats(-1, 1, allow_nan=False), min_size=4, max_size=4), min_size=0, max_size=30)


@settings(max_examples=100, deadline=None)
@given(rows=VECTORS, threshold=st.floats(-0.5, 1.0), max_size=st.integers(2, 6), cut=st.integers(0, 30))
def test_clustering_is_a_deterministic_partition_whatever_the_update_history(
    rows: list[list[float]], threshold: float, max_size: int, cut: int
) -> None:
    vectors = {f"m{i:02d}": np.array(r) + 1e-3 for i, r in enumerate(rows)}
    ids = sorted(vectors)

    def run() -> dict[str, list[str]]:
        counter = iter(range(10_000))
        clusters: dict[str, list[str]] = {}
        update_clusters(clusters, vectors, add=ids[:cut], threshold=threshold, max_size=max_size, new_id=lambda: f"k{next(counter)}")
        update_clusters(clusters, vectors, remove=ids[: cut // 2], add=ids[cut:] + ids[: cut // 2],
                        threshold=threshold, max_size=max_size, new_id=lambda: f"k{next(counter)}")  # fmt: skip
        return clusters

    clusters = run()
    members = [m for ms in clusters.values() for m in ms]
    assert sorted(members) == ids  # every member exactly once
    assert all(0 < len(ms) <= max_size for ms in clusters.values())
    assert run() == clusters


# -- the tree -----------------------------------------------------------------------------------
def test_the_tree_groups_themes_and_keeps_restricted_out(built: RaptorRetriever) -> None:
    nodes = list(built.tree.nodes.values())
    level1 = [n for n in nodes if n.level == 1]
    docs_by_node = [{leaf.doc_id for leaf in n.leaves} for n in level1]
    assert {"ex1", "ex2", "ex3"} in docs_by_node or any({"ex1", "ex2"} <= d for d in docs_by_node)
    assert all(not d & {"memo", "memo2"} for d in docs_by_node)
    texts = {c.chunk_id: c.text for c in built.index.store.iter_chunks()}
    for node in nodes:
        assert "LAYOFFS" not in node.summary and "BONUS" not in node.summary
        assert all(leaf.sensitivity == "PUBLIC" for leaf in node.leaves)
        if node.level == 1:  # extractive: whole member sentences, verbatim
            sentences = {texts[m][s:e] for m in node.members for s, e in sentence_spans(texts[m])}
            assert set(node.summary.split("\n")) <= sentences
            assert set(node.sources) <= set(node.members)
    assert Path(str(built.tree.path)).exists() and str(built.tree.path).endswith("chunks.db.raptor.sqlite")


def test_the_tree_is_stored_and_read_back(built: RaptorRetriever) -> None:
    again = RaptorTree(built.tree.path)
    try:
        assert {k: (n.summary, n.members, n.leaves) for k, n in again.nodes.items()} == {
            k: (n.summary, n.members, n.leaves) for k, n in built.tree.nodes.items()
        }
        assert again.data_version == built.index.store.data_version() and again.clusters == built.tree.clusters
        assert again.languages == built.tree.languages and len(again.languages) == built.tree.meta["leaves"]
    finally:
        again.close()


def test_an_update_touches_only_the_clusters_a_change_reaches(built: RaptorRetriever) -> None:
    before = {k: (n.summary, n.members) for k, n in built.tree.nodes.items()}
    hiring = {k for k, n in built.tree.nodes.items() if n.level == 1 and {l.doc_id for l in n.leaves} & {"hi1", "hi2"}}
    built.index.ingest("Engineers were hired in Shenzhen and Wuhan. Software hiring grew fast.", DocumentMeta("hi2"))
    assert built.status()["stale"]
    snippets = built.retrieve("engineers hired", top_k=5)
    assert not any(s.get("is_synthesis") for s in snippets) and "stale" in snippets[0]["lineage"]["raptor"]
    report = built.build()
    assert not report.full and report.data_version == built.index.store.data_version() and not built.status()["stale"]
    changed = {k for k in before.keys() | built.tree.nodes.keys()
               if before.get(k) != ((built.tree.nodes[k].summary, built.tree.nodes[k].members) if k in built.tree.nodes else None)}  # fmt: skip
    level1_changed = {k for k in changed if k.startswith("raptor:1:")}
    assert level1_changed and level1_changed <= hiring | {k for k in built.tree.nodes if k not in before}
    assert any(k.startswith("raptor:1:") and k not in changed for k in before)  # the other themes untouched
    visible = {c.chunk_id for c in built.index.store.iter_chunks() if c.sensitivity != "RESTRICTED"}
    assert set(built.tree.languages) == visible  # the replaced chunk's language left with it
    assert RaptorTree(built.tree.path).languages == built.tree.languages
    full = built.build(full=True)
    assert full.full and full.summarised >= report.summarised


def test_a_document_relabelled_restricted_leaves_the_tree(built: RaptorRetriever) -> None:
    built.index.ingest(THEMES["ex1"], DocumentMeta("ex1", title="EX1", sensitivity="restricted"))
    built.build()
    assert all(leaf.doc_id != "ex1" for n in built.tree.nodes.values() for leaf in n.leaves)
    for snippet in built.retrieve("exports Europe revenue", top_k=10):
        assert snippet["doc_id"] != "ex1" and "ex1" not in snippet.get("lineage", {}).get("doc_ids", [])
        assert all(m["doc_id"] != "ex1" for m in snippet.get("members", []))


# -- retrieval modes and ask ----------------------------------------------------------------------
def test_modes_leaves_nodes_collapsed(built: RaptorRetriever) -> None:
    query = "exports to Europe and revenue"
    built.mode = "leaves"
    leaves = built.retrieve(query, top_k=6)
    built.mode = "nodes"
    nodes = built.retrieve(query, top_k=3)
    built.mode = "collapsed"
    collapsed = built.retrieve(query, top_k=6)
    assert leaves and not any(s.get("is_synthesis") for s in leaves)
    assert nodes and all(s["is_synthesis"] and s["citable"] is False for s in nodes)
    assert {"ex1", "ex2", "ex3"} & set(nodes[0]["lineage"]["doc_ids"])  # the theme's node comes first
    assert {s.get("is_synthesis", False) for s in collapsed} == {True, False}
    for s in [*leaves, *nodes, *collapsed]:
        assert "LAYOFFS" not in s["text"] and "BONUS" not in s["text"] and s["sensitivity"] != "RESTRICTED"
    filtered = built.retrieve(query, top_k=6, where={"doc_id": "ex1"})
    assert filtered and not any(s.get("is_synthesis") for s in filtered) and "filter" in filtered[0]["lineage"]["raptor"]


class SpyProvider:
    """Stands in for an LLM endpoint (a user never runs it): records prompts, answers citing [1]."""

    def __init__(self, reply: str = "Exports to Europe fell [1].", fail: bool = False) -> None:
        self.prompts: list[str] = []
        self.reply, self.fail = reply, fail

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        self.prompts.append("\n".join(m["content"] for m in messages))
        if self.fail:
            raise RuntimeError("endpoint down")
        return self.reply


def test_ask_cites_member_chunks_never_the_summary(built: RaptorRetriever) -> None:
    built.mode = "nodes"
    provider = SpyProvider()
    answer = ask(built, "what happened to exports to Europe?", provider=provider, top_k=2)
    assert answer.citations and all(not c.get("is_synthesis") and c["doc_id"] and c["source_locator"] for c in answer.citations)
    node_text = built.retrieve("what happened to exports to Europe?", top_k=1)[0]["text"]
    assert all(c["text"] != node_text for c in answer.citations)
    assert "Overview (a synthesis" in provider.prompts[0] and "LAYOFFS" not in provider.prompts[0]
    extractive = ask(built, "what happened to exports to Europe?", top_k=2)
    assert extractive.citations and all(c.get("via", "").startswith("raptor:") for c in extractive.citations)


def test_llm_summaries_never_see_restricted_text_and_fall_back_when_the_llm_fails(tmp_path: Path) -> None:
    provider = SpyProvider(reply="Exports to Europe fell; revenue dropped.")
    raptor, store = _raptor(tmp_path / "a.db", provider=provider)
    failing, store_b = _raptor(tmp_path / "b.db", provider=SpyProvider(fail=True))
    try:
        for r in (raptor, failing):
            _ingest(r, THEMES)
            _ingest(r, SECRET, label="RESTRICTED")
            r.build()
        assert provider.prompts and not any("LAYOFFS" in p or "BONUS" in p for p in provider.prompts)
        assert {n.summarizer for n in raptor.tree.nodes.values()} == {"llm"}
        assert {n.summarizer for n in failing.tree.nodes.values()} == {"extractive (llm failed: RuntimeError)"}
    finally:
        for r, s in ((raptor, store), (failing, store_b)):
            r.close(); r.index.close(); s.close()  # fmt: skip
    with pytest.raises(ValueError, match="RESTRICTED chunks must never be summarised"):
        from ragspine.retrieval.model import Chunk

        LLMSummarizer(provider).summarize([Chunk("x", "d", 0, "secret", "d#1", sensitivity="RESTRICTED")])


# -- settings, CLI, /stats ------------------------------------------------------------------------
def test_raptor_needs_the_dense_channel() -> None:
    with pytest.raises(ValueError, match="RAPTOR clusters chunk vectors"):
        build_retriever(load_settings({"RAGSPINE_DB": ":memory:", "RAGSPINE_RETRIEVAL_MODE": "bm25", "RAGSPINE_RAPTOR": "on"}))


def test_settings_cli_and_stats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RAPTOR": "on", "RAGSPINE_RAPTOR_THRESHOLD": "0.3",
           "RAGSPINE_RAPTOR_MAX_CLUSTER": "4", "RAGSPINE_RAPTOR_MODE": "nodes"}  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    db = tmp_path / "ws" / "chunks.db"
    with ragspine.open(tmp_path / "ws") as ws:
        for doc_id, text in THEMES.items():
            ws.ingest(text, doc_id=doc_id)
        assert isinstance(ws.retriever, RaptorRetriever) and ws.retriever.config.threshold == 0.3
        assert ws.stats()["raptor"]["built"] is False
    runner = CliRunner()
    out = runner.invoke(main, ["raptor", "build", "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert "built RAPTOR tree" in out.output and "level 1" in out.output
    status = json.loads(runner.invoke(main, ["raptor", "status", "--db", str(db), "--json"]).output)
    assert status["built"] and not status["stale"] and status["nodes"]["1"] >= 2 and status["bytes"] > 0
    again = runner.invoke(main, ["raptor", "build", "--db", str(db)])
    assert "updated RAPTOR tree" in again.output and "0 summarised" in again.output
    with ragspine.open(tmp_path / "ws") as ws:
        stats = ws.stats()
        assert stats["raptor"]["built"] and stats["channels"]["raptor"] == "on (nodes)"
        assert all(s["is_synthesis"] for s in ws.search("exports Europe"))
    assert runner.invoke(main, ["raptor", "--help"]).exit_code == 0


def test_vectors_are_centred_per_language_from_enough_leaves(tmp_path: Path) -> None:
    from ragspine.retrieval.raptor.build import centre, language_centres
    from ragspine.retrieval.vector.dense.channel import language_code

    texts = ["revenue fell sharply"] * 15 + ["营收大幅下滑"] * 5
    rows = np.eye(20) + 1.0
    codes = np.array([language_code(t) for t in texts])
    centres = language_centres(codes, rows)
    en, zh = str(language_code(texts[0])), str(language_code(texts[-1]))
    assert set(centres) == {"-1", en} and zh not in centres  # too few Chinese chunks: the overall mean
    assert language_centres(codes[:19], rows[:19]) == {}
    moved = centre(rows[0], texts[0], {int(k): np.asarray(v) for k, v in centres.items()})
    assert abs(np.linalg.norm(moved) - 1.0) < 1e-9
    assert np.allclose(moved, (rows[0] - centres[en]) / np.linalg.norm(rows[0] - centres[en]))

    raptor, store = _raptor(tmp_path / "many.db")
    try:
        for copy in range(3):
            _ingest(raptor, {f"{k}-{copy}": v for k, v in THEMES.items()})
        raptor.build()
        assert raptor.tree.meta["centres"] and raptor.tree.nodes
        raptor.mode = "nodes"
        (top,) = raptor.retrieve("software engineers hired in Shenzhen", top_k=1)
        assert {d.split("-")[0] for d in top["lineage"]["doc_ids"]} <= {"hi1", "hi2"}
    finally:
        raptor.close(); raptor.index.close(); store.close()  # fmt: skip


# -- thematic questions on a Chinese + English corpus written for the project ---------------------
THEMED = json.loads((Path(__file__).parent / "fixtures" / "raptor" / "themes.json").read_text("utf-8"))
# The token-hashing test backend gives lower centred cosines than a semantic model (same-theme
# documents of one language share only some words), hence a lower threshold than the default.
THEMED_CONFIG = RaptorConfig(threshold=0.2)


def _themed(db: Path | str, mode: str = "nodes") -> tuple[RaptorRetriever, Any]:
    base, store = build_narrative_retriever(str(db), embedding_backend=_backend(), query_rewriter=None)
    for doc in THEMED["documents"]:
        base.index.ingest(doc["text"], DocumentMeta(doc["id"], title=doc["id"], sensitivity="PUBLIC"))
    for doc in THEMED["restricted"]:
        base.index.ingest(doc["text"], DocumentMeta(doc["id"], title=doc["id"], sensitivity="RESTRICTED"))
    raptor = make_raptor_retriever(base, mode=mode, config=THEMED_CONFIG)
    raptor.build()
    return raptor, store


def test_thematic_questions_get_a_node_of_their_theme_in_both_languages(tmp_path: Path) -> None:
    raptor, store = _themed(tmp_path / "themes.db")
    markers = [doc["marker"] for doc in THEMED["restricted"]]
    try:
        themes = {doc["theme"] for doc in THEMED["documents"]}
        node_docs = [{leaf.doc_id for leaf in n.leaves} for n in raptor.tree.nodes.values()]
        assert all(len({d.split("-")[0] for d in docs}) == 1 for docs in node_docs)  # no node mixes themes
        assert {next(iter(docs)).split("-")[0] for docs in node_docs} == themes  # every theme has a node
        for theme, questions in THEMED["questions"].items():
            for question in questions:
                language = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in question) else "en"
                raptor.mode = "nodes"
                top = raptor.retrieve(question, top_k=3)
                docs = top[0]["lineage"]["doc_ids"]
                assert {d.split("-")[0] for d in docs} == {theme}, (question, docs)  # the right documents only
                assert len(docs) >= 2 and all(f"-{language}-" in d for d in docs)  # a group, in the question's language
                assert {m["doc_id"] for m in top[0]["members"]} <= set(docs) and top[0]["members"]
                raptor.mode = "collapsed"
                collapsed = raptor.retrieve(question, top_k=6)
                assert any(s.get("is_synthesis") and s["chunk_id"] == top[0]["chunk_id"] for s in collapsed)
                for s in [*top, *collapsed]:
                    shown = [s["text"], *(m["text"] for m in s.get("members", []))]
                    assert not any(marker in text for marker in markers for text in shown)
                    assert not any(d.endswith("-secret") for d in [s["doc_id"], *s.get("lineage", {}).get("doc_ids", [])])
    finally:
        raptor.close(); raptor.index.close(); store.close()  # fmt: skip


def test_the_query_is_embedded_once_and_members_come_from_the_ranked_chunks(tmp_path: Path) -> None:
    class Counting(DeterministicEmbeddingBackend):
        """The test backend, counting query embeddings."""

        def __init__(self) -> None:
            super().__init__(dim=128)
            self.queries: list[str] = []

        def embed_queries(self, texts: list[str]) -> list[list[float]]:
            self.queries += texts
            return super().embed_queries(texts)

    backend = Counting()
    base, store = build_narrative_retriever(str(tmp_path / "c.db"), embedding_backend=backend, query_rewriter=None)
    raptor = make_raptor_retriever(base, mode="collapsed", config=CONFIG)
    try:
        _ingest(raptor, THEMES)
        raptor.build()
        backend.queries.clear()
        snippets = raptor.retrieve("exports to Europe and revenue", top_k=6)
        assert any(s.get("is_synthesis") for s in snippets)
        assert backend.queries == ["exports to Europe and revenue"]  # the dense channel's vector is reused
        node = next(s for s in snippets if s.get("is_synthesis"))
        assert node["members"] and all(m["chunk_id"] in node["lineage"]["chunk_ids"] for m in node["members"])
        base.index.withdraw("ex2")  # a member gone from the store is gone from the node's members
        raptor.build()
        again = [s for s in raptor.retrieve("exports to Europe and revenue", top_k=6) if s.get("is_synthesis")]
        assert again and all(m["doc_id"] != "ex2" for s in again for m in s["members"])
    finally:
        raptor.close(); raptor.index.close(); store.close()  # fmt: skip


def test_a_filter_read_from_the_query_also_keeps_the_nodes_out(tmp_path: Path) -> None:
    from ragspine.retrieval.query.filter_extraction import RuleFilterExtractor
    from ragspine.retrieval.query.glossary import Glossary

    base, store = build_narrative_retriever(str(tmp_path / "f.db"), embedding_backend=_backend(), query_rewriter=None,
                                            filter_extractor=RuleFilterExtractor(Glossary.from_dict({})))  # fmt: skip
    raptor = make_raptor_retriever(base, mode="collapsed", config=CONFIG)
    try:
        for doc_id, text in THEMES.items():
            base.index.ingest(text, DocumentMeta(doc_id, title=doc_id, period="2024" if doc_id == "ex1" else "2023"))
        raptor.build()
        assert any(s.get("is_synthesis") for s in raptor.retrieve("exports to Europe and revenue", top_k=6))
        narrowed = raptor.retrieve("exports to Europe and revenue in 2024", top_k=6)
        assert [s["doc_id"] for s in narrowed] == ["ex1"]  # the year narrowed the leaves, and nothing widens them
        assert "filter" in narrowed[0]["lineage"]["raptor"]
    finally:
        raptor.close(); raptor.index.close(); store.close()  # fmt: skip


# -- property: whatever is RESTRICTED, no summary, prompt, node, member or citation carries it -------
LABELS = st.sampled_from(["PUBLIC", "INTERNAL", "RESTRICTED", " restricted ", "Restricted"])


@settings(max_examples=25, deadline=None)
@given(labels=st.lists(LABELS, min_size=len(THEMES), max_size=len(THEMES)), relabel=st.integers(0, len(THEMES) - 1),
       llm=st.booleans(), mode=st.sampled_from(["nodes", "collapsed"]))  # fmt: skip
def test_restricted_text_never_reaches_a_summary_and_summaries_are_never_cited(
    labels: list[str], relabel: int, llm: bool, mode: str
) -> None:
    marked = {doc_id: f"{text} Marker zq{doc_id}x." for doc_id, text in THEMES.items()}
    provider = SpyProvider(reply="A synthesis of the passages [1].")
    raptor, store = _raptor(":memory:", mode=mode, provider=provider if llm else None)
    try:
        for (doc_id, text), label in zip(marked.items(), labels, strict=True):
            raptor.index.ingest(text, DocumentMeta(doc_id, title=doc_id, sensitivity=label))
        raptor.build()
        first = {d for d, label in zip(marked, labels, strict=True) if label.strip().upper() == "RESTRICTED"}
        assert not any(f"zq{d}x" in prompt for d in first for prompt in provider.prompts)
        provider.prompts.clear()
        doc_id = list(marked)[relabel]  # one document changes label after the build; the update follows
        raptor.index.ingest(marked[doc_id], DocumentMeta(doc_id, title=doc_id, sensitivity="RESTRICTED"))
        raptor.build()
        secret = first | {doc_id}
        tokens = [f"zq{d}x" for d in secret]
        for node in raptor.tree.nodes.values():
            assert not any(t in node.summary for t in tokens)
            assert not {leaf.doc_id for leaf in node.leaves} & secret
        assert not any(t in prompt for t in tokens for prompt in provider.prompts)
        query = "exports Europe revenue weather hired engineers"
        for s in raptor.retrieve(query, top_k=8):
            shown = [s["text"], *(m["text"] for m in s.get("members", []))]
            assert not any(t in text for t in tokens for text in shown)
            assert s["doc_id"] not in secret and not set(s.get("lineage", {}).get("doc_ids", [])) & secret
        answer = ask(raptor, query, top_k=4)
        summaries = {n.summary for n in raptor.tree.nodes.values()}
        for c in answer.citations:
            assert not c.get("is_synthesis") and c["doc_id"] and c["doc_id"] not in secret
            assert c["text"] not in summaries or c["text"] == marked.get(c["doc_id"])  # a chunk, not a summary
        assert not any(t in answer.text for t in tokens)
    finally:
        raptor.close(); raptor.index.close(); store.close()  # fmt: skip
