"""Typed settings read once from flags, environment, config file and defaults; a leaf: imports nothing from retrieval."""
