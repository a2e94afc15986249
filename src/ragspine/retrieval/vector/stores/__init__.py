"""Vector databases behind the VectorStore Protocol: in-process, pgvector, Qdrant."""
