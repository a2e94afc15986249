"""Chunking: paragraph-grained chunker and the versioned chunk store."""
