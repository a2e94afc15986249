"""PDF text extraction, pypdfium2 against pypdf, side by side in one run (issue 37).

Generates `--files` PDFs of `--pages` pages in a temporary folder (not timed): two thirds English
(fpdf2, Helvetica, wrapped paragraphs), one third Chinese with the spaces some reports' text
carries ("本 报 告"; `ragspine.testing.cjk_pdf`), plus every PDF under tests/fixtures. Each file
is read by both extractors through `read_pdf_pages` (the loader's path: cleaning and CJK space
joining included), alternating which goes first, `--repeat` times; the best time per file and
extractor is summed, so noise from the shared machine hits both alike. Prints pages/s for each,
the ratio, and how many pages read the same (whitespace ignored). `--ingest` also times a
BM25-only `ingest_paths` of the folder into a fresh SQLite store with each extractor.

    PYTHONPATH=src:. .venv/bin/python -m bench.pdf_bench --files 60 --pages 8 --ingest
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ragspine.ingest.loaders import pdf_text
from ragspine.ingest.loaders.pdf_text import read_pdf_pages
from ragspine.retrieval.lexical.tokenize import CJK_RUN
from ragspine.testing.cjk_pdf import cjk_pdf_bytes

EXTRACTORS = ("pypdfium2", "pypdf")
EN = ("revenue margin export orders decline recovery plant capacity cost control outlook quarter "
      "guidance supplier currency demand inventory pricing backlog region").split()  # fmt: skip
ZH = ["本 报 告 期 内", "手 续费 收入", "营业 收入 同比 下降", "主要 原因 是 出口 订单 减少", "管理层 认为",
      "原材料 价格 上涨", "第三 季度 毛利率 有所 回升", "公司 计划 扩大 产能"]  # fmt: skip
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def english_pdf(path: Path, rng: random.Random, pages: int) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for page in range(pages):
        pdf.add_page()
        for _ in range(6):
            words = " ".join(rng.choice(EN) for _ in range(70))
            pdf.multi_cell(0, 5, f"Page {page + 1}. {words.capitalize()}.")
            pdf.ln(2)
    pdf.output(str(path))


def chinese_pdf(path: Path, rng: random.Random, pages: int) -> None:
    lines = lambda: "\n".join(f"{n}. " + "，".join(rng.choice(ZH) for _ in range(3)) + "。" for n in range(32))  # noqa: E731
    path.write_bytes(cjk_pdf_bytes([lines() for _ in range(pages)]))


def make_folder(root: Path, files: int, pages: int, seed: int, extra: list[Path]) -> list[tuple[str, Path]]:
    """(group, path) of every PDF written into `root`: generated English and Chinese, then copies
    of the fixtures' PDFs and of `extra` (files, or folders searched for *.pdf)."""
    rng = random.Random(seed)
    out = []
    for i in range(files):
        path = root / f"doc{i:04d}.pdf"
        chinese = i % 3 == 2
        (chinese_pdf if chinese else english_pdf)(path, rng, pages)
        out.append(("generated Chinese (non-embedded STSong-Light)" if chinese else "generated English (fpdf2)", path))
    found = [*sorted(FIXTURES.rglob("*.pdf")), *(q for e in extra for q in (sorted(e.rglob("*.pdf")) if e.is_dir() else [e]))]
    for n, source in enumerate(found):
        path = root / f"real{n:03d}-{source.name}"
        path.write_bytes(source.read_bytes())
        out.append(("tests/fixtures and --extra PDFs", path))
    return out


@dataclass
class Compared:
    """Per file: the best seconds of each extractor and its page count; pages read alike."""

    seconds: dict[str, list[float]]
    pages: list[int]
    same: int
    cjk: int


