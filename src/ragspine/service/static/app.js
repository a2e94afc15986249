// The RAGSpine search page. Every piece of data reaches the DOM as a text node (textContent,
// createTextNode) or inside elements this script creates (<mark>, <strong>, <em>, <code>),
// never parsed as HTML, so document text cannot become markup or script.
// State (query, filters, page, page size, open passage) lives in the URL: Back/Forward restore it.
"use strict";

const TEXT = {
  en: {
    title: "RAGSpine search", language: "Language", key: "API key", keyHint: "kept in this tab only",
    saveKey: "Use key", query: "Question or keywords", qHint: "Press / to type here", pageSize: "Per page",
    search: "Search", ask: "Ask",
    filters: "Filters (all must match)", field: "Field", op: "Operator", value: "Value",
    valueHint: "e.g. ACME_CN; lists: A,B", addFilter: "Add filter", remove: "Remove filter",
    answer: "Answer", results: "Passages", upload: "Add a document (needs the API key)", file: "File",
    docId: "Document id", sensitivity: "Sensitivity", uploadBtn: "Upload", searching: "Searching…",
    found: (from, to, more) => `Showing passages ${from}–${to}${more ? " (more on the next page)" : ""}`,
    none: "No passage matched.", noneFiltered: "No passage matched these filters: remove one to widen the search.",
    asking: "Answering…", answered: (mode) => `Answer (${mode})`, why: "Why this passage",
    scores: "Channel scores", needKey: "This service needs an API key: enter it above.",
    keySaved: "Key kept for this tab.", uploaded: (d, n) => `Ingested ${d}: ${n} chunk(s).`,
    uploading: "Uploading…", emptyValue: "Give a value for the filter.", cited: "cited",
    relevance: "Relevance", rank: (n) => `Rank ${n}`, facets: "Refine", pager: "Result pages",
    prev: "Previous", next: "Next", page: (n) => `Page ${n}`, close: "Close", open: "Open in document",
    loadingDoc: "Opening the document…", before: (n) => `… ${n} passage(s) before`,
    after: (n) => `… ${n} passage(s) after`, docCount: (n) => `${n} visible document(s)`,
    dropped: (names) =>
      `No passage matched every filter, so these were dropped: ${names}. The passages below ignore them.`,
    answerDropped: (names) => `Filters dropped to find an answer: ${names}.`,
  },
  zh: {
    title: "RAGSpine 检索", language: "语言", key: "API 密钥", keyHint: "仅保存在此标签页",
    saveKey: "使用密钥", query: "问题或关键词", qHint: "按 / 键在此输入", pageSize: "每页",
    search: "检索", ask: "问答",
    filters: "筛选条件（需全部满足）", field: "字段", op: "运算符", value: "取值",
    valueHint: "如 ACME_CN；多个值：A,B", addFilter: "添加条件", remove: "删除条件",
    answer: "回答", results: "段落", upload: "添加文档（需要 API 密钥）", file: "文件",
    docId: "文档编号", sensitivity: "密级", uploadBtn: "上传", searching: "检索中…",
    found: (from, to, more) => `第 ${from}–${to} 段${more ? "（下一页还有）" : ""}`,
    none: "没有匹配的段落。",
    noneFiltered: "没有满足这些筛选条件的段落：删除一个条件可扩大范围。",
    asking: "回答中…", answered: (mode) => `回答（${mode}）`, why: "为何命中",
    scores: "各通道得分", needKey: "此服务需要 API 密钥：请在上方输入。",
    keySaved: "密钥已保存在此标签页。", uploaded: (d, n) => `已导入 ${d}：${n} 个分块。`,
    uploading: "上传中…", emptyValue: "请填写筛选取值。", cited: "已引用",
    relevance: "相关度", rank: (n) => `排名 ${n}`, facets: "细化", pager: "结果分页",
    prev: "上一页", next: "下一页", page: (n) => `第 ${n} 页`, close: "关闭", open: "在原文中查看",
    loadingDoc: "正在打开文档…", before: (n) => `…… 前面还有 ${n} 段`,
    after: (n) => `…… 后面还有 ${n} 段`, docCount: (n) => `共 ${n} 份可见文档`,
    dropped: (names) =>
      `没有段落满足全部筛选条件，已放宽以下条件：${names}。下列段落不受其限制。`,
    answerDropped: (names) => `为找到回答已放宽以下条件：${names}。`,
  },
};
// Operators and fields in words; a field not listed (user metadata) shows its own name.
const OPS = {
  en: { eq: "is", ne: "is not", gt: "greater than", gte: "at least", lt: "less than", lte: "at most",
    in: "is one of", nin: "is none of", between: "between" },
  zh: { eq: "等于", ne: "不等于", gt: "大于", gte: "不小于", lt: "小于", lte: "不大于",
    in: "属于其一", nin: "不属于", between: "介于" },
};
const FIELDS = {
  en: { entity: "Entity", period: "Period", topic: "Topic", geography: "Geography", language: "Language",
    sensitivity: "Sensitivity", doc_id: "Document id", valid_as_of: "Valid as of" },
  zh: { entity: "主体", period: "期间", topic: "主题", geography: "地区", language: "语言",
    sensitivity: "密级", doc_id: "文档编号", valid_as_of: "生效日期" },
};
const LIST_OPS = new Set(["in", "nin", "between"]);
const $ = (id) => document.getElementById(id);
let lang = sessionStorage.getItem("ragspine-lang") || ((navigator.language || "en").startsWith("zh") ? "zh" : "en");
let filters = [];
let page = 1;
let maxTopK = 100;
let facetData = null;
let last = null; // {query, snippets, page, size, dropped}: re-rendered when the language changes
let fieldNames = [];
let operators = [];
let pushedPassage = false; // the open document view has its own history entry (Back closes it)
let latest = 0; // the newest search or ask: an older answer arriving late is dropped

