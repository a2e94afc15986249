"""The visual channel's tests build real PDFs with the ingest tests' fpdf2 builder
(tests/ingest/ingest_fixtures.py, put on the import path here)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))
