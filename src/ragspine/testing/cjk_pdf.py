"""A PDF whose pages hold Chinese (and any other BMP) text, built without a font file.

Invariant: the text is drawn in Adobe's STSong-Light, a font PDF readers know by name (it is not
embedded), with UCS-2 codes (the UniGB-UCS2-H CMap), one line per `\\n`, each line its own text
object; spaces in a string are real space glyphs, as in reports whose extraction reads "本 报 告".
Text extractors read it back; a viewer without the font shows substitute glyphs. For tests and
benchmarks on machines without a CJK font for fpdf2 to embed.
"""

from __future__ import annotations


def cjk_pdf_bytes(pages: list[str]) -> bytes:
    """The bytes of a PDF with one page per string (see the module docstring)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        ("<< /Type /Pages /Kids [%s] /Count %d >>" % (" ".join(f"{5 + 2 * i} 0 R" for i in range(len(pages))), len(pages))).encode(),
        b"<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding /UniGB-UCS2-H /DescendantFonts [4 0 R] >>",
        b"<< /Type /Font /Subtype /CIDFontType0 /BaseFont /STSong-Light"
        b" /CIDSystemInfo << /Registry (Adobe) /Ordering (GB1) /Supplement 4 >>"
        b" /FontDescriptor << /Type /FontDescriptor /FontName /STSong-Light /Flags 6 /FontBBox [0 -200 1000 900]"
        b" /ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 880 /StemV 93 >> >>",
    ]  # fmt: skip
    for index, text in enumerate(pages):
        lines = " ".join(
            f"1 0 0 1 72 {760 - 20 * row} Tm <{line.encode('utf-16-be').hex()}> Tj"
            for row, line in enumerate(text.split("\n"))
        )
        stream = f"BT /F1 14 Tf {lines} ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >>"
            f" /Contents {6 + 2 * index} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