function t(name, ...args) {
  const value = TEXT[lang][name];
  return typeof value === "function" ? value(...args) : value;
}
const opWord = (op) => OPS[lang][op] || op;
const fieldWord = (field) => FIELDS[lang][field] || field;
const shownValue = (value) => (Array.isArray(value) ? value.join(", ") : String(value));
const filterText = (f) => `${fieldWord(f.field)} ${opWord(f.op)} ${shownValue(f.value)}`;

function applyLanguage() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  $("lang").value = lang;
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll("[data-i18n-label]")) {
    el.setAttribute("aria-label", t(el.dataset.i18nLabel));
  }
  document.title = t("title");
  renderFieldOptions();
  renderFilters();
  renderFacets();
  if (last) renderResults(last);
}

// -- the API ---------------------------------------------------------------------------------

function headers(json) {
  const h = {};
  const key = sessionStorage.getItem("ragspine-key");
  if (key) h["Authorization"] = "Bearer " + key;
  if (json) h["Content-Type"] = "application/json";
  return h;
}

async function call(method, path, body, isForm) {
  const response = await fetch(path, {
    method, headers: headers(body !== undefined && !isForm), body: isForm ? body : body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) {
    const message = response.status === 401 ? t("needKey") : (data && data.message) || response.statusText;
    throw new Error(message);
  }
  return data;
}

function status(message, isError) {
  const el = $("status");
  el.textContent = message || "";
  el.className = isError ? "error" : "";
}

function clearResults() {
  // Empty and error states replace what an earlier query showed.
  last = null;
  $("results").replaceChildren();
  $("pager").hidden = true;
  $("notice").hidden = true;
  $("answer").hidden = true;
  $("answer-cites").replaceChildren();
}

function fail(error) {
  clearResults();
  status(error.message, true);
}

// -- URL state -------------------------------------------------------------------------------

function pageSize() { return Number($("page-size").value) || 10; }
function searchKey() { return JSON.stringify([$("q").value.trim(), where(), page, pageSize()]); }

function stateURL(passage) {
  const params = new URLSearchParams();
  const query = $("q").value.trim();
  if (query) params.set("q", query);
  for (const f of filters) params.append("f", `${f.field}|${f.op}|${shownValue(f.value).replace(/, /g, ",")}`);
  if (page > 1) params.set("page", String(page));
  if (pageSize() !== 10) params.set("size", String(pageSize()));
  if (passage) params.set("passage", passage);
  const text = params.toString();
  return text ? `?${text}` : location.pathname;
}

function readURL() {
  const params = new URLSearchParams(location.search);
  $("q").value = params.get("q") || "";
  filters = [];
  for (const raw of params.getAll("f")) {
    const [field, op, ...rest] = raw.split("|");
    if (!field || !op || !rest.length) continue;
    const value = rest.join("|");
    filters.push({ field, op, value: LIST_OPS.has(op) ? value.split(",").filter(Boolean) : value });
  }
  page = Math.max(1, Number.parseInt(params.get("page") || "1", 10) || 1);
  $("page-size").value = params.get("size") === "20" ? "20" : "10";
  renderFilters();
  return params.get("passage");
}

function push(passage) {
  const url = stateURL(passage);
  if (url !== (location.search || location.pathname)) history.pushState(null, "", url);
}

async function restore() {
  // Load, Back and Forward: the URL decides what is shown.
  const passage = readURL();
  pushedPassage = false; // after Back or Forward, closing the view no longer steps back
  if (last && last.key === searchKey()) { /* the same results: only the document view changed */ }
  else if ($("q").value.trim()) await runSearch();
  else { clearResults(); status(""); }
  if (passage) openPassage(passage);
  else if ($("doc-view").open) $("doc-view").close();
}

// -- filters and facets ----------------------------------------------------------------------

function where() {
  if (!filters.length) return null;
  const parts = filters.map((f) => ({ [f.field]: { [f.op]: f.value } }));
  return parts.length === 1 ? parts[0] : { and: parts };
}

function renderFilters() {
  const list = $("filter-list");
  list.replaceChildren();
  filters.forEach((f, i) => {
    const li = document.createElement("li");
    li.append(document.createTextNode(filterText(f)));
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "×";
    button.setAttribute("aria-label", `${t("remove")}: ${filterText(f)}`);
    button.addEventListener("click", () => { filters.splice(i, 1); filtersChanged(); });
    li.append(button);
    list.append(li);
  });
}

function filtersChanged() {
  renderFilters();
  renderFacets();
  if ($("q").value.trim()) search();
  else push();
}

function addFilter() {
  const raw = $("f-value").value.trim();
  if (!raw) { status(t("emptyValue"), true); return; }
  const op = $("f-op").value;
  const value = LIST_OPS.has(op) ? raw.split(",").map((v) => v.trim()).filter(Boolean) : raw;
  filters.push({ field: $("f-field").value, op, value });
  $("f-value").value = "";
  status("");
  filtersChanged();
}

function toggleFacet(field, value) {
  const at = filters.findIndex((f) => f.field === field && f.op === "eq" && f.value === value);
  if (at >= 0) filters.splice(at, 1);
  else filters.push({ field, op: "eq", value });
  filtersChanged();
}

function renderFieldOptions() {
  const selected = $("f-field").value || "entity";
  const op = $("f-op").value || "eq";
  $("f-field").replaceChildren(...fieldNames.map((name) => new Option(fieldWord(name), name)));
  $("f-op").replaceChildren(...operators.map((name) => new Option(opWord(name), name)));
  if (fieldNames.includes(selected)) $("f-field").value = selected;
  if (operators.includes(op)) $("f-op").value = op;
  renderValueList();
}

function renderValueList() {
  const values = (facetData && facetData.facets[$("f-field").value]) || [];
  $("f-values").replaceChildren(...values.map((v) => new Option(`${v.value} (${v.count})`, v.value)));
}

function renderFacets() {
  const box = $("facet-list");
  box.replaceChildren();
  if (!facetData) return;
  const count = document.createElement("p");
  count.className = "facet-count";
  count.textContent = t("docCount", facetData.documents);
  box.append(count);
  for (const [field, values] of Object.entries(facetData.facets)) {
    const group = document.createElement("section");
    group.className = "facet";
    group.dataset.field = field;
    const heading = document.createElement("h3");
    heading.textContent = fieldWord(field);
    const list = document.createElement("ul");
    for (const v of values) {
      const on = filters.some((f) => f.field === field && f.op === "eq" && f.value === v.value);
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "facet-value";
      button.dataset.value = v.value;
      button.setAttribute("aria-pressed", on ? "true" : "false");
      const name = document.createElement("span");
      name.textContent = v.value;
      const n = document.createElement("span");
      n.className = "count";
      n.textContent = String(v.count);
      button.append(name, n);
      button.addEventListener("click", () => toggleFacet(field, v.value));
      li.append(button);
      list.append(li);
    }
    group.append(heading, list);
    box.append(group);
  }
}

async function loadFields() {
  try {
    const [fields, facets] = await Promise.all([call("GET", "fields"), call("GET", "facets")]);
    fieldNames = [...fields.fields, ...fields.metadata]; // the service offers only user-facing fields
    operators = fields.operators;
    facetData = facets;
    maxTopK = facets.max_top_k || maxTopK;
    if (facets.levels && facets.levels.length) {
      const keep = $("u-sens").value || "INTERNAL";
      $("u-sens").replaceChildren(...facets.levels.map((level) => new Option(level, level)));
      $("u-sens").value = facets.levels.includes(keep) ? keep : facets.levels[0];
    }
    renderFieldOptions();
    renderFacets();
  } catch (error) {
    status(error.message, true);
  }
}

// -- passages --------------------------------------------------------------------------------

const STOPWORDS = new Set(["the", "and", "for", "was", "were", "what", "why", "how", "who", "which", "with", "from", "did", "does", "are", "its", "this", "that"]);

function terms(query) {
  // Regex sources for the query's Latin words (3+ letters, whole words, no stopwords) and CJK
  // bigrams, longest first, regex-escaped.
  const found = new Map();
  const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  for (const w of query.match(/[\p{L}\p{N}]+/gu) || []) {
    if (/\p{Script=Han}/u.test(w)) {
      for (let i = 0; i + 1 < w.length; i++) found.set(w.slice(i, i + 2), escape(w.slice(i, i + 2)));
    } else if (w.length >= 3 && !STOPWORDS.has(w.toLowerCase())) {
      found.set(w.toLowerCase(), `(?<![\\p{L}\\p{N}])${escape(w)}(?![\\p{L}\\p{N}])`);
    }
  }
  return [...found.entries()].sort((a, b) => b[0].length - a[0].length).map((entry) => entry[1]);
}

function highlighted(text, query) {
  // A fragment of text nodes and <mark> elements: the text is never parsed as HTML.
  const fragment = document.createDocumentFragment();
  const words = query ? terms(query) : [];
  if (!words.length) { fragment.append(document.createTextNode(text)); return fragment; }
  const pattern = new RegExp(words.join("|"), "giu");
  let at = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > at) fragment.append(document.createTextNode(text.slice(at, match.index)));
    const mark = document.createElement("mark");
    mark.textContent = match[0];
    fragment.append(mark);
    at = match.index + match[0].length;
  }
  if (at < text.length) fragment.append(document.createTextNode(text.slice(at)));
  return fragment;
}

