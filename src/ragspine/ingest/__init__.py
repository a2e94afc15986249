"""Turning documents (folders, files, texts) into chunk-store documents: one ingest path.

Read left to right: `files` (discovery, doc_ids, globs) → `loaders` (bytes → text per format,
with `encoding` for text) → `metadata` (sidecars; `front_matter` parses Markdown front matter; `label_keys`
recognises every sensitivity key they hold), `sensitivity_rules` and `labels` (the one label reader) → `document` (one file or text → one document version's chunks; `pages`
adds PDF page numbers) → `content` (documents known by content: the label follows it,
duplicates) → `pipeline` (`IngestPipeline`: labels → load → chunk → store → index → embed, with
the `registry` row of every document, its `origin`; `ingest_paths` drives `folder_run`: change
detection, duplicates, prune, the failures of the last run) → `report`; `copies` names a search
result's recorded duplicates. Every surface (`ragspine ingest`, `Workspace`, the HTTP service,
eval) ingests through `ragspine.ingest.pipeline.IngestPipeline`.
"""
