"""Fixtures for the visual channel's tests: real PDFs built with fpdf2 (the ingest tests' builder)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))

from ingest_fixtures import write_pdf  # noqa: E402  (the one PDF builder the tests share)

__all__ = ["write_pdf"]