// **strong**, __strong__ (not inside a word: snake__case stays), `code`, *em* (not inside a word).
const INLINE = new RegExp([
  String.raw`\*\*(\S(?:.*?\S)?)\*\*`,
  String.raw`(?<![\p{L}\p{N}_])__(\S(?:.*?\S)?)__(?![\p{L}\p{N}_])`,
  "`([^`]+)`",
  String.raw`(?<![\p{L}\p{N}*])\*([^*\s](?:[^*]*?[^*\s])?)\*(?![\p{L}\p{N}*])`,
].join("|"), "gu");

function inline(text, query) {
  // Markdown emphasis and code as <strong>/<em>/<code> holding text nodes; the markers dropped.
  const fragment = document.createDocumentFragment();
  let at = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > at) fragment.append(highlighted(text.slice(at, match.index), query));
    const tag = match[1] !== undefined || match[2] !== undefined ? "strong" : match[3] !== undefined ? "code" : "em";
    const el = document.createElement(tag);
    el.append(highlighted(match[1] ?? match[2] ?? match[3] ?? match[4], query));
    fragment.append(el);
    at = match.index + match[0].length;
  }
  if (at < text.length) fragment.append(highlighted(text.slice(at), query));
  return fragment;
}

function rendered(text, query) {
  // Document text with its Markdown read, not shown: headings as bold lines, list markers as
  // bullets, emphasis as <strong>/<em>. Nothing is parsed as HTML.
  const fragment = document.createDocumentFragment();
  text.split("\n").forEach((line, i) => {
    if (i) fragment.append(document.createTextNode("\n"));
    const heading = line.match(/^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/);
    if (heading) {
      const strong = document.createElement("strong");
      strong.className = "md-heading";
      strong.append(inline(heading[1], query));
      fragment.append(strong);
      return;
    }
    const item = line.match(/^(\s*)[-*+]\s+(.*)$/);
    if (item) { fragment.append(document.createTextNode(`${item[1]}• `), inline(item[2], query)); return; }
    fragment.append(inline(line, query));
  });
  return fragment;
}

