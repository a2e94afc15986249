"""Decode the bytes of a text file in any common encoding used for Chinese, Korean and English.

Invariants: decoding is deterministic and strict (no replacement characters are ever invented):
1. a byte order mark decides (UTF-8, UTF-16, UTF-32);
2. else an encoding the file declares (HTML `<meta charset>`) decides, when the bytes decode with it;
3. else, for bytes holding NUL, UTF-32 or UTF-16 without a BOM decides when the NULs sit where
   that encoding puts them (the zero high bytes of mostly-ASCII text) and the bytes decode to
   text without control characters; else UTF-8 with a few stray NULs (at most a tenth of the
   characters, other controls at most 1%) is still UTF-8 text; other NUL-holding bytes are a
   binary file (ValueError "binary file"), as are the signatures of common binary formats;
4. else valid UTF-8 decides;
5. else, for bytes without NUL, the East Asian legacy encodings are tried first: GB18030 (a
   superset of GBK and GB2312), Big5 (as Windows code page 950) and Korean EUC-KR (as its Windows
   superset cp949, Unified Hangul Code); charset-normalizer ranks them (its mess ratio), and a tie
   is broken by which reading holds fewer characters implausible in its language (for Chinese:
   kana, Hangul, Greek, Cyrillic, box drawing, private use; for Korean the same less Hangul),
   then in that order (so EUC-KR Korean is read as Korean, not as GB18030 Chinese mojibake);
6. else charset-normalizer's full detection (UTF-16 without BOM, Western and other code pages),
   a tie broken towards windows-1252, the Western default.
A file nothing decodes raises ValueError with the reason.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: FF FE 00 00 starts with FF FE
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
LEGACY_CJK = ("gb18030", "cp950", "cp949")
# Also tried when repairing text that was decoded with the wrong code page (`ingest.mojibake`).
SHIFT_JIS = "cp932"
_WESTERN_DEFAULT = "cp1252"
# What a declared label really means (WHATWG: latin-1 and ascii labels are windows-1252; GBK and
# GB2312 are read as their superset GB18030; Big5 as its Windows superset cp950).
_ALIASES = {
    "gbk": "gb18030", "gb2312": "gb18030", "x-gbk": "gb18030", "gb_2312-80": "gb18030",
    "big5": "cp950", "big5-hkscs": "big5hkscs", "x-x-big5": "cp950",
    "euc-kr": "cp949", "ks_c_5601-1987": "cp949", "windows-949": "cp949",
    "iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "ascii": "cp1252",
    "us-ascii": "cp1252", "utf8": "utf-8", "unicode": "utf-16",
}  # fmt: skip
_OTHER_SCRIPTS = "\u0370-\u04ff\u2500-\u257f\u3100-\u312f\ue000-\uf8ff"
# Characters implausible in text of each legacy encoding's language (Greek, Cyrillic, box drawing,
# bopomofo, private use; kana and Hangul where the language has none).
_IMPLAUSIBLE = {
    "chinese": re.compile(f"[{_OTHER_SCRIPTS}\u3040-\u30ff\uac00-\ud7af\uff61-\uff9f]"),
    "korean": re.compile(f"[{_OTHER_SCRIPTS}\u3040-\u30ff\uff61-\uff9f]"),
    "japanese": re.compile(f"[{_OTHER_SCRIPTS}\uac00-\ud7af]"),
}
_LANGUAGE = {"gb18030": "chinese", "cp950": "chinese", "cp949": "korean", "cp932": "japanese"}


@dataclass(frozen=True)
class Decoded:
    """Decoded text and the codec that produced it."""

    text: str
    encoding: str


def decode_bytes(data: bytes, declared: str | None = None) -> Decoded:
    """The text of `data` per the module docstring; ValueError when no encoding fits."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            if codec == "utf-32" and len(data) % 4:
                continue  # FF FE 00 00 can also be a UTF-16 BOM followed by U+0000
            return _strict(data, codec)
    if declared:
        named = _codec(declared)
        if named is not None:
            try:
                return Decoded(data.decode(named), named)
            except UnicodeDecodeError:
                pass  # a wrong declaration is common; fall through to detection
    _refuse_binary_signature(data)
    if b"\x00" in data:
        return _without_bom(data)
    try:
        return Decoded(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError:
        pass
    if b"\x00" not in data:
        legacy = best_legacy_cjk(data)
        if legacy is not None:
            return legacy
    return _detect(data)


# Leading bytes of binary formats a text loader might be handed under a wrong name.
_BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF"), (b"PK\x03\x04", "a ZIP archive (e.g. .docx, .xlsx)"), (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"), (b"\x7fELF", "an executable"),
    (b"\xd0\xcf\x11\xe0", "an old Office file (.doc/.xls)"), (b"\x1f\x8b", "a gzip archive"),
    (b"SQLite format 3\x00", "a SQLite database"),
)  # fmt: skip
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SAMPLE = 65536


