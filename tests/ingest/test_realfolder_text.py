"""Issue 38, items 4-5: real folders read faithfully — mojibake repaired or marked, legacy Korean
read as Korean, garbage scored as garbage, and law list items kept with their article's lead.

The files are real: a law written here (tests/fixtures/realfolder/laws), EUC-KR / GB2312 / Big5
texts (tests/fixtures/realfolder/mojibake), and PDFs built with fpdf2 at test time whose text
extracts as GBK read as Latin-1 or as garbage. They go through the real CLI into a real SQLite
store; every stored chunk is checked to be the exact slice of the text it cites.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragspine.cli import main
from ragspine.ingest.encoding import decode_bytes
from ragspine.ingest.loaders import LoadedDocument, load_document
from ragspine.ingest.mojibake import repair_mojibake
from ragspine.ingest.quality import GARBLED_SHARE, garbled_share
from ragspine.ingest.registry import DocumentRegistry
from ragspine.retrieval.chunking.contextual import context_header
from ragspine.retrieval.chunking.factory import make_chunker
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.store.sqlite import ChunkStore

REALFOLDER = Path(__file__).parent.parent / "fixtures" / "realfolder"
LAW = REALFOLDER / "laws" / "sample_publication_rules.txt"
ENV = {"RAGSPINE_RETRIEVAL_MODE": "bm25", "RAGSPINE_CHUNKER": "auto"}
_LOCATOR = re.compile(r"@(\d+)-(\d+)(?:;pages=(\d+)(?:-(\d+))?)?$")
_ARTICLE = re.compile(r"^第[一二三四五六七八九十百]+条", re.MULTILINE)
_ITEM = re.compile(r"^(?:（[一二三四五六七八九十]+）|\d{1,2}[.、])", re.MULTILINE)
GBK_LINES = ["目录", "关于红军作战的几个问题。", "中华人民共和国是工人阶级领导的、以工农联盟为基础的国家。", "第一章 总则"]
KOREAN = "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다."
TAIWAN = "中華民國之主權屬於國民全體。具有中華民國國籍者為中華民國國民。"


def _span(locator: str) -> tuple[int, int]:
    match = _LOCATOR.search(locator)
    assert match, locator
    return int(match.group(1)), int(match.group(2))


def _ingest(folder: Path, db: Path, **env: str) -> str:
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", str(db)], env={**ENV, **env})
    assert result.exit_code == 0, result.output
    return result.output


def _stored(db: Path) -> dict[str, list[Chunk]]:
    out: dict[str, list[Chunk]] = {}
    with ChunkStore(db) as store:
        for chunk in store.iter_chunks():
            out.setdefault(chunk.doc_id, []).append(chunk)
    return out


def _latin1_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A PDF whose text is written in a Latin-1 core font, one line per cell (what a PDF whose
    font maps legacy code-page bytes to Latin-1 glyphs extracts as)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for lines in pages:
        pdf.add_page()
        for line in lines:
            pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def _gbk_as_latin1(line: str) -> str:
    return line.encode("gbk").decode("latin-1")


# -- item 4: mojibake ---------------------------------------------------------------------------
def test_a_gbk_as_latin1_pdf_scores_garbled_and_is_repaired_with_its_pages(tmp_path: Path) -> None:
    folder = tmp_path / "pdfs"
    folder.mkdir()
    path = _latin1_pdf(folder / "hongjun.pdf", [[_gbk_as_latin1(x) for x in GBK_LINES[:2]],
                                                [_gbk_as_latin1(x) for x in GBK_LINES[2:]],
                                                ["English page: revenue fell."]])  # fmt: skip
    raw = load_document(path, path.read_bytes())
    assert "Ä¿Â¼" in raw.text and garbled_share(raw.text) >= 0.7  # it scored 1% before (issue 38)
    db = tmp_path / "s.db"
    output = _ingest(folder, db)
    assert "mojibake repaired: gb18030 text read as latin-1: 4 line(s)" in output
    with DocumentRegistry(db) as registry:
        record = registry.get("hongjun.pdf")
    assert record is not None
    assert "gb18030" in record.metadata_dict()["mojibake_repaired"]
    assert "garbled" not in record.metadata_dict()
    chunks = _stored(db)["hongjun.pdf"]
    text = "\n".join(c.text for c in chunks)
    assert "关于红军作战的几个问题。" in text and "第一章 总则" in text and "Ä" not in text
    repaired, _ = repair_mojibake(raw)
    for chunk in chunks:  # the exact slice of the repaired text, on the right pages
        start, end = _span(chunk.source_locator)
        assert repaired.text[start:end] == chunk.text
        pages = {n for (s, e), n in zip(repaired.page_spans, repaired.page_numbers, strict=True) if s < end and start < e}
        first, last = (int(g) if g else None for g in _LOCATOR.search(chunk.source_locator).groups()[2:])  # type: ignore[union-attr]
        assert pages == set(range(first or 0, (last or first or 0) + 1))


def test_spaced_mojibake_and_heading_spans_move_with_the_repair() -> None:
    spaced = " ".join(_gbk_as_latin1(ch) for ch in "关于红军作战")  # "¹Ø ÓÚ ºì ¾ü ×÷ Õ½"
    text = f"{_gbk_as_latin1('目录')}\n\n{spaced}\n\nPlain English line."
    loaded = LoadedDocument(text, headings=((0, 4, 1),), page_spans=((0, len(text)),), page_numbers=(1,))
    repaired, repair = repair_mojibake(loaded)
    assert repair is not None and repair.encoding == "gb18030" and repair.lines == 2
    assert repaired.text == "目录\n\n关 于 红 军 作 战\n\nPlain English line."
    assert [repaired.text[s:e] for s, e, _ in repaired.headings] == ["目录"]
    assert repaired.page_spans == ((0, len(repaired.text)),)


@pytest.mark.parametrize(
    ("original", "codec", "expected"),
    [
        (KOREAN, "cp949", "cp949"),  # EUC-KR Korean read as Latin-1
        (TAIWAN, "big5", "cp950"),
        ("日本国民は、正当に選挙された国会における代表者を通じて行動する。", "cp932", "cp932"),  # Shift_JIS
        ("Café d’été — résumé naïve, façade. " * 3, "utf-8", "utf-8"),  # UTF-8 read as Latin-1
    ],
)
def test_other_mis_decoded_text_is_repaired_to_the_original(original: str, codec: str, expected: str) -> None:
    garbled = original.encode(codec).decode("cp1252" if codec == "utf-8" else "latin-1")
    repaired, repair = repair_mojibake(LoadedDocument(garbled))
    assert repair is not None and repair.encoding == expected
    assert repaired.text == original


@pytest.mark.parametrize(
    "text",
    [
        "Größe, Füße und süße Grüße. fæðing. ¿Qué? «Ça» —“Hello”’ 25°C ±5 ½ " * 5,
        "××市××区人民法院 卡尔·马克思 5×3=15 " * 5,
        "A single cafÃ© in English text is reported, not rewritten.",
        "Ä¿ and nothing else",
    ],
)
def test_real_text_and_scant_evidence_are_never_rewritten(text: str) -> None:
    loaded = LoadedDocument(text)
    assert repair_mojibake(loaded) == (loaded, None)


def test_a_line_that_does_not_decode_is_kept_and_counted() -> None:
    broken = _gbk_as_latin1("中华人民共和国是工人阶级领导的")[:-1]  # its last character cut in half
    text = "\n".join([*(_gbk_as_latin1(x) for x in GBK_LINES), broken])
    repaired, repair = repair_mojibake(LoadedDocument(text))
    assert repair is not None and (repair.lines, repair.left) == (4, 1)
    assert repaired.text.split("\n")[:4] == GBK_LINES and repaired.text.endswith(broken)


def test_garbage_scores_near_100_percent_and_is_marked(tmp_path: Path) -> None:
    rng = random.Random(38)
    folder = tmp_path / "garbage"
    folder.mkdir()
    noise = bytes(rng.randrange(0x21, 0x100) for _ in range(4000)).decode("latin-1")
    lines = [noise[i : i + 60] for i in range(0, len(noise), 60)]
    (folder / "extracted.txt").write_text("\n".join(lines), "utf-8")
    _latin1_pdf(folder / "garbage.pdf", [[x.replace("\x7f", "") for x in lines[:30] if x.strip()]])
    pdf_text = load_document(folder / "garbage.pdf", (folder / "garbage.pdf").read_bytes()).text
    assert garbled_share(pdf_text) >= 0.9  # a PDF of pure extraction garbage scored 27% (issue 38)
    assert garbled_share("\n".join(lines)) >= 0.9
    db = tmp_path / "s.db"
    _ingest(folder, db)
    with DocumentRegistry(db) as registry:
        marks = {r.doc_id: r.metadata_dict() for r in registry.all()}
    for doc_id in ("extracted.txt", "garbage.pdf"):
        assert marks[doc_id]["garbled"] >= 0.9 and "mojibake_repaired" not in marks[doc_id]


@pytest.mark.parametrize(
    ("name", "encoding", "start"),
    [
        ("korean_euckr.txt", "cp949", "대한민국 헌법 제1조"),  # was read as GB18030 Chinese mojibake
        ("chinese_gb2312.txt", "gb18030", "年度报告摘要"),
        ("chinese_big5.txt", "cp950", "年度報告摘要"),
    ],
)
def test_legacy_east_asian_files_are_read_in_their_own_script(name: str, encoding: str, start: str) -> None:
    decoded = decode_bytes((REALFOLDER / "mojibake" / name).read_bytes())
    assert (decoded.encoding, decoded.text[: len(start)]) == (encoding, start)
    assert garbled_share(decoded.text) == 0.0


def test_the_legacy_folder_ingests_clean_and_exact(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    output = _ingest(REALFOLDER / "mojibake", db)
    assert "garbled" not in output and "mojibake repaired" not in output
    for doc_id, chunks in _stored(db).items():
        text = decode_bytes((REALFOLDER / "mojibake" / doc_id).read_bytes()).text
        for chunk in chunks:
            start, end = _span(chunk.source_locator)
            assert text[start:end] == chunk.text
    with DocumentRegistry(db) as registry:
        assert {r.doc_id: r.encoding for r in registry.all()}["korean_euckr.txt"] == "cp949"


# -- item 5: law list items stay with their article --------------------------------------------
def _lead_of(text: str, item_at: int) -> str:
    """The sentence that introduces the list `item_at` belongs to: the text of its article
    before the article's first item, its last sentence (written independently of the chunker)."""
    article = [m.start() for m in _ARTICLE.finditer(text) if m.start() < item_at][-1]
    first_item = _ITEM.search(text, article).start()  # type: ignore[union-attr]
    return re.split(r"(?<=[。；])", text[article:first_item].strip())[-1].strip() or text[article:first_item].strip()


