"""The dense channel: chunk vectors kept beside the store and cosine ranking aligned to the lexical index."""
