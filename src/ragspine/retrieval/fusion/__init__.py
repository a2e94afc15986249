"""Fusion: combining the rankings of several channels and query variants (weighted / adaptive RRF)."""
