"""The retrieval pipeline: HybridRetriever (channels + fusion) and NarrativeIndex (store-backed, versioned)."""
