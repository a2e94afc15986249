"""Assemble the mixed 300-file folder that `bench.folder_bench` ingests: real documents, five formats, Chinese and English.

    python -m bench.folder_source [--out /work/tmp-folder/mixed300] [--mirrors /work/.mirror]

Nothing is copied into this repository: the files are written under `--out` from three public
GitHub repositories, each read at a pinned commit from a bare clone, and from HTML and PDF manuals
that Debian packages install under /usr/share/doc. Each source is a rule over the pinned tree
(`git ls-tree`) or a named list, so the same commits give the same folder byte for byte:

| part | source (licence) | rule | files |
|---|---|---|---|
| `md/` | apache/echarts-doc @ 24cf98b (Apache-2.0) | `{zh,en}/{tutorial,api,option-gl}/**/*.md` | 163 (84 zh, 79 en) |
| `pdf/` | mozilla/pdf.js @ 0f26334 `test/pdfs/` (Apache-2.0; test files of many origins) | `PDFJS` below (text-bearing, no duplicates) | 30 |
| `pdf/` | /usr/share/doc: libtasn1-doc, shared-mime-info | `DEBIAN_PDFS` | 2 |
| `docx/` | python-openxml/python-docx @ e454546 (MIT) | `features/steps/test_files/*.docx`, `tests/test_files/*.docx`, less `EMPTY_DOCX`, first of each name | 29 |
| `txt/` | python-openxml/python-docx @ e454546 (MIT) | `docs/**/*.rst` of at least 1,000 bytes, saved as .txt | 45 (first by path) |
| `html/` | /usr/share/doc/libffi8/html (libffi-dev, MIT), /usr/share/doc/valgrind/html (valgrind, GFDL/GPL) | `*.html` up to 60 KB | see the summary |

A bare clone is looked for at `<mirrors>/<owner>+<name>/repo` (where this machine's `fetch` puts
it), else `<mirrors>/<name>.git`; `git clone --bare https://github.com/OWNER/NAME` makes one. A
pinned commit that the clone lacks stops the script with that message. The summary printed at
the end (files per type, MB) is what docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

ECHARTS = ("apache/echarts-doc", "24cf98b1c3e6375b6d02dce61803a427028b1318")
PDFJS_REPO = ("mozilla/pdf.js", "0f26334f9d6f96119f6e5164fb65832fbbde7344")
DOCX_REPO = ("python-openxml/python-docx", "e45454602b53e8e572b179ccf1c91093ec9f4ed7")
# pdf.js test PDFs with extractable text (> ~1,000 characters, or Chinese), one of each content
# (tracemonkey.pdf is stored under ten names there; one is taken). Left out: freeculture.pdf (a
# 352-page book, a third of the chunks on its own) and TAMReview.pdf (its text is glyph names).
PDFJS = (
    "pdkids.pdf", "tracemonkey.pdf", "issue12963.pdf",
    "issue6127.pdf", "issue1350.pdf", "file_pdfjs_test.pdf", "issue840.pdf", "prefilled_f1040.pdf",
    "standard_fonts.pdf", "issue19971.pdf", "bug1885505.pdf", "issue7014.pdf", "issue11913.pdf",
    "pr12564.pdf", "chrome-text-selection-markedContent.pdf", "canvas.pdf", "issue7454.pdf",
    "issue14297.pdf", "issue1905.pdf", "issue13201.pdf", "issue6132.pdf", "160F-2019.pdf",
    "bug1997343.pdf", "pdfjs_wikipedia.pdf", "issue9972-1.pdf", "bug1868759.pdf", "bug1873345.pdf",
    "bug1019475_1.pdf", "issue918.pdf", "issue16538.pdf",
)  # fmt: skip
DEBIAN_PDFS = ("libtasn1-doc/libtasn1.pdf", "shared-mime-info/shared-mime-info-spec.pdf")
DEBIAN_HTML = ("libffi8/html", "valgrind/html")
HTML_MAX_BYTES = 60_000
# python-docx test documents with no body text (`ragspine ingest` fails them: "has no text")
EMPTY_DOCX = (
    "blk-containing-table.docx", "doc-coreprops.docx", "doc-default.docx", "doc-no-coreprops.docx",
    "doc-word-default-blank.docx", "set-no-settings-part.docx", "shp-inline-shape-access.docx",
    "sty-behav-props.docx", "sty-having-no-styles-part.docx", "sty-having-styles-part.docx",
    "having-images.docx", "tbl-2x2-table.docx", "tbl-col-props.docx", "tbl-having-tables.docx",
    "tbl-on-off-props.docx",
)  # fmt: skip
TXT_FILES, TXT_MIN_BYTES = 45, 1_000


def git_dir(mirrors: Path, repo: str) -> Path:
    """The bare clone of `repo` ("owner/name") under `mirrors`."""
    owner, name = repo.split("/")
    for candidate in (mirrors / f"{owner}+{name}" / "repo", mirrors / f"{name}.git"):
        if candidate.is_dir():
            return candidate
    raise SystemExit(f"no bare clone of {repo} under {mirrors}: git clone --bare https://github.com/{repo} {mirrors}/{name}.git")


def _tree(gd: Path, commit: str, under: str) -> list[tuple[str, int]]:
    """(path, size) of every blob under `under` at `commit`, sorted by path."""
    out = subprocess.run(
        ["git", "--git-dir", str(gd), "ls-tree", "-r", "-l", commit, "--", under],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    rows = []
    for line in out.stdout.splitlines():
        meta, path = line.split("\t", 1)
        size = meta.split()[3]
        if size != "-":
            rows.append((path, int(size)))
    return sorted(rows)


def _blob(gd: Path, commit: str, path: str) -> bytes:
    out = subprocess.run(["git", "--git-dir", str(gd), "show", f"{commit}:{path}"], check=True, capture_output=True)
    return out.stdout


def _flat(path: str) -> str:
    return path.replace("/", "__")


def assemble(out: Path, mirrors: Path) -> dict[str, object]:
    """Write the folder under `out` (emptied first); its summary."""
    if out.exists():
        shutil.rmtree(out)
    for part in ("md", "pdf", "docx", "txt", "html"):
        (out / part).mkdir(parents=True)
    gd, commit = git_dir(mirrors, ECHARTS[0]), ECHARTS[1]
    for lang in ("zh", "en"):
        for section in ("tutorial", "api", "option-gl"):
            for path, _ in _tree(gd, commit, f"{lang}/{section}"):
                if path.endswith(".md"):
                    (out / "md" / _flat(path)).write_bytes(_blob(gd, commit, path))
    gd, commit = git_dir(mirrors, PDFJS_REPO[0]), PDFJS_REPO[1]
    for name in PDFJS:
        (out / "pdf" / name).write_bytes(_blob(gd, commit, f"test/pdfs/{name}"))
    for path in DEBIAN_PDFS:
        shutil.copy(Path("/usr/share/doc") / path, out / "pdf" / Path(path).name)
    gd, commit = git_dir(mirrors, DOCX_REPO[0]), DOCX_REPO[1]
    docx = [p for under in ("features/steps/test_files", "tests/test_files") for p, _ in _tree(gd, commit, under)]
    for path in docx:
        target = out / "docx" / Path(path).name
        if path.endswith(".docx") and target.name not in EMPTY_DOCX and not target.exists():
            target.write_bytes(_blob(gd, commit, path))
    rst = [p for p, size in _tree(gd, commit, "docs") if p.endswith(".rst") and size >= TXT_MIN_BYTES]
    for path in rst[:TXT_FILES]:
        (out / "txt" / (_flat(path)[: -len(".rst")] + ".txt")).write_bytes(_blob(gd, commit, path))
    for folder in DEBIAN_HTML:
        for html in sorted((Path("/usr/share/doc") / folder).glob("*.html")):
            if html.stat().st_size <= HTML_MAX_BYTES:
                shutil.copy(html, out / "html" / f"{folder.split('/')[0]}__{html.name}")
    return summary(out)


def summary(folder: Path) -> dict[str, object]:
    """Files per extension, total MB, and Markdown files per language (echarts-doc's zh/ and en/)."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    kinds = Counter(p.suffix.lstrip(".").lower() for p in files)
    md_lang = Counter(p.name.split("__", 1)[0] for p in files if p.suffix == ".md")
    return {
        "folder": str(folder),
        "files": len(files),
        "by_type": dict(sorted(kinds.items())),
        "mb": round(sum(p.stat().st_size for p in files) / 1e6, 2),
        "md_by_language": dict(sorted(md_lang.items())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/work/tmp-folder/mixed300"))
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    args = parser.parse_args()
    print(json.dumps(assemble(args.out, args.mirrors), indent=2))


if __name__ == "__main__":
    main()
