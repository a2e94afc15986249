"""The README's locator grammar is complete (issue 38 item 7): a parser built from the README's
`ebnf` block, and nothing else, parses every locator a real ingest stores and search returns."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ingest_fixtures import write_pdf

import ragspine
from ragspine.assembly import ingest_files, load_settings
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.visual.protocol import page_key

ROOT = Path(__file__).resolve().parents[2]
TERMINALS = {"doc_id": r".+", "number": r"[0-9]+"}  # the README's prose: doc_id up to the last '#'


def grammar_regex(readme: str) -> re.Pattern[str]:
    """The `locator` rule of the README's ```ebnf block as one regular expression."""
    block = re.search(r"```ebnf\n(.*?)```", readme, re.DOTALL)
    assert block, "README.md has no ```ebnf block"
    rules: dict[str, str] = {}
    name = ""
    for line in block.group(1).splitlines():
        if match := re.match(r"(\w+)\s*=\s*(.*)", line):
            name, body = match.groups()
            rules[name] = body
        elif line.strip().startswith("|"):
            rules[name] += " " + line.strip()
    tokens_of = {rule: re.findall(r'"[^"]*"|\w+|[\[\]|()]', body) for rule, body in rules.items()}

    def expand(rule: str) -> str:
        out = []
        for token in tokens_of[rule]:
            if token.startswith('"'):
                out.append(re.escape(token[1:-1]))
            elif token == "[":
                out.append("(?:")
            elif token == "]":
                out.append(")?")
            elif token in "|()":
                out.append(token if token != "(" else "(?:")
            elif token in rules:
                out.append(f"(?:{expand(token)})")
            else:
                out.append(TERMINALS[token])
        return "".join(out)

    return re.compile(expand("locator"))


def test_every_stored_and_returned_locator_parses_with_the_readme_grammar(tmp_path: Path) -> None:
    locator = grammar_regex((ROOT / "README.md").read_text("utf-8"))
    folder = tmp_path / "docs"
    shutil.copytree(ROOT / "tests" / "fixtures" / "chunking", folder)
    write_pdf(folder / "report #2.pdf", ["Revenue fell in 2023.\n\nExports declined.", "Outlook: recovery in 2024."])
    (folder / "one.md").write_text("A single paragraph about export orders.", "utf-8")
    db = str(tmp_path / "s.db")
    report, _ = ingest_files([folder], load_settings(flags={"RAGSPINE_DB": db}), progress=False)
    assert not report.failures
    with ChunkStore(db) as store:
        stored = [c.source_locator for c in store.iter_chunks()]
        stored += [c.parent_locator for c in store.iter_chunks() if c.parent_locator]
    with ragspine.open(db) as ws:
        returned = [s["source_locator"] for q in ("export orders", "revenue 2023", "第一条", "question")
                    for s in ws.search(q, top_k=10)]  # fmt: skip
    seen = stored + returned + [page_key("report #2.pdf", 2)]
    bad = [value for value in seen if not locator.fullmatch(value)]
    assert not bad, bad[:5]
    assert any(re.search(r"#p\d+@", v) for v in seen), "the single-paragraph form"
    assert any(re.search(r"#p\d+-\d+@", v) for v in seen), "the paragraph-range form"
    assert any(";pages=" in v for v in seen) and returned
    for wrong in ("doc#pA-B@s-e", "doc#p1@2", "doc#p1-@0-4", "#p1@0-4;pages="):
        assert not locator.fullmatch(wrong), wrong
