"""The Markdown table of every setting that docs/configuration.md holds, generated from SETTINGS.

Invariant: one row per SETTINGS entry, in declaration order: the variable (and its aliases), the
documented default, what its parser accepts, its help text; `python -m ragspine.settings.docs`
writes it into the file.
"""

from __future__ import annotations

from ragspine.settings.schema import SETTINGS


def markdown_table() -> str:
    """The table of every setting for docs/configuration.md, generated from SETTINGS."""
    lines = ["| Variable | Default | Accepted | Meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        name = f"`{s.env}`" + "".join(f" (alias `{a}`)" for a in s.aliases)
        default = "—" if s.default is None else f"`{s.default}`"
        meaning = s.help.replace("|", r"\|")
        lines.append(f"| {name} | {default} | {s.parse.accepts} | {meaning} |")
    return "\n".join(lines) + "\n"
