"""The search page at / : HTTP-level checks always; the page itself driven in Debian's Chromium
by Playwright (headless) against the real uvicorn service over the demo corpus.

The browser tests skip, with the reason printed, only where Chromium or Playwright is not
installed (`make test` installs both: see the Makefile). RAGSPINE_PAGE_SCREENSHOTS=DIR saves the
page's screenshots in both languages there (docs/img holds the ones the README shows).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import ragspine
from ragspine.service import running_server

from integration_helpers import API_KEY, ENV, MEMO, Demo, ingest_demo

CHROMIUM = os.environ.get("RAGSPINE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Headless, and none of Chromium's own network traffic (this machine has no network but loopback).
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-quic"]  # fmt: skip
DONE = re.compile(r"passage|No passage|段|没有")
XSS_TITLE = '<img src=x onerror="window.__xss=1">Evil title'
XSS_TEXT = (
    'Zebrafish report. <script>window.__xss=2</script> <img src=x onerror="window.__xss=3"> '
    '<a href="javascript:window.__xss=4">click</a> "quoted" & ampersand zebrafish.'
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo corpus plus a document full of markup, served with an API key."""
    path = tmp_path_factory.mktemp("page") / "chunks.db"
    with ragspine.open(path, env=ENV, api_keys=[API_KEY]) as ws:
        ingest_demo(ws)
        ws.ingest_text(XSS_TEXT, "xss<b>doc</b>", title=XSS_TITLE, entity="<i>EVIL</i>", sensitivity="PUBLIC")
        with running_server(ws) as url:
            yield url


# -- HTTP level -------------------------------------------------------------------------------


