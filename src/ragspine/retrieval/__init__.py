"""The narrative retrieval channel: chunking → lexical (+vector) → fuse → rerank → link."""
