"""Builders of fixture files for the ingest tests, each made with the library that writes the format."""

from __future__ import annotations

from pathlib import Path

GBK_TEXT = "营业收入同比下降百分之十二，主要原因是出口订单减少。管理层认为原材料价格上涨是主要风险。"
BIG5_TEXT = "營業收入同比下降百分之十二，主要原因是出口訂單減少。管理層認為原材料價格上漲是主要風險。"
NOISY_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Borealis 2023 review</title>
<style>body { color: red } .STYLENOISE {}</style>
<script>var tracking = "SCRIPTNOISE";</script></head>
<body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/about">About NAVNOISE</a></li></ul></nav>
<header><div class="menu">Menu HEADERNOISE</div></header>
<main><article>
<h1>Revenue review</h1>
<p>Revenue fell twelve percent in 2023 because export orders to Europe declined sharply in the
second half of the year, while input costs kept rising.</p>
<h2>Outlook</h2>
<p>Management expects a gradual recovery in 2024 as the new plant in Ohio reaches full output and
the backlog of orders is cleared.</p>
</article></main>
<aside>Related stories ASIDENOISE</aside>
<footer>Copyright FOOTERNOISE 2024</footer>
<script>console.log("SCRIPTNOISE2")</script>
</body></html>
"""


def write_pdf(path: Path, pages: list[str]) -> Path:
    """A PDF with one page per string (empty string: a page without text), via fpdf2."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 7, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def write_docx(path: Path, *, title: str = "Board minutes") -> Path:
    """A .docx with a heading, paragraphs, a table (with a merged cell) and a second heading."""
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading("Quarterly review", level=1)
    document.add_paragraph("Revenue fell because export orders declined.")
    table = document.add_table(rows=3, cols=3)
    for row, values in enumerate([("Year", "Revenue", "Margin"), ("2023", "12.5", "8%"), ("2024", "13.1", "")]):
        for col, value in enumerate(values):
            table.cell(row, col).text = value
    table.cell(2, 1).merge(table.cell(2, 2))
    document.add_heading("Outlook", level=2)
    document.add_paragraph("A recovery is expected next year.")
    path.parent.mkdir(parents=True, exist_ok=True)
    document.save(str(path))
    return path


def write_mixed_folder(root: Path) -> Path:
    """A folder with one file of every supported kind, a sidecar, and front matter."""
    (root / "cn").mkdir(parents=True)
    write_pdf(root / "reports" / "annual.pdf", [
        "Annual report page one. Revenue fell because export orders declined.",
        "Annual report page two. The outlook for next year is stable.",
    ])  # fmt: skip
    write_docx(root / "board" / "minutes.docx")
    (root / "board" / "minutes.docx.meta.json").write_text(
        '{"entity": "BOREALIS", "period": 2023, "sensitivity": "confidential", "owner": "legal", "tags": ["board", "q4"]}',
        "utf-8",
    )
    (root / "cn" / "gbk.txt").write_bytes(GBK_TEXT.encode("gbk"))
    (root / "cn" / "big5.txt").write_bytes(BIG5_TEXT.encode("big5"))
    (root / "web.html").write_text(NOISY_HTML, "utf-8")
    (root / "notes.md").write_text(
        "---\nentity: ACME_CN\ntopic: strategy\nreviewer: Li Wei\n---\n# Strategy notes\n"
        "We will enter two new markets.\n## Risks\nCurrency swings could hurt margins.\n",
        "utf-8",
    )
    return root


def write_cjk_pdf(path: Path, pages: list[str]) -> Path:
    """A PDF with one page per string, Chinese included (`ragspine.testing.cjk_pdf`: this machine
    has no CJK font for fpdf2 to embed)."""
    from ragspine.testing.cjk_pdf import cjk_pdf_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(cjk_pdf_bytes(pages))
    return path
