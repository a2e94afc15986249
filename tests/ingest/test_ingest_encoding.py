"""Text decoding: BOMs, UTF-8, UTF-16, GB18030/GBK, Big5, declared charsets; and language detection."""

from __future__ import annotations

import codecs
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ingest_fixtures import BIG5_TEXT, GBK_TEXT

from ragspine.ingest.encoding import decode_bytes
from ragspine.retrieval.language import detect_language

MIXED = "ACME 2023 年报：营收 12.5 亿元，gross margin 下降。"


@pytest.mark.parametrize(
    ("text", "codec", "detected"),
    [
        (GBK_TEXT, "gbk", "gb18030"),
        (GBK_TEXT, "gb2312", "gb18030"),
        (GBK_TEXT + "𠀀€", "gb18030", "gb18030"),  # four-byte GB18030 sequences
        (MIXED, "gbk", "gb18030"),
        (BIG5_TEXT, "big5", "cp950"),
        (MIXED.replace("报", "報").replace("营", "營").replace("亿", "億"), "big5", "cp950"),
        ("年度报告", "gbk", "gb18030"),  # four characters: short input still decodes right
        ("年度報告", "big5", "cp950"),
        (GBK_TEXT, "utf-16-le", "utf_16_le"),  # UTF-16 without a byte order mark
        (GBK_TEXT, "utf-16-be", "utf_16_be"),
        ("Le naïve garçon était là", "cp1252", "cp1252"),
    ],
)
def test_legacy_encodings_are_detected_and_decoded(text: str, codec: str, detected: str) -> None:
    decoded = decode_bytes(text.encode(codec))
    assert decoded.text == text
    assert decoded.encoding == detected


@pytest.mark.parametrize(
    ("prefix", "codec"),
    [
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
    ],
)
def test_a_byte_order_mark_decides_and_is_dropped(prefix: bytes, codec: str) -> None:
    assert decode_bytes(prefix + MIXED.encode(codec)).text == MIXED


def test_a_declared_charset_is_used_when_it_fits_and_ignored_when_it_does_not() -> None:
    data = GBK_TEXT.encode("gbk")
    assert decode_bytes(data, declared="GB2312").encoding == "gb18030"
    assert decode_bytes(data, declared="utf-8").text == GBK_TEXT  # wrong declaration: detected
    assert decode_bytes(MIXED.encode("utf-8"), declared="no-such-codec").text == MIXED


def test_undecodable_bytes_name_the_problem() -> None:
    with pytest.raises(ValueError, match="utf-8-sig byte order mark but is not valid"):
        decode_bytes(codecs.BOM_UTF8 + b"\xff\xfe\xfd")


# A UTF-16 LE text starting with U+0000 begins FF FE 00 00, the UTF-32 LE byte order mark:
# inherently ambiguous, and never real-world text, so it is left out. Without a BOM, UTF-8 bytes
# holding NULs are read by where the NULs sit (BOM-less UTF-16/32, else binary), so the UTF-8 leg
# is text without control characters.
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200).filter(lambda t: not t.startswith("\x00")))
def test_utf8_and_bom_utf16_round_trip_any_text(text: str) -> None:
    if not any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in text):
        assert decode_bytes(text.encode("utf-8")).text == text
    assert decode_bytes(text.encode("utf-16")).text == text  # Python writes a BOM
    assert decode_bytes(text.encode("utf-32")).text == text


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("营收下滑的原因是出口订单减少。", "zh"),
        (BIG5_TEXT, "zh"),
        (MIXED, "zh"),
        ("Borealis gross margin fell because of a recall.", "en"),
        ("Gross margin  EBITDA  capex  FY2023  guidance  revenue  opex", "en"),
        ("Le chiffre d'affaires a baissé en raison de la baisse des commandes à l'exportation.", "other"),
        ("Der Umsatz ist gesunken, weil die Exportaufträge zurückgegangen sind.", "other"),
        ("売上高は輸出の減少により低下しました。", "other"),
        ("매출이 감소했습니다 수출 감소 때문입니다", "other"),
        ("Выручка снизилась из-за сокращения экспортных заказов.", "other"),
        ("12,345.6 — 2023", ""),
    ],
)
def test_language_detection(text: str, language: str) -> None:
    assert detect_language(text) == language
