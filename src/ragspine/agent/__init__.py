"""Agent-side contracts that the retrieval channel serves."""
