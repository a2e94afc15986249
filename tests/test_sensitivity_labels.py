"""Sensitivity labels: one normaliser at write time and at every exit; one ingest path.

A RESTRICTED chunk, whatever the spelling of its label (case, full-width forms, surrounding
whitespace including the ideographic space U+3000), never comes back from any exit: the link
(`NarrativeIndexRetriever.retrieve`), multi-library search, `Workspace.search` / `ask` /
`chunks`, the HTTP API (/search, /ask, /chunks on a real uvicorn server), and listwise rerank
never gives it to the judge. An unknown label fails ingest and writes nothing; `ragspine ingest`
and `Workspace.ingest_bytes` store the same chunks for the same file and metadata.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragspine
from ragspine.cli import main
from ragspine.retrieval.link.multi_index import KeywordRouter, LibraryIndex, MultiIndexRetriever
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.rerank.listwise_rerank import listwise_rerank
from ragspine.retrieval.sensitivity import (
    DEFAULT_LEVELS,
    UnknownSensitivityError,
    check_label,
    is_restricted,
    normalize_label,
)
from ragspine.retrieval.store.sqlite import TABLE, ChunkStore
from ragspine.retrieval.types import RetrievalResult
from ragspine.search_libraries import LibrarySpec, search_libraries
from ragspine.service import running_server
from ragspine.settings.config import load_settings
from ragspine.workspace import Workspace

sys.path.insert(0, str(Path(__file__).parent / "service"))
from service_helpers import API_KEY, AUTH, BM25_ENV, SPEC_CHUNKING, doc  # noqa: E402
from test_link import RecordingProvider  # noqa: E402

# Around a label: whitespace a YAML/JSON/form value can carry, the ideographic space, and
# default-ignorable format characters (zero-width space, BOM) that NFKC_Casefold drops.
_AROUND = (" ", "\t", "\n", "\u3000", "\u00a0", "\u200b", "\ufeff")
LEVELS_MESSAGE = "PUBLIC, INTERNAL, CONFIDENTIAL, RESTRICTED"


def _letter(letter: str, form: int) -> str:
    """`letter` upper, lower, full-width upper or full-width lower (forms 0-3)."""
    upper, lower = letter.upper(), letter.lower()
    return (upper, lower, chr(ord(upper) - 0x41 + 0xFF21), chr(ord(lower) - 0x61 + 0xFF41))[form]


def spellings(word: str = "RESTRICTED") -> st.SearchStrategy[str]:
    """Spellings of `word`: each letter in any case and width, whitespace on either side."""
    forms = st.lists(st.integers(0, 3), min_size=len(word), max_size=len(word))
    around = st.text(alphabet=st.sampled_from(_AROUND), max_size=3)
    return st.builds(
        lambda f, before, after: before + "".join(map(_letter, word, f)) + after, forms, around, around
    )


# -- the normaliser ------------------------------------------------------------------------------
@given(label=spellings())
def test_every_spelling_of_restricted_is_restricted(label: str) -> None:
    assert normalize_label(label) == "RESTRICTED"
    assert is_restricted(label) and check_label(label) == "RESTRICTED"


@given(label=st.sampled_from(["PUBLIC", "INTERNAL", "CONFIDENTIAL"]).flatmap(spellings))
def test_the_other_levels_normalise_and_are_not_restricted(label: str) -> None:
    assert check_label(label) in DEFAULT_LEVELS[:3]
    assert not is_restricted(label)


@given(label=st.text())
def test_normalising_is_idempotent_and_decides_restricted(label: str) -> None:
    once = normalize_label(label)
    assert normalize_label(once) == once
    assert is_restricted(label) == (once == "RESTRICTED")


@pytest.mark.parametrize("label", ["SECRETISH", "RESTRICTEDX", "UNRESTRICTED", "", "None"])
def test_a_label_that_is_not_a_level_is_refused_by_name(label: str) -> None:
    assert not is_restricted(label)
    with pytest.raises(UnknownSensitivityError) as info:
        check_label(label, source="the front matter of 'memo.md'")
    message = str(info.value)
    assert repr(label) in message and LEVELS_MESSAGE in message and "front matter of 'memo.md'" in message
    assert check_label(" open ", ["open", "SECRET"]) == "OPEN"  # a rule file's own levels


# -- exit #1 on un-normalised labels (the in-memory spec path never goes through a store) --------
_LABELLED = st.one_of(
    spellings().map(lambda label: (label, True)), st.sampled_from([("PUBLIC", False), (" internal ", False)])
)


@given(labelled=st.lists(_LABELLED, min_size=1, max_size=8))
def test_listwise_rerank_never_shows_a_restricted_candidate_to_the_judge(labelled: list[tuple[str, bool]]) -> None:
    labels = [label for label, _ in labelled]
    results = [
        RetrievalResult(Chunk(f"c{i}", f"d{i}", 0, f"text {i}", f"d{i}#p1@0-6", sensitivity=label), 0.0, None,
                        1.0 / (i + 1))
        for i, label in enumerate(labels)
    ]  # fmt: skip
    shown: list[str] = []

    class Judge:
        def judge(self, query: str, candidates: list[str]) -> list[int]:
            shown.extend(candidates)
            return list(reversed(range(len(candidates))))

    reranked = listwise_rerank("q", results, Judge())
    restricted = [i for i, (_, secret) in enumerate(labelled) if secret]
    assert not {f"text {i}" for i in restricted} & set(shown)
    assert [reranked[i].chunk.chunk_id for i in restricted] == [f"c{i}" for i in restricted], "kept in place"
    if len(labels) - len(restricted) >= 2:
        assert shown, "the judge ran on the open candidates"


# -- write time ----------------------------------------------------------------------------------
@given(label=spellings())
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_store_writes_every_label_normalised(store: ChunkStore, label: str) -> None:
    store.replace_doc_chunks("d", [Chunk("d:0", "d", 0, "text", "d#p1@0-4", sensitivity=label)])
    assert store.execute_read(f"SELECT DISTINCT sensitivity FROM {TABLE} WHERE active = 1") == [("RESTRICTED",)]


FILES = {
    "memo.md": "---\nsensitivity: ＲＥＳＴＲＩＣＴＥＤ\nowner: legal\n---\n# Memo\n\nLayoffs are planned.\n",
    "notes.md": "---\nentity: BOREALIS\nsensitivity: confidential\n---\nRevenue fell.\n\nMargins held.\n",
    "plain.txt": "Margins recovered in the fourth quarter.\n",
}


def _stored(db: Path) -> list[dict[str, Any]]:
    """Every active chunk, without what differs per write (time, version)."""
    with ChunkStore(db) as store:
        rows = [asdict(c) for c in store.iter_chunks()]
    for row in rows:
        del row["ingested_at"], row["version"]
    return sorted(rows, key=lambda r: r["chunk_id"])


def test_ragspine_ingest_and_ingest_bytes_store_the_same_chunks(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, "utf-8")
    cli_db, ws_db = tmp_path / "cli.db", tmp_path / "ws.db"
    flags = ["--sensitivity", " public ", "--entity", "ACME", "--period", "2024"]
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", str(cli_db), *flags])
    assert result.exit_code == 0, result.output
    with ragspine.open(ws_db, env=BM25_ENV) as ws:
        for name in FILES:
            ws.ingest_bytes(name, (folder / name).read_bytes(), sensitivity=" public ", entity="ACME", period="2024")
    cli, through_ws = _stored(cli_db), _stored(ws_db)
    assert cli == through_ws
    labels = {row["doc_id"]: row["sensitivity"] for row in cli}
    assert labels == {"memo.md": "RESTRICTED", "notes.md": "CONFIDENTIAL", "plain.txt": "PUBLIC"}
    assert {row["doc_id"]: row["entity"] for row in cli} == {"memo.md": "ACME", "notes.md": "BOREALIS",
                                                             "plain.txt": "ACME"}  # fmt: skip
    assert all({k: v for k, v in row["metadata"].items() if k not in ("chunker", "chunker_reason")} == {"owner": "legal"}
               for row in cli if row["doc_id"] == "memo.md")  # auto records its choice and why


def test_a_full_width_front_matter_label_is_restricted_everywhere(tmp_path: Path) -> None:
    memo = FILES["memo.md"].replace("Layoffs are planned.", "Layoffs are planned, secretcodeword.")
    with ragspine.open(tmp_path / "ws", env=BM25_ENV) as ws:
        ws.ingest_bytes("memo.md", memo.encode())
        ws.ingest("Layoffs are not planned this year.", doc_id="open", sensitivity="PUBLIC")
        stored = ws.store.execute_read(f"SELECT DISTINCT sensitivity FROM {TABLE} WHERE doc_id = 'memo.md'")
        assert stored == [("RESTRICTED",)]
        assert "memo.md" in {r.chunk.doc_id for r in ws.retriever.index.retrieve("layoffs planned", include_restricted=True)}
        assert [s["doc_id"] for s in ws.search("layoffs planned")] == ["open"]
        assert "secretcodeword" not in json.dumps(ws.ask("layoffs planned").to_dict()) and not ws.chunks("memo.md")


# -- unknown labels ------------------------------------------------------------------------------
def test_an_unknown_label_fails_ingest_and_writes_nothing(tmp_path: Path) -> None:
    memo = tmp_path / "memo.md"
    memo.write_text("---\nsensitivity: SECRETISH\n---\nRevenue memo.\n", "utf-8")
    db = tmp_path / "cli.db"
    result = CliRunner().invoke(main, ["ingest", str(memo), "--db", str(db)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "'SECRETISH'" in result.stderr and LEVELS_MESSAGE in result.stderr and "front matter" in result.stderr
    assert _stored(db) == []
    result = CliRunner().invoke(main, ["ingest", str(memo), "--db", str(db), "--sensitivity", "TOPSECRET"])
    assert result.exit_code == 1 and "'TOPSECRET'" in result.stderr and "--sensitivity" in result.stderr
    with ragspine.open(tmp_path / "ws", env=BM25_ENV) as ws:
        ws.ingest("The first version.", doc_id="memo.md", sensitivity="PUBLIC")
        with pytest.raises(UnknownSensitivityError, match="'SECRETISH'.*front matter of 'memo.md'"):
            ws.ingest(memo)
        with pytest.raises(UnknownSensitivityError, match="'SECRETISH'.*sensitivity argument for 'other'"):
            ws.ingest("Another text.", doc_id="other", sensitivity="SECRETISH")
        with pytest.raises(UnknownSensitivityError, match=LEVELS_MESSAGE):
            ws.ingest_bytes("plain.txt", b"Plain text.", sensitivity="SECRETISH")
        assert [c["text"] for c in ws.chunks("memo.md")] == ["The first version."]
        assert ws.stats()["documents"] == 1


# -- every exit, over generated spellings --------------------------------------------------------
PUBLIC_DOCS = {
    "acme.txt": "Revenue fell because export orders dropped.",
    "borealis.txt": "Revenue fell after the product recall.",
}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Workspace, RecordingProvider, httpx.Client]]:
    """A workspace whose LLM (judge and `ask`) is `RecordingProvider` from test_link, a test-only
    stand-in that records prompts (no user runs it), served by the real uvicorn server."""
    provider = RecordingProvider()
    config = load_settings(BM25_ENV, flags={"RAGSPINE_DB": str(tmp_path / "chunks.db"), "RAGSPINE_API_KEYS": API_KEY})
    retriever, store = build_narrative_retriever(config.db, provider)
    with Workspace(config, retriever, store, provider) as ws:
        for doc_id, text in PUBLIC_DOCS.items():
            ws.ingest(text, doc_id=doc_id, sensitivity="PUBLIC")
        with running_server(ws) as url, httpx.Client(base_url=url, headers=AUTH, timeout=30) as client:
            yield ws, provider, client


def _ingest_restricted(ws: Workspace, client: httpx.Client, via: str, doc_id: str, text: str, label: str) -> None:
    if via == "text":
        ws.ingest(text, doc_id=doc_id, sensitivity=label)
    elif via == "file":  # front matter (the label as a YAML double-quoted scalar: JSON escapes)
        ws.ingest_bytes(doc_id, f"---\nsensitivity: {json.dumps(label)}\n---\n{text}\n".encode())
    elif via == "http":
        assert client.post("/documents", json=doc(doc_id, text, sensitivity=label)).status_code == 201
    elif via == "upload":  # HTTP upload, the label as a form field
        files = {"file": (doc_id, text.encode())}
        assert client.post("/documents/upload", files=files, data={"sensitivity": label}).status_code == 201
    else:  # a row as a version before write-time normalisation stored it: only the exits guard it
        ws.store.replace_doc_chunks(doc_id, [Chunk(f"{doc_id}:0", doc_id, 0, text, f"{doc_id}#p1@0-{len(text)}")])
        with closing(sqlite3.connect(ws.store.db_path)) as conn, conn:
            conn.execute(f"UPDATE {TABLE} SET sensitivity = ? WHERE doc_id = ?", (label, doc_id))


def test_a_restricted_chunk_never_leaves_any_exit(served: tuple[Workspace, RecordingProvider, httpx.Client]) -> None:
    ws, provider, client = served
    libraries = [LibraryIndex("reports", "revenue reports", ws.retriever)]
    multi = MultiIndexRetriever(libraries, KeywordRouter(libraries))
    numbers = itertools.count()

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(label=spellings(), via=st.sampled_from(["text", "file", "http", "upload", "legacy"]))
    def check(label: str, via: str) -> None:
        n = next(numbers)
        # `match` makes this chunk (and no earlier one) a raw match of the query; `secret` is in its
        # text only, never in the query (which `ask` echoes and prompts quote).
        match, secret, doc_id = f"zebra{n}q", f"secretcode{n}x", f"memo{n}.md"
        text = f"Memo {match}: layoffs are planned, {secret}."
        _ingest_restricted(ws, client, via, doc_id, text, label)
        stored = ws.store.execute_read(f"SELECT DISTINCT sensitivity FROM {TABLE} WHERE doc_id = ?", (doc_id,))
        assert stored == [(label if via == "legacy" else "RESTRICTED",)]
        query = f"why revenue fell {match}"
        raw = ws.retriever.index.retrieve(query, top_k=10, include_restricted=True)
        assert doc_id in {r.chunk.doc_id for r in raw}, "the RESTRICTED chunk is a real match before the exits"
        before = len(provider.prompts)
        outputs = {
            "link": ws.retriever.retrieve(query, top_k=10),
            "multi": multi.retrieve(query, top_k=10),
            "search": ws.search(query),
            "ask": ws.ask(query).to_dict(),
            "chunks": ws.chunks(doc_id),
            "http search": client.post("/search", json={"query": query}).json(),
            "http ask": client.post("/ask", json={"question": query}).json(),
            "http chunks": client.get(f"/documents/{doc_id}/chunks").json(),
        }
        for exit_name, output in outputs.items():
            assert secret not in json.dumps(output, ensure_ascii=False), exit_name
        assert {s["doc_id"] for s in outputs["search"]} == set(PUBLIC_DOCS), "the open chunks still come back"
        prompts = provider.prompts[before:]
        assert any("Rank the passages" in p for p in prompts), "the judge ran"
        assert any("Question:" in p for p in prompts), "ask reached the LLM"
        assert all(secret not in p for p in prompts), "nothing RESTRICTED reached a prompt"

    check()
    bad = client.post("/documents", json=doc("bad", "Text.", sensitivity="SECRETISH"))
    assert bad.status_code == 400 and "SECRETISH" in bad.json()["message"]
    upload = client.post("/documents/upload", files={"file": ("bad.md", b"---\nsensitivity: SECRETISH\n---\nText.")})
    assert upload.status_code == 400 and LEVELS_MESSAGE in upload.json()["message"]
    assert ws.stats()["documents"] == len(PUBLIC_DOCS) + 30


# -- labels an older version stored un-normalised --------------------------------------------------
# Spellings of RESTRICTED an attacker or a careless user might write (issue 14 #5 tried 17).
CONFUSABLE = [
    "restricted", "ＲＥＳＴＲＩＣＴＥＤ", " Restricted\u3000", "ｒｅｓｔｒｉｃｔｅｄ", "\tRESTRICTED\n",
    "\ufeffRESTRICTED",  # a leading BOM
    "RE\u200bSTRICTED",  # zero-width space
    "RES\u00adTRICTED",  # soft hyphen
    "RESTRICTED\x00",  # NUL
    "R\u0415STRICTED",  # Cyrillic capital IE
    "RESTR\u0130CTED",  # Turkish capital I with dot
    "R\u0395STRICTED",  # Greek capital epsilon
    "RESTRICTED.", '"RESTRICTED"', "RESTRICTED!",  # punctuation around
    "RE STRICTED", "R.E.S.T.R.I.C.T.E.D", "RESTR1CTED",  # spaced, dotted, a look-alike digit
    "ʀᴇꜱᴛʀɪᴄᴛᴇᴅ",  # small capitals
    "RESTRICTED\u202e", "re\u0301stricted", "\u00a0restricted\u2060",  # bidi control, accent, joiners
]
LEGACY = CONFUSABLE


def test_labels_an_older_version_stored_are_still_restricted_at_every_exit(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    with ChunkStore(db) as store:
        store.init_schema()
        for doc_id, text in PUBLIC_DOCS.items():
            store.replace_doc_chunks(doc_id, [Chunk(f"{doc_id}:0", doc_id, 0, text, f"{doc_id}#p1@0-9")])
        for n in range(len(LEGACY)):
            text = f"Revenue fell: legacycode{n} layoffs, secretcode{n}x."
            store.replace_doc_chunks(f"old{n}", [Chunk(f"old{n}:0", f"old{n}", 0, text, f"old{n}#p1@0-9")])
    with sqlite3.connect(db) as conn:  # what a store written before write-time normalisation holds
        for n, label in enumerate(LEGACY):
            conn.execute(f"UPDATE {TABLE} SET sensitivity = ? WHERE doc_id = ?", (label, f"old{n}"))
    with ragspine.open(db, env={**BM25_ENV, **SPEC_CHUNKING}) as ws:  # the legacy store's chunking
        raw = {r.chunk.sensitivity for r in ws.retriever.index.retrieve("revenue fell legacycode0 legacycode1", include_restricted=True)}
        assert set(LEGACY[:2]) <= raw, "the legacy spellings are really stored and matched"
        stored = {row[0] for row in ws.store.execute_read(f"SELECT DISTINCT sensitivity FROM {TABLE}")}
        assert set(LEGACY) <= stored, "every spelling is stored as written (the exits must catch it)"
        for n in range(len(LEGACY)):
            query = f"revenue fell legacycode{n}"
            outputs: list[Any] = [  # top_k above the hidden documents' count (refill is issue 14 #1)
                ws.search(query, top_k=50),
                ws.ask(query).to_dict(),
                ws.chunks(f"old{n}"),
                search_libraries(ws.settings, [LibrarySpec("a", str(db))], query, where=None, top_k=50),
            ]
            assert f"secretcode{n}x" not in json.dumps(outputs, ensure_ascii=False)
            assert {s["doc_id"] for s in outputs[0]} == set(PUBLIC_DOCS)


@pytest.mark.parametrize("label", CONFUSABLE)
def test_every_confusable_spelling_is_restricted(label: str) -> None:
    """Issue 14 #5: invisible and control characters, look-alike letters, trailing punctuation."""
    assert normalize_label(label) == "RESTRICTED" and is_restricted(label)
    assert check_label(label) == "RESTRICTED"


