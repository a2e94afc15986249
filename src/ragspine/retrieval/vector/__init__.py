"""Vector channel: embedding backends and vector stores (opt-in)."""