def test_page_and_its_files_load_without_a_key_and_forbid_foreign_code(site: str) -> None:
    page = httpx.get(f"{site}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert '<script src="static/app.js"' in page.text and "http" not in page.text.split("<body>")[1]  # no CDN
    script = httpx.get(f"{site}/static/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "innerHTML" not in script.text and "insertAdjacentHTML" not in script.text and "eval(" not in script.text
    assert httpx.get(f"{site}/static/../app.py").status_code == 404
    assert httpx.get(f"{site}/static/index.html").status_code == 404
    # the data behind the page needs the key
    assert httpx.get(f"{site}/fields").status_code == 401
    fields = httpx.get(f"{site}/fields", headers={"X-API-Key": API_KEY}).json()
    assert "entity" in fields["fields"] and "between" in fields["operators"]


# -- in the browser ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (the test extra has it)")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (make test does) to run the browser tests")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture(params=[False], ids=["csp"])
def page(browser: Any, site: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A tab on the page; parametrised with bypass_csp=True where the test must hold without the
    Content-Security-Policy too (the escaping alone)."""
    context = browser.new_context(locale="en-US", viewport={"width": 1100, "height": 900}, bypass_csp=request.param)
    tab = context.new_page()
    tab.dialogs = []
    tab.on("dialog", lambda dialog: (tab.dialogs.append(dialog.message), dialog.dismiss()))
    tab.goto(f"{site}/")
    yield tab
    context.close()


def _use_key(page: Any, key: str = API_KEY) -> None:
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Use key").click()
    page.wait_for_selector("#f-field option", state="attached")


def _search(page: Any, query: str) -> list[Any]:
    from playwright.sync_api import expect

    page.evaluate("document.getElementById('status').textContent = ''")
    page.locator("#q").fill(query)
    page.locator("#q").press("Enter")  # the keyboard submits
    expect(page.locator("#status")).to_have_text(DONE)
    return page.locator("#results > li").all()


def test_keys_are_required_then_search_returns_cited_highlighted_results(page: Any) -> None:
    page.get_by_label("Question or keywords").fill("gross margin")
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector("#status.error")
    assert "needs an API key" in page.locator("#status").inner_text()
    assert page.locator("#results > li").count() == 0
    assert page.evaluate("sessionStorage.getItem('ragspine-key')") in (None, "")

    _use_key(page)
    assert page.evaluate("sessionStorage.getItem('ragspine-key')") == API_KEY
    assert page.evaluate("localStorage.length") == 0  # the key lives in this tab's session only
    results = _search(page, "What caused Borealis's gross margin to fall in 2024?")
    assert results
    first = results[0]
    assert "borealis_2024_annual_report" in first.locator(".locator").inner_text()
    assert "#p" in first.locator(".locator").inner_text()  # the citation locator
    marks = {m.lower() for m in first.locator("mark").all_inner_texts()}  # matching terms highlighted,
    assert marks and marks <= {"caused", "borealis", "gross", "margin", "fall", "2024"}  # whole words only
    assert "bm25" in first.locator(".scores").inner_text() and "fused" in first.locator(".scores").inner_text()
    first.locator("summary").click()  # the "why" panel
    assert '"filters"' in first.locator(".why pre").inner_text()


def test_filters_narrow_the_results(page: Any) -> None:
    _use_key(page)
    everything = {r.get_attribute("data-doc-id") for r in _search(page, "2024年 营收 annual report")}
    assert len(everything) > 1
    page.get_by_label("Field").select_option("entity")
    page.get_by_label("Operator").select_option("eq")
    page.get_by_label("Value").fill("ACME_HK")
    page.get_by_role("button", name="Add filter").click()
    assert "entity eq ACME_HK" in page.locator("#filter-list").inner_text()
    narrowed = {r.get_attribute("data-doc-id") for r in _search(page, "2024年 营收 annual report")}
    assert narrowed == {"acme_hk_2024_annual_report"}


def test_a_restricted_document_never_shows(page: Any, demo: Demo) -> None:
    _use_key(page)
    for query in ("Project Nightjar layoffs and plant closure plan", "夜鹰计划 裁员 工厂", "confidential memo"):
        results = _search(page, query)
        assert all(r.get_attribute("data-doc-id") != MEMO for r in results)
        assert not demo.leaks(page.locator("main").inner_text().replace(query, ""))
    page.get_by_label("Question or keywords").fill("Project Nightjar restructuring")
    page.get_by_role("button", name="Ask").click()
    page.wait_for_selector("#answer:not([hidden])")
    assert not demo.leaks(page.locator("#answer").inner_text().replace("Project Nightjar restructuring", ""))


@pytest.mark.parametrize("page", [False, True], ids=["csp", "no-csp"], indirect=True)
def test_document_text_is_shown_as_text_never_run(page: Any) -> None:
    _use_key(page)
    results = _search(page, "zebrafish ampersand")
    assert results and results[0].get_attribute("data-doc-id") == "xss<b>doc</b>"
    shown = results[0].inner_text()
    assert "<script>window.__xss=2</script>" in shown and XSS_TITLE in shown and "xss<b>doc</b>" in shown
    assert page.evaluate("window.__xss") is None and page.dialogs == []
    assert page.locator("#results img, #results script, #results a, #results b, #results i").count() == 0


def test_ask_shows_numbered_citations(page: Any) -> None:
    _use_key(page)
    page.get_by_label("Question or keywords").fill("为什么营收下滑")
    page.get_by_role("button", name="Ask").click()
    page.wait_for_selector("#answer:not([hidden])")
    assert "[1]" in page.locator("#answer-text").inner_text()
    cites = page.locator("#answer-cites > li").all()
    assert cites and cites[0].locator(".passage-title").inner_text().startswith("[1] ")


def test_upload_then_find_the_document(page: Any, tmp_path: Path) -> None:
    _use_key(page)
    note = tmp_path / "okapi_note.md"
    note.write_text("---\ntitle: Okapi field note\n---\nThe okapi census counted 212 okapis in Ituri.\n", "utf-8")
    page.get_by_text("Add a document").click()
    page.get_by_label("File").set_input_files(str(note))
    page.get_by_label("Sensitivity").select_option("PUBLIC")
    page.get_by_role("button", name="Upload").click()
    page.wait_for_selector("#status:has-text('Ingested')")
    assert [r.get_attribute("data-doc-id") for r in _search(page, "okapi census")][0] == "okapi_note.md"


def test_both_languages_and_screenshots(page: Any) -> None:
    _use_key(page)
    _search(page, "What caused Borealis's gross margin to fall in 2024?")
    shots = os.environ.get("RAGSPINE_PAGE_SCREENSHOTS")
    if shots:
        page.screenshot(path=str(Path(shots) / "search-page-en.png"), full_page=False)
    page.get_by_label("Language").select_option("zh")
    assert page.locator("h1").inner_text() == "RAGSpine 检索"
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    results = _search(page, "为什么营收下滑")
    assert results and "得分" in results[0].locator(".scores").inner_text()
    assert page.get_by_label("问题或关键词").count() == 1  # labels follow the language
    if shots:
        page.screenshot(path=str(Path(shots) / "search-page-zh.png"), full_page=False)


def _filter_nobody(page: Any) -> list[Any]:
    _use_key(page)
    page.get_by_label("Field").select_option("entity")
    page.get_by_label("Operator").select_option("eq")
    page.get_by_label("Value").fill("NOBODY")
    page.get_by_role("button", name="Add filter").click()
    return _search(page, "2024年 营收 annual report")


def test_a_filter_that_matches_nothing_gives_nothing_or_says_it_was_dropped(page: Any, browser: Any, demo: Demo) -> None:
    assert _filter_nobody(page) == [] and page.locator("#status").inner_text() == "No passage matched."
    with ragspine.open(demo.path, env=ENV, api_keys=[API_KEY], filter_fallback="retry") as ws, running_server(ws) as url:
        context = browser.new_context(locale="en-US")
        retried = context.new_page()
        retried.goto(f"{url}/")
        assert _filter_nobody(retried)  # the unfiltered passages, and the status line says why
        assert "Nothing matched the filter(s) on entity: they were dropped" in retried.locator("#status").inner_text()
        context.close()