function relevanceOf(snippet) {
  const value = snippet.relevance ?? null;
  return typeof value === "number" && Number.isFinite(value) ? Math.min(1, Math.max(0, value)) : null;
}

function scoreLine(snippet, rank) {
  const box = document.createElement("div");
  box.className = "scores";
  const relevance = relevanceOf(snippet);
  if (relevance === null) { box.textContent = t("rank", rank); return box; }
  const percent = Math.round(relevance * 100);
  const meter = document.createElement("meter");
  meter.min = 0; meter.max = 1; meter.value = relevance;
  meter.setAttribute("aria-label", `${t("relevance")} ${percent}%`);
  box.append(document.createTextNode(`${t("relevance")} ${percent}% `), meter,
    document.createTextNode(` · ${t("rank", rank)}`));
  return box;
}

function passage(snippet, query, rank, ref) {
  const li = document.createElement("li");
  li.className = "passage";
  li.dataset.docId = snippet.doc_id;
  li.dataset.chunkId = snippet.chunk_id || "";
  const title = document.createElement("h3");
  title.className = "passage-title";
  const link = document.createElement("a");
  link.href = stateURL(snippet.chunk_id);
  link.title = t("open");
  link.textContent = (ref ? `[${ref}] ` : "") + (snippet.title || snippet.doc_id);
  link.addEventListener("click", (event) => {
    event.preventDefault();
    push(snippet.chunk_id);
    pushedPassage = true;
    openPassage(snippet.chunk_id);
  });
  title.append(link);
  const locator = document.createElement("div");
  locator.className = "locator";
  locator.textContent = `${snippet.doc_id} · ${snippet.source_locator}` + (snippet.cited ? ` · ${t("cited")}` : "");
  const text = document.createElement("p");
  text.className = "passage-text";
  text.append(rendered(snippet.text, query));
  const why = document.createElement("details");
  why.className = "why";
  const summary = document.createElement("summary");
  summary.textContent = t("why");
  const pre = document.createElement("pre");
  pre.textContent = JSON.stringify({ [t("scores")]: snippet.scores, lineage: snippet.lineage, chunk_id: snippet.chunk_id,
    period: snippet.period, entity: snippet.entity, topic: snippet.topic, language: snippet.language,
    sensitivity: snippet.sensitivity }, null, 2);
  why.append(summary, pre);
  li.append(title, locator, text, scoreLine(snippet, rank), why);
  return li;
}