def compare(paths: list[Path], repeat: int) -> Compared:
    best = {name: [float("inf")] * len(paths) for name in EXTRACTORS}
    texts: dict[str, list[list[str]]] = {name: [] for name in EXTRACTORS}
    for index, path in enumerate(paths):
        data = path.read_bytes()
        for round_ in range(repeat):
            order = EXTRACTORS if (index + round_) % 2 == 0 else EXTRACTORS[::-1]
            for name in order:
                start = time.perf_counter()
                pages, _ = read_pdf_pages(data, path, extractor=name)
                best[name][index] = min(best[name][index], time.perf_counter() - start)
                if round_ == 0:
                    texts[name].append(pages)
    same = sum(
        " ".join(a.split()) == " ".join(b.split())
        for doc_a, doc_b in zip(texts["pypdfium2"], texts["pypdf"], strict=True)
        for a, b in zip(doc_a, doc_b, strict=True)
    )
    cjk_pages = sum(bool(CJK_RUN.search(page)) for doc in texts["pypdf"] for page in doc)
    return Compared(best, [len(pages) for pages in texts["pypdf"]], same, cjk_pages)


def time_ingest(folder: Path, warm: list[Path], work: Path) -> dict[str, tuple[float, int, int]]:
    """Seconds, chunks and failed files of a BM25-only ingest of `folder` into a fresh store, per
    extractor, each after an untimed ingest of the `warm` files (imports, first-use costs)."""
    from ragspine.ingest.pipeline import ingest_paths

    out = {}
    for name in EXTRACTORS:
        original = pdf_text.pdf_extractor
        setattr(pdf_text, "pdf_extractor", lambda name=name: name)  # what load_pdf asks, for this run
        try:
            ingest_paths(warm, str(work / f"warm-{name}.db"))
            start = time.perf_counter()
            report = ingest_paths([folder], str(work / f"{name}.db"))
            out[name] = (time.perf_counter() - start, report.chunks, len(report.failures))
        finally:
            setattr(pdf_text, "pdf_extractor", original)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="reads per file and extractor; the best counts")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ingest", action="store_true", help="also time a BM25-only ingest_paths per extractor")
    parser.add_argument("--extra", type=Path, nargs="*", default=[], help="more PDFs (files or folders) to read")
    args = parser.parse_args()
    import pypdf
    import pypdfium2

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pdfs"
        folder.mkdir()
        grouped = make_folder(folder, args.files, args.pages, args.seed, args.extra)
        paths = [path for _, path in grouped]
        mb = sum(p.stat().st_size for p in paths) / 1e6
        result = compare(paths, args.repeat)
        pages = sum(result.pages)
        print(f"{len(paths)} PDFs, {pages} pages ({result.cjk} with Chinese), {mb:.2f} MB; "
              f"pypdfium2 {pypdfium2.version.PYPDFIUM_INFO}, pypdf {pypdf.__version__}; best of {args.repeat}")  # fmt: skip
        print("| PDFs | files | pages | extractor | seconds | pages/s | × pypdf |")
        print("|---|---:|---:|---|---:|---:|---:|")
        for group in [*dict.fromkeys(g for g, _ in grouped), "all"]:
            rows = [i for i, (g, _) in enumerate(grouped) if group in (g, "all")]
            count = sum(result.pages[i] for i in rows)
            took = {n: sum(result.seconds[n][i] for i in rows) for n in EXTRACTORS}
            for name in EXTRACTORS:
                print(f"| {group} | {len(rows)} | {count} | {name} | {took[name]:.2f} | {count / took[name]:.0f} | "
                      f"{took['pypdf'] / took[name]:.2f} |")  # fmt: skip
        print(f"pages whose text is the same from both (whitespace ignored): {result.same} of {pages}")
        if args.ingest:
            warm = [next(p for g, p in grouped if g == group) for group in dict.fromkeys(g for g, _ in grouped)]
            timed = time_ingest(folder, warm, Path(tmp))
            print("| BM25-only ingest_paths | seconds | files/s | chunks | failed | × pypdf |")
            print("|---|---:|---:|---:|---:|---:|")
            for name, (s, chunks, failed) in timed.items():
                print(f"| {name} | {s:.2f} | {len(paths) / s:.1f} | {chunks} | {failed} | {timed['pypdf'][0] / s:.2f} |")


if __name__ == "__main__":
    main()
