"""Markdown front matter: found, parsed by a real parser, and every sensitivity key accounted for.

Invariants:
- Front matter is YAML (PyYAML, safe) between lines of three or more `-` (closed by such a line
  or `...`), or TOML (tomllib) between lines of three or more `+`, at the start of the text after
  any BOM, whitespace, blank lines and invisible characters (a zero-width space). A `-` block
  counts only when it holds a `key:` line or mentions a sensitivity key, so a document that
  merely opens with a horizontal rule is left alone.
- At most `MAX_FRONT_MATTER_CHARS` characters and `MAX_FRONT_MATTER_DEPTH` levels deep; YAML
  aliases (`*name`) are refused, so a few hundred bytes cannot expand into gigabytes. The depth
  is measured on the raw text first (`raw_depth`: a loop over the characters, no recursion), and
  a block deeper than the limit never reaches tomllib or PyYAML, whose parsers recurse.
- Every top-level key is read with its value, duplicates included; every value of every key that
  folds (`retrieval.sensitivity.fold_key`) to `sensitivity` is a label (`label_keys.gather_labels`),
  so `sensitivity: RESTRICTED` then `Sensitivity: PUBLIC` gives both and the strictest wins.
- Fails closed: a line that mentions a sensitivity key (after folding: at the start of a line or
  after `{`/`,`, before `:` or `=`, or a lone `? sensitivity`) which the parser did not read as a
  top-level key (unparseable, nested, a full-width colon folded, a tab-indented key, a front matter
  that is not closed, or such a line among the first lines of a text with no front matter) refuses
  the document with a ValueError naming the line: never ingested at a lower label.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from ragspine.ingest.label_keys import LABEL_KEY, gather_labels, is_label_key
from ragspine.retrieval.sensitivity import fold_key

__all__ = ["MAX_FRONT_MATTER_CHARS", "MAX_FRONT_MATTER_DEPTH", "raw_depth", "split_front_matter"]

MAX_FRONT_MATTER_CHARS = 65536
MAX_FRONT_MATTER_DEPTH = 16
_LEAD = re.compile(r"[\s\ufeff\u00ad\u180e\u200b-\u200f\u2060-\u2064]*")
_END = r"[ \t\ufeff\u200b-\u200d\u2060]*(?:\n|\Z)"
_YAML = re.compile(r"-{3,}" + _END + r"(.*?)\n(?:-{3,}|\.\.\.)" + _END, re.DOTALL)
_TOML = re.compile(r"\+{3,}" + _END + r"(.*?)\n\+{3,}" + _END, re.DOTALL)
_YAML_KEY_LINE = re.compile(r"^[\w\-]+[ \t]*:", re.MULTILINE)
_MENTION = re.compile(r"(?:^|[{,])[\s\"'?\-\[]*" + LABEL_KEY + r"[\s\"']*[:=]|^" + LABEL_KEY + "$")
_HEAD_LINES = 20  # lines of a text without front matter checked for a stray sensitivity key
_HEAD_CHARS = 200  # the start of each of those lines that is checked


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter mapping, the rest of the text); ({}, text) when the text has none. A label
    key's values come as one tuple under `sensitivity`. ValueError (naming the line, 1-based) for
    front matter that cannot be parsed or a sensitivity key that is not read (module docstring).

    >>> split_front_matter("\\ufeff\\n----\\nsensitivity: RESTRICTED\\nSensitivity: public\\n----\\nbody")
    ({'sensitivity': ('RESTRICTED', 'public')}, 'body')
    """
    lead = _LEAD.match(text)
    start = lead.end() if lead else 0
    rest = text[start:]
    first = text.count("\n", 0, start) + 2  # the file line of the block's first line
    toml = _TOML.match(rest)
    match = toml or _YAML.match(rest)
    if match is None:
        head = "\n".join(line[:_HEAD_CHARS] for line in rest.split("\n", _HEAD_LINES)[:_HEAD_LINES])
        _refuse_mentions(head, first - 1, range(_HEAD_LINES), "is not in a front matter block the reader finds")
        return {}, text
    block = match.group(1)
    if len(block) > MAX_FRONT_MATTER_CHARS:
        raise ValueError(
            f"front matter is {len(block)} characters; at most {MAX_FRONT_MATTER_CHARS} are read "
            "(move long data into the text or a sidecar)"
        )
    mentions = _mentions(block)
    depth = raw_depth(block)
    if depth > MAX_FRONT_MATTER_DEPTH:
        _refuse_mentions(block, first, mentions, "is nested too deep to be parsed")
        raise ValueError(f"front matter is nested deeper than {MAX_FRONT_MATTER_DEPTH} levels (about {depth})")
    if toml is not None:
        data, read = _toml(block, mentions, first)
    else:
        if not mentions and not _YAML_KEY_LINE.search(block):
            return {}, text  # a horizontal rule, not front matter
        data, read = _yaml(block, mentions, first)
    _refuse_mentions(block, first, [i for i in mentions if i not in read], "is not read as a top-level key")
    _check_depth(data, MAX_FRONT_MATTER_DEPTH)
    return data, rest[match.end() :]