function droppedNotice(names, key) {
  const el = $("notice");
  const list = (names || []).filter(Boolean);
  el.hidden = !list.length;
  el.textContent = list.length ? t(key, list.map(fieldWord).join(", ")) : "";
}

function renderResults(state) {
  const start = (state.page - 1) * state.size;
  const shown = state.snippets.slice(start, start + state.size);
  const more = state.snippets.length > start + state.size;
  $("results").replaceChildren(...shown.map((s, i) => passage(s, state.query, start + i + 1)));
  $("results").start = start + 1; // the list numbers follow the rank across pages
  droppedNotice(state.dropped, "dropped");
  if (!shown.length) status(filters.length ? t("noneFiltered") : t("none"));
  else status(t("found", start + 1, start + shown.length, more));
  $("pager").hidden = state.page === 1 && !more;
  $("prev").disabled = state.page === 1;
  $("next").disabled = !more;
  $("page-info").textContent = t("page", state.page);
}

async function runSearch() {
  const query = $("q").value.trim();
  if (!query) return;
  status(t("searching"));
  $("answer").hidden = true;
  const size = pageSize();
  const topK = Math.min(page * size + 1, maxTopK); // one more than the page: is there a next one?
  const key = searchKey();
  const mine = ++latest;
  try {
    const data = await call("POST", "search", { query, top_k: topK, where: where() });
    if (mine !== latest) return;
    last = { query, snippets: data.snippets, page, size, dropped: data.filters_dropped || [], key };
    renderResults(last);
  } catch (error) {
    if (mine === latest) fail(error);
  }
}

async function search(event) {
  if (event) event.preventDefault();
  if (!$("q").value.trim()) return;
  page = 1;
  push();
  await runSearch();
}

async function goTo(target) {
  page = Math.max(1, target);
  push();
  await runSearch();
  $("results-h").scrollIntoView({ block: "start" });
}

async function ask() {
  const question = $("q").value.trim();
  if (!question) { $("q").reportValidity(); return; }
  clearResults(); // the answer replaces earlier passages
  status(t("asking"));
  const mine = ++latest;
  try {
    const body = { question, top_k: Math.min(pageSize(), 10), where: where() };
    const data = await call("POST", "ask", body);
    if (mine !== latest) return;
    $("answer-text").textContent = data.answer;
    $("answer-h").textContent = t("answered", data.mode);
    $("answer-cites").replaceChildren(...data.citations.map((c, i) => passage(c, question, i + 1, c.ref)));
    $("answer").hidden = false;
    droppedNotice(data.filters_dropped, "answerDropped");
    status(data.note || "");
  } catch (error) {
    if (mine === latest) fail(error);
  }
}

