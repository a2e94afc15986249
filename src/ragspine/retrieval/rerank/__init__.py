"""Rerankers over the fused head of the candidate list."""
