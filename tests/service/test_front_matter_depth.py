"""Deeply nested front matter (issue 34, item 9): its depth is measured on the raw text before
tomllib or PyYAML sees it, so an upload answers a client error with one line (never a 500 from a
RecursionError inside the parser) and `ragspine ingest` fails that file with one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from service_helpers import BM25_ENV

from ragspine.cli import main

DEPTH = 30_000  # within MAX_FRONT_MATTER_CHARS (a longer block is refused for its size first)
NESTED = {
    "toml": "+++\nx = " + "[" * DEPTH + "1" + "]" * DEPTH + "\n+++\nbody words\n",
    "toml_inline": "+++\nx = " + "{a = " * (DEPTH // 3) + "1" + "}" * (DEPTH // 3) + "\n+++\nbody words\n",
    "yaml": "---\nx: " + "[" * DEPTH + "]" * DEPTH + "\n---\nbody words\n",
    "yaml_blocks": "---\n" + "".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "v: 1\n---\nbody\n",
}


@pytest.mark.parametrize("kind", sorted(NESTED))
def test_an_upload_of_nested_front_matter_is_a_client_error(serve: Any, kind: str) -> None:
    served = serve()
    upload = {"file": ("deep.md", NESTED[kind].encode(), "text/markdown")}
    response = served.client.post("/documents/upload", files=upload)
    assert response.status_code in (400, 413, 422), response.text[:300]
    body = response.json()
    assert body["status"] == response.status_code and "Traceback" not in response.text
    assert "\n" not in body["message"] and "nested" in body["message"]
    assert served.client.get("/health").status_code == 200


@pytest.mark.parametrize("kind", sorted(NESTED))
def test_ingest_fails_the_nested_file_with_one_line(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "deep.md").write_text(NESTED[kind], "utf-8")
    (folder / "fine.md").write_text("Plain words about herons.\n", "utf-8")
    result = CliRunner().invoke(main, ["ingest", str(folder), "--db", str(tmp_path / "x.db")], env=BM25_ENV)
    assert "Traceback" not in result.output and not isinstance(result.exception, RecursionError)
    lines = result.output.splitlines()
    mine = [i for i, line in enumerate(lines) if "deep.md" in line]
    assert len(mine) == 1 and "nested" in lines[mine[0]], result.output[-2000:]
    after = lines[mine[0] + 1] if mine[0] + 1 < len(lines) else ""
    assert after.startswith(("ingested", "failed", "fine.md")) or "fine.md" in after, result.output[-2000:]
