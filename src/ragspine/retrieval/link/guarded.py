"""The guarded query run's old path: `QueryPlan` and `QueryRun` live in `ragspine.retrieval.pipeline.pipeline`,
whose `Pipeline` runs gate → variants → filters → channels → fusion → rerank → exit → post-processing → snippets."""

from ragspine.retrieval.pipeline.pipeline import QueryPlan, QueryRun

__all__ = ["QueryPlan", "QueryRun"]
