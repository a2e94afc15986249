"""Fusion: combining the rankings of several channels and query variants (z-score score fusion; weighted / adaptive / learned RRF)."""
