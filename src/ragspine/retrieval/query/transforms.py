"""LLM query transforms (RAGSPINE_QUERY_TRANSFORM, RAGSPINE_QUERY_DECOMPOSE) over the agent's LLMProvider.

    from ragspine.retrieval.query.transforms import make_query_transform

    hyde = make_query_transform("hyde", provider=provider)
    hyde.transform("为什么营收下滑")      # [a hypothetical passage]: a retrieval probe only

Invariants:
- A transform sees the question and nothing else: no retrieved text, so no RESTRICTED text, ever
  enters a prompt built here.
- `transform` returns only generated text (never the original); the caller screens every line
  with the SecurityGate before it is retrieved. HyDE's passage is a probe: it is searched with
  (BM25 and dense), never returned, never cited.
- `safe_generate` never raises: an LLM that fails, times out or answers nothing usable gives no
  variants and an error string, and the query runs untransformed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ragspine.agent.agent import LLMProvider
from ragspine.http_retry import public_error
from ragspine.secret import redact_text
from ragspine import catalog
from ragspine.registry import Registry

DEFAULT_FUSION_QUERIES = 4
DEFAULT_SUB_QUESTIONS = 4
_LOG = logging.getLogger(__name__)
_BULLET = re.compile(r"^\s*(?:[-*•·]|\(?\d{1,2}[.)、:：]|\(?[a-z][.)])\s*", re.IGNORECASE)
_QUOTES = "\"'“”‘’「」`"


@runtime_checkable
class QueryTransform(Protocol):
    """Generates query variants for retrieval (the original query is not among them)."""

    def transform(self, query: str) -> list[str]: ...


def reply_lines(reply: object, limit: int) -> list[str]:
    """The non-blank lines of an LLM reply, bullets, numbering and quotes stripped, deduplicated,
    at most `limit`; ValueError for a reply that is not text.

    >>> reply_lines('1. "revenue decline"\\n- exports 2024\\n\\n1. "revenue decline"', 5)
    ['revenue decline', 'exports 2024']
    """
    if not isinstance(reply, str):
        raise ValueError(f"the LLM reply is not text ({type(reply).__name__})")
    lines = (_BULLET.sub("", line).strip().strip(_QUOTES).strip() for line in reply.splitlines())
    return list(dict.fromkeys(line for line in lines if line))[:limit]


def reply_word(reply: object, words: tuple[str, ...]) -> str:
    """The one of `words` an LLM reply starts with (case-insensitive); ValueError when none.

    >>> reply_word(" yes, they do", ("YES", "NO"))
    'YES'
    """
    text = reply.strip().upper() if isinstance(reply, str) else ""
    for word in words:
        if text.startswith(word):
            return word
    raise ValueError(f"answered neither {' nor '.join(words)}: {str(reply)[:80]!r}")


class _LLMTransform:
    """One chat call with a fixed instruction; subclasses say how many lines to keep."""

    name = "llm"
    system = ""
    instruction = ""
    keep = 1

    def __init__(self, provider: LLMProvider) -> None:
        if provider is None:
            raise ValueError(f"the {self.name} transform needs an LLM provider (set RAGSPINE_LLM_BASE_URL)")
        self.provider = provider

    def prompt(self, query: str) -> list[dict[str, str]]:
        """The messages sent: the instruction and the question, nothing retrieved."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": f"{self.instruction}\n\nQuestion: {query.strip()}"},
        ]

    def transform(self, query: str) -> list[str]:
        return reply_lines(self.provider.chat(self.prompt(query), temperature=0), self.keep)


class HydeTransform(_LLMTransform):
    """HyDE: a hypothetical passage answering the question, used as a search probe only."""

    name = "hyde"
    system = "You write short, plausible passages of the kind a document answering a question would contain."
    instruction = (
        "Write one passage of 2-4 sentences that would answer the question, in the language of the "
        "question. Write the passage only, on one line."
    )

    def transform(self, query: str) -> list[str]:
        reply = self.provider.chat(self.prompt(query), temperature=0)
        lines = reply_lines(reply, 50)
        return [" ".join(lines)] if lines else []


