"""The search page at / : HTTP-level checks always; the page itself driven in Debian's Chromium
by Playwright (headless) against the real uvicorn service over the demo corpus.

The browser tests skip, with the reason printed, only where Chromium or Playwright is not
installed (`make test` installs both: see the Makefile). RAGSPINE_PAGE_SCREENSHOTS=DIR saves the
page's screenshots in both languages there (docs/img holds the ones the README shows).
"""

from __future__ import annotations

import json

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

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
MARKDOWN_TEXT = "# Heron results\n\nThe **heron count** rose to *forty* birds.\n\n- heron nests: 12\n"
KESTRELS = 60  # more passages for one query than the old 50-result bound: pages 1 to 3 at 20 a page


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo corpus plus a document full of markup, served with an API key."""
    path = tmp_path_factory.mktemp("page") / "chunks.db"
    with ragspine.open(path, env=ENV, api_keys=[API_KEY]) as ws:
        ingest_demo(ws)
        ws.ingest_text(XSS_TEXT, "xss<b>doc</b>", title=XSS_TITLE, entity="<i>EVIL</i>", sensitivity="PUBLIC")
        ws.ingest_text(MARKDOWN_TEXT, "heron_note", title="Heron note", entity="HERON", sensitivity="PUBLIC",
                       metadata={"project": "birds"})  # the auto chunker adds `chunker`: internal, never a filter
        for n in range(KESTRELS):
            ws.ingest_text(f"Kestrel sighting {n}: one kestrel hovered.", f"kestrel_{n:02d}", title=f"Kestrel {n}",
                           entity="KESTREL", topic="field_note", sensitivity="PUBLIC")
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
    # the bounded relevance (or, until the service sends one, the rank), never the raw fused score
    assert "Rank 1" in first.locator(".scores").inner_text() and "fused" not in first.inner_text()
    first.locator("summary").click()  # the "why" panel: lineage and the channel scores
    assert '"filters"' in first.locator(".why pre").inner_text() and "fused" in first.locator(".why pre").inner_text()


def test_filters_narrow_the_results(page: Any) -> None:
    _use_key(page)
    everything = {r.get_attribute("data-doc-id") for r in _search(page, "2024年 营收 annual report")}
    assert len(everything) > 1
    page.get_by_label("Field").select_option("entity")
    page.get_by_label("Operator").select_option("eq")
    page.get_by_label("Value").fill("ACME_HK")
    page.get_by_role("button", name="Add filter").click()
    assert "Entity is ACME_HK" in page.locator("#filter-list").inner_text()  # operators in words
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
    assert page.locator("#results img, #results script, #results b, #results i").count() == 0
    # every link is the page's own: each result's title opens the document view (the lexical
    # bridge, on by default, may add a Chinese result for this English query)
    links = page.locator("#results a")
    assert links.count() == len(results)
    assert all(links.nth(i).get_attribute("href").startswith("?q=") for i in range(links.count()))


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
    assert results and "排名 1" in results[0].locator(".scores").inner_text()
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
    assert _filter_nobody(page) == []
    assert page.locator("#status").inner_text() == "No passage matched these filters: remove one to widen the search."
    assert page.locator("#notice").is_hidden()
    with ragspine.open(demo.path, env=ENV, api_keys=[API_KEY], filter_fallback="retry") as ws, running_server(ws) as url:
        context = browser.new_context(locale="en-US")
        retried = context.new_page()
        retried.goto(f"{url}/")
        assert _filter_nobody(retried)  # the unfiltered passages, and the status line says why
        assert "so these were dropped: Entity." in retried.locator("#notice").inner_text()
        context.close()


# -- the daily-use flows: URL state, keyboard, states, pages, facets, document view ----------


def _shoot(page: Any, name: str) -> None:
    shots = os.environ.get("RAGSPINE_PAGE_SCREENSHOTS")
    if shots:
        page.screenshot(path=str(Path(shots) / name), full_page=False)


def _doc_ids(page: Any) -> list[str]:
    return [r.get_attribute("data-doc-id") for r in page.locator("#results > li").all()]


def test_facets_count_visible_documents_only_and_hide_internal_fields(site: str) -> None:
    facets = httpx.get(f"{site}/facets", headers={"X-API-Key": API_KEY}).json()
    values = {name: {v["value"]: v["count"] for v in found} for name, found in facets["facets"].items()}
    # the RESTRICTED memo (ACME_CN, internal_memo, 2025) counts nowhere: its values never appear
    assert values["entity"]["ACME_CN"] == 2 and values["entity"]["KESTREL"] == KESTRELS
    assert "internal_memo" not in values["topic"] and "2025" not in values["period"]
    assert "RESTRICTED" not in values["sensitivity"]
    assert values["project"] == {"birds": 1} and "chunker" not in values  # internal metadata: not a facet
    visible = 5 + 1 + 1 + KESTRELS  # the public demo documents, xss, heron, the kestrels: not the memo
    uploaded = httpx.get(f"{site}/documents/okapi_note.md/chunks", headers={"X-API-Key": API_KEY}).status_code == 200
    assert facets["documents"] == visible + uploaded  # + the upload test's note when it ran first: never the memo
    assert "CONFIDENTIAL" in facets["levels"] and facets["max_top_k"] >= 60
    assert httpx.get(f"{site}/facets").status_code == 401


def test_document_context_returns_the_cited_passage_never_a_restricted_one(site: str) -> None:
    auth = {"X-API-Key": API_KEY}
    hit = httpx.post(f"{site}/search", json={"query": "Borealis gross margin", "top_k": 1}, headers=auth).json()
    cited = hit["snippets"][0]
    found = httpx.get(f"{site}/documents/{cited['doc_id']}/context", params={"chunk_id": cited["chunk_id"]},
                      headers=auth).json()  # fmt: skip
    marked = [c for c in found["chunks"] if c["cited"]]
    assert len(marked) == 1 and marked[0]["text"] == cited["text"] and found["title"] == cited["title"]
    memo = httpx.get(f"{site}/documents/{MEMO}/context", params={"chunk_id": f"{MEMO}:0000:0"}, headers=auth)
    assert memo.status_code == 404 and "Nightjar" not in memo.text
    assert httpx.get(f"{site}/documents/{MEMO}/chunks", headers=auth).status_code == 404
    keyless = httpx.get(f"{site}/documents/{cited['doc_id']}/context", params={"chunk_id": cited["chunk_id"]})
    assert keyless.status_code == 401


def test_url_state_back_forward_autofocus_and_slash(page: Any, site: str) -> None:
    from playwright.sync_api import expect

    assert page.evaluate("document.activeElement.id") == "q"  # autofocus
    _use_key(page)
    _search(page, "kestrel sighting")
    first = _doc_ids(page)
    assert "q=kestrel+sighting" in page.url
    _search(page, "zebrafish ampersand")
    assert _doc_ids(page)[0] == "xss<b>doc</b>"
    page.go_back()
    expect(page.locator("#q")).to_have_value("kestrel sighting")
    expect(page.locator("#results > li").first).to_have_attribute("data-doc-id", first[0])
    page.go_forward()
    expect(page.locator("#results > li").first).to_have_attribute("data-doc-id", "xss<b>doc</b>")
    # a URL opened afresh (a link, a bookmark) shows its query, filters and page
    page.goto(f"{site}/?" + urlencode({"q": "2024年 营收 annual report", "f": "entity|eq|ACME_HK"}))
    page.wait_for_selector("#results > li")
    assert page.locator("#q").input_value() == "2024年 营收 annual report"
    assert "Entity is ACME_HK" in page.locator("#filter-list").inner_text()
    assert set(_doc_ids(page)) == {"acme_hk_2024_annual_report"}
    page.locator("h1").click()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("x")  # "/" itself was not typed into the box: it focused it
    assert page.locator("#q").input_value().endswith("x") and "/" not in page.locator("#q").input_value()


def test_pages_beyond_fifty_results(page: Any) -> None:
    _use_key(page)
    page.get_by_label("Per page").select_option("20")
    _search(page, "kestrel hovered")
    seen = set(_doc_ids(page))
    assert len(seen) == 20 and "Showing passages 1–20" in page.locator("#status").inner_text()
    for number in (2, 3):
        page.get_by_role("button", name="Next").click()
        page.wait_for_selector(f"#status:has-text('Showing passages {(number - 1) * 20 + 1}–')")
        ids = _doc_ids(page)
        assert len(ids) == 20 and not seen & set(ids)
        seen |= set(ids)
    assert "page=3" in page.url and "size=20" in page.url
    assert "Rank 60" in page.locator(".scores").last.inner_text()
    assert page.locator("#results").get_attribute("start") == "41"  # the list numbers follow the rank
    assert len(seen) == KESTRELS and page.get_by_role("button", name="Next").is_disabled()
    page.go_back()
    page.wait_for_selector("#status:has-text('Showing passages 21–40')")


def test_error_and_empty_states_replace_old_results_and_ask_clears_them(page: Any) -> None:
    _use_key(page)
    assert _search(page, "kestrel hovered")
    assert _search(page, "qqqxyzzy wombatfoo") == []  # nothing matches: the old passages are gone
    assert page.locator("#status").inner_text() == "No passage matched."
    assert not page.locator("#pager").is_visible()  # no pages to turn
    _shoot(page, "search-page-empty.png")
    assert _search(page, "kestrel hovered")
    page.evaluate("sessionStorage.setItem('ragspine-key', 'wrong-key-0123456789')")
    page.locator("#q").fill("zebrafish")
    page.locator("#q").press("Enter")
    page.wait_for_selector("#status.error")
    assert "API key" in page.locator("#status").inner_text() and page.locator("#results > li").count() == 0
    _use_key(page)
    assert _search(page, "kestrel hovered")
    page.get_by_role("button", name="Ask").click()
    page.wait_for_selector("#answer:not([hidden])")
    assert page.locator("#results > li").count() == 0 and page.locator("#answer-cites > li").count() > 0


def test_facets_operators_in_words_and_no_internal_field(page: Any) -> None:
    from playwright.sync_api import expect

    _use_key(page)
    fields = page.locator("#f-field option").evaluate_all("os => os.map(o => o.value)")
    assert "project" in fields and "chunker" not in fields and "chunker_reason" not in fields
    ops = page.locator("#f-op option").evaluate_all("os => os.map(o => o.textContent)")
    assert "is" in ops and "at least" in ops and "eq" not in ops and "gte" not in ops
    entity = page.locator(".facet[data-field='entity']")
    assert "ACME_CN2" in entity.inner_text().replace("\n", "").replace(" ", "")  # value and its count
    assert "internal_memo" not in page.locator("#facets").inner_text()
    _search(page, "2024年 营收 annual report")
    entity.locator("button[data-value='ACME_HK']").click()
    expect(page.locator("#results > li:not([data-doc-id='acme_hk_2024_annual_report'])")).to_have_count(0)
    expect(page.locator("#results > li")).not_to_have_count(0)
    assert "f=entity%7Ceq%7CACME_HK" in page.url
    _shoot(page, "search-page-facets.png")
    page.get_by_label("Language").select_option("zh")
    assert "主体 等于 ACME_HK" in page.locator("#filter-list").inner_text()
    assert "等于" in page.locator("#f-op option").evaluate_all("os => os.map(o => o.textContent)")
    entity.locator("button[data-value='ACME_HK']").click()  # pressed again: the filter goes
    expect(page.locator("#filter-list > li")).to_have_count(0)


def test_relevance_and_dropped_filters_as_the_service_sends_them(page: Any) -> None:
    """The bounded `relevance` (fixed values set on the real response, so the percentages are
    known) and the top-level `filters_dropped` the service sends when the request asks it to
    retry without a filter that matches nothing (the default, strict, would give no passage)."""

    def widen(route: Any) -> None:
        asked = json.loads(route.request.post_data)
        response = route.fetch(post_data=json.dumps({**asked, "filter_fallback": "retry"}))
        body = response.json()
        assert body["filters_dropped"] == ["entity"] and body["snippets"]  # the service said it
        for i, snippet in enumerate(body["snippets"]):
            snippet["relevance"] = round(0.734 - i * 0.1, 3)
            snippet["scores"]["fused"] = -1.39  # a raw negative fused score never reaches the screen
        route.fulfill(response=response, json=body)

    _use_key(page)
    page.get_by_label("Value").fill("NOBODY")  # a filter that matches nothing: the service widens
    page.get_by_role("button", name="Add filter").click()
    page.route("**/search", widen)
    _search(page, "kestrel hovered")
    first = page.locator("#results > li").first
    assert first.locator(".scores").inner_text().startswith("Relevance 73%")
    assert first.locator("meter").get_attribute("aria-label") == "Relevance 73%"
    assert "-1.39" not in page.locator("main").inner_text()
    notice = page.locator("#notice")
    assert notice.is_visible() and "dropped: Entity" in notice.inner_text()
    _shoot(page, "search-page-relevance.png")


def test_markdown_is_read_not_shown(page: Any) -> None:
    _use_key(page)
    results = _search(page, "heron count nests")
    shown = results[0].locator(".passage-text")
    assert results[0].get_attribute("data-doc-id") == "heron_note"
    assert "Heron results" in shown.inner_text() and "#" not in shown.inner_text() and "*" not in shown.inner_text()
    assert shown.locator("strong.md-heading").inner_text() == "Heron results"
    assert shown.locator("strong:not(.md-heading)").inner_text() == "heron count" and shown.locator("em").count() == 1
    assert "• heron nests: 12" in shown.inner_text()


def test_document_view_opens_the_cited_passage_highlighted(page: Any) -> None:
    _use_key(page)
    results = _search(page, "What caused Borealis's gross margin to fall in 2024?")
    chunk_id = results[0].get_attribute("data-chunk-id")
    results[0].locator(".passage-title a").click()
    page.wait_for_selector("#doc-view[open] .doc-chunk.cited")
    cited = page.locator("#doc-view .doc-chunk.cited")
    assert cited.get_attribute("data-chunk-id") == chunk_id and cited.locator("mark").count() > 0
    assert "Borealis" in page.locator("#doc-title").inner_text()
    assert "passage=" in page.url
    _shoot(page, "search-page-document.png")
    page.go_back()  # Back closes the view and keeps the results
    page.wait_for_selector("#doc-view:not([open])", state="attached")
    assert page.locator("#results > li").count() == len(results)


def test_upload_offers_every_label_level(page: Any) -> None:
    _use_key(page)
    levels = page.locator("#u-sens option").evaluate_all("os => os.map(o => o.value)")
    assert levels == ["PUBLIC", "INTERNAL", "CONFIDENTIAL", "RESTRICTED"]
    assert page.locator("#u-sens").input_value() == "INTERNAL"


def test_a_link_to_a_passage_opens_the_document_view_and_escape_closes_it(page: Any, site: str) -> None:
    from playwright.sync_api import expect

    _use_key(page)
    results = _search(page, "kestrel hovered")
    chunk_id = results[2].get_attribute("data-chunk-id")
    page.goto(f"{site}/?" + urlencode({"q": "kestrel hovered", "passage": chunk_id}))  # a shared link
    expect(page.locator("#doc-view .doc-chunk.cited")).to_have_attribute("data-chunk-id", chunk_id)
    assert page.locator("#results > li").count() == len(results)  # the results behind it, too
    page.evaluate("window.__same_document = true")
    page.keyboard.press("Escape")
    page.wait_for_selector("#doc-view:not([open])", state="attached")
    assert "passage=" not in page.url and "q=kestrel+hovered" in page.url
    assert page.evaluate("window.__same_document") is True  # closed in place: the page was not left
