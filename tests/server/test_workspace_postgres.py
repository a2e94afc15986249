"""A PostgreSQL URL selects the PostgreSQL chunk store everywhere the store path is accepted."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import ragspine
from ragspine.cli import main
from ragspine.settings.config import ConfigError, load_settings


def test_open_ingest_search_ask_over_postgres(pg_url: str) -> None:
    with ragspine.open(pg_url) as ws:
        ws.ingest("艾克美中国营收下滑的原因是出口订单减少。", doc_id="cn", entity="ACME_CN", period="2024")
        ws.ingest("Project memo SECRETMARK about revenue.", doc_id="memo", sensitivity="RESTRICTED")
        snippets = ws.search("营收下滑", where={"period": {"gte": "2024"}})
        assert [s["doc_id"] for s in snippets] == ["cn"]
        assert ws.stats()["documents"] == 2
        assert "SECRETMARK" not in ws.ask("revenue").text
    found = CliRunner().invoke(main, ["search", "出口订单", "--db", pg_url, "--json"])
    assert found.exit_code == 0, found.output
    assert [s["doc_id"] for s in json.loads(found.stdout)["snippets"]] == ["cn"]


def test_urls_are_accepted_by_config(pg_url: str) -> None:
    assert load_settings({"RAGSPINE_DB": pg_url}).db == pg_url
    with pytest.raises(ConfigError, match="postgresql:// URL"):
        load_settings({"RAGSPINE_DB": "mysql://x/y"})