def raw_depth(block: str) -> int:
    r"""An upper bound on how deep `block` (YAML or TOML source) nests by brackets, braces and
    indentation, read without parsing (TOML's dotted keys and table headers nest without them:
    the parsed value is checked too, `_check_depth`):
    per line, the open brackets and braces (`[`, `{`, carried across lines; closing ones counted
    only down to zero, quotes not honoured, so a bracket in a string can only raise the count),
    plus the line's indentation levels and YAML's compact `- ` / `? ` markers. The maximum over
    the lines.

    >>> raw_depth("a: 1\nb: [[1], {c: [2]}]\nd:\n  e:\n    - - f")
    5
    """
    deepest = brackets = 0
    indents: list[int] = []
    for line in block.split("\n"):
        body = line.lstrip(" \t")
        if body and not body.startswith("#"):
            width = len(line) - len(body)
            while indents and indents[-1] >= width:
                indents.pop()
            indents.append(width)
            markers = 0
            while body[:2] in ("- ", "? ", "-\t") or body in ("-", "?"):
                markers += 1
                body = body[2:].lstrip(" \t")
            deepest = max(deepest, len(indents) + markers + brackets)
        for char in line:
            if char in "[{":
                brackets += 1
                deepest = max(deepest, len(indents) + brackets)
            elif char in "]}" and brackets:
                brackets -= 1
    return deepest


def _mentions(block: str) -> list[int]:
    """The 0-based lines of `block` that mention a sensitivity key (after folding)."""
    return [i for i, line in enumerate(block.split("\n")) if _MENTION.search(fold_key(line))]


def _refuse_mentions(block: str, first: int, lines: Any, why: str) -> None:
    """ValueError naming the first of `lines` (0-based in `block`, whose line 0 is file line
    `first`) that mentions a sensitivity key; nothing when none does."""
    rows = block.split("\n")
    for i in lines:
        if i < len(rows) and _MENTION.search(fold_key(rows[i])):
            raise ValueError(
                f"line {first + i}: {rows[i].strip()[:80]!r} names a sensitivity label that {why} "
                "(refused rather than ingested at a lower label); write it as `sensitivity: LEVEL` in "
                "front matter between `---` lines (or use a sidecar)"
            )


def _toml(block: str, mentions: list[int], first: int) -> tuple[dict[str, Any], set[int]]:
    """The TOML block as a mapping, and the mention lines read as top-level label keys."""
    try:
        data = tomllib.loads(block)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        _refuse_mentions(block, first, mentions, "cannot be parsed")
        raise ValueError(f"front matter (+++) is not valid TOML: {exc}") from exc
    read: set[int] = set()
    in_table = False
    for i, line in enumerate(block.split("\n")):
        in_table = in_table or line.lstrip().startswith("[")
        if i in mentions and not in_table:
            try:
                keys = list(tomllib.loads(line))
            except tomllib.TOMLDecodeError:
                continue
            if len(keys) == 1 and is_label_key(keys[0]):
                read.add(i)
    return gather_labels(data.items()), read


def _yaml(block: str, mentions: list[int], first: int) -> tuple[dict[str, Any], set[int]]:
    """The YAML block as a mapping (every top-level pair seen), and the lines of its top-level
    label keys."""
    try:
        data, pairs = _load_yaml(block)
    except ValueError:
        _refuse_mentions(block, first, mentions, "cannot be parsed")
        raise
    if not isinstance(data, dict):
        _refuse_mentions(block, first, mentions, "is not in a mapping")
        raise ValueError(f"front matter must be a mapping of keys to values, got {type(data).__name__}")
    read = {line for key, _, line in pairs if is_label_key(key)}
    labels = gather_labels((key, value) for key, value, _ in pairs).get(LABEL_KEY)
    out = {key: value for key, value in data.items() if not is_label_key(key)}
    return ({**out, LABEL_KEY: labels} if labels else out), read


def _load_yaml(block: str) -> tuple[Any, list[tuple[Any, Any, int]]]:
    """Safe YAML without aliases (refused) and nested at most MAX_FRONT_MATTER_DEPTH deep: the
    document, and its top-level (key, value, 0-based line of the key) pairs, duplicates included."""
    import yaml  # PyYAML, a core dependency; imported only for files that have front matter

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, "YAML aliases (*name) are not allowed in front matter", event.start_mark
                )
            self.depth += 1
            try:
                if self.depth > MAX_FRONT_MATTER_DEPTH:
                    raise yaml.composer.ComposerError(
                        None, None, f"nested deeper than {MAX_FRONT_MATTER_DEPTH} levels",
                        self.peek_event().start_mark,
                    )  # fmt: skip
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = Loader(block)
    try:
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
        pairs: list[tuple[Any, Any, int]] = []
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = loader.construct_object(key_node, deep=True)
                pairs.append((key, loader.construct_object(value_node, deep=True), key_node.start_mark.line))
    except (yaml.YAMLError, RecursionError, TypeError) as exc:
        raise ValueError(f"front matter is not valid YAML: {exc}") from exc
    finally:
        loader.dispose()
    return data, pairs


def _check_depth(data: Any, limit: int) -> None:
    """ValueError when `data` nests deeper than `limit` (TOML inline tables and arrays)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            raise ValueError(f"front matter is nested deeper than {limit} levels")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)