@pytest.mark.parametrize("max_chars", [480, 200, 120])
@pytest.mark.parametrize("name", ["auto", "laws"])
def test_law_items_never_lose_their_lead_sentence(name: str, max_chars: int) -> None:
    text = LAW.read_text("utf-8")
    chunks = make_chunker(name, max_chars=max_chars, overlap_chars=min(80, max_chars // 4)).chunk(text, DocumentMeta("law"))
    assert {c.metadata.get("chunker", "laws") for c in chunks} == {"laws"}
    starts = [_span(c.source_locator)[0] for c in chunks]
    for chunk in chunks:  # citation exactness: text, and the window a prompt shows
        start, end = _span(chunk.source_locator)
        assert text[start:end] == chunk.text
        if chunk.window_text:
            w_start, w_end = _span(chunk.parent_locator)
            assert text[w_start:w_end] == chunk.window_text and w_start <= start and end <= w_end
    for match in _ARTICLE.finditer(text):  # every 第N条 starts a chunk (after its glued chapter line)
        start = max(s for s in starts if s <= match.start())
        assert all(re.match(r"^(第.+章|样例出版物管理条例)", line) for line in text[start : match.start()].split("\n") if line.strip())
    item_chunks = 0
    for chunk in chunks:
        start, _ = _span(chunk.source_locator)
        for item in _ITEM.finditer(chunk.text):
            item_chunks += 1
            lead = _lead_of(text, start + item.start())
            assert lead in chunk.text or (lead in chunk.window_text and lead in context_header(chunk)), (lead, chunk)
    assert item_chunks >= 15
    if max_chars == 480:  # the short articles stay whole: "（四）音像制品" says what list it is in
        article_two = next(c for c in chunks if "第二条" in c.text)
        assert "（四）音像制品、电子出版物。" in article_two.text and "包括下列物品：" in article_two.text
        assert len([c for c in chunks if len(c.text) < 40]) <= 1  # was one chunk per item


def test_the_law_folder_ingests_with_every_chunk_exact(tmp_path: Path) -> None:
    folder = tmp_path / "laws"
    shutil.copytree(REALFOLDER / "laws", folder)
    db = tmp_path / "s.db"
    _ingest(folder, db, RAGSPINE_CHUNK_CHARS="300")  # 第四条 and 第六条 do not fit: they are cut
    text = LAW.read_text("utf-8")
    chunks = _stored(db)["sample_publication_rules.txt"]
    assert len(chunks) >= 6 and all(c.metadata.get("chunker") == "laws" for c in chunks)
    for chunk in chunks:
        start, end = _span(chunk.source_locator)
        assert text[start:end] == chunk.text
    split = [c for c in chunks if _ITEM.match(c.text)]
    assert len(split) >= 2
    for chunk in split:
        lead = _lead_of(text, _span(chunk.source_locator)[0])
        assert lead in chunk.heading and chunk.window_text.count(lead) == 1
    assert GARBLED_SHARE > garbled_share(text)


def test_a_callers_own_text_is_never_rewritten_only_marked(tmp_path: Path) -> None:
    import ragspine

    garbled = "\n".join(_gbk_as_latin1(x) for x in GBK_LINES)
    with ragspine.open(tmp_path / "s.db", retrieval_mode="bm25") as workspace:
        workspace.ingest_text(garbled, "given.txt")
        chunks = list(workspace.store.iter_chunks(doc_id="given.txt"))
    assert "\n".join(c.text for c in chunks) == garbled  # the caller's text, as given
    with DocumentRegistry(tmp_path / "s.db") as registry:
        record = registry.get("given.txt")
    assert record is not None and record.metadata_dict()["garbled"] >= 0.9
    assert "mojibake_repaired" not in record.metadata_dict()


def test_an_article_whose_items_cross_a_page_is_cut_there_and_keeps_its_lead() -> None:
    from ragspine.retrieval.chunking.protocol import Layout

    page_one = "样例条例\n\n第二条 国家规定下列事项：\n（一）甲；"
    text = page_one + "\n\n（二）乙；\n（三）丙。\n第三条 完。"
    page_two = len(page_one) + 2  # the page starts exactly at an item
    chunks = make_chunker("laws").chunk_structured(text, DocumentMeta("law"), Layout((), (page_two,)))
    assert [c.text for c in chunks] == [page_one, "（二）乙；\n（三）丙。", "第三条 完。"]
    assert "国家规定下列事项：" in chunks[1].heading and "国家规定下列事项：" in chunks[1].window_text
    assert all(not (_span(c.source_locator)[0] < page_two < _span(c.source_locator)[1]) for c in chunks)
