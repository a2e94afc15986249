"""Visual document retrieval (ColPali-style): pages as images, MaxSim over their patch vectors.

Invariants: a page is embedded and stored only when its label is not RESTRICTED
(`sensitivity.is_restricted`, checked in `build.index_pages` before the embedder sees it and
again by `VisualIndex.add` before anything is written); scores are `late_interaction` MaxSim,
the scorer the ColBERT reranker uses; a visual hit is a page pointer (`is_visual`), never a
citable fact. The slot is empty by default (RAGSPINE_VISUAL_EMBEDDER=none): nothing here runs.
"""
