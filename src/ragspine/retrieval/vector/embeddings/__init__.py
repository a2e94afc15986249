"""Embedding models behind the EmbeddingBackend Protocol, and their factory."""
