"""Mojibake repair: text that was decoded with the wrong code page, decoded again right.

A PDF whose font maps GBK codes to Latin-1 glyphs extracts `目录` as `Ä¿Â¼`; a UTF-8 file read
as windows-1252 somewhere upstream holds `cafÃ©`. Each such character is one byte of the real
encoding, so the repair is exact when it exists: the line's characters back to their bytes
(Latin-1, or windows-1252 for its punctuation), those bytes decoded in the right encoding.

Invariants:
- Only lines holding letter soup (`quality.soup_words`) are candidates, and only when the
  document holds at least `MIN_SOUP_CHARS` of it (a stray `Ã©` is reported, not rewritten).
- One encoding for the whole document, chosen from the candidates' bytes joined (those lines
  that decode in at least one of the encodings below; a line cut mid-character does not veto
  the rest): valid UTF-8
  holding multi-byte sequences, else the East Asian legacy encoding the one detector ranks best
  (`encoding.best_legacy_cjk`: GB18030, Big5, EUC-KR/cp949, Shift_JIS), and only when that
  reading is certain: it decodes strictly and holds no character implausible in its language
  (`encoding.implausible_share` is 0) and no letter soup. Else nothing changes.
- A candidate line is replaced only when its own bytes decode strictly in that encoding to text
  with no implausible character; every other line is kept byte for byte. Page spans and heading
  spans are moved with the text (a line boundary stays a line boundary), so citations into the
  repaired text are exact and every PDF chunk still maps to its pages.
- Deterministic; the loaded document is returned unchanged when nothing is repaired.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ragspine.ingest.encoding import LEGACY_CJK, SHIFT_JIS, best_legacy_cjk, implausible_share
from ragspine.ingest.loaders.base import LoadedDocument
from ragspine.ingest.quality import LETTER_SOUP, garbled_share, soup_words

MIN_SOUP_CHARS = 8  # less letter soup than this is too little evidence to rewrite text
_SAMPLE_BYTES = 65536
_CP1252_BYTE = {bytes([b]).decode("cp1252"): b for b in range(0x80, 0xA0) if b not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}
_ENCODINGS = ("utf-8", *LEGACY_CJK, SHIFT_JIS)
READ_AS = "latin-1"  # what the repaired text had been read as (windows-1252 punctuation included)


@dataclass(frozen=True)
class Repair:
    """What `repair_mojibake` changed: the encoding the text really was, and how many lines."""

    encoding: str
    lines: int
    left: int  # candidate lines that did not decode and stay as they were

    def describe(self) -> str:
        """One line for the ingest summary and the registry."""
        kept = f"; {self.left} line(s) did not decode and were kept" if self.left else ""
        return f"{self.encoding} text read as {READ_AS}: {self.lines} line(s) decoded again{kept}"


def repair_mojibake(loaded: LoadedDocument) -> tuple[LoadedDocument, Repair | None]:
    """`loaded` with its mojibake lines decoded right (see the module docstring), and what was
    repaired (None: `loaded` itself, unchanged)."""
    if LETTER_SOUP.search(loaded.text) is None:  # the common case, at regex speed
        return loaded, None
    lines = loaded.text.split("\n")
    soup = [_soup_chars(line) for line in lines]
    if sum(soup) < MIN_SOUP_CHARS:
        return loaded, None
    candidates = [i for i, chars in enumerate(soup) if chars]
    as_bytes = {i: raw for i in candidates if (raw := single_bytes(lines[i])) is not None}
    encoding = _certain_encoding(as_bytes.values())
    fixed = _fixed_lines(as_bytes, encoding) if encoding is not None else {}
    if encoding is None or not fixed:
        return loaded, None
    new_lines = [fixed.get(i, line) for i, line in enumerate(lines)]
    moved = _Positions(lines, new_lines, encoding)
    repaired = replace(
        loaded,
        text="\n".join(new_lines),
        page_spans=tuple((moved(s), moved(e)) for s, e in loaded.page_spans),
        headings=tuple((moved(s), moved(e), level) for s, e, level in loaded.headings),
    )
    return repaired, Repair(encoding, len(fixed), len(candidates) - len(fixed))


def _fixed_lines(as_bytes: dict[int, bytes], encoding: str) -> dict[int, str]:
    """The candidate lines (index -> bytes) that decode with certainty in `encoding`, decoded."""
    decoded = {i: _decoded(raw, encoding) for i, raw in as_bytes.items()}
    return {i: line for i, line in decoded.items() if line is not None}


def single_bytes(text: str) -> bytes | None:
    """The bytes `text` was read from, one per character (Latin-1, windows-1252 punctuation), or
    None when a character cannot have come from one byte.

    >>> single_bytes("Ä¿Â¼"), single_bytes("â€™"), single_bytes("目")
    (b'\\xc4\\xbf\\xc2\\xbc', b'\\xe2\\x80\\x99', None)
    """
    out = bytearray()
    for ch in text:
        code = ord(ch)
        if code < 0x100:
            out.append(code)
        elif ch in _CP1252_BYTE:
            out.append(_CP1252_BYTE[ch])
        else:
            return None
    return bytes(out)


def _soup_chars(line: str) -> int:
    return sum(end - start for start, end in soup_words(line))


def _certain_encoding(lines: Iterable[bytes]) -> str | None:
    """The encoding the candidate lines' bytes were written in, when certain; else None. A line
    no candidate encoding decodes (a character cut in half) has no say."""
    decodable = [raw for raw in lines if any(_strict(raw, encoding) for encoding in _ENCODINGS)]
    sample = b"\n".join(decodable)[:_SAMPLE_BYTES]
    if not sample:
        return None
    try:
        text = sample.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:  # valid UTF-8 with multi-byte sequences is not an accident of Latin-1 text
        return "utf-8" if not text.isascii() and garbled_share(text) == 0 else None
    best = best_legacy_cjk(sample, (*LEGACY_CJK, SHIFT_JIS))
    if best is None or implausible_share(best.text, best.encoding) > 0 or garbled_share(best.text) > 0:
        return None
    return best.encoding


def _strict(raw: bytes, encoding: str) -> bool:
    try:
        raw.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def _decoded(raw: bytes, encoding: str) -> str | None:
    try:
        line = raw.decode(encoding)
    except UnicodeDecodeError:
        return None
    return line if implausible_share(line, encoding) == 0 else None


class _Positions:
    """Maps a character offset of the old text to the new one (line by line; inside a repaired
    line, through the byte offsets of its decoded characters)."""

    def __init__(self, old: list[str], new: list[str], encoding: str) -> None:
        self.old_starts: list[int] = []
        self.new_starts: list[int] = []
        old_at = new_at = 0
        for before, after in zip(old, new, strict=True):
            self.old_starts.append(old_at)
            self.new_starts.append(new_at)
            old_at += len(before) + 1
            new_at += len(after) + 1
        self.old, self.new, self.encoding = old, new, encoding

    def __call__(self, position: int) -> int:
        i = max(0, bisect.bisect_right(self.old_starts, position) - 1)
        offset = position - self.old_starts[i]
        before, after = self.old[i], self.new[i]
        if before is after or offset <= 0:
            return self.new_starts[i] + offset
        if offset >= len(before):
            return self.new_starts[i] + len(after) + (offset - len(before))
        consumed = 0  # characters of `after` whose bytes end at or before `offset`
        for count, ch in enumerate(after):
            if consumed >= offset:
                return self.new_starts[i] + count
            consumed += len(ch.encode(self.encoding, errors="replace"))
        return self.new_starts[i] + len(after)