@pytest.mark.parametrize(
    ("label", "level"),
    [("PUBLIC.", "PUBLIC"), ("\ufeffinternal", "INTERNAL"), ("İnternal", "INTERNAL"), ("CONFIDENTIAL\x00", "CONFIDENTIAL"),
     ("Ｐｕｂｌｉｃ", "PUBLIC"), ("соnfidential", "CONFIDENTIAL")],  # the last with a Cyrillic о
)  # fmt: skip
def test_the_other_levels_survive_the_same_normalisation(label: str, level: str) -> None:
    assert check_label(label) == level and not is_restricted(label)


@pytest.mark.parametrize("label", CONFUSABLE)
def test_every_confusable_spelling_is_stored_restricted_at_write(tmp_path: Path, label: str) -> None:
    """Written through the argument, front matter and a sidecar: always stored as RESTRICTED."""
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.txt").write_text("Sidecar labelled text.", "utf-8")
    (folder / "a.txt.meta.json").write_text(json.dumps({"sensitivity": label}), "utf-8")
    front = "---\nsensitivity: " + json.dumps(label) + "\n---\nFront matter labelled text.\n"
    with ragspine.open(tmp_path / "ws", env=BM25_ENV) as ws:
        ws.ingest("Argument labelled text.", doc_id="arg", sensitivity=label)
        ws.ingest_bytes("front.md", front.encode("utf-8"))
        db = ws.settings.db
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", db])
    assert result.exit_code == 0, result.output
    labels = {row["doc_id"]: row["sensitivity"] for row in _stored(Path(db))}
    assert labels == {"arg": "RESTRICTED", "front.md": "RESTRICTED", "a.txt": "RESTRICTED"}