class RagFusionTransform(_LLMTransform):
    """RAG-Fusion: `n` reformulations, each searched; rankings fused by RRF with the original's."""

    name = "rag_fusion"
    system = "You rewrite search queries."

    def __init__(self, provider: LLMProvider, n: int = DEFAULT_FUSION_QUERIES) -> None:
        super().__init__(provider)
        if n < 1:
            raise ValueError(f"rag_fusion needs n >= 1, got {n}")
        self.keep = n
        self.instruction = (
            f"Write {n} different search queries that would find documents answering the question, "
            "in the language of the question, one per line, nothing else."
        )


class StepBackTransform(_LLMTransform):
    """Step-back: one more general question, searched beside the original."""

    name = "step_back"
    system = "You turn specific questions into the more general question behind them."
    instruction = (
        "Write the more general, step-back question whose answer gives the background needed for "
        "this question, in the language of the question. Write the question only."
    )


class LLMDecomposer(_LLMTransform):
    """Decomposition: at most `n` self-contained sub-questions (RAGSPINE_QUERY_DECOMPOSE=llm)."""

    name = "sub_question"
    system = "You break complex questions into simple, self-contained sub-questions."

    def __init__(self, provider: LLMProvider, n: int = DEFAULT_SUB_QUESTIONS) -> None:
        super().__init__(provider)
        if n < 1:
            raise ValueError(f"decomposition needs n >= 1, got {n}")
        self.keep = n
        self.instruction = (
            f"Break the question into at most {n} self-contained sub-questions that can each be "
            "answered from one document, in the language of the question, one per line, nothing "
            "else. A simple question is its own only sub-question."
        )


class LLMRewriter(_LLMTransform):
    """The corrective loop's rewrite: one better search query for a question that found little."""

    name = "corrective_rewrite"
    system = "You rewrite search queries that found no good documents."
    instruction = (
        "The search for this question found no good documents. Write one better search query for "
        "it (other words, key terms, no filler), in the language of the question. The query only."
    )


QUERY_TRANSFORMS: Registry[QueryTransform] = catalog.QUERY_TRANSFORMS.bind(QueryTransform)
QUERY_DECOMPOSERS: Registry[QueryTransform] = catalog.QUERY_DECOMPOSERS.bind(QueryTransform)


def make_query_transform(spec: str = "none", **options: object) -> QueryTransform | None:
    """The transform `spec` names (hyde | rag_fusion | step_back | none | a dotted path), built
    with `options` (provider=..., and n= for rag_fusion).

    >>> make_query_transform("none") is None
    True
    """
    return QUERY_TRANSFORMS.make(spec, **options)


def make_query_decomposer(spec: str = "none", **options: object) -> QueryTransform | None:
    """The decomposer `spec` names (llm | none | a dotted path), built with `options`."""
    return QUERY_DECOMPOSERS.make(spec, **options)


def origin_of(transform: object) -> str:
    """The name lineage and the gate give a transform's variants."""
    name = getattr(transform, "name", None)
    return name if isinstance(name, str) and name else type(transform).__name__


def safe_generate(generate: Callable[[str], list[str]], query: str) -> tuple[list[str], str | None]:
    """(variants, error): whatever `generate` raises or returns that is not a list of strings
    becomes no variants and an error (`http_retry.public_error`: a short public code; the details,
    redacted, go to the log), never an exception."""
    try:
        variants = generate(query)
        if not isinstance(variants, list) or not all(isinstance(v, str) for v in variants):
            raise ValueError(f"expected a list of strings, got {type(variants).__name__}")
    except Exception as exc:  # noqa: BLE001 - a failed transform means "run the query as given"
        _LOG.warning("query transform failed (%s); running the query untransformed", redact_text(str(exc)))
        return [], public_error(exc)  # a lineage carries the public code; the details are in the log
    lines = [v.strip() for v in variants if v.strip()]
    if not lines:
        return [], "the LLM reply gave no usable variant"
    return [v for v in lines if v != query.strip()], None
