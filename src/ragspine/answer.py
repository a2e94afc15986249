"""`ask`: retrieve → a prompt with numbered sources → the LLM → an answer with its citations.

Invariants:
- Only RESTRICTED-free snippets (the link's exit #2, checked again here) reach the prompt.
- Each source in the prompt is numbered [1], [2], … in rank order, and its `prompt_text` (a
  generation-only expansion, when present) stands in for `text`; the citations returned are the
  snippet dicts themselves, with their `ref` number and whether the answer cites them.
- A query the pipeline refused (security gate, corrective retrieval) gets NO_SOURCES with the
  reason in `note`: no grounded answer, said so, never an answer made up without sources.
- Without a provider, or when the provider fails, the answer is extractive: the retrieved
  snippets' verbatim `text`, numbered. A failed LLM call is said so in `note`, never silent.
- A synthesis snippet (`is_synthesis`, e.g. a RAPTOR summary) is never a numbered source nor a
  citation: the prompt shows it as an unnumbered overview, and its member chunks (`members`)
  become numbered sources in its place, so the answer cites them.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any, cast

from ragspine.agent.agent import LLMProvider, NarrativeRetriever
from ragspine.http_retry import public_error
from ragspine.retrieval.relevance import above
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.snippet import Citation
from ragspine.secret import redact_text

DEFAULT_ASK_TOP_K = 5
NO_SOURCES = "No source in the store answers this question."
_CITE = re.compile(r"\[(\d+)\]")
_LOG = logging.getLogger(__name__)
ANSWER_SYSTEM = (
    "You answer questions using only the numbered sources you are given. Cite the source of every "
    "claim with its number in square brackets, like [1] or [2][3]. If the sources do not contain "
    "the answer, say so plainly. Answer in the language of the question."
)


@dataclass(frozen=True)
class Answer:
    """An answer and the snippets it rests on (each with `ref` and `cited`)."""

    question: str
    text: str
    mode: str  # "llm" or "extractive"
    citations: list[Citation] = field(default_factory=list)
    note: str = ""
    filters_dropped: list[str] = field(default_factory=list)  # filter fields that matched nothing and were dropped

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.text,
            "mode": self.mode,
            "note": self.note,
            "filters_dropped": list(self.filters_dropped),
            "citations": self.citations,
        }


def ask(
    retriever: NarrativeRetriever,
    question: str,
    *,
    provider: LLMProvider | None = None,
    filters: Any = None,
    top_k: int = DEFAULT_ASK_TOP_K,
    filter_fallback: str | None = None,
    min_score: float | None = None,
) -> Answer:
    """Answer `question` from the store; see the module docstring. `filter_fallback` ("retry"
    or "strict"; None: the retriever's own) goes to a retriever with `retrieve_run`; the
    answer's `filters_dropped` names the filter fields dropped to find its sources.
    `min_score`: the least `relevance` a retrieved snippet needs to become a source, the cut
    `Workspace.search` makes (`relevance.above`; None: no cut); when it leaves none, the
    answer is NO_SOURCES and its note names the floor.

    >>> from ragspine.retrieval.link.narrative_link import build_narrative_retriever
    >>> retriever, store = build_narrative_retriever(":memory:")
    >>> ask(retriever, "why?").text
    'No source in the store answers this question.'
    >>> store.close()
    """
    if not question.strip():
        raise ValueError("question is empty: ask something")
    run = getattr(retriever, "retrieve_run", None)  # says why a query was refused, when it was
    if callable(run):
        outcome = run(question, filters=filters or None, top_k=top_k, filter_fallback=filter_fallback)
        snippets, refusal, dropped = outcome.snippets, outcome.refusal, outcome.filters_dropped
    else:
        snippets, refusal = retriever.retrieve(question, filters=filters or None, top_k=top_k), None
        dropped = list(getattr(snippets, "filters_dropped", ()))
    if min_score is not None and snippets:
        snippets = above(snippets, min_score)
        refusal = refusal or (None if snippets else f"no passage reached min_score {min_score:g}")
    return replace(_answer(question, snippets, refusal, provider), filters_dropped=dropped)


def _answer(question: str, snippets: list[Any], refusal: str | None, provider: LLMProvider | None) -> Answer:
    """The answer from the retrieved `snippets` (see `ask`)."""
    sources, overviews = citable_sources(snippets)
    if not sources:
        return Answer(question, NO_SOURCES, "extractive", note=f"no grounded answer: {refusal}" if refusal else "")
    if provider is None:
        return _extractive(question, sources)
    messages = [
        {"role": "system", "content": ANSWER_SYSTEM},
        {"role": "user", "content": build_answer_prompt(question, sources, overviews)},
    ]
    try:
        reply = provider.chat(messages).strip()
    except Exception as exc:  # noqa: BLE001 - any provider failure becomes a visible extractive answer
        _LOG.warning("LLM answer failed (%s); answering extractively", redact_text(str(exc)))
        note = f"LLM call failed ({public_error(exc)}); extractive answer instead"
        return _extractive(question, sources, note=note)
    cited = {int(n) for n in _CITE.findall(reply)}
    return Answer(question, reply, "llm", _numbered(sources, cited))


def citable_sources(snippets: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(numbered sources, overviews): synthesis snippets become overviews and their members
    sources (each chunk once); a visual page pointer is never a source, the text chunks on its
    page (its members) are; RESTRICTED never passes."""
    sources: list[dict[str, Any]] = []
    overviews: list[dict[str, Any]] = []
    seen: set[str] = set()
    for snippet in snippets:
        if snippet.get("is_synthesis"):
            overviews.append(snippet)
            candidates = list(snippet.get("members", []))
        elif snippet.get("is_visual"):  # a page pointer: its page's text chunks, never the pixels
            candidates = list(snippet.get("members", []))
        else:
            candidates = [snippet]
        for candidate in candidates:
            if not is_restricted(candidate.get("sensitivity")) and candidate.get("chunk_id") not in seen:
                seen.add(candidate.get("chunk_id", ""))
                sources.append(candidate)
    return sources, [o for o in overviews if not is_restricted(o.get("sensitivity"))]


def build_answer_prompt(
    question: str, sources: list[dict[str, Any]], overviews: list[dict[str, Any]] | None = None
) -> str:
    """The user message: unnumbered overviews (synthesis, not citable), numbered sources
    (prompt_text before text), then the question."""
    blocks = [f"Overview (a synthesis of the sources below; cite the numbered sources, not this):\n{o['text'].strip()}"
              for o in overviews or []]  # fmt: skip
    blocks.append("Sources:")
    for number, snippet in enumerate(sources, start=1):
        where = snippet.get("title") or snippet.get("doc_id", "")
        body = snippet.get("prompt_text") or snippet["text"]
        blocks.append(f"[{number}] {where} ({snippet.get('source_locator', '')})\n{body.strip()}")
    blocks.append(f"Question: {question.strip()}")
    return "\n\n".join(blocks)


def _extractive(question: str, sources: list[dict[str, Any]], *, note: str = "") -> Answer:
    text = "\n\n".join(f"[{n}] {' '.join(s['text'].split())}" for n, s in enumerate(sources, start=1))
    return Answer(question, text, "extractive", _numbered(sources, set(range(1, len(sources) + 1))), note)


def _numbered(sources: list[dict[str, Any]], cited: set[int]) -> list[Citation]:
    return [cast(Citation, {"ref": n, "cited": n in cited, **s}) for n, s in enumerate(sources, start=1)]