def _refuse_binary_signature(data: bytes) -> None:
    for magic, kind in _BINARY_SIGNATURES:
        if data.startswith(magic):
            raise ValueError(f"binary file, not text (it starts like {kind}); give it its real suffix")


def _without_bom(data: bytes) -> Decoded:
    """UTF-32/UTF-16 without a BOM, when the NUL bytes sit where they put them; else binary."""
    sample = data[:_SAMPLE]
    zeros = [sample[offset::4].count(0) / max(1, len(sample[offset::4])) for offset in range(4)]
    candidates = []
    if len(data) % 4 == 0:
        candidates += [("utf-32-le", min(zeros[1:]) >= 0.9), ("utf-32-be", min(zeros[:3]) >= 0.9)]
    if len(data) % 2 == 0:
        odd, even = (zeros[1] + zeros[3]) / 2, (zeros[0] + zeros[2]) / 2
        candidates += [("utf-16-le", odd >= 0.3 and even <= 0.05), ("utf-16-be", even >= 0.3 and odd <= 0.05)]
    for codec, fits in candidates:
        if not fits:
            continue
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        if len(_CONTROL.findall(text)) <= len(text) // 100:
            return Decoded(text, codec)
    try:  # UTF-8 text with a few stray NULs (padding): still text
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        nuls = text.count("\x00")
        if nuls <= len(text) // 10 and len(_CONTROL.findall(text)) - nuls <= len(text) // 100:
            return Decoded(text, "utf-8")
    raise ValueError(
        "binary file, not text (it holds NUL bytes that fit no text encoding); "
        "give it its real suffix or leave it out"
    )


def _strict(data: bytes, codec: str) -> Decoded:
    try:
        return Decoded(data.decode(codec), codec)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"starts with a {codec} byte order mark but is not valid {codec} (byte {exc.start})"
        ) from exc


def _codec(label: str) -> str | None:
    name = label.strip().lower()
    name = _ALIASES.get(name, name)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def best_legacy_cjk(data: bytes, encodings: tuple[str, ...] = LEGACY_CJK) -> Decoded | None:
    """The best reading of `data` in one of the East Asian `encodings` (step 5 of the module
    docstring), or None when none decodes it."""
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data, cp_isolation=list(encodings)))
    if not matches:
        return None
    readings = [(match, str(match)) for match in matches]
    match, text = min(
        readings,
        key=lambda pair: (
            round(pair[0].chaos, 2),
            implausible_share(pair[1], pair[0].encoding),
            encodings.index(pair[0].encoding) if pair[0].encoding in encodings else 9,
        ),
    )
    return Decoded(text, match.encoding)


def implausible_share(text: str, encoding: str) -> float:
    """The share of `text`'s characters implausible in the language of a legacy East Asian
    `encoding` (gb18030, cp950, cp949, cp932).

    >>> implausible_share("대한민국", "cp949"), implausible_share("대한민국", "gb18030")
    (0.0, 1.0)
    """
    pattern = _IMPLAUSIBLE[_LANGUAGE.get(encoding, "chinese")]
    return len(pattern.findall(text)) / max(len(text), 1)


def _detect(data: bytes) -> Decoded:
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data))
    if not matches:
        raise ValueError(
            "cannot detect the text encoding (not UTF-8, UTF-16, GB18030/GBK, Big5, EUC-KR or a common "
            "code page); save the file as UTF-8"
        )
    best = min(
        matches,
        key=lambda m: (round(m.chaos, 2), -round(m.coherence, 2), m.encoding != _WESTERN_DEFAULT),
    )
    return Decoded(str(best), best.encoding)
