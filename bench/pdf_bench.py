"""PDF text extraction, pypdfium2 against pypdf, side by side in one run (issue 37).

Generates `--files` PDFs of `--pages` pages in a temporary folder (not timed): two thirds English
(fpdf2, Helvetica, wrapped paragraphs), one third Chinese with the spaces some reports' text
carries ("本 报 告"; `ragspine.testing.cjk_pdf`), plus every PDF under tests/fixtures. Each file
is read by both extractors through `read_pdf_pages` (the loader's path: cleaning and CJK space
joining included), alternating which goes first, `--repeat` times; the best time per file and
extractor is summed, so noise from the shared machine hits both alike. Prints pages/s for each,
the ratio, and how many pages read the same (whitespace ignored). `--ingest` also times a
BM25-only `ingest_paths` of the folder into a fresh SQLite store with each extractor;
`--before REF` times instead git revision REF's `ingest_paths` (`bench.before`: its package
imported beside this one, same process), today's with pypdfium2, and today's with the lexical
index built at ingest too (the step `ragspine ingest` adds; all sides BM25-only `ingest_paths` with its default chunker). The ingests run `--rounds` times, the sides' order reversed every other
round, best time kept; files/s and pages/s are of the whole folder. After the timing, every
chunk each side stored is checked against the text that side's loader gives for its file
(`ragspine.testing.citations.citation_failure`: text equals the cited slice, page range exact);
the count checked and the failures are printed.

    PYTHONPATH=src:. .venv/bin/python -m bench.pdf_bench --files 60 --pages 8 --ingest --before ebe533d
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.before import load_before

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


def readable(path: Path, seconds: int = 300, least: int = 200) -> bool:
    """`--screen`: both extractors read `path` without an error and give at least `least`
    non-space characters (the bench stops on a file an extractor cannot read, and a scanned PDF
    without a text layer times nothing). `seconds` only catches a hang (a PDF bomb): it is far
    above any real file's read here, so the load of the machine does not change the folder.
    Prints why a file is left out."""

    def expired(*_: object) -> None:
        raise TimeoutError(f"over {seconds} s")

    data = path.read_bytes()
    previous = signal.signal(signal.SIGALRM, expired)
    try:
        for name in EXTRACTORS:
            signal.alarm(seconds)
            try:
                pages, _ = read_pdf_pages(data, path, extractor=name)
            except Exception as exc:  # noqa: BLE001 - any failure leaves the file out, said below
                print(f"screened out {path.name}: {name} raised {type(exc).__name__}")
                return False
            finally:
                signal.alarm(0)
            if sum(len("".join(page.split())) for page in pages) < least:
                print(f"screened out {path.name}: {name} gives under {least} characters of text")
                return False
    finally:
        signal.signal(signal.SIGALRM, previous)
    return True


def make_folder(root: Path, files: int, pages: int, seed: int, extra: list[Path], screen: bool = False) -> list[tuple[str, Path]]:
    """(group, path) of every PDF written into `root`: generated English and Chinese, then copies
    of the fixtures' PDFs and of `extra` (files, or folders searched for *.pdf); `screen`: only
    the `readable` ones."""
    rng = random.Random(seed)
    out = []
    for i in range(files):
        path = root / f"doc{i:04d}.pdf"
        chinese = i % 3 == 2
        (chinese_pdf if chinese else english_pdf)(path, rng, pages)
        out.append(("generated Chinese (non-embedded STSong-Light)" if chinese else "generated English (fpdf2)", path))
    found = [*sorted(FIXTURES.rglob("*.pdf")), *(q for e in extra for q in (sorted(e.rglob("*.pdf")) if e.is_dir() else [e]))]
    if screen:
        found = [source for source in found if readable(source)]
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


@dataclass
class Side:
    """One way of ingesting the folder: `ingest(paths, db)` returns the run's report, `load(path,
    data)` the document text (with page spans) that run chunked, `store(db)` opens its store."""

    name: str
    ingest: Callable[[list[Path], str], Any]
    load: Callable[[Path, bytes], Any]
    store: Callable[[str], Any]


@contextmanager
def _extractor(name: str) -> Iterator[None]:
    original = pdf_text.pdf_extractor
    setattr(pdf_text, "pdf_extractor", lambda: name)  # what load_pdf asks, for this run
    try:
        yield
    finally:
        setattr(pdf_text, "pdf_extractor", original)


def today(extractor: str, index: bool = False) -> Side:
    """This checkout's `ingest_paths` with `extractor`; `index`: the lexical index built at ingest
    too (`lexical_analyzer`), the step `ragspine ingest` adds. Every side is `ingest_paths` with
    its own default chunker and no embedding: a BM25-only ingest, not the CLI's settings
    (RAGSPINE_CHUNKER, RAGSPINE_EMBEDDING)."""
    from ragspine.ingest.loaders import load_document
    from ragspine.ingest.mojibake import repair_mojibake
    from ragspine.ingest.pipeline import ingest_paths
    from ragspine.retrieval.lexical.analyzers import make_analyzer
    from ragspine.retrieval.store.sqlite import ChunkStore

    def ingest(paths: list[Path], db: str) -> Any:
        with _extractor(extractor):
            return ingest_paths(paths, db, progress=False, lexical_analyzer=make_analyzer() if index else None)

    def load(path: Path, data: bytes) -> Any:
        with _extractor(extractor):
            return repair_mojibake(load_document(path, data))[0]  # the text prepare() chunks

    name = f"today, {extractor}" + (" + lexical index built at ingest" if index else "")
    return Side(name, ingest, load, ChunkStore)


def before(ref: str, work: Path) -> Side:
    """Git revision `ref`'s `ingest_paths` (pypdf only), loaded beside this one by `bench.before`."""
    package = load_before(ref, work / "before")
    pipeline = importlib.import_module(f"{package}.ingest.pipeline")
    loaders = importlib.import_module(f"{package}.ingest.loaders")
    store = importlib.import_module(f"{package}.retrieval.store.sqlite").ChunkStore
    ingest = lambda paths, db: pipeline.ingest_paths(paths, db, progress=False)  # noqa: E731
    return Side(f"before ({ref}), pypdf", ingest, loaders.load_document, store)


def time_ingest(
    folder: Path, warm: list[Path], work: Path, sides: list[Side], rounds: int
) -> dict[str, tuple[float, int, int]]:
    """Best seconds, chunks and failed files of a BM25-only ingest of `folder` into a fresh store,
    per side, `rounds` times with the order of the sides reversed every other round; each side
    first ingests the `warm` files untimed (imports, first-use costs). Each side's last store
    stays at `work/<n>-<round>.db` for `check_citations`."""
    out: dict[str, tuple[float, int, int]] = {}
    numbered = list(enumerate(sides))
    for n, side in numbered:
        side.ingest(warm, str(work / f"warm-{n}.db"))
    for round_ in range(rounds):
        for n, side in numbered if round_ % 2 == 0 else numbered[::-1]:
            start = time.perf_counter()
            report = side.ingest([folder], str(work / f"{n}-{round_}.db"))
            took = time.perf_counter() - start
            best = min(took, out.get(side.name, (took,))[0])
            out[side.name] = (best, report.chunks, len(report.failures))
    return out


def check_citations(side: Side, db: str, folder: Path) -> tuple[int, list[str]]:
    """Every chunk stored in `db` checked with `ragspine.testing.citations.citation_failure`
    against the text `side` loads from its file: (chunks checked, failures)."""
    from ragspine.testing.citations import citation_failure

    store = side.store(db)
    try:
        chunks = list(store.iter_chunks())
    finally:
        store.close()
    loaded: dict[str, Any] = {}
    failures = []
    for chunk in chunks:
        if chunk.doc_id not in loaded:
            path = folder / chunk.doc_id
            loaded[chunk.doc_id] = side.load(path, path.read_bytes())
        doc = loaded[chunk.doc_id]
        failure = citation_failure(chunk.text, chunk.source_locator, doc.text, doc.page_spans, doc.page_numbers)
        if failure is not None:
            failures.append(failure)
    return len(chunks), failures


def print_ingest(folder: Path, grouped: list[tuple[str, Path]], pages: int, args: argparse.Namespace, work: Path) -> None:
    """Time the sides' ingests (interleaved), then check every stored chunk's citation."""
    sides = [today("pypdfium2"), today("pypdf")]
    if args.before:  # before and after: today's default extractor, then with the index step `ragspine ingest` adds
        sides = [before(args.before, work), today("pypdfium2"), today("pypdfium2", index=True)]
    warm = [next(p for g, p in grouped if g == group) for group in dict.fromkeys(g for g, _ in grouped)]
    timed = time_ingest(folder, warm, work, sides, args.rounds)
    base = timed[sides[0].name][0]
    print(f"BM25-only ingest_paths of the {len(grouped)} files, {pages} pages; best of {args.rounds} rounds, "
          f"sides interleaved; citations: every stored chunk against its file's text (load {os.getloadavg()})")  # fmt: skip
    print(f"| ingest | seconds | files/s | pages/s | chunks | failed | × {sides[0].name} | chunks checked | citation failures |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, side in enumerate(sides):
        s, chunks, failed = timed[side.name]
        checked, failures = check_citations(side, str(work / f"{n}-{args.rounds - 1}.db"), folder)
        print(f"| {side.name} | {s:.2f} | {len(grouped) / s:.2f} | {pages / s:.1f} | {chunks} | {failed} | "
              f"{base / s:.2f} | {checked} | {len(failures)} |")  # fmt: skip
        for failure in failures[:5]:
            print(f"  citation failure: {failure}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="reads per file and extractor; the best counts")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ingest", action="store_true", help="also time a BM25-only ingest_paths per extractor")
    parser.add_argument("--extra", type=Path, nargs="*", default=[], help="more PDFs (files or folders) to read")
    parser.add_argument("--screen", action="store_true",
                        help="leave out PDFs an extractor cannot read (an error, or a hang past 300 s) or with under 200 characters of text")  # fmt: skip
    parser.add_argument("--before", metavar="REF", help="also ingest with git revision REF's code (implies --ingest)")
    parser.add_argument("--rounds", type=int, default=2, help="timed ingests per side, order reversed each round")
    args = parser.parse_args()
    import pypdf
    import pypdfium2

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pdfs"
        folder.mkdir()
        grouped = make_folder(folder, args.files, args.pages, args.seed, args.extra, args.screen)
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
        for name in EXTRACTORS:  # one slow file can carry a side's total: say which and how much
            slowest = max(range(len(paths)), key=lambda i: result.seconds[name][i])
            share = result.seconds[name][slowest] / sum(result.seconds[name])
            print(f"{name}'s slowest file: {paths[slowest].name}, {result.seconds[name][slowest]:.2f} s ({share:.0%} of its reading)")
        if args.ingest or args.before:
            print_ingest(folder, grouped, pages, args, Path(tmp))

if __name__ == "__main__":
    main()
