"""Ingest throughput: files/s and MB/s over a generated folder of mixed documents.

Generates `--files` documents (default 1,000) in a temporary folder, in a fixed mix of formats and
encodings: Markdown with front matter, text in UTF-8 / GBK / Big5 / UTF-16, HTML with navigation
noise, two-page PDFs (fpdf2) and Word files with a heading and a table (python-docx); then times
`ingest_paths` into a fresh SQLite store (the cold run), and again on the same folder (the
unchanged re-run, which must write nothing). Generation is not timed. Deterministic for a seed.

    .venv/bin/python bench/ingest_bench.py                 # 1,000 files
    .venv/bin/python bench/ingest_bench.py --by-type       # plus one row per format
Needs the loader extras and fpdf2: pip install -e '.[test]'.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ragspine.ingest.pipeline import ingest_paths

ZH = ("营业收入同比下降，主要原因是出口订单减少。管理层认为原材料价格上涨是主要风险。"
      "公司计划在华东地区扩大产能，并加强成本控制。第三季度毛利率有所回升。")  # fmt: skip
ZH_TW = ("營業收入同比下降，主要原因是出口訂單減少。管理層認為原材料價格上漲是主要風險。"
         "公司計劃在華東地區擴大產能，並加強成本控制。第三季度毛利率有所回升。")  # fmt: skip
EN_WORDS = ("revenue margin export orders decline recovery plant capacity cost control outlook "
            "quarter guidance supplier currency demand inventory pricing backlog region").split()  # fmt: skip
# (share of files, sub-folder, writer)
MIX: tuple[tuple[float, str], ...] = (
    (0.25, "md"), (0.10, "txt-utf8"), (0.08, "txt-gbk"), (0.05, "txt-big5"), (0.02, "txt-utf16"),
    (0.20, "html"), (0.15, "pdf"), (0.15, "docx"),
)  # fmt: skip


def english(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        words = rng.choices(EN_WORDS, k=rng.randint(8, 16))
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def chinese(rng: random.Random, base: str, sentences: int) -> str:
    parts = [s + "。" for s in base.split("。") if s]
    return "".join(rng.choice(parts) for _ in range(sentences))


def write_md(path: Path, rng: random.Random, i: int) -> None:
    body = "\n\n".join(english(rng, 4) if k % 2 else chinese(rng, ZH, 5) for k in range(6))
    path.write_text(f"---\nentity: CO{i % 17}\nperiod: {2018 + i % 7}\nowner: team{i % 5}\n---\n"
                    f"# Report {i}\n{body}\n## Risks\n{english(rng, 3)}\n", "utf-8")  # fmt: skip


def write_text(codec: str, base: str) -> Callable[[Path, random.Random, int], None]:
    def write(path: Path, rng: random.Random, i: int) -> None:
        body = "\n\n".join(chinese(rng, base, 6) for _ in range(5)) + f"\n\nNo. {i}"
        path.write_bytes(body.encode(codec))

    return write


def write_utf8_english(path: Path, rng: random.Random, i: int) -> None:
    path.write_text("\n\n".join(english(rng, 5) for _ in range(6)) + f"\n\nDocument {i}.", "utf-8")


def write_html(path: Path, rng: random.Random, i: int) -> None:
    paragraphs = "".join(f"<p>{english(rng, 4)}</p>" for _ in range(6))
    path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>Page {i}</title>"
        "<style>body{margin:0}</style><script>var t = 1;</script></head><body>"
        "<nav><a href='/'>Home</a> <a href='/about'>About</a> <a href='/news'>News</a></nav>"
        f"<main><article><h1>Update {i}</h1>{paragraphs}<h2>Outlook</h2><p>{english(rng, 3)}</p>"
        "</article></main><footer>Copyright 2024. All rights reserved.</footer></body></html>",
        "utf-8",
    )


def write_pdf(path: Path, rng: random.Random, i: int) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for page in range(2):
        pdf.add_page()
        pdf.multi_cell(0, 6, f"Report {i}, page {page + 1}. " + english(rng, 12))
    pdf.output(str(path))


def write_docx(path: Path, rng: random.Random, i: int) -> None:
    import docx

    document = docx.Document()
    document.add_heading(f"Minutes {i}", level=1)
    for _ in range(4):
        document.add_paragraph(english(rng, 4))
    table = document.add_table(rows=4, cols=3)
    for r in range(4):
        for c in range(3):
            table.cell(r, c).text = f"{rng.choice(EN_WORDS)} {rng.randint(1, 999)}"
    document.save(str(path))


WRITERS: dict[str, tuple[str, Callable[[Path, random.Random, int], None]]] = {
    "md": (".md", write_md),
    "txt-utf8": (".txt", write_utf8_english),
    "txt-gbk": (".txt", write_text("gbk", ZH)),
    "txt-big5": (".txt", write_text("big5", ZH_TW)),
    "txt-utf16": (".txt", write_text("utf-16", ZH)),
    "html": (".html", write_html),
    "pdf": (".pdf", write_pdf),
    "docx": (".docx", write_docx),
}


def generate(root: Path, files: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    made = 0
    for n, (share, kind) in enumerate(MIX):
        count = files - made if n == len(MIX) - 1 else round(files * share)
        suffix, writer = WRITERS[kind]
        folder = root / kind
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            writer(folder / f"{kind}-{i:04d}{suffix}", rng, made + i)
        counts[kind] = count
        made += count
    return counts


def timed_ingest(paths: list[Path], db: Path) -> tuple[float, object]:
    start = time.perf_counter()
    report = ingest_paths(paths, str(db), progress=False)
    return time.perf_counter() - start, report


def row(label: str, files: int, size: int, seconds: float, chunks: int, failed: int) -> str:
    return (f"| {label} | {files} | {size / 1e6:.2f} | {seconds:.2f} | {files / seconds:.1f} | "
            f"{size / 1e6 / seconds:.2f} | {chunks} | {failed} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--by-type", action="store_true", help="also time each format on its own")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragspine-ingest-bench-") as tmp:
        root = Path(tmp) / "docs"
        started = time.perf_counter()
        counts = generate(root, args.files, args.seed)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        print(f"generated {sum(counts.values())} files, {size / 1e6:.2f} MB in "
              f"{time.perf_counter() - started:.1f} s: {counts}")  # fmt: skip
        print("| run | files | MB | seconds | files/s | MB/s | chunks | failed |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        db = Path(tmp) / "bench.db"
        seconds, report = timed_ingest([root], db)
        print(row("cold (empty store)", len(report.ingested), report.bytes_read, seconds, report.chunks, len(report.failures)))
        seconds, again = timed_ingest([root], db)
        assert not again.ingested, "an unchanged re-run must write nothing"
        print(row("re-run (all unchanged)", len(again.unchanged), again.bytes_read, seconds, 0, len(again.failures)))
        if args.by_type:
            for kind in counts:
                seconds, part = timed_ingest([root / kind], Path(tmp) / f"{kind}.db")
                print(row(kind, len(part.ingested), part.bytes_read, seconds, part.chunks, len(part.failures)))


if __name__ == "__main__":
    main()
