"""PDF pages as images, via pypdfium2 (the `[visual]` extra): what the visual channel embeds.

Invariants: pages are numbered from 1 as the text loader numbers them (`pdf_loader`, whose page
text goes with each image); a page is rendered only when `render(number)` is called, at `dpi`,
as a (height, width, 3) uint8 RGB array, its longer side capped at `max_side` pixels (a poster
page does not take gigabytes); the document is closed when the `with` block ends. A file
pypdfium2 cannot open is a ValueError with the reason; a missing pypdfium2 names the extra.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ragspine.ingest.loaders.base import require

DEFAULT_DPI = 96
DEFAULT_MAX_SIDE = 2048


class PdfPages:
    """An open PDF whose pages render on demand (use `open_pdf_pages`)."""

    def __init__(self, document: Any, *, dpi: int, max_side: int) -> None:
        if not 18 <= dpi <= 600:
            raise ValueError(f"dpi must be between 18 and 600, got {dpi}")
        self._document, self.dpi, self.max_side = document, dpi, max_side

    def __len__(self) -> int:
        return len(self._document)

    def render(self, number: int) -> np.ndarray:
        """Page `number` (1-based) as RGB pixels."""
        if not 1 <= number <= len(self):
            raise ValueError(f"page {number} is not in this {len(self)}-page PDF")
        page = self._document[number - 1]
        try:
            width, height = page.get_size()  # points, 72 per inch
            scale = min(self.dpi / 72.0, self.max_side / max(width, height, 1.0))
            bitmap = page.render(scale=scale, rev_byteorder=True)
            pixels = np.array(bitmap.to_numpy()[:, :, :3], dtype=np.uint8)  # a copy: the bitmap is freed
        finally:
            page.close()
        return pixels


@contextmanager
def open_pdf_pages(data: bytes, *, dpi: int = DEFAULT_DPI, max_side: int = DEFAULT_MAX_SIDE) -> Iterator[PdfPages]:
    """The PDF in `data`, its pages rendered on demand while the block runs.

    >>> from pathlib import Path  # doctest: +SKIP
    >>> with open_pdf_pages(Path("report.pdf").read_bytes(), dpi=96) as pages:  # doctest: +SKIP
    ...     first = pages.render(1)
    """
    pdfium = require("pypdfium2", extra="visual", purpose="rendering PDF pages (RAGSPINE_VISUAL_EMBEDDER)")
    try:
        document = pdfium.PdfDocument(data)
    except Exception as exc:  # pdfium's PdfiumError and friends: report the reason
        raise ValueError(f"pypdfium2 cannot open the PDF ({type(exc).__name__}: {exc})") from exc
    try:
        yield PdfPages(document, dpi=dpi, max_side=max_side)
    finally:
        document.close()
