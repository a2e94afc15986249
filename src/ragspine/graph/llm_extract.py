"""The LLM relation extractor: relations a model proposes from open narrative chunks.

Invariants:
- Only open chunks are sent (`check_open` raises on a RESTRICTED one), each cut to `max_chars`,
  at most `max_chunks` of them (those naming a controlled entity first, in chunk order).
- Every edge is stamped `derivation="model-derived"`, `verified=False`, with the chunk it came
  from as provenance; a model never makes a verified or declared edge.
- Both endpoints are screened by the security gate (`SecurityGate.check`, origin
  "relation_extractor"); an endpoint must also appear in the chunk's text or be a controlled
  entity: a name the model invented is dropped. A relation outside LLM_RELATIONS is dropped.
- A failed call (provider error) skips that chunk and is logged; the build goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ragspine.agent.agent import LLMProvider
from ragspine.graph.extract import ref
from ragspine.graph.model import Edge, Provenance, make_edge, node_id
from ragspine.graph.vocabulary import Vocabulary
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.query.gate import SecurityGate, fold
from ragspine.retrieval.raptor.summary import check_open

LLM_RELATIONS = ("subsidiary_of", "peer_of", "supplier_of", "customer_of", "related_to")
ORIGIN = "relation_extractor"
_LOG = logging.getLogger(__name__)


class LLMRelationExtractor:
    """Asks `provider` for `A | relation | B` lines per chunk; keeps what passes the checks above.

    >>> LLMRelationExtractor(provider=None).name  # doctest: +SKIP
    'llm'
    """

    name = "llm"

    def __init__(
        self, provider: LLMProvider | None, gate: SecurityGate | None = None, max_chunks: int = 200,
        max_chars: int = 2000,
    ) -> None:  # fmt: skip
        if provider is None:
            raise ValueError("the llm relation extractor needs an LLM: set RAGSPINE_LLM_BASE_URL and RAGSPINE_LLM_MODEL")
        if max_chunks < 1 or max_chars < 1:
            raise ValueError(f"max_chunks and max_chars must be >= 1, got {max_chunks}, {max_chars}")
        self.provider, self.gate = provider, gate if gate is not None else SecurityGate()
        self.max_chunks, self.max_chars = max_chunks, max_chars
        self.dropped: list[dict[str, str]] = []  # what was refused, and why (the build report shows it)

    def extract(self, chunks: Sequence[Chunk], vocabulary: Vocabulary) -> list[Edge]:
        check_open(chunks)
        self.dropped = []  # this build's
        ranked = sorted(range(len(chunks)), key=lambda i: (not vocabulary.find(chunks[i].text), i))
        edges: list[Edge] = []
        for i in ranked[: self.max_chunks]:
            chunk = chunks[i]
            check_open([chunk])
            text = chunk.text[: self.max_chars]
            try:
                reply = self.provider.chat(self._messages(text, vocabulary.find(text)), temperature=0)
            except Exception as exc:  # noqa: BLE001 - one failed chunk never stops the build
                _LOG.warning("relation extraction skipped chunk %s: %s", chunk.chunk_id, type(exc).__name__)
                continue
            edges.extend(self._parse(reply, chunk, text, vocabulary))
        return edges

    @staticmethod
    def _messages(text: str, known: list[str]) -> list[dict[str, str]]:
        names = ", ".join(known) or "(none)"
        return [
            {"role": "system", "content": "You extract relations between companies. Use only what the passage says."},
            {"role": "user", "content": f"Known entities: {names}\nRelations: {', '.join(LLM_RELATIONS)}\n"
                                        "Write one relation per line as SOURCE | RELATION | TARGET, naming "
                                        f"entities as the passage does. Nothing else.\n\nPassage:\n{text}"},
        ]  # fmt: skip

    def _parse(self, reply: str, chunk: Chunk, text: str, vocabulary: Vocabulary) -> list[Edge]:
        out: list[Edge] = []
        folded = fold(text)
        for line in reply.splitlines():
            parts = [p.strip().strip("*-•` ") for p in line.split("|")]
            if len(parts) != 3:
                continue
            source, relation, target = parts
            relation = relation.lower().replace(" ", "_")
            if relation not in LLM_RELATIONS:
                self._drop(line, "relation outside " + ", ".join(LLM_RELATIONS))
                continue
            ends = [self._endpoint(name, folded, vocabulary) for name in (source, target)]
            if ends[0] is None or ends[1] is None or ends[0] == ends[1]:
                continue
            out.append(make_edge(node_id("entity", ends[0]), node_id("entity", ends[1]), relation,
                                 [Provenance("llm", chunks=(ref(chunk),))], derivation="model-derived",
                                 verified=False))  # fmt: skip
        return out

    def _endpoint(self, name: str, folded_text: str, vocabulary: Vocabulary) -> str | None:
        """The entity `name` stands for, or None (refused by the gate, or not in the passage)."""
        reason = self.gate.check(name, origin=ORIGIN)
        if reason is not None:
            self._drop(name, reason)
            return None
        canonical = vocabulary.canonical(name)
        if canonical is not None:
            return canonical
        if fold(name).strip() not in folded_text:
            self._drop(name, "not in the passage")
            return None
        return name.strip()

    def _drop(self, what: str, reason: str) -> None:
        self.dropped.append({"text": what[:200], "reason": reason})
