"""The table of every setting in docs/configuration.md, generated from SETTINGS by one command.

    python -m ragspine.settings.docs            # rewrite the table in docs/configuration.md
    python -m ragspine.settings.docs --check    # exit 1 when the file is stale (`make docs-check`)

Invariant: the text between the `settings-table` markers is exactly `markdown_table()`; nothing
else in the file changes. tests/ (run by CI) fail when the committed file is stale. Not imported
by the package (so `python -m` runs it cleanly): the table itself is `ragspine.settings.table`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from ragspine.settings.table import markdown_table

DOC = Path("docs/configuration.md")
_TABLE = re.compile(r"(<!-- settings-table:start[^>]*-->\n)(.*)(<!-- settings-table:end -->)", re.DOTALL)


def with_table(text: str) -> str:
    """`text` (a configuration.md) with the table between its markers regenerated."""
    if not _TABLE.search(text):
        raise ValueError("no <!-- settings-table:start --> ... <!-- settings-table:end --> markers")
    return _TABLE.sub(lambda m: m.group(1) + markdown_table() + m.group(3), text, count=1)


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or with --check, verify) the settings table of a configuration.md."""
    parser = argparse.ArgumentParser(prog="python -m ragspine.settings.docs", description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DOC, help=f"the file (default: {DOC})")
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale; change nothing")
    args = parser.parse_args(argv)
    text = args.path.read_text("utf-8")
    fresh = with_table(text)
    if fresh == text:
        return 0
    if args.check:
        print(f"{args.path} is stale: run `python -m ragspine.settings.docs`", file=sys.stderr)
        return 1
    args.path.write_text(fresh, "utf-8")
    print(f"{args.path}: settings table regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
