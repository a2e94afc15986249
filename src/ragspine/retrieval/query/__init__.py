"""The query stage: rewriters (glossary multi-query), filter extraction, LLM transforms and decomposition, Adaptive routing, corrective grading, and the security gate every variant passes."""
