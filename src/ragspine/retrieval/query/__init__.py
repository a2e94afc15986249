"""The query stage: rewriters (glossary multi-query), filter extraction; later transforms."""
