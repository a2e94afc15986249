"""RAPTOR: a tree of synthesis nodes over a store's chunk vectors (`make_raptor_retriever`).

    from ragspine.retrieval.raptor import make_raptor_retriever

    raptor = make_raptor_retriever(retriever, mode="collapsed")   # leaves | nodes | collapsed
    raptor.build()                                               # incremental; full=True rebuilds
    snippets = raptor.retrieve("what themes recur?", top_k=10)

Invariants (see each module): deterministic threshold clustering per level; a node's summary is
a synthesis (`is_synthesis`), never cited (`ask` cites its member chunks); RESTRICTED chunks are
never members, so never in a summary or a summary prompt; updates touch only the clusters a
change reaches and follow the store's data_version (writes make it stale, never rebuild it); the
tree is stored beside the chunks: a file beside a SQLite store, tables in a PostgreSQL store's schema.
"""

from ragspine.retrieval.raptor.build import BuildReport, RaptorConfig, build_tree
from ragspine.retrieval.raptor.retriever import RAPTOR_MODES, NoVectors, RaptorRetriever, make_raptor_retriever
from ragspine.retrieval.raptor.summary import ExtractiveSummarizer, LLMSummarizer
from ragspine.retrieval.raptor.tree import RaptorTree

__all__ = [
    "RAPTOR_MODES", "BuildReport", "ExtractiveSummarizer", "LLMSummarizer", "NoVectors", "RaptorConfig",
    "RaptorRetriever", "RaptorTree", "build_tree", "make_raptor_retriever",
]  # fmt: skip
