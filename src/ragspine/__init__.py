"""RAGSpine: the narrative half of RAG for LLM agents.

Ingest documents (Chinese and English mixed), chunk and version them, retrieve with BM25
(CJK unigram+bigram) fused by RRF, rerank, and hand an agent cited snippets. Text marked
RESTRICTED never reaches a prompt.
"""

__version__ = "0.1.0"
