"""Turning documents (folders, files, texts) into chunk-store documents: one ingest path.

Read left to right: `files` (discovery, doc_ids, globs) → `loaders` (bytes → text per format,
with `encoding` for text) → `metadata` (sidecars; `front_matter` parses Markdown front matter; `label_keys`
recognises every sensitivity key they hold), `sensitivity_rules` and `labels` (the one label reader) → `document` (one file or text → one document version's chunks; `pages`
adds PDF page numbers) → `pipeline` (`IngestPipeline`: labels → load → chunk → store → index →
embed, with the `registry` row of every document; `ingest_paths`, the folder run: change
detection, prune) → `report`. Every surface (`ragspine ingest`, `Workspace`, the HTTP service,
eval) ingests through `ragspine.ingest.pipeline.IngestPipeline`.
"""
