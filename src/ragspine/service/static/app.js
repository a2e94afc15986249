// The RAGSpine search page. Every piece of data reaches the DOM as a text node (textContent,
// createTextNode), never parsed as HTML, so document text cannot become markup or script.
"use strict";

const TEXT = {
  en: {
    title: "RAGSpine search", language: "Language", key: "API key", keyHint: "kept in this tab only",
    saveKey: "Use key", query: "Question or keywords", topK: "Results", search: "Search", ask: "Ask",
    filters: "Filters (all must match)", field: "Field", op: "Operator", value: "Value",
    valueHint: "e.g. ACME_CN; lists: A,B", addFilter: "Add filter", remove: "Remove filter",
    answer: "Answer", results: "Passages", upload: "Add a document (needs the API key)", file: "File",
    docId: "Document id", sensitivity: "Sensitivity", uploadBtn: "Upload", searching: "Searching…",
    found: (n, mode) => `${n} passage(s) (${mode} retrieval)`, none: "No passage matched.",
    asking: "Answering…", answered: (mode) => `Answer (${mode})`, why: "Why this passage",
    scores: "Scores", needKey: "This service needs an API key: enter it above.",
    keySaved: "Key kept for this tab.", uploaded: (d, n) => `Ingested ${d}: ${n} chunk(s).`,
    uploading: "Uploading…", emptyValue: "Give a value for the filter.", cited: "cited",
    dropped: (fields) => `Nothing matched the filter(s) on ${fields}: they were dropped, so these passages ignore them.`,
  },
  zh: {
    title: "RAGSpine 检索", language: "语言", key: "API 密钥", keyHint: "仅保存在此标签页",
    saveKey: "使用密钥", query: "问题或关键词", topK: "条数", search: "检索", ask: "问答",
    filters: "筛选条件（需全部满足）", field: "字段", op: "运算符", value: "取值",
    valueHint: "如 ACME_CN；多个值：A,B", addFilter: "添加条件", remove: "删除条件",
    answer: "回答", results: "段落", upload: "添加文档（需要 API 密钥）", file: "文件",
    docId: "文档编号", sensitivity: "密级", uploadBtn: "上传", searching: "检索中…",
    found: (n, mode) => `共 ${n} 段（${mode} 检索）`, none: "没有匹配的段落。",
    asking: "回答中…", answered: (mode) => `回答（${mode}）`, why: "为何命中",
    scores: "得分", needKey: "此服务需要 API 密钥：请在上方输入。",
    keySaved: "密钥已保存在此标签页。", uploaded: (d, n) => `已导入 ${d}：${n} 个分块。`,
    uploading: "上传中…", emptyValue: "请填写筛选取值。", cited: "已引用",
    dropped: (fields) => `没有段落满足 ${fields} 的筛选条件：已去掉这些条件，以下段落不受其约束。`,
  },
};
const LIST_OPS = new Set(["in", "nin", "between"]);
const $ = (id) => document.getElementById(id);
let lang = sessionStorage.getItem("ragspine-lang") || ((navigator.language || "en").startsWith("zh") ? "zh" : "en");
const filters = [];

function t(name, ...args) {
  const value = TEXT[lang][name];
  return typeof value === "function" ? value(...args) : value;
}

function applyLanguage() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  $("lang").value = lang;
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
  document.title = t("title");
  renderFilters();
}

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
    const shown = Array.isArray(f.value) ? f.value.join(", ") : f.value;
    li.append(document.createTextNode(`${f.field} ${f.op} ${shown}`));
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "×";
    button.setAttribute("aria-label", `${t("remove")}: ${f.field} ${f.op} ${shown}`);
    button.addEventListener("click", () => { filters.splice(i, 1); renderFilters(); });
    li.append(button);
    list.append(li);
  });
}

