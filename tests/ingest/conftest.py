"""Fixtures for the ingest tests (builders live in ingest_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ingest_fixtures import write_mixed_folder


@pytest.fixture
def mixed_folder(tmp_path: Path) -> Path:
    """A folder with one file of every supported kind, a sidecar, and front matter."""
    return write_mixed_folder(tmp_path / "docs")
