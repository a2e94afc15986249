"""Chunk stores: the versioned store Protocol, SQLite (embedded default) and PostgreSQL, opened by one factory."""