function addFilter() {
  const raw = $("f-value").value.trim();
  if (!raw) { status(t("emptyValue"), true); return; }
  const op = $("f-op").value;
  const value = LIST_OPS.has(op) ? raw.split(",").map((v) => v.trim()).filter(Boolean) : raw;
  filters.push({ field: $("f-field").value, op, value });
  $("f-value").value = "";
  status("");
  renderFilters();
}

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
  const words = terms(query);
  if (!words.length) { fragment.append(document.createTextNode(text)); return fragment; }
  const pattern = new RegExp(words.join("|"), "giu");
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) fragment.append(document.createTextNode(text.slice(last, match.index)));
    const mark = document.createElement("mark");
    mark.textContent = match[0];
    fragment.append(mark);
    last = match.index + match[0].length;
  }
  if (last < text.length) fragment.append(document.createTextNode(text.slice(last)));
  return fragment;
}

function passage(snippet, query, ref) {
  const li = document.createElement("li");
  li.className = "passage";
  li.dataset.docId = snippet.doc_id;
  const title = document.createElement("h3");
  title.className = "passage-title";
  title.textContent = (ref ? `[${ref}] ` : "") + (snippet.title || snippet.doc_id);
  const locator = document.createElement("div");
  locator.className = "locator";
  locator.textContent = `${snippet.doc_id} · ${snippet.source_locator}` + (snippet.cited ? ` · ${t("cited")}` : "");
  const text = document.createElement("p");
  text.className = "passage-text";
  text.append(highlighted(snippet.text, query));
  const scores = document.createElement("div");
  scores.className = "scores";
  const s = snippet.scores || {};
  const fmt = (v) => (v === null || v === undefined ? "—" : Number(v).toFixed(4));
  scores.textContent = `${t("scores")}: bm25 ${fmt(s.bm25)} · vector ${fmt(s.vector)} · fused ${fmt(s.fused)}`;
  const why = document.createElement("details");
  why.className = "why";
  const summary = document.createElement("summary");
  summary.textContent = t("why");
  const pre = document.createElement("pre");
  pre.textContent = JSON.stringify({ lineage: snippet.lineage, chunk_id: snippet.chunk_id, period: snippet.period,
    entity: snippet.entity, topic: snippet.topic, language: snippet.language, sensitivity: snippet.sensitivity }, null, 2);
  why.append(summary, pre);
  li.append(title, locator, text, scores, why);
  return li;
}

// The response's top-level `filters_dropped` (RAGSPINE_FILTER_FALLBACK=retry), said in words.
function droppedNote(fields) {
  return fields && fields.length ? t("dropped", fields.join(", ")) : "";
}

async function search(event) {
  if (event) event.preventDefault();
  const query = $("q").value.trim();
  if (!query) return;
  status(t("searching"));
  $("answer").hidden = true;
  try {
    const body = { query, top_k: Number($("top-k").value) || 10, where: where() };
    const data = await call("POST", "search", body);
    $("results").replaceChildren(...data.snippets.map((s) => passage(s, query)));
    const found = data.snippets.length ? t("found", data.snippets.length, data.mode) : t("none");
    status([found, droppedNote(data.filters_dropped)].filter(Boolean).join(" "));
  } catch (error) {
    status(error.message, true);
  }
}

async function ask() {
  const question = $("q").value.trim();
  if (!question) { $("q").reportValidity(); return; }
  status(t("asking"));
  try {
    const body = { question, top_k: Math.min(Number($("top-k").value) || 5, 10), where: where() };
    const data = await call("POST", "ask", body);
    $("answer-text").textContent = data.answer;
    $("answer-h").textContent = t("answered", data.mode);
    $("answer-cites").replaceChildren(...data.citations.map((c) => passage(c, question, c.ref)));
    $("answer").hidden = false;
    status([data.note, droppedNote(data.filters_dropped)].filter(Boolean).join(" "));
  } catch (error) {
    status(error.message, true);
  }
}

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

async function loadFields() {
  try {
    const data = await call("GET", "fields");
    const options = (names) => names.map((name) => new Option(name, name));
    $("f-field").replaceChildren(...options([...data.fields, ...data.metadata]));
    $("f-op").replaceChildren(...options(data.operators));
    $("f-field").value = "entity";
  } catch (error) {
    status(error.message, true);
  }
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
  $("f-value").addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); addFilter(); } });
  $("upload-form").addEventListener("submit", upload);
  loadFields();
});
