"""The full DOM walk of an HTML page: every visible text node of its main content, in reading order.

Invariants: the walk covers `<main>` (or `role="main"`) when the page has one, else `<body>`;
it leaves out what a reader does not read as content — scripts, styles, templates, form
controls, hidden elements (`hidden`, `aria-hidden="true"`, `display:none`), `<nav>` and
`<aside>`, a page-level `<header>` / `<footer>` (one inside `<article>` / `<main>` / `<section>`
is kept, and a `<header>` holding a heading), elements whose id or class names navigation (`nav`, `menu`, `breadcrumb`, `toc`,
`sidebar`, `footer`, `page-header`, `site-footer`, …), and link lists (a block whose text is
mostly link text; inside `<article>` / `<main>` / `<section>` only a table of contents) — and
keeps every other text node, whatever wraps it (text directly under `<body>` included).
Headings come out as Markdown `#` lines, each its own paragraph: `<h1>`…`<h6>` at their level,
and the FAQ-style question elements (`<dt>`, `<summary>`, an element whose class names a
question, a paragraph that is one bold question) one level below the heading above them.
Paragraphs, list items (`- `, `1. `), table rows (`| a | b |`) and `<pre>` blocks (fenced, their
whitespace kept) are blocks separated by blank lines; elsewhere whitespace, line ends of the
source included, collapses as a browser renders it, and a `<br>` is a line end.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

_SKIP = frozenset(
    "script style noscript template head title meta link nav aside form button select option "
    "textarea input iframe svg math canvas object embed map audio video img picture source "
    "track datalist dialog".split()
)
_PAGE_FURNITURE = frozenset({"header", "footer"})
_CONTENT_SCOPES = frozenset({"article", "main", "section"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_QUESTIONS = frozenset({"dt", "summary"})
_BLOCKS = frozenset(
    "address article blockquote body center dd details dl div fieldset figcaption figure hgroup "
    "html li main ol p section table tbody thead tfoot tr ul caption legend".split()
) | frozenset(_HEADINGS) | _QUESTIONS | {"pre", "hr", "td", "th"}
_NAVIGATION_TOKENS = frozenset(
    "nav navbar navigation menu menubar breadcrumb breadcrumbs crumbs toc sidebar footer "
    "pageheader page-header skiplink skip-link cookie cookies banner pagination pager share social "
    "toplang bottomlang permalink headerlink".split()
)
# ... and the last part of a compound name: site-footer, main-nav, left_sidebar
_NAVIGATION_ENDS = frozenset({"nav", "navbar", "navigation", "menu", "breadcrumbs", "sidebar", "footer", "toc"})
_LINK_LIST_TAGS = frozenset({"ul", "ol", "dl", "div", "table", "menu"})
_TOKEN = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
LINK_LIST_SHARE = 0.7  # a block with at least this share of its text in links is navigation
_QUESTION_END = ("?", "？")
_BREAK = "\x00"  # a <br> in the paragraph being filled (NUL never reaches the text)


@dataclass
class _Walk:
    """What the walk has produced so far: finished blocks and the paragraph being filled."""

    blocks: list[str] = field(default_factory=list)
    inline: list[str] = field(default_factory=list)
    level: int = 2  # of the last <h1>…<h6> written (a question goes one deeper)
    marker: str = ""  # a list item's `- ` / `N. `, put before its first text
    in_list: bool = False  # the last block is a list item (the next item joins it, one per line)

    def flush(self) -> None:
        lines = ("".join(self.inline)).split(_BREAK)  # whitespace collapses, as a browser shows it
        text = "\n".join(" ".join(line.split()) for line in lines if line.split())
        self.inline.clear()
        if not text:
            return
        if self.marker and self.in_list:
            self.blocks[-1] += "\n" + self.marker + text
        else:
            self.blocks.append(self.marker + text)
        self.in_list, self.marker = bool(self.marker), ""

    def add(self, block: str) -> None:
        """A finished block (a heading, a table, code) after what is pending."""
        self.flush()
        self.blocks.append(block)
        self.in_list = False

    def heading(self, level: int, text: str, *, question: bool = False) -> None:
        self.flush()
        label = " ".join(text.split())
        if label:
            self.add("#" * level + " " + label)
            self.level = self.level if question else level


def dom_text(tree: Any) -> str:
    """The main content of a parsed page (`lxml.html` document) as Markdown blocks."""
    root = _main_root(tree)
    walk = _Walk()
    if root is not None:
        _visit(root, walk, in_content=root.tag in _CONTENT_SCOPES)
    walk.flush()
    return "\n\n".join(walk.blocks)


def _main_root(tree: Any) -> Any:
    """`<main>` / `role="main"` when the page has exactly one, else `<body>` (else the root)."""
    mains = tree.xpath("//main | //*[@role='main']")
    if len(mains) == 1:
        return mains[0]
    bodies = tree.xpath("//body")
    return bodies[0] if bodies else tree


def _visit(element: Any, walk: _Walk, *, in_content: bool) -> None:
    """Walk `element` (its own text, children and their tails) into `walk`."""
    tag = element.tag.lower() if isinstance(element.tag, str) else ""
    if not tag or _left_out(element, tag, in_content):
        return
    if tag in _HEADINGS:
        walk.heading(_HEADINGS[tag], _text_of(element))
        return
    if _is_question(element, tag):
        walk.heading(min(6, walk.level + 1), _text_of(element), question=True)
        return
    if tag == "pre":
        walk.flush()
        _pre(element, walk)
        return
    if tag == "table":
        walk.flush()
        _table(element, walk)
        return
    if tag == "br":
        walk.inline.append(_BREAK)
        return
    block = tag in _BLOCKS
    if block:
        walk.flush()
        walk.marker = _list_marker(element, tag) or walk.marker
    walk.inline.append(element.text or "")
    scope = in_content or tag in _CONTENT_SCOPES
    for child in element:
        _visit(child, walk, in_content=scope)
        walk.inline.append(child.tail or "")
    if block:
        walk.flush()


def _left_out(element: Any, tag: str, in_content: bool) -> bool:
    """Whether `element` (and all it holds) is not part of the content (module docstring)."""
    if _hidden(element, tag) or (tag in _PAGE_FURNITURE and not in_content and not _holds_title(element, tag)):
        return True
    return tag in _LINK_LIST_TAGS and _is_link_list(element, in_page_only=in_content)


def _holds_title(element: Any, tag: str) -> bool:
    """A page-level `<header>` holding a heading (the page's `<h1>`) is kept, its menus are not."""
    return tag == "header" and bool(element.xpath(".//h1 | .//h2 | .//h3 | .//h4 | .//h5 | .//h6"))


def _hidden(element: Any, tag: str) -> bool:
    """Never read as content: a skipped tag, a hidden element, or one whose id, class or role
    names navigation (not `<body>`, `<html>` or `<main>` themselves)."""
    if tag in _SKIP:
        return True
    if element.get("hidden") is not None or element.get("aria-hidden", "").lower() == "true":
        return True
    if _HIDDEN_STYLE.search(element.get("style", "")):
        return True
    names = f"{element.get('id', '')} {element.get('class', '')} {element.get('role', '')}".lower()
    tokens = _TOKEN.findall(names)
    named = any(token in _NAVIGATION_TOKENS or re.split(r"[-_]", token)[-1] in _NAVIGATION_ENDS for token in tokens)
    return named and tag not in ("body", "html", "main")


def _is_link_list(element: Any, *, in_page_only: bool) -> bool:
    """A block of links: at least three links (two when all point inside the page, a table of
    contents) holding `LINK_LIST_SHARE` of its text. Inside `<article>` / `<main>` /
    `<section>` (`in_page_only`) only a table of contents is: a list of links there is content."""
    links = element.xpath(".//a[@href]")
    in_page = all(link.get("href", "").startswith("#") for link in links)
    if len(links) < (2 if in_page else 3) or (in_page_only and not in_page):
        return False
    text = "".join(element.itertext())
    link_text = "".join("".join(link.itertext()) for link in links)
    total = len("".join(text.split()))
    return total > 0 and len("".join(link_text.split())) >= LINK_LIST_SHARE * total


def _is_question(element: Any, tag: str) -> bool:
    """A FAQ question: `<dt>`, `<summary>`, an element whose class names a question, or a
    paragraph whose whole text is one bold run ending in a question mark."""
    if tag in _QUESTIONS:
        return True
    classes = _TOKEN.findall(element.get("class", "").lower())
    if any(re.split(r"[-_]", token)[-1] == "question" for token in classes):
        return True
    if tag != "p" or len(element) != 1 or element[0].tag not in ("b", "strong"):
        return False
    own = (element.text or "") + (element[0].tail or "")
    return not own.strip() and _text_of(element).strip().endswith(_QUESTION_END)


def _pre(element: Any, walk: _Walk) -> None:
    """A `<pre>` block as fenced code, its text verbatim (leading and trailing blank lines off)."""
    code = "".join(element.itertext()).strip("\n").rstrip()
    if code.strip():
        fence = "~~~" if "```" in code else "```"
        walk.add(f"{fence}\n{code}\n{fence}")


def _table(element: Any, walk: _Walk) -> None:
    """A table as one block: its caption, then one `| a | b |` line per row (a nested table's
    text stays in its cell)."""
    lines = [" ".join(_text_of(caption).split()) for caption in element.xpath("./caption")]
    for row in element.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr"):
        cells = [" ".join(_text_of(cell).split()) for cell in row if _tag(cell) in ("td", "th")]
        if any(cells):
            lines.append("| " + " | ".join(cells) + " |")
    if any(lines):
        walk.add("\n".join(line for line in lines if line))


def _tag(element: Any) -> str:
    return element.tag.lower() if isinstance(element.tag, str) else ""


def _list_marker(element: Any, tag: str) -> str:
    """`- ` for an item of a `<ul>`, `N. ` for the Nth item of an `<ol>`; nothing otherwise."""
    if tag != "li":
        return ""
    parent = element.getparent()
    if parent is None or not isinstance(parent.tag, str) or parent.tag.lower() != "ol":
        return "- "
    items = [child for child in parent if isinstance(child.tag, str) and child.tag.lower() == "li"]
    start = parent.get("start", "1").strip()
    return f"{items.index(element) + (int(start) if start.isdigit() else 1)}. "


def _text_of(element: Any) -> str:
    """The visible text of `element`, what `_hidden` drops inside it dropped (`<br>`: a space)."""
    return "".join(_texts(element))


def _texts(element: Any) -> Iterator[str]:
    tag = element.tag.lower() if isinstance(element.tag, str) else ""
    if not tag or _hidden(element, tag):
        return
    if tag == "br":
        yield " "
        return
    yield element.text or ""
    for child in element:
        yield from _texts(child)
        yield child.tail or ""
