"""Which chunker `auto` picks for every entry of BEIR corpora, the way `ragspine eval` ingests them.

Each entry becomes the text `ragspine eval` writes to its .txt file (title, blank line, text;
`CorpusDoc.indexed_text`), read back as the text loader does (`clean_text`), and is cut by
`make_chunker("auto")` with the default budget. No embedding, no store. Prints the count of each
chosen chunker per corpus and, with --digests FILE, writes one line per entry (corpus, id, choice,
SHA-256 of the chunks' text, heading and locator) so two runs (e.g. two branches) can be diffed.

    PYTHONPATH=src python bench/auto_choice.py /work/shared/eval/*/ --digests after.tsv
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import sys
from pathlib import Path

from ragspine.ingest.loaders.base import clean_text
from ragspine.retrieval.chunking.factory import make_chunker
from ragspine.retrieval.model import DocumentMeta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="BEIR folders holding corpus.jsonl")
    parser.add_argument("--digests", type=Path, help="write corpus, id, choice and chunk digest per entry")
    args = parser.parse_args(argv)
    chunker = make_chunker("auto")
    out = args.digests.open("w", encoding="utf-8") if args.digests else None
    for folder in args.folders:
        counts: collections.Counter[str] = collections.Counter()
        reasons: collections.Counter[str] = collections.Counter()
        with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
            for line in lines:
                entry = json.loads(line)
                title, body = str(entry.get("title") or ""), str(entry.get("text") or "")
                text = clean_text(f"{title}\n\n{body}" if title.strip() else body)
                if not text.strip():
                    continue
                chunks = chunker.chunk(text, DocumentMeta(str(entry["_id"])))
                choice = str(chunks[0].metadata.get("chunker", "?")) if chunks else "-"
                counts[choice] += 1
                reason = str(chunks[0].metadata.get("chunker_reason", "")) if chunks else ""
                reasons[reason.split(":")[0]] += 1
                if out is not None:
                    digest = hashlib.sha256(
                        json.dumps([(c.text, c.heading, c.source_locator, c.parent_id) for c in chunks]).encode()
                    ).hexdigest()[:16]
                    out.write(f"{folder.name}\t{entry['_id']}\t{choice}\t{digest}\n")
        print(folder.name, dict(sorted(counts.items())), file=sys.stdout)
        if any(reasons):
            print("   reasons:", dict(reasons.most_common(8)))
    if out is not None:
        out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