// -- the document view -----------------------------------------------------------------------

async function openPassage(chunkId) {
  const docId = chunkId.split(":").slice(0, -2).join(":");
  const dialog = $("doc-view");
  $("doc-title").textContent = t("loadingDoc");
  $("doc-meta").textContent = "";
  $("doc-body").replaceChildren();
  if (!dialog.open) dialog.showModal();
  try {
    const params = new URLSearchParams({ chunk_id: chunkId, around: "3" });
    const data = await call("GET", `documents/${encodeURIComponent(docId)}/context?${params}`);
    $("doc-title").textContent = data.title || data.doc_id;
    $("doc-meta").textContent = data.doc_id;
    const parts = [];
    if (data.before) parts.push(gap(t("before", data.before)));
    for (const chunk of data.chunks) {
      const block = document.createElement("div");
      block.className = chunk.cited ? "doc-chunk cited" : "doc-chunk";
      block.dataset.chunkId = chunk.chunk_id;
      const where_ = document.createElement("div");
      where_.className = "locator";
      where_.textContent = chunk.source_locator + (chunk.cited ? ` · ${t("cited")}` : "");
      const text = document.createElement("p");
      text.className = "passage-text";
      text.append(rendered(chunk.text, chunk.cited && last ? last.query : ""));
      block.append(where_, text);
      parts.push(block);
    }
    if (data.after) parts.push(gap(t("after", data.after)));
    $("doc-body").replaceChildren(...parts);
    const cited = $("doc-body").querySelector(".cited");
    if (cited) cited.scrollIntoView({ block: "center" });
  } catch (error) {
    $("doc-title").textContent = error.message;
  }
}

function gap(message) {
  const p = document.createElement("p");
  p.className = "gap";
  p.textContent = message;
  return p;
}

function closePassage() {
  // Opened from a result: Back. Opened from a link: the same URL without the passage, in place.
  if (pushedPassage) history.back();
  else {
    if (new URLSearchParams(location.search).has("passage")) history.replaceState(null, "", stateURL());
    $("doc-view").close();
  }
  pushedPassage = false;
}

// -- upload ----------------------------------------------------------------------------------

async function upload(event) {
  event.preventDefault();
  const file = $("u-file").files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file);
  if ($("u-doc").value.trim()) form.append("doc_id", $("u-doc").value.trim());
  form.append("sensitivity", $("u-sens").value);
  status(t("uploading"));
  try {
    const data = await call("POST", "documents/upload", form, true);
    status(t("uploaded", data.doc_id, data.chunks));
    loadFields();
  } catch (error) {
    status(error.message, true);
  }
}

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}

document.addEventListener("DOMContentLoaded", () => {
  applyLanguage();
  $("key").value = sessionStorage.getItem("ragspine-key") || "";
  $("lang").addEventListener("change", () => { lang = $("lang").value; sessionStorage.setItem("ragspine-lang", lang); applyLanguage(); });
  $("save-key").addEventListener("click", () => {
    sessionStorage.setItem("ragspine-key", $("key").value);
    status(t("keySaved"));
    loadFields();
  });
  $("search-form").addEventListener("submit", search);
  $("ask-btn").addEventListener("click", ask);
  $("f-add").addEventListener("click", addFilter);
  $("f-field").addEventListener("change", renderValueList);
  $("f-value").addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); addFilter(); } });
  $("page-size").addEventListener("change", () => { if (last) search(); });
  $("prev").addEventListener("click", () => goTo(page - 1));
  $("next").addEventListener("click", () => goTo(page + 1));
  $("doc-close").addEventListener("click", closePassage);
  $("doc-view").addEventListener("cancel", (e) => { e.preventDefault(); closePassage(); });
  $("upload-form").addEventListener("submit", upload);
  document.addEventListener("keydown", (e) => {
    if (e.key === "/" && !e.ctrlKey && !e.metaKey && !e.altKey && !typing(e.target) && !$("doc-view").open) {
      e.preventDefault();
      $("q").focus();
      $("q").select();
    }
  });
  window.addEventListener("popstate", restore);
  $("q").focus();
  loadFields().then(restore);
});
