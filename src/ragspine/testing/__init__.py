"""Conformance suites that any implementation of a RAGSpine seam can inherit (needs pytest).

One module per seam, each with a suite class to inherit in a `Test*` class. Import them from
tests only: they import pytest, which is not a runtime dependency of the package.
"""
