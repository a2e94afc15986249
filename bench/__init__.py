"""Benchmarks of the lexical index (`make bench`); not part of the package or the unit tests."""
