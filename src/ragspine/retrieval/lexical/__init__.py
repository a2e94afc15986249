"""Lexical channel: tokenizer, Okapi BM25, RRF fusion, glossary rewriting, retrievers."""
