"""docs/integrations.md: its Python examples run as written, in order, in an empty folder, and
print what the page says they print (the MCP stdio example starts a real `ragspine mcp`)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


@pytest.mark.integration
def test_the_examples_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text("utf-8"), re.DOTALL)
    assert len(blocks) >= 7
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - the documented code itself
    out = printed.getvalue()
    assert "1 艾克美中国 2024 年报 [acme-2024#p1@0-29]" in out  # the line the page shows
    assert '1 passage, filtered by {"entity":"ACME_CN"}.' in out  # the MCP text's first line
    assert "Borealis Annual Report 2024 [borealis-2024#" in out  # ask over HTTP cites it
    assert "acme-2024 acme-2024#p1@0-29 True" in out
    assert "['borealis-2024'" in out
    assert "['acme-2024']\nFilterOperator.GTE" in out  # MetadataFilters translated, and written back
    assert "{'where': {'period': {'gte': '2024'}}, 'top_k': 2}" in out  # a LangChain structured query
    assert "Nightjar" not in out and "memo" not in out and "plant 3" not in out  # never the RESTRICTED memo
