"""Turning document folders into chunk-store documents, incrementally.

Read left to right: `files` (discovery, doc_ids, globs) → `loaders` (bytes → text per format,
with `encoding` for text) → `metadata` (sidecars, front matter) and `sensitivity_rules` →
`document` (one file → one document version's chunks; `pages` adds PDF page numbers) →
`pipeline` (store writes, the `registry` of content hashes, prune) → `report`.
The public entry point is `ragspine.ingest.pipeline.ingest_paths`.
"""
